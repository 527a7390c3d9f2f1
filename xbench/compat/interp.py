"""A symbolic interpreter of a CUDA kernel's Python body: it runs the body once for one thread whose coordinates
are variables, and records what that thread computes, stores and synchronises.

Why the syntax tree and not the bytecode, or running the function on proxies: a kernel's `if` on the thread
index must take both branches (a proxy cannot: Python asks it for a bool), loops must be seen whole to be
recognised as reductions (a proxy sees iterations one at a time), and every message must name the kernel's own
line. The tree gives all three; numba's own bytecode is lower-level than what we recognise and changes between
Python versions.

Values the interpreter handles: symbolic numbers (`expr.Node`), references to the kernel's arrays, shared and
local arrays, tuples, and the namespaces a kernel calls into (`cuda`, `math`, `numpy`, numba types). Control
flow: `if` (both branches, merged with selects; early `return`, `continue` and `break` as conditions on which
threads still run), `for ... in range(...)` (interpreted once with a loop variable when the loop is a reduction
or a grid-stride loop, otherwise unrolled), `while` with a condition the same for every thread (unrolled).
"""
from __future__ import annotations

import ast
from typing import Any

import numpy as np

from . import expr as E
from .errors import LiftError, NotSymbolic
from .loops import Loops
from .memory import GlobalArray, Read, SharedArray, Write, commit, read_shared
from .source import KernelSource
from .values import ArrayRef, Frame, LocalRef, LoopCtx, Poison, SharedRef, State, Threads, _same


class Interp(Loops):
    """Interprets `spec.kernel` for one symbolic thread (see `lift.Specialization` for `spec`)."""

    def __init__(self, spec):
        self.spec = spec
        self.kernel: KernelSource = spec.kernel
        self.threads: Threads = spec.threads
        arrays = {n: GlobalArray(n, a.dtype, a.shape, a, a) for n, a in spec.sources.items()}
        env = {}
        for p in self.kernel.params:
            env[p] = ArrayRef(p) if p in spec.sources else spec.scalars[p]
        self.st = State([Frame(self.kernel, env)], E.TRUE, arrays, {}, {})
        self.calls: list = [self.kernel.py]
        self._local_ids = 0
        self.line = self.kernel.tree.lineno
        self.assign_target: str | None = None
        from .calls import Calls
        self.calls_impl = Calls(self)

    # ---- entry ---------------------------------------------------------------------------------------------
    def run(self) -> dict[str, GlobalArray]:
        try:
            self.block(self.kernel.tree.body)
            for a in self.st.arrays.values():
                commit(a, self.spec.init_of(a.name), self.kernel)
        except E.ExpressionTooLarge:
            raise LiftError("the kernel unrolls into an expression too large to lift (more than "
                            f"{E.Budget.limit} terms)", self.line, self.kernel, construct="unrolled loop",
                            hint="loops that combine values across threads step by step (tree reductions in shared "
                                 "memory) are not lifted: write the reduction as a loop in one thread, or use "
                                 "xb.sum") from None
        return self.st.arrays

    @property
    def frame(self) -> Frame:
        return self.st.frames[-1]

    @property
    def live(self) -> E.Node:
        return self.st.live

    @live.setter
    def live(self, v: E.Node) -> None:
        self.st.live = v

    def err(self, message: str, node: ast.AST | int | None = None, construct: str = "", hint: str | None = None):
        line = node if isinstance(node, int) else getattr(node, "lineno", self.line)
        return LiftError(message, line, self.frame.src, construct=construct, hint=hint, name=self.kernel.name)

    def ranges(self) -> dict:
        return E.refine({}, self.live)

    def decide(self, c: E.Node) -> bool | None:
        return E.decide(c, self.ranges())

    # ---- statements ----------------------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> None:
        for s in stmts:
            if self.live is E.FALSE:
                return
            self.line = s.lineno
            self.stmt(s)

    def stmt(self, s: ast.stmt) -> None:
        m = getattr(self, "s_" + type(s).__name__, None)
        if m is None:
            raise self.err(f"`{type(s).__name__}` statements are not supported in kernels", s,
                           construct=type(s).__name__.lower())
        m(s)

    def s_Expr(self, s: ast.Expr) -> None:
        if isinstance(s.value, ast.Constant):
            return                                          # a docstring
        self.ev(s.value)

    def s_Pass(self, s) -> None:
        pass

    def s_Assert(self, s) -> None:
        pass                                                # numba drops asserts in kernels unless debugging

    def s_Assign(self, s: ast.Assign) -> None:
        self.assign_target = s.targets[0].id if len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) else None
        try:
            v = self.ev(s.value)
        finally:
            self.assign_target = None
        for t in s.targets:
            self.assign(t, v, s)

    def s_AnnAssign(self, s: ast.AnnAssign) -> None:
        if s.value is not None:
            self.assign(s.target, self.ev(s.value), s)

    def s_AugAssign(self, s: ast.AugAssign) -> None:
        op = _BINOPS.get(type(s.op))
        if op is None:
            raise self.err(f"the operator {type(s.op).__name__} is not supported", s, construct="operator")
        if isinstance(s.target, ast.Name):
            cur = self.name(s.target.id, s.target)
            self.assign(s.target, self.binop(op, cur, self.ev(s.value), s), s)
        elif isinstance(s.target, ast.Subscript):
            base = self.ev(s.target.value)
            idx = self.ev_index(s.target.slice)
            cur = self.subscript(base, idx, s.target)
            self.store(base, idx, self.binop(op, cur, self.ev(s.value), s), s.target)
        else:
            raise self.err("augmented assignment to this target is not supported", s, construct="assignment")

    def assign(self, t: ast.expr, v: Any, s: ast.stmt) -> None:
        if isinstance(t, ast.Name):
            self.set_name(t.id, v)
        elif isinstance(t, (ast.Tuple, ast.List)):
            if not isinstance(v, tuple) or len(v) != len(t.elts):
                raise self.err(f"cannot unpack {v!r} into {len(t.elts)} names", s, construct="unpacking")
            for tt, vv in zip(t.elts, v):
                self.assign(tt, vv, s)
        elif isinstance(t, ast.Subscript):
            self.store(self.ev(t.value), self.ev_index(t.slice), v, t)
        else:
            raise self.err(f"assigning to {ast.unparse(t)} is not supported", s, construct="assignment")

    def set_name(self, name: str, v: Any) -> None:
        env = self.frame.env
        guard = E.FALSE
        for lc in self.frame.loops:
            guard = E.lor(guard, E.lor(lc.cont, lc.brk))
        if guard is not E.FALSE and name in env and isinstance(v, (E.Node, int, float, bool)):
            old = env[name]
            if isinstance(old, (E.Node, int, float, bool)):
                v = E.select(guard, E.wrap(old), E.wrap(v))
        env[name] = v

    def s_If(self, s: ast.If) -> None:
        c = self.cond(s.test)
        d = self.decide(c)
        if d is True:
            self.block(s.body)
            return
        if d is False:
            self.block(s.orelse)
            return
        self.branch(c, s.body, s.orelse)

    def branch(self, c: E.Node, body, orelse) -> None:
        live0 = self.live
        env0 = dict(self.frame.env)
        self.live = E.land(live0, c)
        self.block(body)
        live1, env1 = self.live, self.frame.env
        self.frame.env = dict(env0)
        self.live = E.land(live0, E.lnot(c))
        self.block(orelse)
        live2, env2 = self.live, self.frame.env
        if live1 is E.land(live0, c) and live2 is E.land(live0, E.lnot(c)):
            self.live = live0                         # neither branch left early
        else:
            self.live = E.lor(live1, live2)
        self.frame.env = self.merge(c, env1, env2)

    def merge(self, c: E.Node, a: dict, b: dict) -> dict:
        out = {}
        for k in set(a) | set(b):
            if k not in a or k not in b:
                out[k] = Poison(f"`{k}` is assigned on only one side of a condition", self.line)
                continue
            va, vb = a[k], b[k]
            if va is vb or _same(va, vb):
                out[k] = va
            elif isinstance(va, Poison) or isinstance(vb, Poison):
                out[k] = va if isinstance(va, Poison) else vb
            elif isinstance(va, (E.Node, int, float, bool, np.generic)) and \
                    isinstance(vb, (E.Node, int, float, bool, np.generic)):
                out[k] = E.select(c, E.wrap(va), E.wrap(vb))
            elif isinstance(va, tuple) and isinstance(vb, tuple) and len(va) == len(vb):
                out[k] = tuple(E.select(c, E.wrap(x), E.wrap(y)) if not _same(x, y) else x for x, y in zip(va, vb))
            else:
                out[k] = Poison(f"`{k}` refers to different arrays depending on the thread or the data", self.line)
        return out

    def s_Return(self, s: ast.Return) -> None:
        v = self.ev(s.value) if s.value is not None else None
        if len(self.st.frames) == 1 and v is not None:
            raise self.err("a kernel cannot return a value", s, construct="return value")
        self.frame.returns.append((self.live, v))
        self.live = E.FALSE

    def s_Continue(self, s) -> None:
        lc = self._loop(s)
        lc.cont = E.lor(lc.cont, self.live)
        self.live = E.FALSE

    def s_Break(self, s) -> None:
        lc = self._loop(s)
        if lc.sym is not None:
            raise NotSymbolic("break")
        lc.brk = E.lor(lc.brk, self.live)
        self.live = E.FALSE

    def _loop(self, s) -> LoopCtx:
        if not self.frame.loops:
            raise self.err("`continue`/`break` outside a loop", s, construct="control flow")
        return self.frame.loops[-1]

    def s_Raise(self, s) -> None:
        raise self.err("kernels cannot raise exceptions", s, construct="raise")

    # ---- expressions -------------------------------------------------------------------------------------
    def ev(self, n: ast.expr) -> Any:
        m = getattr(self, "e_" + type(n).__name__, None)
        if m is None:
            raise self.err(f"`{ast.unparse(n)}` ({type(n).__name__}) is not supported in kernels", n,
                           construct=type(n).__name__)
        return m(n)

    def e_Constant(self, n: ast.Constant):
        return n.value

    def e_Name(self, n: ast.Name):
        return self.name(n.id, n)

    def name(self, ident: str, n) -> Any:
        env = self.frame.env
        if ident in env:
            v = env[ident]
        else:
            try:
                v = self.calls_impl.lift(self.frame.src.resolve(ident))
            except KeyError:
                raise self.err(f"name `{ident}` is not defined", n, construct="name") from None
        if isinstance(v, Poison):
            raise self.err(v.reason, n, construct="undefined value")
        return v

    def e_Tuple(self, n: ast.Tuple):
        return tuple(self.ev(e) for e in n.elts)

    e_List = e_Tuple

    def e_BinOp(self, n: ast.BinOp):
        op = _BINOPS.get(type(n.op))
        if op is None:
            raise self.err(f"the operator in `{ast.unparse(n)}` is not supported", n, construct="operator")
        return self.binop(op, self.ev(n.left), self.ev(n.right), n)

    def binop(self, op: str, a, b, n):
        if isinstance(a, tuple) and isinstance(b, tuple) and op == "add":
            return a + b
        a, b = self.num(a, n), self.num(b, n)
        if op in ("bitand", "bitor", "bitxor") and a.dtype == "bool" and b.dtype == "bool":
            return E.logical({"bitand": "and", "bitor": "or", "bitxor": "xor"}[op], a, b)
        if op in ("floordiv", "mod") and E.is_int(a.dtype) and E.is_int(b.dtype):
            bv = E.try_concrete(b)
            if bv == 0:
                raise self.err(f"integer division by zero in `{ast.unparse(n)}`", n, construct="division by zero")
        return E.binary(op, a, b)

    def e_UnaryOp(self, n: ast.UnaryOp):
        v = self.num(self.ev(n.operand), n)
        if isinstance(n.op, ast.USub):
            return E.neg(v)
        if isinstance(n.op, ast.UAdd):
            return v
        if isinstance(n.op, ast.Not):
            return E.lnot(v)
        if isinstance(n.op, ast.Invert):
            return E.lnot(v) if v.dtype == "bool" else E.unary("invert", v)
        raise self.err("unsupported unary operator", n, construct="operator")

    def e_BoolOp(self, n: ast.BoolOp):
        is_and = isinstance(n.op, ast.And)
        live0 = self.live
        out = E.TRUE if is_and else E.FALSE
        for v in n.values:
            c = self.cond(v)
            out = E.land(out, c) if is_and else E.lor(out, c)
            self.live = E.land(live0, out) if is_and else E.land(live0, E.lnot(out))
        self.live = live0
        return out

    def e_Compare(self, n: ast.Compare):
        left = self.ev(n.left)
        out = E.TRUE
        for op, right_n in zip(n.ops, n.comparators):
            right = self.ev(right_n)
            name = _CMPOPS.get(type(op))
            if name is None:
                if isinstance(op, (ast.Is, ast.IsNot)) and (left is None or right is None):
                    same = left is right
                    out = E.land(out, E.const(same if isinstance(op, ast.Is) else not same))
                    left = right
                    continue
                raise self.err(f"the comparison in `{ast.unparse(n)}` is not supported", n, construct="comparison")
            out = E.land(out, E.compare(name, self.num(left, n), self.num(right, n)))
            left = right
        return out

    def e_IfExp(self, n: ast.IfExp):
        c = self.cond(n.test)
        d = self.decide(c)
        if d is True:
            return self.ev(n.body)
        if d is False:
            return self.ev(n.orelse)
        live0 = self.live
        self.live = E.land(live0, c)
        a = self.num(self.ev(n.body), n)
        self.live = E.land(live0, E.lnot(c))
        b = self.num(self.ev(n.orelse), n)
        self.live = live0
        return E.select(c, a, b)

    def e_Attribute(self, n: ast.Attribute):
        return self.calls_impl.attribute(self.ev(n.value), n.attr, n)

    def e_Call(self, n: ast.Call):
        f = self.ev(n.func)
        args = []
        for a in n.args:
            if isinstance(a, ast.Starred):
                v = self.ev(a.value)
                if not isinstance(v, tuple):
                    raise self.err("only tuples can be unpacked into a call", n, construct="call")
                args.extend(v)
            else:
                args.append(self.ev(a))
        kwargs = {k.arg: self.ev(k.value) for k in n.keywords}
        return self.calls_impl.call(f, args, kwargs, n)

    def e_Subscript(self, n: ast.Subscript):
        return self.subscript(self.ev(n.value), self.ev_index(n.slice), n)

    def ev_index(self, s: ast.expr):
        if isinstance(s, ast.Slice):
            raise self.err(f"slices ({ast.unparse(s)}) are not supported in kernels: index elements", s,
                           construct="slice")
        v = self.ev(s)
        return v if isinstance(v, tuple) else (v,)

    # ---- values ------------------------------------------------------------------------------------------
    def num(self, v, n) -> E.Node:
        if isinstance(v, E.Node):
            return v
        if isinstance(v, (bool, int, float, np.generic)):
            return E.const(v)
        if isinstance(v, Poison):
            raise self.err(v.reason, n, construct="undefined value")
        raise self.err(f"`{ast.unparse(n) if isinstance(n, ast.AST) else n}` is not a number here", n,
                       construct="value")

    def cond(self, n: ast.expr) -> E.Node:
        v = self.ev(n)
        if isinstance(v, tuple):
            return E.const(bool(v))
        if v is None:
            return E.FALSE
        return E.as_bool(self.num(v, n))

    def index(self, idx: tuple, n) -> tuple[E.Node, ...]:
        out = []
        for i in idx:
            v = self.num(i, n)
            if E.is_float(v.dtype) or v.dtype == "bool":
                raise self.err(f"an index of `{ast.unparse(n)}` is {v.dtype}: indices must be integers", n,
                               construct="index type")
            if isinstance(v, E.Sym) and v.sym_kind == "carry":
                raise NotSymbolic("it indexes with a loop-carried value")
            if v.free & self._carries():
                raise NotSymbolic("it indexes with a loop-carried value")
            out.append(v)
        return tuple(out)

    def _carries(self) -> frozenset:
        out: frozenset = frozenset()
        for f in self.st.frames:
            for lc in f.loops:
                out |= lc.carries
        return out

    def subscript(self, base, idx: tuple, n):
        if isinstance(base, ArrayRef):
            return self.load_global(base, idx, n)
        if isinstance(base, SharedRef):
            sh = self.st.shared[base.name]
            ix = self.index(idx, n)
            self.check_bounds(sh.name, ix, sh.shape, n, load=True)
            v, first = read_shared(sh, ix, self.st.phase, self.threads.local_coords(), n.lineno, self.frame.src)
            for lc in self.frame.loops:
                if lc.sym is not None and first < lc.shared_marks.get(sh.name, len(sh.writes)):
                    lc.stale_reads.add(sh.name)
            return v
        if isinstance(base, LocalRef):
            return self.local_read(base, idx, n)
        if isinstance(base, tuple):
            if len(idx) != 1:
                raise self.err("a tuple takes one index", n, construct="tuple index")
            k = E.try_concrete(self.num(idx[0], n))
            if k is None:
                raise self.err(f"`{ast.unparse(n)}` indexes a tuple with a value that differs between threads", n,
                               construct="tuple index")
            return base[k]
        what = "a number" if isinstance(base, E.Node) else type(base).__name__
        raise self.err(f"`{ast.unparse(n)}`: cannot index {what}", n, construct="index",
                       hint="if that parameter is an array, give from_cuda an example= with arrays for it"
                       if isinstance(base, E.Node) else None)

    def load_global(self, ref: ArrayRef, idx: tuple, n):
        arr: GlobalArray = self.st.arrays[ref.name]
        full = ref.prefix + tuple(idx)
        if len(full) < len(arr.shape):
            return ArrayRef(ref.name, full)
        ix = self.index(full, n)
        if len(ix) > len(arr.shape):
            raise self.err(f"{ref.name} has {len(arr.shape)} dims but `{ast.unparse(n)}` indexes {len(ix)}", n,
                           construct="index")
        neg = self.check_bounds(ref.name, ix, arr.current.sizes, n, load=True)
        arr.reads.append(Read(ix, n.lineno))
        mine = [w for w in arr.pending if w.op == "store" and tuple(w.idx) == ix]     # the thread's own stores
        # from the last store this thread surely made on its way here, what it stored since
        first = max((i for i, w in enumerate(mine) if w.cond is self.live or w.cond is E.TRUE or
                     E.decide(E.lor(E.lnot(self.live), w.cond), self.ranges()) is True), default=None)
        value = self._version_load(arr, ix, n, neg) if first is None else mine[first].value
        for w in mine[(first + 1) if first is not None else 0:]:
            value = E.select(w.cond, w.value, value)
        return value

    def _version_load(self, arr: GlobalArray, ix, n, neg) -> E.Node:
        src = arr.current
        if src is arr.v0:
            init = self.spec.init_of(arr.name)
            if init is not None:
                return E.cast(E.const(init), arr.dtype)
            arr.read_v0 = True
        node = E.load(src, ix, n.lineno)
        if neg:
            self.spec.negative_loads.add(node)
        return node

    def store(self, base, idx: tuple, v, n) -> None:
        if isinstance(base, ArrayRef):
            arr: GlobalArray = self.st.arrays[base.name]
            if base.name not in self.spec.outs:
                raise self.err(f"the kernel writes {base.name}, which is not one of its outputs (out="
                               f"{self.spec.out_text})", n, construct="store to an input",
                               hint=f"list it: out=({', '.join(repr(o) for o in self.spec.outs + [base.name])})")
            full = base.prefix + tuple(idx)
            ix = self.index(full, n)
            if len(ix) != len(arr.shape):
                raise self.err(f"{base.name} has {len(arr.shape)} dims but `{ast.unparse(n)}` indexes {len(ix)}", n,
                               construct="index")
            self.check_bounds(base.name, ix, arr.current.sizes, n, load=False)
            raw = self.num(v, n)
            arr.stored.append((raw.dtype, raw.weak))
            value = E.cast(raw, arr.dtype)
            arr.pending.append(Write(ix, value, self.live, n.lineno, "store", self.coords(), self.st.phase))
            arr.written = True
        elif isinstance(base, SharedRef):
            sh: SharedArray = self.st.shared[base.name]
            ix = self.index(idx, n)
            self.check_bounds(sh.name, ix, sh.shape, n, load=False)
            sh.writes.append(Write(ix, E.cast(self.num(v, n), sh.dtype), self.live, n.lineno, "store", (),
                                   self.st.phase))
        elif isinstance(base, LocalRef):
            self.local_write(base, idx, v, n)
        else:
            raise self.err(f"cannot store into `{ast.unparse(n)}`", n, construct="store")

    def coords(self) -> tuple[E.Sym, ...]:
        loops = tuple(lc.sym for f in self.st.frames for lc in f.loops if lc.sym is not None)
        return tuple(self.threads.syms) + loops

    # ---- per-thread arrays ---------------------------------------------------------------------------------
    def new_local(self, shape: tuple[int, ...], dtype: str) -> LocalRef:
        self._local_ids += 1
        ref = LocalRef(self._local_ids, shape, dtype)
        self.st.local[ref.key] = {}
        return ref

    def _local_key(self, ref: LocalRef, idx, n) -> tuple[int, ...]:
        key = []
        for i, size in zip(self.index(idx, n), ref.shape):
            k = E.try_concrete(i)
            if k is None:
                if any(lc.sym is not None for lc in self.frame.loops):
                    raise NotSymbolic("it indexes a local array by the iteration")
                raise self.err(f"`{ast.unparse(n)}` indexes a local array with a value that differs between threads",
                               n, construct="local array index")
            if not -size <= k < size:
                raise self.err(f"`{ast.unparse(n)}` is out of bounds (index {k}, size {size})", n,
                               construct="local array index")
            key.append(k % size)
        if len(key) != len(ref.shape):
            raise self.err("index the local array's every dim", n, construct="local array index")
        return tuple(key)

    def local_read(self, ref: LocalRef, idx, n) -> E.Node:
        v = self.st.local[ref.key].get(self._local_key(ref, idx, n))
        if v is None:
            raise self.err(f"`{ast.unparse(n)}` reads a local array element never written", n,
                           construct="uninitialised local array")
        return v

    def local_write(self, ref: LocalRef, idx, v, n) -> None:
        key = self._local_key(ref, idx, n)
        cur = self.st.local[ref.key].get(key)
        val = E.cast(self.num(v, n), ref.dtype)
        self.st.local[ref.key][key] = val if cur is None else E.select(self.live, val, cur)

    # ---- bounds --------------------------------------------------------------------------------------------
    def check_bounds(self, name: str, ix, sizes, n, load: bool) -> bool:
        """Refuse an access that provably leaves the array for some running thread; for loads, say whether an
        index may be negative (numba wraps those around, as Python does)."""
        ranges = self.ranges()
        neg_possible = False
        for d, (c, size) in enumerate(zip(ix, sizes)):
            lo, hi = E.bounds(c, ranges)
            low_ok = lo is not None and lo >= (-size if load else 0)
            high_ok = hi is not None and hi < size
            if low_ok and high_ok and (lo >= 0 or not load):
                continue
            exact = not self.live.data and not c.data
            if exact:
                bad_hi = E.land(self.live, E.compare("ge", c, E.const(size)))
                bad_lo = E.land(self.live, E.compare("lt", c, E.const(-size if load else 0)))
                for bad, edge in ((bad_hi, "past the end"), (bad_lo, "before the start")):
                    w = _witness(bad)
                    if w:
                        what = "reads" if load else "writes"
                        raise self.err(f"line {self.frame.src.lineno(n.lineno)} {what} `{ast.unparse(n)}` {edge} of "
                                       f"{name} (size {size} along axis {d}) {w}", n, construct="out-of-bounds access",
                                       hint="guard the access with a bounds check (if i < n: ...); the kernel reads "
                                            "or writes memory it does not own there")
                if load and (lo is None or lo < 0):
                    neg_possible = _witness(E.land(self.live, E.compare("lt", c, E.ZERO))) is not None or lo is None
            elif load and (lo is None or lo < 0):
                neg_possible = True
        return neg_possible


def _witness(bad: E.Node) -> str | None:
    """'at x = 3' for a point where `bad` holds; '' when it may hold but the space is too large to search;
    None when it never holds."""
    d = E.decide(bad)
    if d is False:
        return None
    vars_ = sorted(bad.free, key=lambda s: s.order)
    sizes = [v.extent for v in vars_]
    total = int(np.prod(sizes)) if sizes else 1
    if total > (1 << 20) or any(v.sym_kind == "carry" for v in vars_):
        return None if d is None else ""
    env = {}
    for i, v in enumerate(vars_):
        shape = [1] * len(vars_)
        shape[i] = v.extent
        env[v] = np.arange(v.extent).reshape(shape)
    try:
        vals = np.broadcast_to(E.evaluate(bad, env), tuple(sizes))
    except E.NotEvaluable:
        return None
    hits = np.argwhere(vals)
    if not len(hits):
        return None
    pt = hits[0]
    return "at " + ", ".join(f"{_sym_text(v)} = {int(p)}" for v, p in zip(vars_, pt))


def _sym_text(v: E.Sym) -> str:
    if v.sym_kind == "thread":
        return f"cuda.grid axis {v.name}"
    return v.name



_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.FloorDiv: "floordiv",
           ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "bitand", ast.BitOr: "bitor", ast.BitXor: "bitxor",
           ast.LShift: "lshift", ast.RShift: "rshift"}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}

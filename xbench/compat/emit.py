"""From a lifted output (an expression over element positions) to xbench source: the operator the kernel
computes, written in the public xbench language.

Each value becomes a tensor over the index variables it depends on (a labelled tensor: code, axes). Loads at
`i + c` become slices of the array (padded with zeros where the kernel masks the reads past its edges), loads at
any other index a gather; conditions on positions become masks over `xb.iota`; a reduction over a loop
becomes `xb.sum` / `xb.max` over an axis, and a sum of products of two loads along the reduced axis a
contraction (`a @ b`, `xb.einsum`). Dims keep the names the kernel gave them (`x.shape[0]`), so the source reads
as an operator rather than a trace at one shape.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from . import expr as E
from .errors import LiftError


@dataclass(frozen=True)
class LT:
    code: str
    axes: tuple = ()
    dtype: str = "float32"
    scalar: bool = False          # a Python number (a literal or arithmetic on dims), not a tensor
    prec: int = 100               # Python precedence of the code's outermost operator (100: an atom)

    @property
    def atom(self) -> str:
        return self.code if self.prec >= 100 else f"({self.code})"


def canon(s: E.Sym):
    return (0, s.axis, s.order) if s.sym_kind == "pos" else (1, s.order)


def union(*ltss) -> tuple:
    seen = {}
    for lt in ltss:
        for a in lt.axes:
            seen[a] = None
    return tuple(sorted(seen, key=canon))


_AXIS_NAMES = {("pos", 0): "i", ("pos", 1): "j", ("pos", 2): "k", ("pos", 3): "l"}
PREC = {"pow": 15, "neg": 14, "mul": 13, "div": 13, "floordiv": 13, "mod": 13, "matmul": 13, "add": 12, "sub": 12,
        "lshift": 11, "rshift": 11, "bitand": 10, "and": 10, "bitxor": 9, "xor": 9, "bitor": 8, "or": 8, "lt": 7,
        "le": 7, "gt": 7, "ge": 7, "eq": 7, "ne": 7, "ifelse": 3}
_ASSOC = {"add", "mul", "bitand", "bitor", "bitxor", "and", "or", "xor"}
_SYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**", "lt": "<",
        "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!=", "bitand": "&", "bitor": "|", "bitxor": "^",
        "lshift": "<<", "rshift": ">>", "and": "&", "or": "|", "xor": "^"}
_FN = {"max": "xb.maximum", "min": "xb.minimum", "atan2": "xb.atan2", "hypot": "xb.hypot",
       "copysign": "xb.copysign", "fmod": "xb.fmod"}
_PY_FN = {"max": "max", "min": "min", "atan2": "math.atan2", "hypot": "math.hypot", "copysign": "math.copysign",
          "fmod": "math.fmod"}
_UN = {"abs": "xb.abs", "exp": "xb.exp", "exp2": "xb.exp2", "expm1": "xb.expm1", "log": "xb.log", "log2": "xb.log2",
       "log10": "xb.log10", "log1p": "xb.log1p", "sqrt": "xb.sqrt", "rsqrt": "xb.rsqrt", "sin": "xb.sin",
       "cos": "xb.cos", "tan": "xb.tan", "asin": "xb.asin", "acos": "xb.acos", "atan": "xb.atan", "sinh": "xb.sinh",
       "cosh": "xb.cosh", "tanh": "xb.tanh", "asinh": "xb.asinh", "acosh": "xb.acosh", "atanh": "xb.atanh",
       "erf": "xb.erf", "erfc": "xb.erfc", "floor": "xb.floor", "ceil": "xb.ceil", "trunc": "xb.trunc",
       "round": "xb.round", "isnan": "xb.isnan", "isinf": "xb.isinf", "isfinite": "xb.isfinite", "sign": "xb.sign",
       "not": "xb.logical_not", "invert": "~"}


class Emitter:
    def __init__(self, name: str, negative_loads: set, kernel=None, params=()):
        self.name = name
        self.lines: list[str] = []
        self.memo: dict[E.Node, LT] = {}
        self.uses: Counter = Counter()
        self.versions: dict[int, str] = {}
        self.negative_loads = negative_loads
        self.kernel = kernel
        self.ntmp = 0
        self.needs_math = False
        self.taken: set[str] = set(params)
        self.iotas: dict[str, str] = {}

    # ---- whole outputs -----------------------------------------------------------------------------------
    def count_uses(self, roots: list[E.Node]) -> None:
        seen = set()
        stack = list(roots)
        while stack:
            x = stack.pop()
            for k in x.children():
                self.uses[k] += 1
                if k not in seen:
                    seen.add(k)
                    stack.append(k)
            if isinstance(x, E.Load) and x.src.version > 0:
                src = x.src
                if id(src) not in seen:
                    seen.add(id(src))
                    stack.append(src.content)

    def whole(self, src: E.Source, content: E.Node) -> str:
        """Code for the whole array `src` (its content over its positions, in its shape and dtype)."""
        lt = self.value(content)
        shape = self.shape_code(src.shape)
        full = tuple(sorted(src.pos, key=canon))
        if lt.scalar:
            return f"xb.full({shape}, {lt.code}, {src.dtype!r})"
        if lt.dtype != src.dtype:
            lt = LT(f"{lt.atom}.astype({src.dtype!r})", lt.axes, src.dtype)
        code = self.align(lt, full)
        if set(lt.axes) != set(full):
            code = f"xb.broadcast_to({code}, {shape})"
        return code

    def materialize(self, src: E.Source, content: E.Node, target: str) -> str:
        """Assign the whole array `src` to `target`; return the name."""
        self.lines.append(f"{target} = {self.whole(src, content)}")
        self.taken.add(target)
        self.memo[content] = LT(target, tuple(sorted(src.pos, key=canon)), src.dtype)
        return target

    def shape_code(self, shape) -> str:
        parts = [self.int_code(d) for d in shape]
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"

    def tmp(self, lt: LT, name: str | None = None) -> LT:
        if name is None or name in self.taken:
            self.ntmp += 1
            name = f"t{self.ntmp}"
            while name in self.taken:
                self.ntmp += 1
                name = f"t{self.ntmp}"
        self.taken.add(name)
        self.lines.append(f"{name} = {lt.code}")
        return LT(name, lt.axes, lt.dtype, lt.scalar)

    # ---- values ------------------------------------------------------------------------------------------
    def value(self, n: E.Node) -> LT:
        got = self.memo.get(n)
        if got is not None:
            return got
        lt = self._value(n)
        if isinstance(n, E.Sym):
            same = self.iotas.get(lt.code)          # positions of another array of the same size
            if same is not None:
                lt = LT(same, lt.axes, lt.dtype)
            else:
                lt = self.tmp(lt, _AXIS_NAMES.get((n.sym_kind, n.axis)) if n.sym_kind == "pos" else None)
                self.iotas[self.lines[-1].split(" = ", 1)[1]] = lt.code
        elif not lt.scalar and (self.uses[n] > 1 and not lt.code.isidentifier() or len(lt.code) > 90):
            lt = self.tmp(lt)
        self.memo[n] = lt
        return lt

    def _value(self, n: E.Node) -> LT:
        if isinstance(n, E.Const):
            return LT(_literal(n.value), (), n.dtype, True)
        if isinstance(n, E.Dim):
            return LT(f"{n.param}.shape[{n.axis}]", (), "int64", True)
        if isinstance(n, E.Param):
            return LT(n.name, (), n.dtype)
        if isinstance(n, E.Sym):
            if n.sym_kind == "thread":
                raise LiftError("internal: a thread coordinate survived lifting", construct="internal")
            return LT(f"xb.iota({self.shape_code((n.extent_node(),))}, 0)", (n,), "int64")
        if not n.free and not n.data and E.is_int(n.dtype) and isinstance(n, (E.Lin, E.FloorDiv, E.Mod)):
            return LT(self.int_code(n), (), n.dtype, True)
        if isinstance(n, E.Lin):
            out = None
            for t, k in n.terms:
                v = self.value(t)
                term = v if k == 1 else self.binary("mul", v, LT(str(k), (), "int64", True), n.dtype)
                out = term if out is None else self.binary("add", out, term, n.dtype)
            if n.const:
                out = self.binary("add", out, LT(str(n.const), (), "int64", True), n.dtype)
            return out
        if isinstance(n, E.FloorDiv):
            return self.binary("floordiv", self.value(n.a), LT(str(n.c), (), "int64", True), n.dtype)
        if isinstance(n, E.Mod):
            return self.binary("mod", self.value(n.a), LT(str(n.c), (), "int64", True), n.dtype)
        if isinstance(n, E.Load):
            return self.load(n)
        if isinstance(n, E.Bin):
            compute = E.promote(n.a, n.b)[0] if n.op in E.COMPARE else n.dtype
            if n.op in E.LOGICAL:
                compute = "bool"
            return self.binary(n.op, self.value(n.a), self.value(n.b), compute, n.dtype)
        if isinstance(n, E.Un):
            return self.unary(n.op, self.value(n.a), n.dtype)
        if isinstance(n, E.Select):
            c, a, b = self.value(n.c), self.value(n.a), self.value(n.b)
            if c.scalar:
                return LT(f"{a.atom} if {c.atom} else {b.atom}", union(a, b), n.dtype, a.scalar and b.scalar, 3) \
                    if a.axes == b.axes else self._where(c, a, b, n.dtype)
            return self._where(c, a, b, n.dtype)
        if isinstance(n, E.Cast):
            a = self.value(n.a)
            return self.cast(a, n.dtype)
        if isinstance(n, E.Reduce):
            return self.reduce(n)
        if isinstance(n, E.Unwritten):
            raise LiftError(f"internal: reads {n.what} nobody wrote", construct="internal")
        raise LiftError(f"internal: cannot write {type(n).__name__} as xbench code", construct="internal")

    def _where(self, c: LT, a: LT, b: LT, dtype: str) -> LT:
        axes = union(c, a, b)
        ca = self.align(self.cast(a, dtype), axes)
        cb = self.align(self.cast(b, dtype), axes)
        return LT(f"xb.where({self.align(c, axes)}, {ca}, {cb})", axes, dtype)

    def cast(self, a: LT, dtype: str) -> LT:
        if a.dtype == dtype:
            return a
        if a.scalar:
            if E.is_float(dtype):
                return LT(f"float({a.code})", (), dtype, True) if not _is_float_literal(a.code) else \
                    LT(a.code, (), dtype, True)
            if dtype == "bool":
                return LT(f"bool({a.code})", (), dtype, True)
            return LT(f"int({a.code})", (), dtype, True)
        return LT(f"{a.atom}.astype({dtype!r})", a.axes, dtype)

    def binary(self, op: str, a: LT, b: LT, compute: str, result: str | None = None) -> LT:
        result = result or compute
        if a.scalar and b.scalar and op not in _SYM:
            self.needs_math = self.needs_math or op in ("atan2", "hypot", "copysign", "fmod")
            return LT(f"{_PY_FN[op]}({a.code}, {b.code})", (), result, True)
        axes = union(a, b)
        if not a.scalar:
            a = self.cast(a, compute)
        if not b.scalar:
            b = self.cast(b, compute)
        if a.scalar and b.scalar:
            ca, cb = a, b
            sym = {"and": "and", "or": "or", "xor": "!="}.get(op, _SYM[op])
        else:
            ca, cb = self.aligned(a, axes), self.aligned(b, axes)
            sym = _SYM.get(op)
        if sym is None:
            return LT(f"{_FN[op]}({ca.code}, {cb.code})", axes, result)
        p = PREC[op]
        left = ca.code if ca.prec >= p and not (op == "pow" and ca.prec == p) else f"({ca.code})"
        right = cb.code if cb.prec > p or cb.prec == p and op in _ASSOC else f"({cb.code})"
        return LT(f"{left} {sym} {right}", axes, result, a.scalar and b.scalar, p)

    def unary(self, op: str, a: LT, dtype: str) -> LT:
        if op == "neg":
            return LT(f"-{a.code if a.prec >= 14 else a.atom}", a.axes, dtype, a.scalar, 14)
        if a.scalar:
            self.needs_math = True
            py = {"abs": "abs", "not": "not "}.get(op)
            return LT(f"{py}({a.code})" if py else f"math.{op}({a.code})", (), dtype, True)
        if op == "invert":
            return LT(f"~{a.atom}", a.axes, dtype, False, 14)
        if E.UNARY[op] == "float" and not E.is_float(a.dtype):
            a = self.cast(a, dtype)
        return LT(f"{_UN[op]}({a.code})", a.axes, dtype)

    def aligned(self, lt: LT, axes: tuple) -> LT:
        code = self.align(lt, axes)
        return lt if code == lt.code else LT(code, axes, lt.dtype, lt.scalar)

    def align(self, lt: LT, axes: tuple) -> str:
        """lt's code with its axes moved into the order of `axes` and size-1 axes for the ones it lacks."""
        if lt.scalar or not lt.axes:
            return lt.code
        order = [a for a in axes if a in lt.axes]
        code = lt.atom
        if list(lt.axes) != order:
            perm = [lt.axes.index(a) for a in order]
            code = f"{code}.T" if len(perm) == 2 else f"xb.transpose({lt.code}, {tuple(perm)})"
        if len(order) < len(axes):
            parts = [":" if a in lt.axes else "None" for a in axes]
            while parts and parts[-1] == ":":
                parts.pop()
            code = f"{code}[{', '.join(parts)}]"
        return code if code != lt.atom else lt.code

    # ---- loads -------------------------------------------------------------------------------------------
    def source_code(self, src: E.Source) -> str:
        if src.version == 0:
            return src.name
        got = self.versions.get(id(src))
        if got is None:
            got = self.materialize(src, src.content, f"{src.name}_{src.version}")
            self.versions[id(src)] = got
        return got

    def load(self, n: E.Load) -> LT:
        src = n.src
        base = self.source_code(src)
        sizes = src.sizes
        plan = []
        used: set = set()
        simple = n not in self.negative_loads
        for c, _size in zip(n.idx, sizes):
            if not c.free and not c.data:
                plan.append(("int", c))
                continue
            terms, c0 = E._lin_parts(c)
            syms = [t for t in terms if isinstance(t, E.Sym)]
            rest = [t for t in terms if not isinstance(t, (E.Sym, E.Dim))]
            if len(syms) == 1 and not rest and terms[syms[0]] > 0 and syms[0] not in used:
                v = syms[0]
                used.add(v)
                off = E.lin({t: k for t, k in terms.items() if t is not v}, c0)
                plan.append(("slice", v, terms[v], off))
            else:
                simple = False
        if simple:
            return self._slice(base, plan, sizes, src.dtype)
        return self._gather(base, n, src.dtype)

    def _slice(self, base: str, plan, sizes, dtype: str) -> LT:
        pads, idx, axes = [], [], []
        for p, size in zip(plan, sizes):
            if p[0] == "int":
                k = E.concrete(p[1])
                if not -size <= k < size:           # never read on a live path: any element will do
                    idx.append(str(min(max(k, 0), size - 1)))
                else:
                    idx.append(self.int_code(p[1]))
                pads.append((0, 0))
                continue
            _, v, a, off = p
            o = E.concrete(off)
            lo_i, hi_i = o, o + a * (v.extent - 1)
            plo, phi = max(0, -lo_i), max(0, hi_i - (size - 1))
            pads.append((plo, phi))
            start = E.add(off, E.const(plo))
            stop = E.add(start, E.add(E.mul(v.extent_node(), E.const(a)), E.const(1 - a)))
            full = E.concrete(start) == 0 and E.concrete(stop) == size + plo + phi and a == 1
            if full:
                idx.append(":")
            else:
                s0 = self.int_code(start)
                s1 = self.int_code(stop)
                idx.append(f"{'' if s0 == '0' else s0}:{s1}" + (f":{a}" if a != 1 else ""))
            axes.append(v)
        code = base
        if any(p != (0, 0) for p in pads):
            code = f"xb.pad({base}, {tuple(pads)})"
        while idx and idx[-1] == ":":
            idx.pop()
        if idx:
            code = f"{code}[{', '.join(idx)}]"
        return LT(code, tuple(axes), dtype)

    def _gather(self, base: str, n: E.Load, dtype: str) -> LT:
        lts = [self.value(c) for c in n.idx]
        axes = union(*lts)
        codes = []
        for lt in lts:
            codes.append(self.align(lt, axes) if not lt.scalar else lt.code)
        if all(lt.scalar for lt in lts):
            return LT(f"{base}[{', '.join(codes)}]", (), dtype)
        return LT(f"{base}[{', '.join(codes)}]", axes, dtype)

    # ---- reductions --------------------------------------------------------------------------------------
    def reduce(self, n: E.Reduce) -> LT:
        v = n.var
        scan = self.scan(n)
        if scan is not None:
            return scan
        if n.rkind == "sum":
            fs = _factors(n.body)
            dep = [f for f in fs if v in f.free]
            if len(dep) == 2:
                got = self.contract(n, dep, [f for f in fs if v not in f.free])
                if got is not None:
                    return got
        body = self.value(n.body)
        if v not in body.axes:
            if n.rkind == "sum":
                return self.binary("mul", body, LT(self.int_code(v.extent_node()), (), "int64", True), n.dtype)
            return body
        axis = body.axes.index(v)
        fn = {"sum": "xb.sum", "max": "xb.max", "min": "xb.min", "prod": "xb.prod"}[n.rkind]
        code = f"{fn}({body.code}, axis={axis})" if len(body.axes) > 1 else f"{fn}({body.code})"
        out = LT(code, tuple(a for a in body.axes if a is not v), n.dtype)
        if E.is_int(n.dtype) and n.dtype != "int64" and n.rkind in ("sum", "prod"):
            out = LT(f"{code}.astype({n.dtype!r})", out.axes, n.dtype)
        return out

    def scan(self, n: E.Reduce) -> LT | None:
        """reduce over r of where(r < p, g(r), identity) (or r <= p) is a prefix reduction along r, read at p."""
        b = n.body
        if not (isinstance(b, E.Select) and isinstance(b.c, E.Bin) and b.c.op in ("lt", "le") and b.c.a is n.var
                and isinstance(b.c.b, E.Sym) and b.c.b is not n.var and b.c.b.extent == n.var.extent
                and b.c.b not in b.a.free and isinstance(b.b, E.Const)
                and b.b.value == E.identity(n.rkind, n.dtype).value):
            return None
        p = b.c.b
        g = self.cast(self.value(b.a), n.dtype)
        if n.var not in g.axes or p in g.axes:
            return None
        ax = g.axes.index(n.var)
        fn = {"sum": "xb.cumsum", "prod": "xb.cumprod", "max": "xb.cummax", "min": "xb.cummin"}[n.rkind]
        code = f"{fn}({g.code}, axis={ax})"
        if b.c.op == "lt":          # exclusive: shift by one, the identity first
            pads = tuple((1, 0) if i == ax else (0, 0) for i in range(len(g.axes)))
            ident = _literal(E.identity(n.rkind, n.dtype).value)
            cut = ", ".join([":"] * ax + [f":{self.int_code(p.extent_node())}"])
            code = f"xb.pad({code}, {pads}, value={ident})[{cut}]"
        axes = tuple(p if a is n.var else a for a in g.axes)
        return LT(code, axes, n.dtype)

    def contract(self, n: E.Reduce, dep: list, rest: list) -> LT | None:
        v = n.var
        if not E.is_float(n.dtype):
            return None
        lhs, rhs = self.cast(self.value(dep[0]), n.dtype), self.cast(self.value(dep[1]), n.dtype)
        if v not in lhs.axes or v not in rhs.axes:
            return None
        out_axes = tuple(sorted((set(lhs.axes) | set(rhs.axes)) - {v}, key=canon))
        letters = {a: "abcdefghijklmnopqrstuvwxyz"[i] for i, a in enumerate(sorted(set(lhs.axes) | set(rhs.axes),
                                                                                     key=canon))}
        if len(letters) > 26:
            return None
        la, lb = "".join(letters[a] for a in lhs.axes), "".join(letters[a] for a in rhs.axes)
        lo = "".join(letters[a] for a in out_axes)
        prec = 100
        if len(lhs.axes) == 2 and len(rhs.axes) == 2 and lhs.axes[1] is v and rhs.axes[0] is v and \
                out_axes == (lhs.axes[0], rhs.axes[1]):
            code = f"{lhs.code if lhs.prec >= 13 else lhs.atom} @ {rhs.code if rhs.prec > 13 else rhs.atom}"
            prec = 13
        else:
            code = f"xb.einsum({la + ',' + lb + '->' + lo!r}, {lhs.code}, {rhs.code})"
        out = LT(code, out_axes, n.dtype, False, prec)
        for f in rest:
            out = self.binary("mul", out, self.value(f), n.dtype)
        return out

    # ---- integers --------------------------------------------------------------------------------------
    def int_code(self, n) -> str:
        if isinstance(n, int):
            return str(n)
        if isinstance(n, E.Const):
            return str(n.value)
        if isinstance(n, E.Dim):
            return f"{n.param}.shape[{n.axis}]"
        if isinstance(n, E.Lin):
            parts = []
            for t, k in n.terms:
                tc = self.int_code(t)
                parts.append((k, tc))
            text = ""
            for k, tc in parts:
                term = tc if abs(k) == 1 else f"{abs(k)} * {tc}"
                text += (term if not text and k > 0 else f"-{term}" if not text else
                         f" + {term}" if k > 0 else f" - {term}")
            if n.const:
                text += f" + {n.const}" if n.const > 0 else f" - {-n.const}"
            return text
        if isinstance(n, E.FloorDiv):
            return f"({self.int_code(n.a)}) // {n.c}"
        if isinstance(n, E.Mod):
            return f"({self.int_code(n.a)}) % {n.c}"
        raise LiftError(f"internal: {n!r} is not a known integer", construct="internal")


def _factors(n: E.Node) -> list[E.Node]:
    if isinstance(n, E.Bin) and n.op == "mul":
        return _factors(n.a) + _factors(n.b)
    return [n]


def _literal(v) -> str:
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else '-float("inf")'
        return repr(v)
    return str(v)


def _is_float_literal(code: str) -> bool:
    try:
        float(code)
        return "." in code or "e" in code or "inf" in code
    except ValueError:
        return False

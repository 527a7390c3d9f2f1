"""Lowering a graph to a program of kernels, with fusion.

1. Plan: which values get a buffer. Graph inputs and outputs, and the results of root primitives (reductions,
   contractions, scans, sorts, scatters) always do; an elementwise or movement value used more than once gets
   one only when recomputing it would be costly (a transcendental), otherwise it is inlined into every use.
2. Build: one kernel per buffered value; each inlines the index expressions of everything it reads that has no
   buffer (elementwise chains, broadcasts, reshapes, transposes, slices, pads, windows, gathers).
3. Fuse: a kernel whose buffer has a single consumer kernel is merged into it when the consumer reads that
   buffer at its own outer point (a fused epilogue, or a per-row statistic such as softmax's max and sum), or at
   its outer point plus its stage axes (a row kept in a row-local scratch buffer). Repeated to a fixed point,
   softmax, log-softmax, layernorm and rmsnorm become one kernel per row; matmul + bias + GELU becomes one
   contraction with an epilogue. Two contractions are never merged: each stays a GEMM a backend can hand on.
4. Order: the fused kernels are reordered where that lowers the peak of live buffer bytes (`order.py`).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import replace as dc_replace

import numpy as np

from ..config import log
from . import expr as E
from .expr import Call, Expr, Idx, Load, Local
from .graph import Eqn, Graph, Var
from .kernel import Assign, Axis, Buffer, Contract, Kernel, Program, Reduce, Scan, Store, locals_used
from .order import for_memory
from .prims import REGISTRY
from .scalar import BINARY, UNARY

CHEAP = 4                  # inline a multiply-used value whose expression costs at most this
# primitives that only move, repeat or drop their one tensor input's elements
MOVES = frozenset({"broadcast", "reshape", "permute", "slice", "pad", "window"})
ROW_BUFFER_LIMIT = 1 << 16  # elements of a row-local scratch buffer
SIBLING_REACH = 4           # kernels after a reduction looked through for a sibling (`_extremum_pair`, `_sibling_sums`)


class LowerCtx:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.producer: dict[int, Eqn] = graph.producers()
        self.uses: dict[int, int] = {}
        for e in graph.eqns:
            for v in e.inputs:
                self.uses[v.id] = self.uses.get(v.id, 0) + 1
        for v in graph.outputs:
            self.uses[v.id] = self.uses.get(v.id, 0) + 1
        self.buffers: dict[str, Buffer] = {}
        self.buffer_of: dict[int, str] = {}
        self.materialized: set[int] = set()
        self._counters: dict[str, itertools.count] = {}
        self._cost: dict[int, float] = {}
        self._taken: set[str] = set(graph.input_names)

    # ---- names ---------------------------------------------------------------------------------------
    def fresh(self, prefix: str) -> str:
        c = self._counters.setdefault(prefix, itertools.count())
        while True:
            name = f"{prefix}{next(c)}"
            if name not in self._taken:
                self._taken.add(name)
                return name

    def axis(self, extent: int, prefix: str = "i") -> Axis:
        return Axis(self.fresh(prefix), int(extent))

    def local(self, prefix: str, dtype: str) -> str:
        return self.fresh(prefix)

    def kernel_name(self, kind: str) -> str:
        return kind

    # ---- buffers -------------------------------------------------------------------------------------
    def buffer(self, var: Var, optional: bool = False) -> str | None:
        if var.id in self.buffer_of:
            return self.buffer_of[var.id]
        if optional and self.uses.get(var.id, 0) == 0:
            return None
        name = self.fresh("tmp")
        self.buffers[name] = Buffer(name, var.shape, var.dtype, "temp")
        self.buffer_of[var.id] = name
        return name

    def const_load(self, eqn: Eqn, index: tuple[Expr, ...]) -> Expr:
        """A load of a captured array. It has a const buffer of its own even where the value is an output
        (whose buffer the kernel storing it writes)."""
        var = eqn.out
        name = self.buffer_of.get(var.id)
        if name is None or self.buffers[name].role != "const":
            const = self.fresh("const")
            value = np.ascontiguousarray(np.broadcast_to(eqn.params["value"], var.shape))
            self.buffers[const] = Buffer(const, var.shape, var.dtype, "const", value)
            if name is None:
                self.buffer_of[var.id] = const
            name = const
        return Load(name, index, var.dtype)

    def value_range(self, e: Expr) -> tuple[int, int] | None:
        """The least and greatest value of a read of a captured integer array (a resampling's index table)."""
        buf = self.buffers.get(e.buf) if isinstance(e, Load) else None
        if buf is None or buf.role != "const" or buf.value is None or not np.issubdtype(buf.value.dtype, np.integer) \
                or buf.value.size == 0:
            return None
        return int(buf.value.min()), int(buf.value.max())

    # ---- expressions ---------------------------------------------------------------------------------
    def expr(self, var: Var, index: tuple[Expr, ...]) -> Expr:
        if var.id in self.materialized:
            return Load(self.buffer_of[var.id], tuple(index), var.dtype)
        eqn = self.producer[var.id]
        return eqn.prim.lower(eqn, tuple(index), self)

    def cost(self, var: Var) -> float:
        """Operations per element to recompute `var` inline (0 for buffered values)."""
        if var.id in self.materialized or var.id not in self.producer:
            return 0.0
        if var.id in self._cost:
            return self._cost[var.id]
        eqn = self.producer[var.id]
        own = 0.0
        if eqn.prim.name in ("unary", "binary"):
            f = (UNARY if eqn.prim.name == "unary" else BINARY)[eqn.params["fn"]]
            own = f.flops * (8 if f.transcendental else 1)
        elif eqn.prim.name in ("where", "gather"):
            own = 1.0
        c = own + sum(self.cost(v) for v in eqn.inputs)
        self._cost[var.id] = c
        return c

    # ---- the three steps -----------------------------------------------------------------------------
    def plan(self) -> None:
        g = self.graph
        for v, name in zip(g.inputs, g.input_names):
            self.buffers[name] = Buffer(name, v.shape, v.dtype, "input")
            self.buffer_of[v.id] = name
            self.materialized.add(v.id)
        outputs = {v.id for v in g.outputs}
        for e in g.eqns:
            for v in e.outputs:
                if e.prim.root or v.id in outputs:
                    self.materialized.add(v.id)
                elif self.uses.get(v.id, 0) > 1 and self.cost(v) > CHEAP:
                    self._keep(v)
            # a gather larger than the value it reads evaluates it more than once an element: an upsampling's
            # gradient, 10 taps for every 4 rows, read a log-softmax's gradient with its exponential 2.5 times an
            # element. (Windows stay inline: a convolution's operand plans evaluate each element once.)
            x = e.inputs[0] if e.prim.name == "gather" else None
            if x is not None and x.id not in self.materialized and x.id in self.producer \
                    and math.prod(e.out.shape) > math.prod(x.shape) and self.cost(x) > CHEAP:
                self._keep(x)
                self._cost.clear()          # readers of `x` before this one counted it inline

    def _keep(self, v: Var) -> None:
        """Buffer `v` (or the value it is windows of, `source`) instead of recomputing it at each read."""
        src = self.source(v)
        self.materialized.add(src.id)
        if src is not v:
            self._cost.clear()      # the costs through `src` counted it inline

    def source(self, var: Var) -> Var:
        """The value to keep in a buffer for `var`: `var`, or, where `var` is windows of another value (moved
        through `MOVES` only, a window among them), that value when it is no larger. A pooling's overlapping
        windows are 2.25x the activation they read: keep the activation, and let each reader gather its windows."""
        eqn, src, windowed = self.producer.get(var.id), var, False
        while eqn is not None and eqn.prim.name in MOVES and len(eqn.inputs) == 1:
            nxt = eqn.inputs[0]
            if nxt.id in self.materialized or math.prod(nxt.shape) > math.prod(src.shape):
                break
            windowed |= eqn.prim.name == "window"
            src, eqn = nxt, self.producer.get(nxt.id)
        return src if windowed else var

    def build(self) -> tuple[list[Kernel], list[str]]:
        g = self.graph
        out_names: list[str] = []
        kernels: list[Kernel] = []
        copies: list[Kernel] = []
        # name graph outputs first so their buffers are called out, out1, ...
        k = 0
        for v in g.outputs:
            name = "out" if k == 0 else f"out{k}"
            while name in self._taken:         # an input may be called `out` (ATen's flash attention backward)
                k += 1
                name = f"out{k}"
            k += 1
            self._taken.add(name)
            if v.id in self.buffer_of:          # an input (or an output listed twice): copy it, after the rest
                src = self.buffer_of[v.id]
                self.buffers[name] = Buffer(name, v.shape, v.dtype, "output")
                axes = tuple(self.axis(n) for n in v.shape)
                idx = tuple(a.var for a in axes)
                copies.append(Kernel("copy", "elementwise", axes, [Store(name, (), idx, Load(src, idx, v.dtype))]))
            else:
                self.buffers[name] = Buffer(name, v.shape, v.dtype, "output")
                self.buffer_of[v.id] = name
            out_names.append(name)
        done: set[int] = set()
        for e in g.eqns:
            if not any(v.id in self.materialized for v in e.outputs) or id(e) in done:
                continue
            done.add(id(e))
            if e.prim.root:
                kernels.append(e.prim.build(e, self))
            else:
                v = e.out
                axes = tuple(self.axis(n) for n in v.shape)
                idx = tuple(a.var for a in axes)
                value = e.prim.lower(e, idx, self)
                kernels.append(Kernel(e.prim.name, "elementwise", axes, [Store(self.buffer(v), (), idx, value)]))
            kernels[-1].origin.append(e.prim.name if e.prim.name not in ("unary", "binary", "reduce")
                                      else e.params.get("fn") or e.params.get("kind"))
        return kernels + copies, out_names


# ---- fusion -------------------------------------------------------------------------------------------

def _kind(k: Kernel) -> str:
    names = {type(s).__name__ for s in k.stages}
    if "Sort" in names:
        return "sort"
    if "ScatterAdd" in names:
        return "scatter"
    if "Scan" in names:
        return "scan"
    if "Contract" in names:
        return "contract"
    if "Reduce" in names:
        return "row" if any(isinstance(s, Store) and s.axes for s in k.stages) else "reduce"
    return "elementwise"


def _split(k: Kernel, at: int) -> Kernel | None:
    """Move outer axes [at:] into the kernel's single pointwise store (elementwise kernels only)."""
    if len(k.outer) == at:
        return k
    if len(k.outer) < at or len(k.stages) != 1 or not isinstance(k.stages[0], Store) or k.stages[0].axes:
        return None
    s = k.stages[0]
    return dc_replace(k, outer=k.outer[:at], stages=[Store(s.buf, k.outer[at:], s.index, s.value, s.scope)])


def _unsplit(k: Kernel) -> Kernel | None:
    """The inverse of `_split`: per-point Assigns then one Store over its own axes become a kernel whose outer
    axes include the store's (the Assigns, cheap loads, are then evaluated per point)."""
    *pre, last = k.stages
    if not isinstance(last, Store) or not last.axes or last.scope != "global":
        return None
    if any(not isinstance(s, Assign) or any(isinstance(n, Call) and n.dtype != E.INDEX for n in s.value.walk())
           for s in pre):
        return None
    return dc_replace(k, outer=k.outer + last.axes, stages=[*pre, Store(last.buf, (), last.index, last.value)])


def _final_store(k: Kernel) -> Store | None:
    """The single global store of a kernel that writes its buffer at (outer vars + its own axes)."""
    globals_ = [s for s in k.stages if not isinstance(s, (Reduce, Contract, Assign))
                and not (isinstance(s, Store) and s.scope == "row")]
    if len(globals_) != 1 or not isinstance(globals_[0], Store) or globals_[0] is not k.stages[-1]:
        return None
    s = globals_[0]
    want = tuple(a.var for a in k.outer) + tuple(a.var for a in s.axes)
    return s if tuple(s.index) == want else None


def _with_units(c: Kernel, p: Kernel) -> Kernel | None:
    """Consumer `c` iterating `p`'s outer axes but those of extent 1 (a grouped convolution's one channel per
    group, dropped by a reshape), with them put back: it then reads `p`'s output at its point, and fuses."""
    units = [a for a in p.outer if a.extent == 1]
    if not units or [a.extent for a in p.outer if a.extent != 1] != [a.extent for a in c.outer]:
        return None
    rest = iter(c.outer)
    return dc_replace(c, outer=tuple(a if a.extent == 1 else next(rest) for a in p.outer))


def _axis_extents(k: Kernel) -> dict[str, int]:
    out = {a.name: a.extent for a in k.outer}
    for s in k.stages:
        for a in getattr(s, "axes", ()) or ():
            out[a.name] = a.extent
        if isinstance(s, Scan):
            out[s.axis.name] = s.axis.extent
    return out


def _try_merge(p: Kernel, c: Kernel, buf: str) -> Kernel | None:
    if _kind(p) not in ("elementwise", "reduce", "row", "contract"):
        return None
    if _kind(c) not in ("elementwise", "reduce", "row", "contract", "scan"):
        return None
    if _kind(p) == "contract" and _kind(c) == "contract":
        # a sum of products (an RNN's weight gradient over its time steps) stays one GEMM per term, each
        # adding the last one's result in its epilogue: fused, they are loops no backend can hand to a GEMM
        return None
    if _kind(p) == "contract" and len(c.outer) < len(p.outer):
        c = _unsplit(c) or c          # an epilogue written per row: give it back its point-wise form
        c = _with_units(c, p) or c
    for k in range(min(len(p.outer), len(c.outer) or len(p.outer)), 0, -1):
        p2, c2 = _split(p, k), _split(c, k)
        if p2 is None or c2 is None:
            continue
        if [a.extent for a in p2.outer] != [a.extent for a in c2.outer]:
            continue
        merged = _merge(p2, c2, buf)
        if merged is not None:
            return merged
    if not p.outer and not c.outer:
        return _merge(p, c, buf)
    return None


def _merge(p: Kernel, c: Kernel, buf: str) -> Kernel | None:
    store = _final_store(p)
    if store is None:
        return None
    k = len(c.outer)
    extents = _axis_extents(c)
    row_extents = tuple(a.extent for a in store.axes)
    if row_extents and int(np.prod(row_extents)) > ROW_BUFFER_LIMIT:
        return None
    # every read of `buf` in the consumer must be at its outer point (+ pure stage-axis variables)
    for s in c.stages:
        for e in s.exprs():
            for ld in E.loads(e):
                if ld.buf != buf:
                    continue
                if isinstance(s, Contract):
                    return None
                if not _at_point(ld.index[:k], c.outer):
                    return None
                rest = ld.index[k:]
                if len(rest) != len(row_extents):
                    return None
                for r, n in zip(rest, row_extents):
                    if not isinstance(r, Idx) or r.name in {a.name for a in c.outer} or extents.get(r.name) != n:
                        return None
    rename = {a.name: b.var for a, b in zip(p.outer, c.outer)}
    pre = []
    for s in p.stages[:-1]:
        pre.append(s.replace(lambda e: E.substitute(e, rename)))
    value = E.substitute(store.value, rename)
    row_buffers = dict(c.row_buffers)
    row_buffers.update(p.row_buffers)
    if row_extents:
        row = f"{buf}_row"
        row_buffers[row] = (row_extents, value.dtype)
        pre.append(Store(row, store.axes, tuple(a.var for a in store.axes), value, "row"))

        def swap(e: Expr) -> Expr:
            return e.map(lambda n: Load(row, n.index[k:], n.dtype) if isinstance(n, Load) and n.buf == buf else None)
    else:
        local = f"{buf}_v"
        pre.append(Assign(local, value))

        def swap(e: Expr) -> Expr:
            return e.map(lambda n: Local(local, n.dtype) if isinstance(n, Load) and n.buf == buf else None)
    stages = pre + [s.replace(swap) for s in c.stages]
    merged = Kernel(c.name, c.kind, c.outer, stages, row_buffers, {**p.locals, **c.locals}, p.origin + c.origin)
    merged.kind = _kind(merged)
    return merged


def _at_point(index, axes: tuple[Axis, ...]) -> bool:
    """Does `index` address the current point of `axes`? (An axis of extent 1 may be indexed by 0.)"""
    return len(index) == len(axes) and all(
        i == a.var or (a.extent == 1 and isinstance(i, E.Const) and i.value == 0) for i, a in zip(index, axes))


def _takes_rows_of(p: Kernel, c: Kernel) -> bool:
    """What `_absorb` asks of `p`, and of `c`'s points: a kernel that stores its one buffer at its points, and
    the same points."""
    return (_kind(p) in ("row", "elementwise", "reduce") and _final_store(p) is not None and bool(p.outer)
            and [a.extent for a in p.outer] == [a.extent for a in c.outer])


def _absorb(p: Kernel, c: Kernel, between: list[Kernel]) -> Kernel | None:
    """Append reduction kernel `c` to `p` when `c` reads `p`'s output on `p`'s rows (a sibling output computed
    while the row is in cache: softmax's sum next to its exponentials)."""
    if _kind(c) not in ("reduce", "row") or not _takes_rows_of(p, c):
        return None
    store = _final_store(p)
    written_between = {b for k in between for b in k.writes()}
    if set(c.reads()) & written_between:
        return None
    k = len(c.outer)
    extents = _axis_extents(c)
    reads_p = False
    for s in c.stages:
        for e in s.exprs():
            for ld in E.loads(e):
                if ld.buf != store.buf:
                    continue
                reads_p = True
                if not _at_point(ld.index[:k], c.outer) or len(ld.index) != k + len(store.axes):
                    return None
                for r, a in zip(ld.index[k:], store.axes):
                    if not isinstance(r, Idx) or extents.get(r.name) != a.extent:
                        return None
    if not reads_p:
        return None
    rename = {a.name: b.var for a, b in zip(c.outer, p.outer)}
    stages = list(p.stages) + [s.replace(lambda e: E.substitute(e, rename)) for s in c.stages]
    merged = Kernel(p.name, p.kind, p.outer, stages, {**p.row_buffers, **c.row_buffers}, {**p.locals, **c.locals},
                    p.origin + c.origin)
    merged.kind = _kind(merged)
    return merged


def fuse(kernels: list[Kernel], buffers: dict[str, Buffer], outputs: list[str]) -> list[Kernel]:
    kernels = list(kernels)
    changed = True
    while changed:
        changed = _fuse_vertical(kernels, buffers, outputs) or _fuse_siblings(kernels, buffers) or \
            _fuse_pointwise(kernels)
    return kernels


def _fuse_pointwise(kernels: list[Kernel]) -> bool:
    """Append one elementwise kernel at a reduction's points to it (`_absorb_pointwise`), last of the fusions:
    the reduction then writes several buffers, which other fusions take as a sign to leave it."""
    readers = _readers(kernels)
    pos = {id(k): i for i, k in enumerate(kernels)}
    for i, p in enumerate(kernels):
        for j in sorted({pos[id(c)] for b in p.writes() for c in readers.get(b, ()) if pos[id(c)] > i}):
            merged = _absorb_pointwise(p, kernels[j], kernels[i + 1:j])
            if merged is not None:
                kernels[i] = merged
                del kernels[j]
                return True
    return False


def _fuse_siblings(kernels: list[Kernel], buffers: dict[str, Buffer]) -> bool:
    readers = _readers(kernels)
    pos = {id(k): i for i, k in enumerate(kernels)}
    for i, p in enumerate(kernels):
        # (each pass starts over after one merge: the tests on `p` alone come first)
        if _leading_sums(p) or _extremum(p):
            for j in range(i + 1, min(len(kernels), i + 1 + SIBLING_REACH)):
                merged = _extremum_pair(p, kernels[j], kernels[i + 1:j]) or \
                    _sibling_sums(p, kernels[j], kernels[i + 1:j])
                if merged is not None:
                    kernels[i] = merged
                    del kernels[j]
                    return True
        writes = p.writes()
        if len(writes) != 1:
            continue
        for j in sorted(pos[id(c)] for c in readers.get(writes[0], ()) if pos[id(c)] > i):
            c = kernels[j]
            if not _takes_rows_of(p, c):
                continue
            between = kernels[i + 1:j]
            merged = _absorb(p, c, between)
            if merged is not None:
                kernels[i] = merged
                del kernels[j]
                return True
            # `c` also reads something computed in between: move only its leading reductions over p's rows
            split = _split_head(c, {b for k in between for b in k.writes()}, buffers)
            if split is not None:
                head, tail, new = split
                merged = _absorb(p, head, between)
                if merged is not None:
                    buffers.update(new)
                    kernels[i] = merged
                    kernels[j] = tail
                    return True
    return False


def _absorb_pointwise(p: Kernel, c: Kernel, between: list[Kernel]) -> Kernel | None:
    """Append elementwise kernel `c` to reduction `p` when `c` runs over `p`'s points (with axes of extent 1 or
    not) and reads what `p` writes where `p` writes it at the same point (a batch norm's statistics: their
    running averages, saved copies and inverse deviation, each a kernel of a few dozen points otherwise)."""
    if _kind(c) != "elementwise" or _kind(p) not in ("reduce", "row") or not p.outer:
        return None
    if not all(isinstance(s, Assign) or isinstance(s, Store) and not s.axes and s.scope == "global"
               for s in c.stages):
        return None
    rest = [a for a in c.outer if a.extent != 1]
    if [a.extent for a in rest] != [a.extent for a in p.outer]:
        return None
    if set(c.reads()) & {b for k in between for b in k.writes()}:
        return None
    rename = {a.name: b.var for a, b in zip(rest, p.outer)}
    rename.update({a.name: E.const(0) for a in c.outer if a.extent == 1})
    stages = [s.replace(lambda e: E.substitute(e, rename)) for s in c.stages]
    written = {s.buf: s.index for s in p.stages if isinstance(s, Store) and s.scope == "global"}
    reads = [ld for s in stages for e in s.exprs() for ld in E.loads(e) if ld.buf in written]
    if not reads or any(ld.index != written[ld.buf] for ld in reads):
        return None
    merged = Kernel(p.name, p.kind, p.outer, [*p.stages, *stages], dict(p.row_buffers),
                    {**p.locals, **c.locals}, p.origin + c.origin)
    merged.kind = _kind(merged)
    return merged


def _moves_up(p: Kernel, c: Kernel, between: list[Kernel]) -> bool:
    """Whether `c` can run with `p`: neither reads what the other writes, and no kernel between them writes what
    `c` reads or touches what it writes."""
    return not (set(c.reads()) & {w for k in between for w in k.writes()}
                or set(c.writes()) & {r for k in between for r in (*k.reads(), *k.writes())}
                or set(c.reads()) & set(p.writes()) or set(p.reads()) & set(c.writes()))


def _leading_sums(k: Kernel) -> int:
    """How many sums lead `k`'s stages when only assignments and stores at its point follow them, else 0."""
    def compute():
        n = next((i for i, s in enumerate(k.stages) if not isinstance(s, Reduce)), len(k.stages))
        if not all(isinstance(s, Reduce) and s.kind == "sum" and not s.index_local for s in k.stages[:n]):
            return 0
        if not all(isinstance(s, Assign) or isinstance(s, Store) and not s.axes for s in k.stages[n:]):
            return 0
        return n
    return k._memo("leading_sums", compute)


_PAIRED = {"max": "argmax", "min": "argmin", "argmax": "max", "argmin": "min"}


def _extremum(k: Kernel) -> bool:
    """Whether `k` starts with a max, min or their arg- forms (`_extremum_pair`)."""
    return bool(k.stages) and isinstance(k.stages[0], Reduce) and k.stages[0].kind in _PAIRED


def _sibling_sums(p: Kernel, c: Kernel, between: list[Kernel]) -> Kernel | None:
    """Sums over the same axes at the same points reading some of the same data, each over its point's own slice
    (a batch norm's gradient: the sum of the output gradient and of its product with the normalised input, per
    channel), as one kernel whose sums are all taken before its stores: one visit of each point's slice. Sums
    whose reads run across points in memory (a bias gradient: columns of rows) stay apart; a backend adds those
    a row at a time."""
    m, n = _leading_sums(p), _leading_sums(c)
    if not m or not n or not p.outer or [a.extent for a in p.outer] != [a.extent for a in c.outer]:
        return None
    axes, theirs = p.stages[0].axes, c.stages[0].axes
    if any(s.axes != axes for s in p.stages[:m]) or any(s.axes != theirs for s in c.stages[:n]) or \
            [a.extent for a in axes] != [a.extent for a in theirs]:
        return None
    if not set(p.reads()) & set(c.reads()) or not _moves_up(p, c, between):
        return None
    rename = {x.name: y.var for x, y in zip((*c.outer, *theirs), (*p.outer, *axes))}
    sums = [*p.stages[:m], *(Reduce(s.local, s.kind, axes, E.substitute(s.body, rename), s.dtype)
                            for s in c.stages[:n])]
    outer, summed = {a.name for a in p.outer}, {a.name for a in axes}
    for s in sums:
        for ld in E.loads(s.body):
            free = set().union(*map(E.free_indices, ld.index)) if ld.index else set()
            if free & summed and free & outer and outer & E.free_indices(ld.index[-1]):
                return None
    rest = [s.replace(lambda e: E.substitute(e, rename)) for s in c.stages[n:]]
    merged = Kernel(p.name, p.kind, p.outer, [*sums, *p.stages[m:], *rest], {**p.row_buffers, **c.row_buffers},
                    {**p.locals, **c.locals}, p.origin + c.origin)
    merged.kind = _kind(merged)
    return merged


def _extremum_pair(p: Kernel, c: Kernel, between: list[Kernel]) -> Kernel | None:
    """A max and an arg-max (or a min and an arg-min) of the same values at the same points, `c` after `p`
    (a max pool's values and offsets, `torch.max` along a dim), as one kernel: the arg-max's running value is
    the max. `c` moves up to `p`, past kernels that neither write what it reads nor touch what it writes."""
    if not (p.stages and c.stages and isinstance(p.stages[0], Reduce) and isinstance(c.stages[0], Reduce)):
        return None
    a, b = p.stages[0], c.stages[0]
    if _PAIRED.get(a.kind) != b.kind or a.dtype != b.dtype or [x.extent for x in a.axes] != [x.extent for x in b.axes]:
        return None
    if [x.extent for x in p.outer] != [x.extent for x in c.outer] or not _moves_up(p, c, between):
        return None
    rename = {x.name: y.var for x, y in zip((*c.outer, *b.axes), (*p.outer, *a.axes))}
    rest = [s.replace(lambda e: E.substitute(e, rename)) for s in c.stages[1:]]
    if E.substitute(b.body, rename) != a.body:
        return None
    arg, ext = (a, b) if a.kind.startswith("arg") else (b, a)
    stages = [Reduce(arg.local, arg.kind, a.axes, a.body, arg.dtype, arg.index_local),
              Assign(ext.local, Local(arg.local, ext.dtype)), *p.stages[1:], *rest]
    merged = Kernel(p.name, p.kind, p.outer, stages, {**p.row_buffers, **c.row_buffers}, {**p.locals, **c.locals},
                    p.origin + c.origin)
    merged.kind = _kind(merged)
    return merged


def _split_head(c: Kernel, blocked: set[str], buffers: dict[str, Buffer]):
    """(head, tail, new buffers): `c`'s leading Reduce/Assign stages that read none of `blocked`, writing the
    values the rest uses to new per-point buffers, and the rest of `c` reading them back."""
    n = 0
    for s in c.stages:
        if not isinstance(s, (Reduce, Assign)) or any(ld.buf in blocked for e in s.exprs() for ld in E.loads(e)):
            break
        n += 1
    if n == 0 or n == len(c.stages):
        return None
    head_stages, rest = c.stages[:n], c.stages[n:]
    used = {name for s in rest for e in s.exprs() for name in locals_used(e)}
    shape = tuple(a.extent for a in c.outer)
    point = tuple(a.var for a in c.outer)
    new: dict[str, Buffer] = {}
    stores, loads = [], []
    for s in head_stages:
        for local, dtype in _defined(s):
            if local in used:
                name = f"{local}_out"
                new[name] = Buffer(name, shape, dtype, "temp")
                stores.append(Store(name, (), point, Local(local, dtype)))
                loads.append(Assign(local, Load(name, point, dtype)))
    if not new:
        return None
    head = Kernel(c.name + "_head", "reduce", c.outer, list(head_stages) + stores, {}, dict(c.locals), list(c.origin))
    tail = Kernel(c.name, c.kind, c.outer, loads + list(rest), dict(c.row_buffers), dict(c.locals), list(c.origin))
    return head, tail, new


def _defined(s) -> list[tuple[str, str]]:
    if isinstance(s, Reduce):
        out = [(s.local, s.dtype)]
        return out + [(s.index_local, "int64")] if s.index_local else out
    return [(s.local, s.value.dtype)]


def _readers(kernels: list[Kernel]) -> dict[str, list[Kernel]]:
    out: dict[str, list[Kernel]] = {}
    for k in kernels:
        for b in k.reads():
            out.setdefault(b, []).append(k)
    return out


def _fuse_vertical(kernels: list[Kernel], buffers: dict[str, Buffer], outputs: list[str]) -> bool:
    """Merge each kernel into its single consumer where `_try_merge` can, first such pair first, to a fixed
    point (who reads what is indexed once per merge: whole-model graphs have hundreds of kernels)."""
    any_change = False
    changed = True
    while changed:
        changed = False
        readers = _readers(kernels)
        pos = {id(k): i for i, k in enumerate(kernels)}
        for p in kernels:
            writes = p.writes()
            if len(writes) != 1 or writes[0] in outputs:
                continue
            buf = writes[0]
            consumers = [c for c in readers.get(buf, ()) if c is not p]
            if len(consumers) != 1 or pos[id(consumers[0])] < pos[id(p)]:
                continue
            c = consumers[0]
            merged = _try_merge(p, c, buf)
            if merged is None:
                continue
            kernels[pos[id(c)]] = merged
            kernels.remove(p)
            del buffers[buf]
            changed = any_change = True
            break
    return any_change


def lower(graph: Graph, *, fusion: bool = True, donated: bool = False) -> Program:
    """The graph's program (`donated`: the caller hands its inputs over, so the program may free each after its
    last reader, and the kernels' order counts on it)."""
    ctx = LowerCtx(graph)
    ctx.plan()
    kernels, outputs = ctx.build()
    if fusion:
        inputs = list(graph.input_names)
        kernels = for_memory(fuse(kernels, ctx.buffers, outputs), ctx.buffers, inputs, outputs,
                             inputs if donated else ())
    for i, k in enumerate(kernels):
        k.kind = _kind(k)
        k.name = f"k{i}_{k.kind}"
    used = {b for k in kernels for b in k.reads() + k.writes()} | set(graph.input_names) | set(outputs)
    buffers = {n: b for n, b in ctx.buffers.items() if n in used}
    prog = Program(graph.name, buffers, list(graph.input_names), outputs, kernels, graph=graph)
    log.debug("lowered %s to %d kernel(s)", graph.name, len(kernels))
    return prog


__all__ = ["lower", "LowerCtx", "fuse", "REGISTRY"]

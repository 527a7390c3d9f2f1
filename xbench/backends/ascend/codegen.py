"""Ascend C source from loop-IR programs, in the official kernel style.

Every loop-IR kernel becomes one or more `extern "C" __global__ __aicore__` entries (a `Kernel*` class with
`Init` and `Process`, `TPipe`, `TQue` double buffering, `GlobalTensor`/`LocalTensor`, `DataCopy`, the count
form of the vector API), a POD tiling struct and a host function that fills it:

- elementwise and small-window reduce kernels (`TileKernel`): the outer index space is split into rows
  (leading axes) and a flattened vector extent (trailing axes); tiles of `tileLength` elements are spread
  over `blockDim` cores and pass CopyIn -> Compute -> CopyOut; reductions inside run as loops of vector
  instructions over the tile;
- row kernels (softmax, layernorm, ...; `RowKernel`): one row per step, kept whole in the UB when it fits
  (ReduceMax/ReduceSum once per statistic), streamed in tiles otherwise (one pass per statistic, one for the
  output);
- contractions (`MatmulKernel`): the Cube through the high-level Matmul API with a host `TCubeTiling`;
  operands that are not plain ND matrices are packed first by a generated vector kernel; epilogues run on the
  vector unit on each core's block of C;
- scans, sorts, scatters and anything the vector forms cannot express (`ScalarKernel`): loops on the scalar
  unit over `GetValue`/`SetValue`, flagged "scalar path".
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...dtypes import is_float
from ...errors import BackendError
from ...ir import expr as E
from ...ir.expr import Call, Cast, Const, Expr, Idx, Load, Local, Select
from ...ir.kernel import Assign, Axis, Contract, Kernel, Program, Reduce, Scan, ScatterAdd, Sort, Store
from ...ir.schedule import Schedule
from .affine import classify
from .cpp import (
    CTYPE,
    SCALAR,
    SCALAR_HELPERS,
    SIZE,
    ScalarScope,
    ScalarWriter,
    Source,
    Unsupported,
    ctype,
    lit,
    vec_scalar,
)
from .vecexpr import COMPOSED_BINARY, Domain, Features, Pool, Tile, VecEmitter

ALIGN = 128                 # tile lengths are multiples of 128 elements (whole 256-byte repeats)
SELECT_RESERVE = 8192       # Select in tensor modes needs 8 KiB of UB left free
MATH_SLOT = 256             # bytes of one scratch block of the scalar math helpers
SYS_WORKSPACE = 16 * 1024 * 1024   # the Matmul library's system workspace on Atlas A2
QUE_LIMIT = 8               # TQue buffers per TPosition (hardware event ids)


def ident(name: str) -> str:
    s = re.sub(r"[^0-9A-Za-z_]", "_", name)
    return s if not s[0].isdigit() else "_" + s


def camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in re.split(r"[^0-9A-Za-z]", name) if p)


def prod(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n


def align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# ---- the UB plan --------------------------------------------------------------------------------------

@dataclass
class UbItem:
    """One InitBuffer call: `num` buffers of `per_elem * tileLength + fixed` bytes (rounded to 32), or of
    `fn(tileLength)` bytes."""
    name: str
    kind: str          # TQue | TBuf
    position: str      # VECIN | VECOUT | VECCALC
    num: int
    per_elem: int
    fixed: int = 0
    fn: Any = None

    def bytes(self, T: int) -> int:
        if self.fn is not None:
            return align(self.fn(T), 32)
        return align(self.per_elem * T + self.fixed, 32)


def ub_total(items: list[UbItem], T: int) -> int:
    return sum(i.num * i.bytes(T) for i in items)


def fit_tile(items: list[UbItem], budget: int, cap: int, need: int = ALIGN) -> int:
    """The largest multiple of ALIGN, at most `cap`, whose plan fits `budget`; 0 when not even `need` fits."""
    per = sum(i.num * i.per_elem for i in items)
    fixed = sum(i.num * align(i.fixed, 32) for i in items)
    if per == 0:
        return max(ALIGN, align(min(cap, need), ALIGN))
    T = (budget - fixed - 32 * len(items)) // per // ALIGN * ALIGN
    T = min(T, align(cap, ALIGN))
    while T >= ALIGN and ub_total(items, T) > budget:
        T -= ALIGN
    if align(need, ALIGN) > T:
        return 0
    return T


def plan_text(items: list[UbItem], T: int) -> str:
    return ", ".join(f"{i.name} {i.num} x {i.bytes(T)} B" for i in items)


# ---- launches -----------------------------------------------------------------------------------------

@dataclass
class Launch:
    """One kernel entry the host launches: its GM arguments, tiling struct and host tiling function."""
    entry: str
    kernel: str                    # the loop-IR kernel it belongs to
    role: str                      # main | pack | matmul
    args: list[str]                # buffer names (GM_ADDR parameters before workspace and tiling)
    struct: str                    # tiling struct name
    fields: list[tuple[str, str]]  # (name, comment); uint32_t each, after an optional TCubeTiling `cube`
    cube: bool = False
    cores: int = 48                # cores of the kind it runs on (vector cores, or cube cores for Matmul)
    workspace: int = 0             # bytes of GM workspace (the Matmul system workspace)
    plan: dict[str, Any] = field(default_factory=dict)   # what the generator decided (resources)

    @property
    def host(self) -> str:
        return f"{self.entry}_tiling"


class KernelGen:
    """Shared by the generators: GM tensors, the scalar writer, math helpers, the UB plan and the entry."""

    role = "main"

    def __init__(self, pw: ProgramWriter, k: Kernel, sched: Schedule, entry: str):
        self.pw = pw
        self.k = k
        self.sched = sched
        self.entry = entry
        self.cls = "Kernel" + camel(entry)
        self.struct = camel(entry) + "Tiling"
        self.shapes = pw.shapes
        self.features = Features()
        self.math: set[str] = set()
        self.gm: list[str] = []
        self.row_ub: dict[str, str] = {}         # row buffer -> LocalTensor name (scalar access)
        self.sw = ScalarWriter(self.shapes, self._load, self._math)
        self.buffer_num = int(sched.get("buffer_num", 2))
        self.notes: list[str] = []

    # scalar code callbacks
    def gm_name(self, buf: str) -> str:
        if buf not in self.gm:
            self.gm.append(buf)
        return f"{ident(buf)}Gm"

    def _load(self, buf: str, off: str, dtype: str) -> str:
        if buf in self.row_ub:
            v = f"{self.row_ub[buf]}.GetValue({off})"
        else:
            v = f"{self.gm_name(buf)}.GetValue({off})"
        if dtype in ("float16", "bfloat16"):
            return f"static_cast<float>({v})"
        if dtype == "bool":
            return f"({v} != 0)"
        return v

    def _math(self, fn: str, dtype: str, args: list[str]) -> str:
        self.math.add(fn)
        return f"Math{camel(fn)}({', '.join(args)})"

    # pieces every class has
    def gm_members(self) -> list[str]:
        return [f"GlobalTensor<{ctype(self.pw.dtypes[b])}> {ident(b)}Gm;" for b in self.gm]

    def gm_init(self, src: Source) -> None:
        for b in self.gm:
            c = ctype(self.pw.dtypes[b])
            src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {c}*){ident(b)}, {prod(self.shapes[b])});")

    def math_helpers(self, src: Source) -> None:
        """Emit the scalar math helpers (built once by `math_source`)."""
        src.extend(_reindent(self.math_source(), src.depth))

    def math_slots(self) -> int:
        self.math_source()
        return self._math_slots

    def math_source(self) -> Source:
        if getattr(self, "_math_src", None) is None:
            self._math_slots = 0
            self._math_src = Source(1)
            self._build_math(self._math_src)
        return self._math_src

    def _build_math(self, src: Source) -> None:
        """Scalar transcendental functions through the vector unit: one 32-byte block per call."""
        for fn in sorted(self.math):
            pool = Pool("m")
            body = Source(src.depth + 1)
            dom = Domain((), v0="0", count="8")
            em = VecEmitter(body, dom, pool, self.sw, ScalarScope(), self.shapes, {}, inputs=lambda *_: None,
                            features=self.features)
            x = pool.alloc("float32", pinned=True)
            body(f"Duplicate({x.name}, x, 8);")
            out = pool.alloc("float32", pinned=True)
            binary = fn == "pow" or fn in COMPOSED_BINARY
            if fn == "pow":
                y = pool.alloc("float32", pinned=True)
                body(f"Duplicate({y.name}, y, 8);")
                body(f"Ln({out.name}, {x.name}, 8);")
                body(f"Mul({out.name}, {out.name}, {y.name}, 8);")
                body(f"Exp({out.name}, {out.name}, 8);")
            elif binary:
                y = pool.alloc("float32", pinned=True)
                body(f"Duplicate({y.name}, y, 8);")
                em.vlocals = {"xa": x, "xb": y}
                call = Call(fn, (Local("xa", "float32"), Local("xb", "float32")), "float32")
                em.count_uses([call])
                em.root(call, out)
            elif fn in ("exp", "log", "sqrt", "rsqrt", "reciprocal", "abs"):
                api = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "reciprocal": "Reciprocal",
                       "abs": "Abs"}[fn]
                body(f"{api}({out.name}, {x.name}, 8);")
            else:
                em.compose(fn, out, x)
            body("XbSync<HardEvent::V_S>();")
            body(f"return {out.name}.GetValue(0);")
            params = "float x, float y" if binary else "float x"
            with src.block(f"__aicore__ inline float Math{camel(fn)}({params})"):
                for d in pool.declarations("mathBuf", str(MATH_SLOT)):
                    src(d)
                src("XbSync<HardEvent::S_V>();")
                src.extend(body)
            self._math_slots = max(getattr(self, "_math_slots", 0), pool.count)

    def math_item(self) -> list[UbItem]:
        if not self.math:
            return []
        return [UbItem("mathBuf", "TBuf", "VECCALC", 1, 0, MATH_SLOT * self.math_slots())]

    def entry_source(self, src: Source, init_args: list[str]) -> None:
        params = ", ".join([f"GM_ADDR {param(b)}" for b in self.args()] + ["GM_ADDR workspace", "GM_ADDR tiling"])
        with src.block(f'extern "C" __global__ __aicore__ void {self.entry}({params})'):
            src(f"{self.struct} t;")
            src("XbCopyTiling(&t, tiling);")
            self.entry_prologue(src)
            src(f"{self.cls} op;")
            src(f"op.Init({', '.join(init_args)});")
            src("op.Process();")

    def entry_prologue(self, src: Source) -> None:
        pass

    def args(self) -> list[str]:
        return list(self.gm)

    def struct_source(self, src: Source, fields: list[tuple[str, str]], cube: bool = False) -> None:
        src(f"// Tiling of {self.entry}: computed on the host by {self.entry}_tiling(), copied into the kernel "
            "from GM.")
        with src.block(f"struct {self.struct}", "};"):
            if cube:
                src("TCubeTiling cube;              // Matmul tiling (base blocks, L1 depths, single-core shape)")
            width = max(len(n) for n, _ in fields) + 1
            for n, c in fields:
                src(f"uint32_t {(n + ';').ljust(width + 1)}  // {c}")


# ---- a tile of a domain: CopyIn / Compute / CopyOut ----------------------------------------------------

@dataclass
class Entry:
    """A contiguous load copied into the UB once per tile: through its own VECIN queue, or -- beyond the
    queues the hardware has events for -- straight into a scratch tile with explicit pipe syncs."""
    key: tuple
    buf: str
    base: Expr
    dtype: str
    tile: str
    queue: str | None

    def copy_in(self, src: Source, gm: str, count: str, name: str | None = None) -> None:
        c, t = ctype(self.dtype), name or self.tile
        if self.queue:
            src(f"LocalTensor<{c}> {t} = {self.queue}.AllocTensor<{c}>();")
            src(f"CopyGmToUb({t}, {gm}, {count});")
            src(f"{self.queue}.EnQue({t});")
        else:
            src("XbSync<HardEvent::V_MTE2>();  // the vector unit is done with the tile")
            src(f"CopyGmToUb({self.tile}, {gm}, {count});")

    def take(self, src: Source) -> None:
        if self.queue:
            c = ctype(self.dtype)
            src(f"LocalTensor<{c}> {self.tile} = {self.queue}.DeQue<{c}>();")

    def free(self, src: Source) -> None:
        if self.queue:
            src(f"{self.queue}.FreeTensor({self.tile});")


def take_all(src: Source, entries) -> None:
    entries = list(entries)
    for e in entries:
        e.take(src)
    if any(e.queue is None for e in entries):
        src("XbSync<HardEvent::MTE2_V>();  // direct copies have landed")


class Inputs:
    """The contiguous loads of a compute block, each mapped to a UB tile. Registries of one kernel share a
    budget of queues (the hardware has 8 VECIN buffer events); beyond it loads go to scratch tiles."""

    def __init__(self, prefix: str, budget: list[int], tile_prefix: str, row_tiles: dict[str, Tile] | None = None,
                 pool: Pool | None = None):
        self.prefix = prefix
        self.tile_prefix = tile_prefix
        self.budget = budget
        self.entries: dict[tuple, Entry] = {}
        self.row_tiles = row_tiles or {}
        self.pool = pool

    def __call__(self, load: Load, extra: tuple, register: bool = True) -> Tile | None:
        """The tile holding `load` along the domain (None: it cannot have one). With `register` False only
        says whether it could, without claiming a queue (the emitter asks before it decides to gather)."""
        base = extra[0]
        if load.buf in self.row_tiles:
            return self.row_tiles[load.buf] if isinstance(base, Const) and base.value == 0 else None
        key = (load.buf, base, load.dtype)
        if key not in self.entries:
            if load.dtype not in ("float32", "float16", "int32", "bfloat16"):
                return None
            if not register:
                return Tile("?", load.dtype) if self.budget[0] > 0 or self.pool is not None else None
            j = len(self.entries)
            if self.budget[0] > 0:
                self.budget[0] -= 1
                self.entries[key] = Entry(key, load.buf, base, load.dtype, f"{self.tile_prefix}{j}",
                                          f"{self.prefix}{j}")
            elif self.pool is not None:
                # a slot no instruction emitted so far has used: CopyIn fills it before Compute runs
                t = self.pool.alloc(load.dtype, pinned=True, fresh=True)
                self.entries[key] = Entry(key, load.buf, base, load.dtype, t.name, None)
            else:
                return None
        e = self.entries[key]
        return Tile(e.tile, e.dtype)

    def queued(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.queue]


def inline_assigns(stages: list) -> tuple[list, dict[str, Expr]]:
    """Replace Assign locals by their values in later stages (CSE in the emitter shares them again)."""
    env: dict[str, Expr] = {}

    def sub(e: Expr) -> Expr:
        return e.map(lambda n: env.get(n.name) if isinstance(n, Local) and n.name in env else None)
    out = []
    for s in stages:
        s2 = s.replace(sub)
        if isinstance(s2, Assign):
            env[s2.local] = s2.value
        else:
            out.append(s2)
    return out, env


def tile_store_base(s: Store, shapes: dict, domain: tuple[Axis, ...]) -> Expr | None:
    """Where a per-point store's run starts along `domain` (None when it does not move contiguously)."""
    if prod(a.extent for a in domain) == 1:
        zero = {a.name: E.ZERO for a in domain}
        return E.substitute(E.linear(tuple(s.index), shapes[s.buf]), zero)
    acc = classify(Load(s.buf, s.index, "float32"), shapes[s.buf], domain)
    return acc.base if acc.kind == "contiguous" else None


def forward_stores(stages: list) -> list:
    """Per-point stages read back what an earlier stage of the same point stored: use the stored value.
    Raises Unsupported when a stage reads another point of a buffer this kernel writes."""
    stored: dict[str, tuple[tuple[Expr, ...], Expr]] = {}
    out = []
    for st in stages:
        def sub(e: Expr) -> Expr:
            def f(n):
                if isinstance(n, Load) and n.buf in stored:
                    idx, val = stored[n.buf]
                    if tuple(n.index) != idx:
                        raise Unsupported(f"a stage reads {n.buf} at another point than the one stored")
                    return val
                return None
            return e.map(f)
        st2 = st.replace(sub)
        if isinstance(st2, Store):
            stored[st2.buf] = (tuple(st2.index), st2.value)
        out.append(st2)
    return out


def walk_loads(e: Expr, guarded: bool = False):
    """(load, under a Select branch) for every load in `e`, outside other loads' indices too."""
    if isinstance(e, Load):
        yield e, guarded
        for i in e.index:
            yield from walk_loads(i, guarded)
        return
    if isinstance(e, Select):
        yield from walk_loads(e.cond, guarded)
        yield from walk_loads(e.a, True)
        yield from walk_loads(e.b, True)
        return
    for c in e.children():
        yield from walk_loads(c, guarded)


class TileBody:
    """The per-tile code of stages [Reduce*, Assign*, Store(no axes)*] evaluated over a vector domain:
    reductions become loops of vector instructions accumulating into a tile."""

    def __init__(self, gen: KernelGen, stages: list, domain: tuple[Axis, ...], scope: ScalarScope,
                 ranges: dict[str, tuple[int, int]], pool: Pool, tag: str = ""):
        self.gen = gen
        self.stages, _ = inline_assigns(stages)
        self.stages = forward_stores(self.stages)
        self.domain = Domain(domain, v0="v0", count="len")
        self.scope = scope
        self.ranges = ranges
        self.pool = pool
        self.tag = tag
        self.budget = [max(1, QUE_LIMIT // gen.buffer_num)]
        self.inputs = Inputs(f"inQueue{tag}", self.budget, f"x{tag}", pool=pool)
        self.inner: list[Inputs] = []
        self.outs: list[tuple[Store, str, str, Expr]] = []   # (store, tile, queue, base)
        self.copy_in = Source(2)
        self.compute = Source(2)
        self.copy_out = Source(2)

    def check(self) -> None:
        for s in self.stages:
            if isinstance(s, Reduce):
                if s.kind not in ("sum", "max", "min", "prod") or s.index_local:
                    raise Unsupported(f"{s.kind} reductions have no vector form here")
                if s.dtype not in ("float32", "float16", "int32") or (s.dtype == "int32" and s.kind == "prod"):
                    raise Unsupported(f"{s.kind} over {s.dtype} has no vector form")
            elif isinstance(s, Store):
                if s.axes or s.scope != "global":
                    raise Unsupported("stores with their own loops need the row or scalar form")
                if tile_store_base(s, self.gen.shapes, self.domain.axes) is None:
                    raise Unsupported(f"the store to {s.buf} does not move contiguously along the vector axes")
                if self.gen.pw.dtypes[s.buf] not in ("float32", "float16", "int32", "bfloat16", "bool", "int64",
                                                     "int8", "uint8", "int16"):
                    raise Unsupported(f"no vector store of {self.gen.pw.dtypes[s.buf]}")
            else:
                raise Unsupported(f"{type(s).__name__} stages have no vector form")
        nouts = sum(1 for s in self.stages if isinstance(s, Store))
        if nouts * self.gen.buffer_num > QUE_LIMIT:
            raise Unsupported(f"{nouts} outputs need more than {QUE_LIMIT} VECOUT queue buffers")

    def build(self) -> None:
        self.check()
        g, src, n = self.gen, self.compute, self.domain.count
        vlocals: dict[str, Tile] = {}
        body = Source(2)
        ri = 0
        for s in self.stages:
            if not isinstance(s, Reduce):
                continue
            acc = self.pool.alloc(s.dtype, pinned=True)
            init = _init(s.kind, s.dtype)
            body(f"Duplicate({acc.name}, {vec_scalar(init, s.dtype)}, {n});")
            inner = Inputs(f"rinQueue{self.tag}{ri}_", self.budget, f"z{self.tag}{ri}_", pool=self.pool)
            ri += 1
            self.inner.append(inner)
            scope = self.scope.child()
            copy_scope = None
            ranges = dict(self.ranges)
            opened = 0
            for a in s.axes:
                body(f"for (int64_t {a.name}_ = 0; {a.name}_ < {a.extent}; ++{a.name}_) {{")
                body.depth += 1
                opened += 1
                scope.idx[a.name] = f"{a.name}_"
                scope.ranges[a.name] = ranges[a.name] = (0, a.extent - 1)
            copy_scope = scope.child()
            val = s.body if s.body.dtype == s.dtype else Cast(s.body, s.dtype)
            loop = Source(body.depth)
            em = VecEmitter(loop, self.domain, self.pool, g.sw, scope, g.shapes, {}, inputs=inner,
                            vlocals=vlocals, ranges=ranges, features=g.features)
            em.count_uses([val])
            t = em.value(val)
            tt = em.tile_of(val, t)
            loop(f"{_accumulate(s.kind)}({acc.name}, {acc.name}, {tt.name}, {n});")
            em.done(val, t)
            if tt is not t:
                self.pool.release(tt)
            # inner copies: one queue round trip per iteration
            for e in inner.entries.values():
                base = g.sw.expr(e.base, copy_scope, body)
                e.copy_in(body, f"{g.gm_name(e.buf)}[{_plus(base, 'v0')}]", n, f"{e.tile}in")
            take_all(body, inner.entries.values())
            body.extend(loop)
            for e in inner.entries.values():
                e.free(body)
            for _ in range(opened):
                body.depth -= 1
                body("}")
            vlocals[s.local] = Tile(acc.name, acc.dtype)
        stores = [s for s in self.stages if isinstance(s, Store)]
        em = VecEmitter(body, self.domain, self.pool, g.sw, self.scope.child(), g.shapes, {}, inputs=self.inputs,
                        vlocals=vlocals, ranges=self.ranges, features=g.features)
        em.count_uses([s.value for s in stores])
        for j, s in enumerate(stores):
            dt = g.pw.dtypes[s.buf]
            tile = f"y{self.tag}{j}"
            queue = f"outQueue{self.tag}{j}"
            self.outs.append((s, tile, queue, tile_store_base(s, g.shapes, self.domain.axes)))
            val = s.value
            if dt == "bool" or dt not in ("float32", "float16", "int32", "bfloat16"):
                t = em.gather(val, ())
                em.copy(Tile(tile, _storage(dt)), t)
                self.pool.release(t)
            else:
                em.root(val, Tile(tile, dt))
        # assemble Compute
        take_all(src, self.inputs.entries.values())
        for s, tile, queue, _ in self.outs:
            c = ctype(g.pw.dtypes[s.buf])
            src(f"LocalTensor<{c}> {tile} = {queue}.AllocTensor<{c}>();")
        src.extend(body)
        for _, tile, queue, _ in self.outs:
            src(f"{queue}.EnQue({tile});")
        for e in self.inputs.entries.values():
            e.free(src)
        # CopyIn / CopyOut
        ci, co = self.copy_in, self.copy_out
        scope = self.scope.child()
        for e in self.inputs.entries.values():
            base = g.sw.expr(e.base, scope, ci)
            e.copy_in(ci, f"{g.gm_name(e.buf)}[{_plus(base, 'v0')}]", n)
        for s, tile, queue, base_e in self.outs:
            c = ctype(g.pw.dtypes[s.buf])
            co(f"LocalTensor<{c}> {tile} = {queue}.DeQue<{c}>();")
            base = g.sw.expr(base_e, self.scope.child(), co)
            co(f"CopyUbToGm({g.gm_name(s.buf)}[{_plus(base, 'v0')}], {tile}, {n});")
            co(f"{queue}.FreeTensor({tile});")

    def queues(self) -> list[tuple[str, str, int]]:
        """(queue, position, bytes per element) of every queue this body uses."""
        out = []
        for e in self.inputs.queued():
            out.append((e.queue, "VECIN", SIZE[e.dtype]))
        for inner in self.inner:
            for e in inner.queued():
                out.append((e.queue, "VECIN", SIZE[e.dtype]))
        for s, _, queue, _ in self.outs:
            out.append((queue, "VECOUT", SIZE[_storage(self.gen.pw.dtypes[s.buf])]))
        return out

    def items(self, slot_elem: int) -> list[UbItem]:
        items = [UbItem(q, "TQue", pos, self.gen.buffer_num, sz) for q, pos, sz in self.queues()]
        n = sum(i.num for i in items if i.position == "VECIN")
        if n > QUE_LIMIT:
            raise Unsupported(f"{n} VECIN queue buffers exceed the {QUE_LIMIT} the hardware has events for")
        return items


def _plus(a: str, b: str) -> str:
    return b if a == "0" else f"{a} + {b}"


class _Block:
    """A bare `{ ... }` scope."""

    def __init__(self, src: Source):
        self.src = src

    def __enter__(self):
        self.src("{")
        self.src.depth += 1

    def __exit__(self, *a):
        self.src.depth -= 1
        self.src("}")


def _storage(dtype: str) -> str:
    return "uint8" if dtype == "bool" else dtype


def _init(kind: str, dtype: str) -> str:
    if kind == "sum":
        return lit(0, dtype)
    if kind == "prod":
        return lit(1, dtype)
    if is_float(dtype):
        return "(-XB_INF)" if kind == "max" else "XB_INF"
    info = np.iinfo(dtype)
    return lit(int(info.min) if kind == "max" else int(info.max), dtype)


def _accumulate(kind: str) -> str:
    return {"sum": "Add", "prod": "Mul", "max": "Max", "min": "Min"}[kind]


def slot_elem_bytes(pool_views: dict, fallback: int = 4) -> int:
    sizes = [SIZE.get(dt, 4) for (_, dt) in pool_views]
    return max(sizes + [fallback])


RESERVED = {"t", "tiling", "workspace", "op", "blk", "pipe", "len", "v0", "i", "j", "x", "y"}


def param(buf: str) -> str:
    p = ident(buf)
    return p + "_" if p in RESERVED else p


def decode(src: Source, flat: str, axes: list[Axis], names: dict[str, str], declare: bool = False) -> None:
    """Assign the coordinates of row-major index `flat` over `axes` to `names[axis]`."""
    for i, a in enumerate(axes):
        inner = prod(b.extent for b in axes[i + 1:])
        if a.extent == 1:
            v = "0"
        elif i == 0:
            v = f"{flat} / {inner}" if inner > 1 else flat
        else:
            v = f"({flat} / {inner}) % {a.extent}" if inner > 1 else f"{flat} % {a.extent}"
        src(f"{'const int64_t ' if declare else ''}{names[a.name]} = {v};")


def used_decls(decls: list[str], body: Source) -> list[str]:
    text = body.text()
    return [d for d in decls if re.search(r"\b" + re.escape(d.split()[1]) + r"\b", text)]


class VectorKernelGen(KernelGen):
    """Common layout of the vector kernels: members, InitBuffer calls from the UB plan, ramp and math buffers."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.pool = Pool()
        self.slot_elem = 2
        self.T = 0

    def scalar_members(self) -> list[str]:
        return []

    def calc_item(self) -> list[UbItem]:
        if not self.pool.count:
            return []
        self.slot_elem = max(2, max((SIZE[dt] for (_, dt) in self.pool.views), default=2))
        se = self.slot_elem
        return [UbItem("calcBuf", "TBuf", "VECCALC", 1, 0, fn=lambda T, n=self.pool.count: n * align(T * se, 256))]

    def ramp_item(self) -> list[UbItem]:
        return [UbItem("rampBuf", "TBuf", "VECCALC", 1, 4)] if self.features.ramp else []

    def buffers_init(self, src: Source, queues: list[tuple[str, str, int]]) -> None:
        for q, _pos, size in queues:
            src(f"pipe.InitBuffer({q}, BUFFER_NUM, t.tileLength * {size});")
        if self.pool.count:
            src(f"pipe.InitBuffer(calcBuf, {self.pool.count} * t.slotBytes);")
        if self.features.ramp:
            src("pipe.InitBuffer(rampBuf, t.tileLength * sizeof(float));")
            src("rampTile = rampBuf.Get<float>();")
            with src.block("for (uint32_t r = 0; r < t.tileLength; ++r)"):
                src("rampTile.SetValue(r, static_cast<float>(r));")
            src("XbSync<HardEvent::S_V>();")
        if self.math:
            src(f"pipe.InitBuffer(mathBuf, {MATH_SLOT * self.math_slots()});")

    def buffer_members(self, queues: list[tuple[str, str, int]]) -> list[str]:
        out = ["TPipe pipe;"]
        for q, pos, _ in queues:
            out.append(f"TQue<QuePosition::{pos}, BUFFER_NUM> {q};")
        if self.pool.count:
            out.append("TBuf<QuePosition::VECCALC> calcBuf;")
        if self.features.ramp:
            out.append("TBuf<QuePosition::VECCALC> rampBuf;")
            out.append("LocalTensor<float> rampTile;")
        if self.math:
            out.append("TBuf<QuePosition::VECCALC> mathBuf;")
        return out

    def budget(self) -> int:
        return self.pw.ub_bytes - (SELECT_RESERVE if self.features.select else 0)

    def choose_tile(self, items: list[UbItem], want: int, need: int = ALIGN) -> int:
        """Fit the tile length: the schedule's (or the default) length, shrunk until the plan fits the UB;
        refused with the numbers when not even `need` elements fit."""
        given = int(self.sched.get("tile_length", 0) or 0)
        cap = align(max(given, 1), ALIGN) if given else align(want, ALIGN)
        T = fit_tile(items, self.budget(), cap, need)
        if T == 0:
            n = align(need, ALIGN)
            raise BackendError(
                f"kernel {self.k.name}: a tile of {n} elements needs {ub_total(items, n)} bytes of UB "
                f"({plan_text(items, n)}{', plus 8192 kept free for Select' if self.features.select else ''}); "
                f"the UB has {self.pw.ub_bytes} bytes",
                hint="use buffer_num=1, or a smaller row_mode/tile_length (row_mode='stream' splits rows)")
        if given and align(given, ALIGN) > T:
            self.notes.append(f"tile_length {given} shrunk to {T}: {ub_total(items, align(given, ALIGN))} bytes "
                              f"of UB needed > {self.budget()} available")
        return T

    def plan(self, items: list[UbItem], T: int) -> dict[str, Any]:
        return {
            "tile_length": T, "buffer_num": self.buffer_num,
            "ub": {i.name: {"kind": i.kind, "position": i.position, "num": i.num, "bytes": i.bytes(T),
                            "total": i.num * i.bytes(T)} for i in items},
            "ub_total": ub_total(items, T), "ub_budget": self.pw.ub_bytes,
            "ub_reserved_for_select": SELECT_RESERVE if self.features.select else 0,
            "scalar_path": list(self.features.gathers), "notes": list(self.notes),
        }


class TileKernel(VectorKernelGen):
    """Elementwise and windowed-reduce kernels: rows (leading outer axes) x a flattened vector extent."""

    def __init__(self, pw, k, sched, entry, domain: tuple[Axis, ...] | None = None):
        super().__init__(pw, k, sched, entry)
        if domain is None:
            domain = choose_domain(k, pw)
        self.dom = domain
        self.prefix = list(k.outer[:len(k.outer) - len(domain)])
        self.scope = ScalarScope({a.name: f"{a.name}_" for a in self.prefix},
                                 {a.name: (0, a.extent - 1) for a in self.prefix})
        self.ranges = {a.name: (0, a.extent - 1) for a in self.prefix}
        self.rows = prod(a.extent for a in self.prefix)
        self.V = prod(a.extent for a in domain)

    def generate(self) -> tuple[Source, Launch]:
        body = TileBody(self, self.k.stages, self.dom, self.scope, self.ranges, self.pool)
        body.build()
        queues = body.queues()
        items = [UbItem(q, "TQue", pos, self.buffer_num, sz) for q, pos, sz in queues]
        n_in = sum(self.buffer_num for _, pos, _ in queues if pos == "VECIN")
        if n_in > QUE_LIMIT:
            raise Unsupported(f"{n_in} VECIN buffers exceed {QUE_LIMIT}")
        items += self.calc_item() + self.ramp_item() + self.math_item()
        cores = self.pw.vector_cores
        per_core = -(-self.rows * self.V // cores)
        want = min(8192, max(ALIGN, min(self.V, per_core // 2 if per_core >= 2 * ALIGN else per_core)))
        T = self.choose_tile(items, want)
        self.T = T
        slot_bytes = align(T * self.slot_elem, 256)
        src = Source()
        fields = [("blockDim", "cores the launch uses"), ("tileLength", "elements per tile (a multiple of 128)"),
                  ("tilesPerRow", f"tiles covering the vector extent ({self.V})"),
                  ("lastTileLength", "elements in the last tile of a row"),
                  ("rows", "rows: points of the leading axes " + (", ".join(a.name for a in self.prefix) or "(none)")),
                  ("totalTiles", "rows x tilesPerRow"), ("tilesPerBlock", "tiles every core takes"),
                  ("extraTiles", "cores [0, extraTiles) take one tile more"),
                  ("slotBytes", "bytes of one scratch tile in calcBuf")]
        self.struct_source(src, fields)
        src()
        ax = ", ".join(a.name for a in self.dom) or "(a single point)"
        src(f"// {self.k.name} ({self.k.kind}): vector axes {ax} ({self.V} elements per row), "
            f"{self.rows} rows")
        with src.block(f"class {self.cls}", "};"):
            src.lines.append("public:")
            src(f"static constexpr int32_t BUFFER_NUM = {self.buffer_num};")
            src(f"__aicore__ inline {self.cls}() {{}}")
            init_params = ", ".join([f"GM_ADDR {param(b)}" for b in self.gm] + [f"const {self.struct}& tiling"])
            with src.block(f"__aicore__ inline void Init({init_params})"):
                src("t = tiling;")
                src("const uint32_t blk = GetBlockIdx();")
                src("tileCount = t.tilesPerBlock + (blk < t.extraTiles ? 1 : 0);")
                src("firstTile = blk * t.tilesPerBlock + (blk < t.extraTiles ? blk : t.extraTiles);")
                self.gm_init_params(src)
                self.buffers_init(src, queues)
            with src.block("__aicore__ inline void Process()"), \
                    src.block("for (uint32_t i = 0; i < tileCount; ++i)"):
                    src("Locate(firstTile + i);")
                    src("CopyIn();")
                    src("Compute();")
                    src("CopyOut();")
            src.lines.append("private:")
            with src.block("__aicore__ inline void Locate(uint32_t tile)"):
                src("const uint32_t row = tile / t.tilesPerRow;")
                src("const uint32_t j = tile % t.tilesPerRow;")
                src("v0 = j * t.tileLength;")
                src("len = j + 1 == t.tilesPerRow ? t.lastTileLength : t.tileLength;")
                decode(src, "int64_t(row)", self.prefix, self.scope.idx)
                if not self.prefix:
                    src("(void)row;")
            self.functions(src, body)
            self.math_helpers(src)
            for m in self.buffer_members(queues) + self.gm_members():
                src(m)
            src(f"{self.struct} t;")
            src("uint32_t firstTile = 0, tileCount = 0, v0 = 0, len = 0;")
            for a in self.prefix:
                src(f"int64_t {a.name}_ = 0;")
        src()
        self.entry_source(src, [param(b) for b in self.gm] + ["t"])
        host = Source()
        with host.block(f'extern "C" uint32_t {self.entry}_tiling({self.struct}* t, uint32_t coreNum)'):
            host(f"const uint32_t rows = {self.rows}, extent = {self.V}, tileLength = {T};")
            host("t->tileLength = tileLength;")
            host("t->tilesPerRow = (extent + tileLength - 1) / tileLength;")
            host("t->lastTileLength = extent - (t->tilesPerRow - 1) * tileLength;")
            host("t->rows = rows;")
            host("t->totalTiles = rows * t->tilesPerRow;")
            host("t->blockDim = t->totalTiles < coreNum ? t->totalTiles : coreNum;")
            host("if (t->blockDim == 0) t->blockDim = 1;")
            host("t->tilesPerBlock = t->totalTiles / t->blockDim;")
            host("t->extraTiles = t->totalTiles % t->blockDim;")
            host(f"t->slotBytes = {slot_bytes};  // tileLength x {self.slot_elem} bytes, whole 256-byte repeats")
            host("return t->blockDim;")
        plan = self.plan(items, T)
        plan.update({"form": "tiles", "vector_axes": [a.name for a in self.dom], "vector_extent": self.V,
                     "rows": self.rows, "slots": self.pool.count})
        launch = Launch(self.entry, self.k.name, self.role, list(self.gm), self.struct, fields,
                        cores=cores, plan=plan)
        launch.host_source = host
        return src, launch

    def gm_init_params(self, src: Source) -> None:
        for b in self.gm:
            c = ctype(self.pw.dtypes[b])
            src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {c}*){param(b)}, {prod(self.shapes[b])});")

    def functions(self, src: Source, body: TileBody) -> None:
        decls = self.pool.declarations("calcBuf", "t.slotBytes")
        with src.block("__aicore__ inline void CopyIn()"):
            for d in used_decls(decls, body.copy_in):
                src(d)
            src.extend(_reindent(body.copy_in, src.depth))
        with src.block("__aicore__ inline void Compute()"):
            for d in used_decls(decls, body.compute):
                src(d)
            src.extend(_reindent(body.compute, src.depth))
        with src.block("__aicore__ inline void CopyOut()"):
            src.extend(_reindent(body.copy_out, src.depth))


def _reindent(s: Source, depth: int) -> Source:
    out = Source(depth)
    base = min((len(line) - len(line.lstrip()) for line in s.lines if line.strip()), default=0)
    for line in s.lines:
        out.lines.append(("    " * depth + line[base:]) if line.strip() else "")
    return out


def choose_domain(k: Kernel, pw: ProgramWriter) -> tuple[Axis, ...]:
    """The trailing outer axes to flatten into the vector extent: fewest gathered loads, then the longest."""
    return domain_and_gathers(k, pw)[0]


def domain_and_gathers(k: Kernel, pw: ProgramWriter) -> tuple[tuple[Axis, ...], int]:
    outer = tuple(k.outer)
    if not outer:
        return (), 0
    stages, _ = inline_assigns(k.stages)
    stages = forward_stores(stages)
    best = None
    for L in range(1, len(outer) + 1):
        dom = outer[len(outer) - L:]
        ok = True
        gathers = 0
        for s in stages:
            if isinstance(s, Store) and tile_store_base(s, pw.shapes, dom) is None:
                ok = False
            for e in s.exprs():
                for ld, guarded in walk_loads(e):
                    if ld.buf not in pw.shapes:
                        continue
                    size = prod(pw.shapes[ld.buf])
                    ranges = {a.name: (0, a.extent - 1) for a in outer}
                    for st in stages:
                        for a in getattr(st, "axes", ()) or ():
                            ranges[a.name] = (0, a.extent - 1)
                    if classify(ld, pw.shapes[ld.buf], dom, guarded, ranges, size).kind == "gather":
                        gathers += 1
        if not ok:
            continue
        score = (gathers, -L)
        if best is None or score < best[0]:
            best = (score, dom)
    if best is None:
        raise Unsupported("no trailing axes along which every store is contiguous")
    return best[1], best[0][0]


# ---- row kernels ----------------------------------------------------------------------------------------

def store_base(s: Store, shapes: dict) -> Expr | None:
    """The element offset where a store's contiguous run starts (its whole offset when it has no loops)."""
    if not s.axes:
        return E.linear(tuple(s.index), shapes[s.buf])
    acc = classify(Load(s.buf, s.index, "float32"), shapes[s.buf], s.axes)
    return acc.base if acc.kind == "contiguous" else None


def inline_row_buffers(k: Kernel) -> list:
    """Stages with every row-scratch buffer replaced by the value stored into it (recomputed where read), for
    the streaming form. Raises Unsupported when a row buffer is not written as `buf[axes] = value`."""
    defs: dict[str, tuple[list[str], Expr]] = {}

    def sub(e: Expr) -> Expr:
        def f(n):
            if isinstance(n, Load) and n.buf in defs:
                names, val = defs[n.buf]
                return E.substitute(val, dict(zip(names, n.index)))
            return None
        return e.map(f)
    out = []
    for s in k.stages:
        s2 = s.replace(sub)
        if isinstance(s2, Store) and s2.scope == "row":
            names = [a.name for a in s2.axes]
            if tuple(s2.index) != tuple(a.var for a in s2.axes) or \
                    tuple(a.extent for a in s2.axes) != tuple(k.row_buffers[s2.buf][0]):
                raise Unsupported(f"row buffer {s2.buf} is not stored as {s2.buf}[axes]")
            defs[s2.buf] = (names, s2.value)
        else:
            out.append(s2)
    return out


class RowKernel(VectorKernelGen):
    """One outer point (a row) per step; each stage vectorised over its own axes. `resident`: the row's data,
    scratch rows and outputs stay in the UB for all stages (one GM read per row); `stream`: every stage
    streams its axes in tiles (one pass over GM per statistic, one for the output)."""

    def __init__(self, pw, k, sched, entry, mode: str = "resident"):
        super().__init__(pw, k, sched, entry)
        self.mode = mode
        self.prefix = list(k.outer)
        self.rows = prod(a.extent for a in k.outer)
        self.scope = ScalarScope({a.name: f"{a.name}_" for a in self.prefix},
                                 {a.name: (0, a.extent - 1) for a in self.prefix})
        self.ranges = {a.name: (0, a.extent - 1) for a in self.prefix}
        self.members: list[str] = []
        self.reduce_types: set[str] = set()
        self.stages = list(k.stages) if mode == "resident" else inline_row_buffers(k)
        self.D = max([prod(a.extent for a in getattr(s, "axes", ()) or ()) for s in self.stages] + [1])
        self.budget_ = [max(1, QUE_LIMIT // self.buffer_num)]

    def written_before(self) -> list[set[str]]:
        """For each stage, the GM buffers earlier stages of this kernel wrote."""
        out, seen = [], set()
        for s in self.stages:
            out.append(set(seen))
            if isinstance(s, Store) and s.scope == "global":
                seen.add(s.buf)
        return out

    def check(self) -> None:
        for s, before in zip(self.stages, self.written_before()):
            reads = {ld.buf for e in s.exprs() for ld, _ in walk_loads(e)}
            if self.mode == "resident" and reads & before:
                raise BackendError(f"kernel {self.k.name}: a stage reads {', '.join(sorted(reads & before))}, which "
                                   "an earlier stage writes to GM; such rows are streamed",
                                   hint="use row_mode='stream' (or 'auto')")
            if isinstance(s, Reduce):
                if s.kind not in ("sum", "max", "min") or s.index_local:
                    raise Unsupported(f"{s.kind} row reductions have no vector form here")
                if s.dtype not in ("float32", "float16"):
                    raise Unsupported(f"row reductions over {s.dtype} have no vector form")
            elif isinstance(s, Store):
                if s.scope == "global":
                    dt = self.pw.dtypes[s.buf]
                    if dt not in ("float32", "float16", "int32", "bfloat16"):
                        raise Unsupported(f"no vector row store of {dt}")
                    if s.axes and store_base(s, self.shapes) is None:
                        raise Unsupported(f"the store to {s.buf} is not contiguous along its axes")
            elif not isinstance(s, Assign):
                raise Unsupported(f"{type(s).__name__} stages have no row form")

    def member(self, local: str, dtype: str) -> str:
        name = f"{local}_"
        self.members.append(f"{SCALAR.get(dtype, 'float')} {name} = 0;")
        self.scope.locals[local] = name
        return name

    def reduce_finish(self, src: Source, s: Reduce, t: Tile, count: str) -> None:
        api = {"sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin"}[s.kind]
        c = ctype(t.dtype)
        self.reduce_types.add(t.dtype)
        per = 32 // SIZE[t.dtype]
        with _Block(src):
            src(f"LocalTensor<{c}> red = reduceBuf.GetWithOffset<{c}>({per}, 0);")
            src(f"LocalTensor<{c}> redTmp = reduceBuf.GetWithOffset<{c}>((reduceBytes - 32) / sizeof({c}), 32);")
            src(f"{api}(red, {t.name}, redTmp, {count});")
            src("XbSync<HardEvent::V_S>();")
            name = self.scope.locals[s.local]
            conv = "static_cast<float>" if t.dtype in ("float16", "bfloat16") else ""
            src(f"{name} = {conv}(red.GetValue(0));")

    def reduce_item(self) -> list[UbItem]:
        if not self.reduce_types:
            return []
        return [UbItem("reduceBuf", "TBuf", "VECCALC", 1, 0, fn=lambda T: 32 + 4 * align(-(-T // 64) * 2, 8))]

    def generate(self) -> tuple[Source, Launch]:
        self.check()
        for s in self.stages:
            if isinstance(s, Reduce):
                self.member(s.local, s.dtype)
            elif isinstance(s, Assign):
                self.member(s.local, s.value.dtype)
        fns = Source(1)
        queues = self.resident(fns) if self.mode == "resident" else self.stream(fns)
        items = [UbItem(q, "TQue", pos, self.buffer_num, sz) for q, pos, sz in queues]
        items += self.calc_item() + self.ramp_item() + self.math_item() + self.reduce_item()
        if self.mode == "resident":
            T = self.choose_tile(items, self.D, need=self.D)
            T = align(self.D, ALIGN) if align(self.D, ALIGN) <= T else T
        else:
            T = self.choose_tile(items, min(self.D, 8192))
        self.T = T
        slot_bytes = align(T * self.slot_elem, 256)
        src = Source()
        fields = [("blockDim", "cores the launch uses"), ("rows", f"rows ({self.rows})"),
                  ("rowsPerBlock", "rows every core takes"), ("extraRows", "cores [0, extraRows) take one more"),
                  ("tileLength", "elements per tile" + (" (a whole row)" if self.mode == "resident" else "")),
                  ("slotBytes", "bytes of one scratch tile in calcBuf"),
                  ("reduceBytes", "bytes of reduceBuf: result block and ReduceMax/ReduceSum workspace")]
        self.struct_source(src, fields)
        src()
        src(f"// {self.k.name} ({self.k.kind}): {self.rows} rows, stages over up to {self.D} elements, "
            f"{'each row kept in the UB' if self.mode == 'resident' else 'rows streamed in tiles'}")
        with src.block(f"class {self.cls}", "};"):
            src.lines.append("public:")
            src(f"static constexpr int32_t BUFFER_NUM = {self.buffer_num};")
            src(f"__aicore__ inline {self.cls}() {{}}")
            init_params = ", ".join([f"GM_ADDR {param(b)}" for b in self.gm] + [f"const {self.struct}& tiling"])
            with src.block(f"__aicore__ inline void Init({init_params})"):
                src("t = tiling;")
                src("const uint32_t blk = GetBlockIdx();")
                src("rowCount = t.rowsPerBlock + (blk < t.extraRows ? 1 : 0);")
                src("firstRow = blk * t.rowsPerBlock + (blk < t.extraRows ? blk : t.extraRows);")
                for b in self.gm:
                    c = ctype(self.pw.dtypes[b])
                    src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {c}*){param(b)}, {prod(self.shapes[b])});")
                self.buffers_init(src, queues)
                if self.reduce_types:
                    src("pipe.InitBuffer(reduceBuf, t.reduceBytes);")
                    src("reduceBytes = t.reduceBytes;")
            with src.block("__aicore__ inline void Process()"), \
                    src.block("for (uint32_t i = 0; i < rowCount; ++i)"):
                    src("Locate(firstRow + i);")
                    if self.mode == "resident":
                        src("CopyIn();")
                        src("Compute();")
                        src("CopyOut();")
                    else:
                        src("ProcessRow();")
            src.lines.append("private:")
            with src.block("__aicore__ inline void Locate(uint32_t row)"):
                decode(src, "int64_t(row)", self.prefix, self.scope.idx)
                if not self.prefix:
                    src("(void)row;")
            src.extend(_reindent(fns, src.depth))
            self.math_helpers(src)
            for m in self.buffer_members(queues) + self.gm_members():
                src(m)
            if self.reduce_types:
                src("TBuf<QuePosition::VECCALC> reduceBuf;")
                src("uint32_t reduceBytes = 0;")
            src(f"{self.struct} t;")
            src("uint32_t firstRow = 0, rowCount = 0, v0 = 0, len = 0;")
            for a in self.prefix:
                src(f"int64_t {a.name}_ = 0;")
            for m in self.members:
                src(m)
        src()
        self.entry_source(src, [param(b) for b in self.gm] + ["t"])
        host = Source()
        with host.block(f'extern "C" uint32_t {self.entry}_tiling({self.struct}* t, uint32_t coreNum)'):
            host(f"const uint32_t rows = {self.rows};")
            host("t->rows = rows;")
            host("t->blockDim = rows < coreNum ? rows : coreNum;")
            host("if (t->blockDim == 0) t->blockDim = 1;")
            host("t->rowsPerBlock = rows / t->blockDim;")
            host("t->extraRows = rows % t->blockDim;")
            host(f"t->tileLength = {T};")
            host(f"t->slotBytes = {slot_bytes};")
            red = self.reduce_item()
            host(f"t->reduceBytes = {red[0].bytes(T) if red else 0};")
            host("return t->blockDim;")
        plan = self.plan(items, T)
        plan.update({"form": "row", "row_mode": self.mode, "rows": self.rows, "row_extent": self.D,
                     "slots": self.pool.count})
        launch = Launch(self.entry, self.k.name, self.role, list(self.gm), self.struct, fields,
                        cores=self.pw.vector_cores, plan=plan)
        launch.host_source = host
        return src, launch

    # -- resident: CopyIn the whole row once, every stage on it, CopyOut
    def resident(self, fns: Source) -> list[tuple[str, str, int]]:
        reg = Inputs("inQueue", self.budget_, "x", pool=self.pool)
        row_tiles: dict[str, Tile] = {}
        for name, (_shape, dt) in self.k.row_buffers.items():
            row_tiles[name] = self.pool.alloc(dt, pinned=True)
            self.row_ub[name] = row_tiles[name].name
        reg.row_tiles = row_tiles
        outs: list[tuple[Store, str, str, Expr, int]] = []
        body = Source(2)
        for s in self.stages:
            axes = tuple(getattr(s, "axes", ()) or ())
            D = prod(a.extent for a in axes)
            dom = Domain(axes, v0="0", count=str(D))
            if isinstance(s, Assign):
                body(f"{self.scope.locals[s.local]} = {self.sw.expr(s.value, self.scope.child(), body)};")
                continue
            em = VecEmitter(body, dom, self.pool, self.sw, self.scope.child(), self.shapes, {}, inputs=reg,
                            ranges=self.ranges, features=self.features)
            if isinstance(s, Reduce):
                val = s.body if s.body.dtype == s.dtype else Cast(s.body, s.dtype)
                em.count_uses([val])
                op = em.value(val)
                t = em.tile_of(val, op)
                self.reduce_finish(body, s, t, str(D))
                em.done(val, op)
                if t is not op:
                    self.pool.release(t)
            elif s.scope == "row":
                em.count_uses([s.value])
                em.root(s.value, row_tiles[s.buf])
            else:
                j = len(outs)
                dt = self.pw.dtypes[s.buf]
                outs.append((s, f"y{j}", f"outQueue{j}", store_base(s, self.shapes), D))
                em.count_uses([s.value])
                em.root(s.value, Tile(f"y{j}", dt))
        if len(outs) * self.buffer_num > QUE_LIMIT:
            raise Unsupported(f"{len(outs)} row outputs need more than {QUE_LIMIT} VECOUT queue buffers")
        # the row loads: every stage's contiguous load, once per row
        extent_of: dict[tuple, int] = {}
        for s in self.stages:
            axes = tuple(getattr(s, "axes", ()) or ())
            for e in s.exprs():
                for ld, _guarded in walk_loads(e):
                    if ld.buf in self.shapes and ld.buf not in self.k.row_buffers:
                        acc = classify(ld, self.shapes[ld.buf], axes)
                        if acc.kind == "contiguous":
                            key = (ld.buf, acc.base, ld.dtype)
                            extent_of[key] = max(extent_of.get(key, 0), prod(a.extent for a in axes))
        decls = self.pool.declarations("calcBuf", "t.slotBytes")
        copy_in = Source(2)
        scope = self.scope.child()
        for e in reg.entries.values():
            base = self.sw.expr(e.base, scope, copy_in)
            e.copy_in(copy_in, f"{self.gm_name(e.buf)}[{base}]", str(extent_of.get(e.key, self.D)))
        with fns.block("__aicore__ inline void CopyIn()"):
            for d in used_decls(decls, copy_in):
                fns(d)
            fns.extend(_reindent(copy_in, fns.depth))
        with fns.block("__aicore__ inline void Compute()"):
            take_all(fns, reg.entries.values())
            for s, tile, queue, _, _ in outs:
                c = ctype(self.pw.dtypes[s.buf])
                fns(f"LocalTensor<{c}> {tile} = {queue}.AllocTensor<{c}>();")
            for d in used_decls(decls, body):
                fns(d)
            fns.extend(_reindent(body, fns.depth))
            for _, tile, queue, _, _ in outs:
                fns(f"{queue}.EnQue({tile});")
            for e in reg.entries.values():
                e.free(fns)
        with fns.block("__aicore__ inline void CopyOut()"):
            for s, tile, queue, base_e, D in outs:
                c = ctype(self.pw.dtypes[s.buf])
                fns(f"LocalTensor<{c}> {tile} = {queue}.DeQue<{c}>();")
                base = self.sw.expr(base_e, self.scope.child(), fns)
                fns(f"CopyUbToGm({self.gm_name(s.buf)}[{base}], {tile}, {D});")
                fns(f"{queue}.FreeTensor({tile});")
        qs = [(e.queue, "VECIN", SIZE[e.dtype]) for e in reg.queued()]
        qs += [(q, "VECOUT", SIZE[self.pw.dtypes[s.buf]]) for s, _, q, _, _ in outs]
        return qs

    # -- stream: each stage loops over its axes in tiles
    def stream(self, fns: Source) -> list[tuple[str, str, int]]:
        in_sizes: dict[int, int] = {}
        out_sizes: dict[int, int] = {}
        calls = Source(2)
        decls_later: list[tuple[Source, Source]] = []
        before_all = self.written_before()
        for si, s in enumerate(self.stages):
            axes = tuple(getattr(s, "axes", ()) or ())
            D = prod(a.extent for a in axes)
            if isinstance(s, Assign):
                calls(f"{self.scope.locals[s.local]} = {self.sw.expr(s.value, self.scope.child(), calls)};")
                continue
            reg = Inputs("inQueue", [max(1, QUE_LIMIT // self.buffer_num)], "x", pool=self.pool)
            dom = Domain(axes, v0="v0", count="len")
            body = Source(2)
            em = VecEmitter(body, dom, self.pool, self.sw, self.scope.child(), self.shapes, {}, inputs=reg,
                            ranges=self.ranges, features=self.features)
            out = None
            acc_tile = None
            if isinstance(s, Reduce):
                val = s.body if s.body.dtype == s.dtype else Cast(s.body, s.dtype)
                acc_tile = self.pool.alloc(s.dtype, pinned=True)
                em.count_uses([val])
                op = em.value(val)
                t = em.tile_of(val, op)
                body(f"{_accumulate(s.kind)}({acc_tile.name}, {acc_tile.name}, {t.name}, len);")
                em.done(val, op)
                if t is not op:
                    self.pool.release(t)
            else:
                dt = self.pw.dtypes[s.buf]
                out = (f"y{si}", "outQueue0", store_base(s, self.shapes), dt)
                out_sizes[0] = max(out_sizes.get(0, 0), SIZE[dt])
                em.count_uses([s.value])
                em.root(s.value, Tile(out[0], dt))
            for j, e in enumerate(reg.queued()):
                in_sizes[j] = max(in_sizes.get(j, 0), SIZE[e.dtype])
            # the stage's functions
            ci_body, cp, co = Source(2), Source(1), Source(1)
            scope = self.scope.child()
            for e in reg.entries.values():
                base = self.sw.expr(e.base, scope, ci_body)
                e.copy_in(ci_body, f"{self.gm_name(e.buf)}[{_plus(base, 'v0')}]", "len")
            pre = Source(2)
            take_all(pre, reg.entries.values())
            if out:
                pre(f"LocalTensor<{ctype(out[3])}> {out[0]} = {out[1]}.AllocTensor<{ctype(out[3])}>();")
            post = Source(2)
            if out:
                post(f"{out[1]}.EnQue({out[0]});")
            for e in reg.entries.values():
                e.free(post)
            decls_later.append((cp, pre, body, post, si, ci_body))
            if out:
                with co.block(f"__aicore__ inline void CopyOut{si}()"):
                    c = ctype(out[3])
                    co(f"LocalTensor<{c}> {out[0]} = {out[1]}.DeQue<{c}>();")
                    base = self.sw.expr(out[2], self.scope.child(), co)
                    co(f"CopyUbToGm({self.gm_name(s.buf)}[{_plus(base, 'v0')}], {out[0]}, len);")
                    co(f"{out[1]}.FreeTensor({out[0]});")
            # the stage's loop in ProcessRow
            calls(f"// stage {si}: {s.text()[:100]}")
            reads = {ld.buf for e in s.exprs() for ld, _ in walk_loads(e)}
            if reads & before_all[si]:
                calls("XbSync<HardEvent::MTE3_MTE2>();  // earlier stages wrote what this one reads")
            with _Block(calls):
                if acc_tile is not None:
                    calls(f"LocalTensor<{ctype(s.dtype)}> {acc_tile.name} = calcBuf.GetWithOffset<{ctype(s.dtype)}>"
                          f"(t.slotBytes / sizeof({ctype(s.dtype)}), {self._slot(acc_tile)} * t.slotBytes);")
                    calls(f"Duplicate({acc_tile.name}, {vec_scalar(_init(s.kind, s.dtype), s.dtype)}, "
                          "t.tileLength);")
                calls(f"const uint32_t tiles = ({D} + t.tileLength - 1) / t.tileLength;")
                with calls.block("for (uint32_t j = 0; j < tiles; ++j)"):
                    calls("v0 = j * t.tileLength;")
                    calls(f"len = j + 1 == tiles ? {D} - v0 : t.tileLength;")
                    calls(f"CopyIn{si}();")
                    calls(f"Compute{si}();")
                    if out:
                        calls(f"CopyOut{si}();")
                if acc_tile is not None:
                    self.reduce_finish(calls, s, acc_tile, f"({D} < t.tileLength ? {D} : t.tileLength)")
                    self.pool.pinned.discard(self._slot(acc_tile))
                    self.pool.release(Tile(acc_tile.name, acc_tile.dtype, (self._slot(acc_tile),)))
            fns.extend(co)
        decls = self.pool.declarations("calcBuf", "t.slotBytes")
        for cp, pre, body, post, si, ci_body in decls_later:
            with fns.block(f"__aicore__ inline void CopyIn{si}()"):
                for d in used_decls(decls, ci_body):
                    fns(d)
                fns.extend(_reindent(ci_body, fns.depth))
            with cp.block(f"__aicore__ inline void Compute{si}()"):
                cp.extend(_reindent(pre, cp.depth))
                for d in used_decls(decls, body):
                    cp(d)
                cp.extend(_reindent(body, cp.depth))
                cp.extend(_reindent(post, cp.depth))
            fns.extend(cp)
        with fns.block("__aicore__ inline void ProcessRow()"):
            fns.extend(_reindent(calls, fns.depth))
        qs = [(f"inQueue{j}", "VECIN", sz) for j, sz in sorted(in_sizes.items())]
        qs += [(f"outQueue{j}", "VECOUT", sz) for j, sz in sorted(out_sizes.items())]
        return qs

    def _slot(self, t: Tile) -> int:
        for (slot, _dt), name in self.pool.views.items():
            if name == t.name:
                return slot
        raise KeyError(t.name)


# ---- the program ----------------------------------------------------------------------------------------

PREAMBLE = """\
#include "kernel_operator.h"
{matmul}
using namespace AscendC;

constexpr float XB_INF = __builtin_huge_valf();
constexpr float XB_NAN = __builtin_nanf("");

__aicore__ inline uint32_t XbAlign(uint32_t n, uint32_t a) {{ return (n + a - 1) / a * a; }}

// Order two pipes of this core (the scalar unit reading what the vector unit wrote, and so on).
template <HardEvent EVT>
__aicore__ inline void XbSync() {{
    TEventID id = GetTPipePtr()->FetchEventID(EVT);
    SetFlag<EVT>(id);
    WaitFlag<EVT>(id);
}}

// GM -> UB: DataCopy moves whole 32-byte blocks; a count that is not a whole number of blocks uses DataCopyPad.
template <typename T>
__aicore__ inline void CopyGmToUb(const LocalTensor<T>& dst, const GlobalTensor<T>& src, uint32_t count) {{
    if ((count * sizeof(T)) % 32 == 0) {{
        DataCopy(dst, src, count);
    }} else {{
        DataCopyExtParams params(1, static_cast<uint32_t>(count * sizeof(T)), 0, 0, 0);
        DataCopyPadExtParams<T> pad(false, 0, 0, T());
        DataCopyPad(dst, src, params, pad);
    }}
}}

// UB -> GM, the same way.
template <typename T>
__aicore__ inline void CopyUbToGm(const GlobalTensor<T>& dst, const LocalTensor<T>& src, uint32_t count) {{
    if ((count * sizeof(T)) % 32 == 0) {{
        DataCopy(dst, src, count);
    }} else {{
        DataCopyExtParams params(1, static_cast<uint32_t>(count * sizeof(T)), 0, 0, 0);
        DataCopyPad(dst, src, params);
    }}
}}

// The host's tiling struct arrives in GM; copy it word by word into the kernel's stack.
template <typename T>
__aicore__ inline void XbCopyTiling(T* dst, GM_ADDR src) {{
    for (uint32_t i = 0; i < sizeof(T) / sizeof(uint32_t); ++i) {{
        reinterpret_cast<uint32_t*>(dst)[i] = reinterpret_cast<__gm__ uint32_t*>(src)[i];
    }}
}}
"""


class ProgramWriter:
    """Generates the Ascend C source of a program: one or more launches per loop-IR kernel."""

    def __init__(self, program: Program, schedules: dict[str, Schedule], *, ub_bytes: int = 196608,
                 vector_cores: int = 48, cube_cores: int = 24, l1_bytes: int = 524288, l0a_bytes: int = 65536,
                 l0b_bytes: int = 65536, l0c_bytes: int = 131072):
        self.l1_bytes, self.l0a_bytes, self.l0b_bytes, self.l0c_bytes = l1_bytes, l0a_bytes, l0b_bytes, l0c_bytes
        self.program = program
        self.schedules = schedules
        self.ub_bytes = ub_bytes
        self.vector_cores = vector_cores
        self.cube_cores = cube_cores
        self.shapes = {n: tuple(b.shape) for n, b in program.buffers.items()}
        self.dtypes = {n: b.dtype for n, b in program.buffers.items()}
        for _n, b in program.buffers.items():
            ctype(b.dtype)
        for k in program.kernels:
            for name, (shape, dt) in k.row_buffers.items():
                self.shapes[name] = tuple(shape)
                self.dtypes[name] = dt
        self.extra: dict[str, tuple[tuple[int, ...], str]] = {}   # workspaces in GM: name -> (shape, dtype)
        self.launches: list[Launch] = []
        self.matmul = False
        self.fallbacks: dict[str, str] = {}

    def workspace(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        self.extra[name] = (tuple(shape), dtype)
        self.shapes[name] = tuple(shape)
        self.dtypes[name] = dtype
        return name

    def entry_name(self, k: Kernel, suffix: str = "") -> str:
        return ident(f"{self.program.name}_{k.name}{suffix}")

    def write(self) -> tuple[str, list[Launch]]:
        bodies: list[Source] = []
        hosts: list[Source] = []
        for k in self.program.kernels:
            sched = self.schedules.get(k.name, Schedule())
            for src, launch in self.kernel(k, sched):
                bodies.append(src)
                hosts.append(launch.host_source)
                self.launches.append(launch)
        out = Source()
        out("// Ascend C kernels generated by xbench from the loop IR below.")
        out("//")
        for line in self.program.text().splitlines():
            out("// " + line)
        out()
        out.lines.extend(PREAMBLE.format(matmul='#include "lib/matmul_intf.h"' if self.matmul else "")
                         .splitlines())
        helpers = set()
        for launch in self.launches:
            helpers |= launch.helpers
        for h in sorted(helpers):
            out()
            out.lines.extend(SCALAR_HELPERS[h].splitlines())
        for src, launch in zip(bodies, self.launches):
            out()
            out(f"// {'=' * 100}")
            out.extend(src)
            out("#ifdef XBENCH_TWIN")
            out(f"XBENCH_TWIN_LAUNCH({launch.entry})")
            out("#endif")
        out()
        out(f"// {'=' * 100}")
        out("// Host side: each function fills its kernel's tiling struct for a launch on `coreNum` cores and")
        out("// returns the blockDim to launch with.")
        out("#ifndef __CCE_AICORE__")
        for h in hosts:
            out()
            out.extend(h)
        out("#endif  // __CCE_AICORE__")
        return out.text() + "\n", self.launches

    def kernel(self, k: Kernel, sched: Schedule) -> list[tuple[Source, Launch]]:
        entry = self.entry_name(k)
        errors = []
        for make in self.candidates(k, sched):
            saved = (dict(self.extra), self.matmul)
            try:
                result = make(entry)
                return result
            except Unsupported as exc:
                errors.append(str(exc.message))
                self.extra, self.matmul = saved
        self.fallbacks[k.name] = "; ".join(errors)
        gen = ScalarKernel(self, k, sched, entry)
        gen.reason = "; ".join(errors)
        return [gen.generate_all()]

    def candidates(self, k: Kernel, sched: Schedule):
        mode = sched.get("row_mode", "auto")

        def tile(entry):
            return [_finish(TileKernel(self, k, sched, entry))]

        def row(m):
            def make(entry):
                return [_finish(RowKernel(self, k, sched, entry, m))]
            return make

        def row_auto(entry):
            if mode in ("resident", "stream"):
                return row(mode)(entry)
            try:
                return row("resident")(entry)
            except Unsupported:
                raise
            except BackendError:  # the row does not fit the UB: stream it
                return row("stream")(entry)

        if k.kind == "contract":
            from .matmul import MatmulKernel
            return [lambda entry: MatmulKernel(self, k, sched, entry).generate_all()]
        if k.kind == "row":
            return [row_auto]
        if k.kind == "elementwise":   # with row scratch (stores that loop) it is a row kernel in all but name
            return [tile, row_auto]
        if k.kind == "reduce":
            order = [tile, row_auto] if prefer_tiles(k, self) else [row_auto, tile]
            return order
        return []


def _finish(gen: VectorKernelGen) -> tuple[Source, Launch]:
    src, launch = gen.generate()
    launch.helpers = set(gen.sw.helpers)
    return src, launch


def prefer_tiles(k: Kernel, pw: ProgramWriter) -> bool:
    """Reduce kernels: vectorise over the outputs (loops over the reduced axes) or over the reduced axes (one
    output at a time), whichever gathers fewer loads element by element; on a tie, over the outputs when the
    reduced extent is short."""
    if not k.outer:
        return False
    try:
        _, tile_gathers = domain_and_gathers(k, pw)
    except Unsupported:
        return False
    row_gathers = 0
    for s in k.stages:
        axes = tuple(getattr(s, "axes", ()) or ())
        for e in s.exprs():
            for ld, _ in walk_loads(e):
                if ld.buf in pw.shapes and classify(ld, pw.shapes[ld.buf], axes).kind == "gather":
                    row_gathers += 1
    if tile_gathers != row_gathers:
        return tile_gathers < row_gathers
    n = max([prod(a.extent for a in s.axes) for s in k.stages if isinstance(s, Reduce)] + [1])
    return n < 256


# ---- the scalar path --------------------------------------------------------------------------------------

class ScalarKernel(KernelGen):
    """Any kernel as loops on the scalar unit: loads with GetValue, stores with SetValue (flushed from the data
    cache at the end), transcendental functions through one-block vector helpers. Correct, not fast: the
    resources report lists the kernel under "scalar path"."""

    reason = ""

    def generate_all(self) -> tuple[Source, Launch]:
        src, launch = self.generate()
        launch.helpers = set(self.sw.helpers)
        return src, launch

    def storage(self, code: str, dtype: str) -> str:
        if dtype == "bool":
            return f"static_cast<uint8_t>({code})"
        return f"static_cast<{CTYPE[dtype]}>({code})"

    def generate(self) -> tuple[Source, Launch]:
        k = self.k
        outer = list(k.outer)
        points = prod(a.extent for a in outer)
        serial = any(isinstance(s, ScatterAdd) for s in k.stages)
        scope = ScalarScope({a.name: f"{a.name}_" for a in outer}, {a.name: (0, a.extent - 1) for a in outer})
        body = Source(3)
        row_bytes = 0
        row_decl = []
        for name, (shape, dt) in k.row_buffers.items():
            n = prod(shape)
            self.row_ub[name] = f"row_{ident(name)}"
            row_decl.append(f"LocalTensor<{CTYPE[dt]}> row_{ident(name)} = rowBuf.GetWithOffset<{CTYPE[dt]}>"
                            f"({n}, {row_bytes});")
            row_bytes += align(n * SIZE[dt], 32)
        sort_bytes = 0
        for s in k.stages:
            if isinstance(s, Sort):
                sort_bytes = max(sort_bytes, align(s.axis.extent * 4, 32) * 2)
        written: list[str] = []
        for s in k.stages:
            self.stage(body, s, scope, written)
        items = self.math_item()
        if row_bytes:
            items.append(UbItem("rowBuf", "TBuf", "VECCALC", 1, 0, row_bytes))
        if sort_bytes:
            items.append(UbItem("sortBuf", "TBuf", "VECCALC", 1, 0, sort_bytes))
        total = ub_total(items, 0)
        if total > self.pw.ub_bytes:
            raise BackendError(f"kernel {k.name}: the scalar path needs {total} bytes of UB ({plan_text(items, 0)});"
                               f" the UB has {self.pw.ub_bytes}")
        src = Source()
        fields = [("blockDim", "cores the launch uses"), ("points", f"outer points ({points})"),
                  ("pointsPerBlock", "points every core takes"),
                  ("extraPoints", "cores [0, extraPoints) take one more")]
        self.struct_source(src, fields)
        src()
        src(f"// {k.name} ({k.kind}): scalar path -- element-by-element loops on the scalar unit"
            + (f" ({self.reason})" if self.reason else ""))
        with src.block(f"class {self.cls}", "};"):
            src.lines.append("public:")
            src(f"__aicore__ inline {self.cls}() {{}}")
            src.depth += 1
            init_params = ", ".join([f"GM_ADDR {param(b)}" for b in self.gm] + [f"const {self.struct}& tiling"])
            with src.block(f"__aicore__ inline void Init({init_params})"):
                src("t = tiling;")
                src("const uint32_t blk = GetBlockIdx();")
                src("count = t.pointsPerBlock + (blk < t.extraPoints ? 1 : 0);")
                src("first = blk * t.pointsPerBlock + (blk < t.extraPoints ? blk : t.extraPoints);")
                for b in self.gm:
                    c = ctype(self.pw.dtypes[b])
                    src(f"{ident(b)}Gm.SetGlobalBuffer((__gm__ {c}*){param(b)}, {prod(self.shapes[b])});")
                if self.math:
                    src(f"pipe.InitBuffer(mathBuf, {MATH_SLOT * self.math_slots()});")
                if row_bytes:
                    src(f"pipe.InitBuffer(rowBuf, {row_bytes});")
                if sort_bytes:
                    src(f"pipe.InitBuffer(sortBuf, {sort_bytes});")
            with src.block("__aicore__ inline void Process()"):
                for d in row_decl:
                    src(d)
                with src.block("for (uint32_t p = first; p < first + count; ++p)"):
                    decode(src, "int64_t(p)", outer, scope.idx, declare=True)
                    src.extend(_reindent(body, src.depth))
                for b in written:
                    src(f"DataCacheCleanAndInvalid<{ctype(self.pw.dtypes[b])}, CacheLine::ENTIRE_DATA_CACHE, "
                        f"DcciDst::CACHELINE_OUT>({ident(b)}Gm);")
            src.lines.append("private:")
            self.math_helpers(src)
            src("TPipe pipe;")
            if self.math:
                src("TBuf<QuePosition::VECCALC> mathBuf;")
            if row_bytes:
                src("TBuf<QuePosition::VECCALC> rowBuf;")
            if sort_bytes:
                src("TBuf<QuePosition::VECCALC> sortBuf;")
            for m in self.gm_members():
                src(m)
            src(f"{self.struct} t;")
            src("uint32_t first = 0, count = 0;")
        src()
        self.entry_source(src, [param(b) for b in self.gm] + ["t"])
        host = Source()
        with host.block(f'extern "C" uint32_t {self.entry}_tiling({self.struct}* t, uint32_t coreNum)'):
            host(f"const uint32_t points = {points};")
            host("t->points = points;")
            if serial:
                host("(void)coreNum;")
                host("t->blockDim = 1;  // scatter-add: one core, so no two cores update one element")
            else:
                host("t->blockDim = points < coreNum ? points : coreNum;")
                host("if (t->blockDim == 0) t->blockDim = 1;")
            host("t->pointsPerBlock = points / t->blockDim;")
            host("t->extraPoints = points % t->blockDim;")
            host("return t->blockDim;")
        plan = {"form": "scalar", "scalar_path": [f"{k.name}: whole kernel on the scalar unit"
                                                  + (f" ({self.reason})" if self.reason else "")],
                "ub": {i.name: {"kind": i.kind, "position": i.position, "num": i.num, "bytes": i.bytes(0),
                                "total": i.num * i.bytes(0)} for i in items},
                "ub_total": total, "ub_budget": self.pw.ub_bytes, "buffer_num": 0, "tile_length": 0,
                "notes": list(self.notes)}
        launch = Launch(self.entry, k.name, "main", list(self.gm), self.struct, fields,
                        cores=self.pw.vector_cores, plan=plan)
        launch.host_source = host
        return src, launch

    def loops(self, src: Source, axes, scope: ScalarScope, reverse: bool = False) -> int:
        for a in axes:
            if reverse:
                src(f"for (int64_t {a.name}_ = {a.extent - 1}; {a.name}_ >= 0; --{a.name}_) {{")
            else:
                src(f"for (int64_t {a.name}_ = 0; {a.name}_ < {a.extent}; ++{a.name}_) {{")
            src.depth += 1
            scope.idx[a.name] = f"{a.name}_"
            scope.ranges[a.name] = (0, a.extent - 1)
        return len(axes)

    def close(self, src: Source, n: int) -> None:
        for _ in range(n):
            src.depth -= 1
            src("}")

    def put(self, src: Source, buf: str, index, value: str, scope: ScalarScope) -> None:
        off = self.sw.offset((buf, tuple(index)), scope, src)
        dt = self.pw.dtypes[buf]
        if buf in self.row_ub:
            src(f"{self.row_ub[buf]}.SetValue({off}, {self.storage(value, dt)});")
        else:
            src(f"{self.gm_name(buf)}.SetValue({off}, {self.storage(value, dt)});")

    def stage(self, src: Source, s, scope: ScalarScope, written: list[str]) -> None:
        sw = self.sw
        if isinstance(s, Assign):
            v = sw.expr(s.value, scope, src)
            src(f"const {SCALAR[s.value.dtype]} {s.local}_ = {v};")
            scope.locals[s.local] = f"{s.local}_"
        elif isinstance(s, Store):
            if s.scope == "global" and s.buf not in written:
                written.append(s.buf)
            inner = scope.child()
            n = self.loops(src, s.axes, inner)
            v = sw.expr(s.value, inner, src)
            self.put(src, s.buf, s.index, v, inner)
            self.close(src, n)
        elif isinstance(s, (Reduce, Contract)):
            t = SCALAR[s.dtype]
            kind = s.kind if isinstance(s, Reduce) else "sum"
            init = {"sum": lit(0, s.dtype), "prod": lit(1, s.dtype), "any": "false", "all": "true"}.get(kind)
            if init is None:
                init = _init("max" if kind in ("max", "argmax") else "min", s.dtype)
            src(f"{t} {s.local}_ = {init};")
            idx = getattr(s, "index_local", None)
            if idx:
                src(f"int64_t {idx}_ = 0, {idx}_pos = 0;")
            inner = scope.child()
            n = self.loops(src, s.axes, inner)
            if isinstance(s, Contract):
                body = Call("mul", (_as(s.lhs, s.dtype), _as(s.rhs, s.dtype)), s.dtype)
            else:
                body = _as(s.body, s.dtype) if kind not in ("any", "all") else s.body
            v = sw.expr(body, inner, src)
            acc = f"{s.local}_"
            if kind == "sum":
                src(f"{acc} += {v};")
            elif kind == "prod":
                src(f"{acc} *= {v};")
            elif kind in ("max", "min"):
                if is_float(s.dtype):
                    sw.helpers.add("minmax")
                    src(f"{acc} = Xb{'Max' if kind == 'max' else 'Min'}({acc}, {v});")
                else:
                    src(f"{acc} = ({v}) {'>' if kind == 'max' else '<'} {acc} ? ({v}) : {acc};")
            elif kind == "any":
                src(f"{acc} = {acc} || ({v});")
            elif kind == "all":
                src(f"{acc} = {acc} && ({v});")
            else:
                op = ">" if kind == "argmax" else "<"
                src(f"const {t} cand = {v};")
                nan = f" || (cand != cand && {acc} == {acc})" if is_float(s.dtype) else ""
                with src.block(f"if (cand {op} {acc}{nan})"):
                    src(f"{acc} = cand;")
                    src(f"{idx}_ = {idx}_pos;")
                src(f"++{idx}_pos;")
            self.close(src, n)
            scope.locals[s.local] = acc
            if idx:
                scope.locals[idx] = f"{idx}_"
        elif isinstance(s, Scan):
            if s.buf not in written:
                written.append(s.buf)
            t = SCALAR[s.dtype]
            init = {"sum": lit(0, s.dtype), "prod": lit(1, s.dtype)}.get(s.kind) or \
                _init("max" if s.kind == "max" else "min", s.dtype)
            src(f"{t} run = {init};")
            inner = scope.child()
            n = self.loops(src, (s.axis,), inner, reverse=s.reverse)
            v = sw.expr(_as(s.body, s.dtype), inner, src)
            if s.kind == "sum":
                src(f"run += {v};")
            elif s.kind == "prod":
                src(f"run *= {v};")
            elif is_float(s.dtype):
                sw.helpers.add("minmax")
                src(f"run = Xb{'Max' if s.kind == 'max' else 'Min'}(run, {v});")
            else:
                src(f"run = ({v}) {'>' if s.kind == 'max' else '<'} run ? ({v}) : run;")
            self.put(src, s.buf, s.index, "run", inner)
            self.close(src, n)
        elif isinstance(s, Sort):
            self.sort(src, s, scope, written)
        elif isinstance(s, ScatterAdd):
            if s.buf not in written:
                written.append(s.buf)
            inner = scope.child()
            n = self.loops(src, s.axes, inner)
            off = sw.offset((s.buf, tuple(s.index)), inner, src)
            v = sw.expr(s.value, inner, src)
            dt = self.pw.dtypes[s.buf]
            cur = self._load(s.buf, off, dt)
            src(f"{self.gm_name(s.buf)}.SetValue({off}, {self.storage(f'{cur} + ({v})', dt)});")
            self.close(src, n)
        else:
            raise Unsupported(f"internal: no scalar form of {type(s).__name__}")

    def sort(self, src: Source, s: Sort, scope: ScalarScope, written: list[str]) -> None:
        """Stable insertion sort of one row in the UB (values as float, source positions as int32)."""
        n = s.axis.extent
        for b in (s.values_buf, s.indices_buf):
            if b and b not in written:
                written.append(b)
        src(f"LocalTensor<float> keys = sortBuf.GetWithOffset<float>({n}, 0);")
        src(f"LocalTensor<int32_t> order = sortBuf.GetWithOffset<int32_t>({n}, {align(n * 4, 32)});")
        inner = scope.child()
        c = self.loops(src, (s.axis,), inner)
        v = self.sw.expr(Cast(s.body, "float32") if s.body.dtype != "float32" else s.body, inner, src)
        src(f"keys.SetValue({s.axis.name}_, {v});")
        src(f"order.SetValue({s.axis.name}_, static_cast<int32_t>({s.axis.name}_));")
        self.close(src, c)
        op = ">" if s.descending else "<"
        with src.block(f"for (int32_t a = 1; a < {n}; ++a)"):
            src("const float key = keys.GetValue(a);")
            src("const int32_t pos = order.GetValue(a);")
            src("int32_t b = a - 1;")
            with src.block(f"while (b >= 0 && key {op} keys.GetValue(b))"):
                src("keys.SetValue(b + 1, keys.GetValue(b));")
                src("order.SetValue(b + 1, order.GetValue(b));")
                src("--b;")
            src("keys.SetValue(b + 1, key);")
            src("order.SetValue(b + 1, pos);")
        inner = scope.child()
        c = self.loops(src, (s.axis,), inner)
        a = s.axis.name + "_"
        if s.values_buf:
            dt = self.pw.dtypes[s.values_buf]
            val = self.sw.expr(E.substitute(s.body, {s.axis.name: Idx("src_pos")}), _with_idx(inner, "src_pos"),
                               None)
            src(f"const int64_t src_pos = order.GetValue({a});")
            self.put(src, s.values_buf, s.index, val if dt != "float32" else f"keys.GetValue({a})", inner)
        if s.indices_buf:
            if not s.values_buf:
                src(f"const int64_t src_pos = order.GetValue({a});")
            self.put(src, s.indices_buf, s.index, "src_pos", inner)
        self.close(src, c)


def _with_idx(scope: ScalarScope, name: str) -> ScalarScope:
    s = scope.child()
    s.idx[name] = name
    return s


def _as(e: Expr, dtype: str) -> Expr:
    return e if e.dtype == dtype else Cast(e, dtype)

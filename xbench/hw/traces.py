"""Memory-access traces of loop-IR kernels, in the order a backend runs them, for the cache simulator.

Layout
------
Global buffers (inputs, outputs, temporaries, constants) lie one after another from address 0, each starting
at a multiple of `ALIGN` (4 KiB, a page). Row-local scratch, BLAS packing buffers and the CUDA backend's
global scratch lie after them, one region per stream (core or SM), reused by every kernel.

What is an access
-----------------
Each `Load` of a kernel's expressions and each store is one access of the element's size, at the byte address
of the element in its buffer (row-major). Within one iteration of a stage a `Load` that appears several times
is read once (the backends share common subexpressions); a `Load` that does not depend on the stage's loop
variables is read once per outer point, before the loop (the backends hoist it). Only the taken side of a
`Select` is read; its condition is evaluated on the index grid (with the input arrays' contents when it reads
them). Indices that read data (gather, embedding) are evaluated from the arrays given in `data`; a kernel whose
addresses depend on values computed inside the kernel cannot be traced (`TraceError`).

cpu (numba)
-----------
The outer loop is the parallel loop: its points (flattened row-major) are split into one contiguous chunk per
core, as numba's static scheduler does, and each core's accesses form one stream; a kernel the schedule runs
serially is one stream. At each point the stages run in order (`Reduce`: its loop nest; `Store`: its loop
nest, the store last in each iteration; `Scan`: one load/store step per element; `ScatterAdd`: the loads, then
a read-modify-write of the target; `Sort`: the row gathered into scratch, ceil(log2 n) merge passes over the
scratch, then the outputs written). Accesses are per element (`granularity = "element"`).

Contractions the cpu backend hands to BLAS (`impl = "blas"`) are traced as the packing passes the generated
code runs (operands that are not plain views are packed element by element into `_A[M, K]`, `_B[K, N]`), a
GotoBLAS/BLIS-style blocked GEMM, and the epilogue pass when the result is not written in place. The GEMM model
uses BLIS's Haswell blocking (`bli_cntx_init_haswell.c`: float32 MR x NR = 16 x 6, MC 168, KC 256, NC 4080;
float64 8 x 6, MC 72, KC 256, NC 4080): per (NC, KC) block the B panel is packed (shared by the cores), each
core packs its MC x KC blocks of A and runs the micro-kernel over MR x NR tiles, which reads the packed panels
one k-step at a time and loads and stores its tile of C. These accesses are vector-sized (32 bytes with AVX2,
64 with AVX-512: `granularity = "vector"`), not per element.

gpu (cuda backend)
------------------
Blocks go to SMs round-robin (block b on SM b mod #SMs) and each SM runs its blocks in order; the launch
configuration (template, grid, block, threads per point, points per block, GEMM tiles, where row scratch
lives) is read from the cuda artifact's per-kernel resources, else from the backend's documented default
(256 threads, one point per thread). Within a block, warps issue each access in turn (instruction-major,
warp-minor). A warp's access is coalesced into the distinct 32-byte sectors its active lanes touch; each sector
is one access (`granularity = "sector"`, what Nsight Compute's sector hit rates count). Templates: *point*
(thread g of the grid handles points g, g + grid size, ...), *row* (T threads per point stride over each stage's
loop, R points per block; reductions combine in shared memory; row scratch in shared memory makes no global
access), *tiled* (per block a BM x BN tile of the output: for each BK step the A and B tiles are loaded from
their operand expressions, lanes along the operand's contiguous axis, then the epilogue stores the tile).

Units
-----
A `KernelTrace` is consumed in *steps*: every stream advances by one unit per step (cpu: a segment of a stage
at one outer point, at most `SEGMENT` iterations; BLAS: one packing panel or micro-kernel call; gpu: one block
per SM). `generate(lo, hi)` returns one `Trace` per stream for steps [lo, hi), so a window of a large kernel is
generated without the rest (see `simulate_program`).
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import itemsize
from ..ir.contraction import ShiftPlan, direct_output, operand_view, read_in_place, shift_plan
from ..ir.contraction import roles as contract_roles
from ..ir.expr import Call, Cast, Const, Expr, Idx, Load, Local, Select
from ..ir.kernel import Assign, Axis, Contract, Kernel, Program, Reduce, Scan, ScatterAdd, Sort, Store
from ..ir.scalar import lookup
from .cachesim import CacheSimulator, Hierarchy, Trace
from .target import Target

ALIGN = 4096
SEGMENT = 8192            # stage iterations per unit of a cpu trace
_CHUNK = 1 << 21          # addresses materialised at once
SECTOR = 32

# BLIS Haswell blocking (bli_cntx_init_haswell.c): MR, NR, MC, KC, NC per element size
BLIS_HASWELL = {4: (16, 6, 168, 256, 4080), 8: (8, 6, 72, 256, 4080)}


class TraceError(ValueError):
    """A kernel whose access pattern cannot be traced (the message says why)."""

    def __init__(self, message: str):
        super().__init__(f"xbench: {message}")


class _Unknown(Exception):
    pass


# ---- layout ----------------------------------------------------------------------------------------------

def _align(n: int, a: int = ALIGN) -> int:
    return -(-int(n) // a) * a


@dataclass
class Layout:
    """Byte addresses of a program's global buffers, and per-stream scratch regions after them."""

    bases: dict[str, int]
    shapes: dict[str, tuple[int, ...]]
    itemsizes: dict[str, int]
    end: int
    scratch_bytes: int = 1 << 26         # reserved per stream

    def scratch(self, stream: int) -> int:
        return self.end + stream * self.scratch_bytes

    def add(self, name: str, shape: tuple[int, ...], size: int) -> None:
        """Place an extra buffer (a packing buffer of the generated code) after the others."""
        if name in self.bases:
            return
        self.bases[name] = self.end
        self.shapes[name] = tuple(shape)
        self.itemsizes[name] = size
        self.end = _align(self.end + int(np.prod(shape, dtype=np.int64)) * size)


def layout(program: Program, align: int = ALIGN) -> Layout:
    """Global buffers one after another from 0, each at a multiple of `align` bytes."""
    bases, shapes, sizes = {}, {}, {}
    at = 0
    for name, b in program.buffers.items():
        if name in program.aliases:
            continue
        bases[name] = at
        shapes[name] = tuple(b.shape)
        sizes[name] = itemsize(b.dtype)
        at = _align(at + max(b.nbytes, 1), align)
    for out, src in program.aliases.items():
        bases[out], shapes[out], sizes[out] = bases[src], shapes[src], sizes[src]
    return Layout(bases, shapes, sizes, _align(at, align))


# ---- evaluating index expressions on grids -----------------------------------------------------------------

def _and(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a & b


def _or(a, b):
    if a is None or b is None:
        return None
    return a | b


@dataclass
class _Column:
    """One access per iteration: addresses broadcastable to (points, iterations)."""
    addr: np.ndarray
    mask: np.ndarray | None
    write: bool
    size: int

    def hoistable(self) -> bool:
        return self.addr.shape[-1] == 1 and (self.mask is None or self.mask.shape[-1] == 1)


class _Grid:
    """Values and addresses of expressions over an index grid (numpy broadcasting)."""

    def __init__(self, env: Mapping[str, np.ndarray], data: Mapping[str, np.ndarray], lay: Layout,
                 rows: Mapping[str, tuple[int, tuple[int, ...], int]], skip: frozenset[str] = frozenset()):
        self.env = env
        self.skip = skip                  # buffers kept on chip: reading them is no memory access
        self.data = data
        self.lay = lay
        self.rows = rows                  # row buffer -> (base address, shape, itemsize)
        self.memo: dict[int, tuple[Expr, Any]] = {}
        self.approximate: list[str] = []

    def value(self, e: Expr) -> np.ndarray:
        hit = self.memo.get(id(e))
        if hit is not None:
            return hit[1]
        v = self._value(e)
        self.memo[id(e)] = (e, v)
        return v

    def _value(self, e: Expr):
        if isinstance(e, Const):
            return np.asarray(e.value)
        if isinstance(e, Idx):
            if e.name not in self.env:
                raise _Unknown(f"loop variable {e.name}")
            return self.env[e.name]
        if isinstance(e, Local):
            raise _Unknown(f"the value {e.name} computed in the kernel")
        if isinstance(e, Load):
            arr = self.data.get(e.buf)
            if arr is None:
                raise _Unknown(f"the contents of {e.buf}")
            if not e.index:
                return np.asarray(arr).reshape(())
            idx = tuple(np.clip(np.asarray(self.value(i)).astype(np.int64), 0, n - 1)
                        for i, n in zip(e.index, arr.shape))
            return arr[idx]
        if isinstance(e, Cast):
            v = np.asarray(self.value(e.x))
            return v.astype(bool) if e.dtype == "bool" else v
        if isinstance(e, Select):
            return np.where(self.value(e.cond), self.value(e.a), self.value(e.b))
        if isinstance(e, Call):
            fn = lookup(e.fn, len(e.args))
            with np.errstate(all="ignore"):
                return fn.ref(*[self.value(a) for a in e.args])
        raise _Unknown(type(e).__name__)

    def address(self, buf: str, index: Sequence[Expr]) -> np.ndarray:
        if buf in self.rows:
            base, shape, size = self.rows[buf]
        elif buf in self.lay.bases:
            base, shape, size = self.lay.bases[buf], self.lay.shapes[buf], self.lay.itemsizes[buf]
        else:
            raise TraceError(f"buffer {buf} is not in the program's layout")
        lin: Any = 0
        for i, n in zip(index, shape):
            lin = lin * n + np.asarray(self.value(i)).astype(np.int64)
        return base + np.asarray(lin, dtype=np.int64) * size

    def size_of(self, buf: str) -> int:
        return self.rows[buf][2] if buf in self.rows else self.lay.itemsizes[buf]

    def loads(self, exprs: Sequence[Expr], mask=None) -> list[_Column]:
        """The distinct loads of `exprs` in evaluation order (operands first), each with its mask."""
        found: dict[Load, list] = {}

        def walk(e: Expr, m) -> None:
            if isinstance(e, Load):
                for i in e.index:
                    walk(i, m)
                if e in found:
                    found[e][1] = _or(found[e][1], m)
                else:
                    found[e] = [e, m]
                return
            if isinstance(e, Select):
                walk(e.cond, m)
                try:
                    c = np.asarray(self.value(e.cond)).astype(bool)
                except _Unknown as why:
                    self.approximate.append(f"a condition reads {why}: both sides counted")
                    walk(e.a, m)
                    walk(e.b, m)
                    return
                walk(e.a, _and(m, c))
                walk(e.b, _and(m, ~c))
                return
            for ch in e.children():
                walk(ch, m)

        for e in exprs:
            walk(e, mask)
        out = []
        for load, m in found.values():
            if load.buf in self.skip:
                continue
            try:
                addr = self.address(load.buf, load.index)
            except _Unknown as why:
                raise TraceError(f"the address of {load} depends on {why}; its cache behaviour cannot be "
                                 f"traced") from None
            out.append(_Column(addr, None if m is None else np.asarray(m, bool), False, self.size_of(load.buf)))
        return out

    def store(self, buf: str, index: Sequence[Expr], mask=None) -> _Column:
        try:
            addr = self.address(buf, index)
        except _Unknown as why:
            raise TraceError(f"the address of a store to {buf} depends on {why}; it cannot be traced") from None
        return _Column(addr, mask, True, self.size_of(buf))


def _unravel(flat: np.ndarray, extents: Sequence[int]) -> list[np.ndarray]:
    out = []
    rem = flat
    for n in reversed(extents):
        out.append(rem % n)
        rem = rem // n
    return out[::-1]


def _stage_axes(s) -> tuple[Axis, ...]:
    if isinstance(s, (Scan, Sort)):
        return (s.axis,)
    return tuple(getattr(s, "axes", ()) or ())


def _extent(axes: Sequence[Axis]) -> int:
    return int(np.prod([a.extent for a in axes], dtype=np.int64)) if axes else 1


# ---- per-point access columns of a kernel ------------------------------------------------------------------

@dataclass
class _Block:
    """Accesses of P points: `addr` (P, A), `mask` (P, A) or None, `write` and `size` (A,)."""
    addr: np.ndarray
    mask: np.ndarray | None
    write: np.ndarray
    size: np.ndarray

    @staticmethod
    def empty(P: int) -> _Block:
        return _Block(np.zeros((P, 0), np.int64), None, np.zeros(0, bool), np.zeros(0, np.int32))

    @staticmethod
    def join(blocks: Sequence[_Block]) -> _Block:
        blocks = [b for b in blocks if b.addr.shape[1]]
        if not blocks:
            return _Block.empty(0)
        P = blocks[0].addr.shape[0]
        mask = None
        if any(b.mask is not None for b in blocks):
            mask = np.concatenate([np.ones((P, b.addr.shape[1]), bool) if b.mask is None else b.mask
                                   for b in blocks], axis=1)
        return _Block(np.concatenate([b.addr for b in blocks], axis=1), mask,
                      np.concatenate([b.write for b in blocks]), np.concatenate([b.size for b in blocks]))

    def trace(self) -> Trace:
        P, A = self.addr.shape
        addr = self.addr.reshape(-1)
        write = np.broadcast_to(self.write, (P, A)).reshape(-1)
        size = np.broadcast_to(self.size, (P, A)).reshape(-1)
        if self.mask is not None:
            m = self.mask.reshape(-1)
            addr, write, size = addr[m], write[m], size[m]
        return Trace(addr, write, size)


def _columns_block(cols: list[_Column], P: int, n: int) -> _Block:
    """Columns of one stage iteration space of n iterations -> accesses in program order."""
    if not cols:
        return _Block.empty(P)
    addr = np.stack([np.broadcast_to(c.addr, (P, n)) for c in cols], axis=-1).reshape(P, n * len(cols))
    mask = None
    if any(c.mask is not None for c in cols):
        mask = np.stack([np.ones((P, n), bool) if c.mask is None else np.broadcast_to(c.mask, (P, n))
                         for c in cols], axis=-1).reshape(P, n * len(cols))
    write = np.tile(np.array([c.write for c in cols], bool), n)
    size = np.tile(np.array([c.size for c in cols], np.int32), n)
    return _Block(addr, mask, write, size)


class _PointAccesses:
    """The access sequence of a kernel at any set of outer points, stage by stage (segments of at most
    `SEGMENT` iterations)."""

    def __init__(self, program: Program, kernel: Kernel, lay: Layout, data: Mapping[str, np.ndarray],
                 scratch_base: int = 0, row_place: Mapping[str, str] | None = None, sort_scratch: bool = True):
        self.k = kernel
        self.lay = lay
        self.data = data
        self.sort_scratch = sort_scratch
        self.outer = [a.name for a in kernel.outer]
        self.extents = [a.extent for a in kernel.outer]
        self.points = kernel.points()
        self.notes: list[str] = []
        # row scratch: on-chip (no access) where the backend keeps it there, else a per-stream region
        self.row_place = dict(row_place or {})
        self.rows: dict[str, tuple[int, tuple[int, ...], int]] = {}
        self.row_bytes = 0
        for name, (shape, dt) in kernel.row_buffers.items():
            if self.row_place.get(name, "global") != "global":
                continue
            self.rows[name] = (0, tuple(shape), itemsize(dt))
            self.row_bytes = _align(self.row_bytes + int(np.prod(shape, dtype=np.int64)) * itemsize(dt), 64)
        self.on_chip = frozenset(n for n in kernel.row_buffers if n not in self.rows)
        self.set_scratch(scratch_base)
        self.segments: list[tuple[int, int, int]] = []      # (stage index, first iteration, end)
        for si, s in enumerate(kernel.stages):
            n = _extent(_stage_axes(s))
            for j0 in range(0, max(n, 1), SEGMENT):
                self.segments.append((si, j0, min(n, j0 + SEGMENT) if n else 1))
        if not self.segments:
            self.segments.append((-1, 0, 0))

    def set_scratch(self, base: int) -> None:
        """Place the row scratch (then the sort scratch) at `base`."""
        at = base
        rows = {}
        for name, (_, shape, size) in self.rows.items():
            rows[name] = (at, shape, size)
            at = _align(at + int(np.prod(shape, dtype=np.int64)) * size, 64)
        self.rows = rows
        self.sort_base = at

    @property
    def units(self) -> int:
        return len(self.segments)

    def _env(self, pts: np.ndarray) -> dict[str, np.ndarray]:
        env = {}
        for name, v in zip(self.outer, _unravel(pts.astype(np.int64), self.extents)):
            env[name] = v.reshape(-1, 1)
        return env

    def block(self, pts: np.ndarray, seg_lo: int = 0, seg_hi: int | None = None) -> _Block:
        """Accesses of points `pts` (flattened outer indices) for segments [seg_lo, seg_hi)."""
        seg_hi = self.units if seg_hi is None else seg_hi
        P = len(pts)
        base_env = self._env(pts)
        parts = []
        for si, j0, j1 in self.segments[seg_lo:seg_hi]:
            if si < 0:
                continue
            parts += self.stage_parts(si, base_env, P, j0, j1)
        out = _Block.join(parts)
        return out if out.addr.shape[0] == P else _Block.empty(P)

    def _skip(self, buf: str) -> bool:
        return buf in self.k.row_buffers and buf not in self.rows

    def _loads(self, g: _Grid, exprs: Sequence[Expr], mask=None) -> list[_Column]:
        return g.loads(exprs, mask)

    def stage_parts(self, si: int, base_env: dict, P: int, j0: int, j1: int) -> list[_Block]:
        """[hoisted loads (once per point), loop accesses (n iterations)] of stage `si`, iterations [j0, j1)."""
        s = self.k.stages[si]
        axes = _stage_axes(s)
        n = j1 - j0
        env = dict(base_env)
        if axes:
            flat = np.arange(j0, j1, dtype=np.int64)
            if isinstance(s, Scan) and s.reverse:
                flat = s.axis.extent - 1 - flat
            for a, v in zip(axes, _unravel(flat, [a.extent for a in axes])):
                env[a.name] = v.reshape(1, -1)
        g = _Grid(env, self.data, self.lay, self.rows, self.on_chip)
        if isinstance(s, Sort):
            return [_Block.empty(P), self._sort(s, g, P, j0, j1)]
        if isinstance(s, (Reduce, Contract, Assign)):
            cols = self._loads(g, s.exprs())
        elif isinstance(s, Store):
            cols = self._loads(g, [*s.index, s.value])
            if not self._skip(s.buf):
                cols.append(g.store(s.buf, s.index))
        elif isinstance(s, Scan):
            cols = self._loads(g, [*s.index, s.body])
            cols.append(g.store(s.buf, s.index))
        elif isinstance(s, ScatterAdd):
            cols = self._loads(g, [*s.index, s.value])
            target = g.store(s.buf, s.index)
            cols += [_Column(target.addr, None, False, target.size), target]
        else:  # pragma: no cover - every stage type is handled above
            raise TraceError(f"stage {type(s).__name__} cannot be traced")
        for note in g.approximate:
            if note not in self.notes:
                self.notes.append(note)
        if not axes:
            return [_Block.empty(P), _columns_block(cols, P, 1)]
        hoisted = [c for c in cols if not c.write and c.hoistable()]
        loop = [c for c in cols if c.write or not c.hoistable()]
        first = _columns_block(hoisted, P, 1) if hoisted and j0 == 0 else _Block.empty(P)
        return [first, _columns_block(loop, P, n)]

    def _sort(self, s: Sort, g: _Grid, P: int, j0: int, j1: int) -> _Block:
        """Gather the row into scratch, merge-sort passes over the scratch, write the outputs (on a GPU the
        sort runs on chip: only the loads and the output stores)."""
        n = s.axis.extent
        item = itemsize(s.body.dtype)
        iters = j1 - j0
        outs = [g.store(b, s.index) for b in (s.values_buf, s.indices_buf) if b]
        if not self.sort_scratch:
            return _Block.join([_columns_block(self._loads(g, [s.body]), P, iters), _columns_block(outs, P, iters)])
        scratch = self.sort_base + np.arange(j0, j1, dtype=np.int64).reshape(1, -1) * item
        cols = self._loads(g, [s.body]) + [_Column(scratch, None, True, item)]
        gather = _columns_block(cols, P, iters)
        passes = max(1, math.ceil(math.log2(max(n, 2))))
        merge = _columns_block([_Column(scratch, None, False, item), _Column(scratch, None, True, item)], P, iters)
        write = _columns_block([_Column(scratch, None, False, item)] + outs, P, iters)
        return _Block.join([gather] + [merge] * passes + [write])


# ---- kernel traces -------------------------------------------------------------------------------------------

class KernelTrace(ABC):
    """The access streams of one kernel, consumed step by step (see the module docstring)."""

    kernel: str = ""
    streams: int = 1
    steps: int = 0
    granularity: str = "element"
    notes: list[str]

    @abstractmethod
    def generate(self, lo: int, hi: int) -> list[Trace]:
        """The access streams of steps lo..hi-1, one Trace per stream."""

    def estimate_accesses(self, probes: int = 3) -> float:
        """Accesses of the whole kernel, from a few generated steps."""
        if self.steps == 0:
            return 0.0
        width = max(1, min(self.steps, 4))
        starts = sorted({int(x) for x in np.linspace(0, self.steps - width, probes)})
        seen = 0
        for s in starts:
            seen += sum(len(t) for t in self.generate(s, s + width))
        return seen / (len(starts) * width) * self.steps

    def segments(self) -> list[tuple[int, float]]:
        """(steps, accesses) of consecutive runs of steps of even density: what sampling weighs windows by."""
        return [(self.steps, self.estimate_accesses())] if self.steps else []

    def all(self) -> list[Trace]:
        return self.generate(0, self.steps)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kernel}: {self.streams} stream(s), {self.steps} steps>"


def _empty_trace() -> Trace:
    return Trace(np.zeros(0, np.int64), False, 4)


def _concat(ts: Sequence[Trace]) -> Trace:
    ts = [t for t in ts if len(t)]
    if not ts:
        return _empty_trace()
    return ts[0] if len(ts) == 1 else Trace.concat(ts)


class CpuPointTrace(KernelTrace):
    """A kernel's loop nest as numba runs it: the parallel outer loop split into one chunk per core."""

    granularity = "element"

    def __init__(self, program: Program, kernel: Kernel, lay: Layout, *, cores: int, parallel: bool,
                 data: Mapping[str, np.ndarray] | None = None):
        self.kernel = kernel.name
        self.acc = _PointAccesses(program, kernel, lay, data or {})
        self.lay = lay
        P = max(self.acc.points, 1)
        self.streams = cores if parallel and P > 1 else 1
        bounds = np.linspace(0, P, self.streams + 1)
        sizes = np.diff(np.floor(bounds).astype(np.int64))
        sizes = np.array(sorted(sizes, reverse=True), np.int64)    # array_split: the first chunks are longer
        self.starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        self.sizes = sizes
        self.units = self.period = self.acc.units
        self.steps = int(sizes.max()) * self.units if P else 0
        self.notes = self.acc.notes
        self.global_end = lay.end

    def generate(self, lo: int, hi: int) -> list[Trace]:
        out = []
        U = self.units
        for c in range(self.streams):
            self.acc.set_scratch(self.lay.scratch(c))
            end = min(hi, int(self.sizes[c]) * U)
            out.append(self._range(c, lo, end) if end > lo else _empty_trace())
        return out

    def _range(self, c: int, lo: int, hi: int) -> Trace:
        U = self.units
        start = int(self.starts[c])
        parts = []
        p_lo, u_lo = divmod(lo, U)
        p_hi, u_hi = divmod(hi, U)
        if p_lo == p_hi:
            return self.acc.block(np.array([start + p_lo]), u_lo, u_hi).trace()
        if u_lo:
            parts.append(self.acc.block(np.array([start + p_lo]), u_lo, U).trace())
            p_lo += 1
        per_point = max(1, self._per_point())
        step = max(1, _CHUNK // per_point)
        for p in range(p_lo, p_hi, step):
            pts = np.arange(start + p, start + min(p + step, p_hi), dtype=np.int64)
            parts.append(self.acc.block(pts).trace())
        if u_hi:
            parts.append(self.acc.block(np.array([start + p_hi]), 0, u_hi).trace())
        return _concat(parts)

    def _per_point(self) -> int:
        if not hasattr(self, "_pp"):
            self._pp = int(self.acc.block(np.array([0])).addr.shape[1])
        return self._pp


class SequenceTrace(KernelTrace):
    """Phases run one after another by every stream (a barrier between them)."""

    def __init__(self, name: str, phases: Sequence[KernelTrace], granularity: str):
        self.kernel = name
        self.phases = [p for p in phases if p.steps]
        self.streams = max([p.streams for p in self.phases] + [1])
        self.steps = sum(p.steps for p in self.phases)
        self.granularity = granularity
        self.notes = [n for p in self.phases for n in p.notes]
        self.global_end = min([getattr(p, "global_end", 0) for p in self.phases] or [0]) or None

    def generate(self, lo: int, hi: int) -> list[Trace]:
        per = [[] for _ in range(self.streams)]
        at = 0
        for p in self.phases:
            a, b = max(lo, at), min(hi, at + p.steps)
            if a < b:
                for i, t in enumerate(p.generate(a - at, b - at)):
                    per[i].append(t)
            at += p.steps
        return [_concat(ts) for ts in per]

    def segments(self) -> list[tuple[int, float]]:
        """Each phase's own density (a GEMM's steps hold thousands of accesses, its epilogue's a few); a phase
        repeated per batch point (same name and steps) is estimated once."""
        seen: dict[tuple[str, int], list[tuple[int, float]]] = {}
        out: list[tuple[int, float]] = []
        for p in self.phases:
            key = (getattr(p, "kernel", ""), p.steps)
            if key not in seen:
                seen[key] = p.segments()
            out += seen[key]
        return out

    def estimate_accesses(self, probes: int = 3) -> float:
        return float(sum(a for _, a in self.segments()))


# ---- BLAS contractions on the cpu ----------------------------------------------------------------------------

@dataclass
class _Matrix:
    """A matrix operand in memory: element (r, c) at base + r * rs + c * cs (bytes)."""
    base: int
    rows: int
    cols: int
    rs: int
    cs: int
    item: int

    def runs(self, r0: int, r1: int, c0: int, c1: int, vec: int) -> np.ndarray:
        """Start addresses of vector-sized accesses reading the block [r0, r1) x [c0, c1) along its contiguous
        direction (rows when the column stride is the element size)."""
        if self.cs == self.item or self.rs != self.item:
            per = max(1, vec // self.item)
            starts = np.arange(c0, c1, per, dtype=np.int64)
            rr = np.arange(r0, r1, dtype=np.int64)
            return (self.base + rr[:, None] * self.rs + starts[None, :] * self.cs).reshape(-1)
        per = max(1, vec // self.item)
        starts = np.arange(r0, r1, per, dtype=np.int64)
        cc = np.arange(c0, c1, dtype=np.int64)
        return (self.base + cc[:, None] * self.cs + starts[None, :] * self.rs).reshape(-1)


class BlasGemmTrace(KernelTrace):
    """C[M, N] (+)= A[M, K] @ B[K, N] as a BLIS-style blocked GEMM over `cores` threads (see module doc)."""

    granularity = "vector"

    def __init__(self, name: str, a: _Matrix, b: _Matrix, c: _Matrix, lay: Layout, *, cores: int, vec: int,
                 batch: Sequence[tuple[int, int, int]] = ((0, 0, 0),)):
        self.kernel = name
        self.a, self.b, self.c = a, b, c
        self.lay = lay
        self.vec = vec
        self.item = a.item
        self.M, self.K, self.N = a.rows, a.cols, b.cols
        self.MR, self.NR, self.MC, self.KC, self.NC = BLIS_HASWELL.get(self.item, BLIS_HASWELL[4])
        self.streams = max(1, cores)
        self.batch = list(batch)                       # per batch: byte offsets added to A, B, C
        self.notes = []
        self.global_end = lay.end
        self.groups = [self._groups(s) for s in range(self.streams)]
        self.counts = [np.cumsum([g[1] for g in gs]) if gs else np.zeros(0, np.int64) for gs in self.groups]
        self.steps = int(max([int(cn[-1]) if len(cn) else 0 for cn in self.counts] + [0]))

    def _groups(self, s: int) -> list[tuple]:
        """(kind, units, params) in order for stream s."""
        out = []
        M, N, K = self.M, self.N, self.K
        for bi in range(len(self.batch)):
            for jc in range(0, N, self.NC):
                nc = min(self.NC, N - jc)
                for pc in range(0, K, self.KC):
                    kc = min(self.KC, K - pc)
                    panels = -(-nc // self.NR)
                    mine = list(range(s, panels, self.streams))
                    if mine:
                        out.append(("packB", len(mine), (bi, jc, pc, nc, kc, mine)))
                    ics = list(range(0, M, self.MC))[s::self.streams]
                    for ic in ics:
                        mc = min(self.MC, M - ic)
                        ap = -(-mc // self.MR)
                        out.append(("packA", ap, (bi, ic, pc, mc, kc)))
                        out.append(("micro", ap * panels, (bi, jc, pc, ic, nc, kc, mc)))
        return out

    def _bp(self) -> int:
        return self.lay.scratch(self.streams) + (1 << 20)        # B panel shared by the cores

    def _ap(self, s: int) -> int:
        return self.lay.scratch(s) + (1 << 20)

    def generate(self, lo: int, hi: int) -> list[Trace]:
        return [self._stream(s, lo, hi) for s in range(self.streams)]

    def _stream(self, s: int, lo: int, hi: int) -> Trace:
        gs, cn = self.groups[s], self.counts[s]
        if not len(cn) or lo >= cn[-1]:
            return _empty_trace()
        gi = int(np.searchsorted(cn, lo, side="right"))
        addrs, writes, sizes = [], [], []
        while gi < len(gs) and (cn[gi] - gs[gi][1]) < hi:
            kind, n, prm = gs[gi]
            first = int(cn[gi] - n)
            for u in range(max(lo, first) - first, min(hi, int(cn[gi])) - first):
                a, w, z = getattr(self, "_" + kind)(s, u, *prm)
                addrs.append(a)
                writes.append(w)
                sizes.append(z)
            gi += 1
        if not addrs:
            return _empty_trace()
        return Trace(np.concatenate(addrs), np.concatenate(writes), np.concatenate(sizes))

    def _off(self, bi: int) -> tuple[int, int, int]:
        return self.batch[bi]

    def _packB(self, s, u, bi, jc, pc, nc, kc, mine):
        jr = mine[u] * self.NR
        nr = min(self.NR, nc - jr)
        oa, ob, oc = self._off(bi)
        b = self.b
        src = _Matrix(b.base + ob, b.rows, b.cols, b.rs, b.cs, b.item).runs(pc, pc + kc, jc + jr, jc + jr + nr,
                                                                             self.vec)
        dst0 = self._bp() + mine[u] * self.NR * kc * self.item
        dst = dst0 + np.arange(0, kc * nr * self.item, self.vec, dtype=np.int64)
        return self._rw(src, dst)

    def _packA(self, s, u, bi, ic, pc, mc, kc):
        ir = u * self.MR
        mr = min(self.MR, mc - ir)
        oa, ob, oc = self._off(bi)
        a = self.a
        src = _Matrix(a.base + oa, a.rows, a.cols, a.rs, a.cs, a.item).runs(ic + ir, ic + ir + mr, pc, pc + kc,
                                                                             self.vec)
        dst = self._ap(s) + u * self.MR * kc * self.item + np.arange(0, kc * mr * self.item, self.vec,
                                                                     dtype=np.int64)
        return self._rw(src, dst)

    def _rw(self, src: np.ndarray, dst: np.ndarray):
        a = np.concatenate([src, dst])
        w = np.concatenate([np.zeros(len(src), bool), np.ones(len(dst), bool)])
        z = np.concatenate([np.full(len(src), min(self.vec, self.item * max(1, self.vec // self.item)), np.int32),
                            np.full(len(dst), self.vec, np.int32)])
        return a, w, z

    def _micro(self, s, u, bi, jc, pc, ic, nc, kc, mc):
        ap = -(-mc // self.MR)
        jp, ip = divmod(u, ap)
        ir, jr = ip * self.MR, jp * self.NR
        mr, nr = min(self.MR, mc - ir), min(self.NR, nc - jr)
        it = self.item
        a_row = mr * it
        na = max(1, -(-a_row // self.vec))
        k = np.arange(kc, dtype=np.int64)
        a_base = self._ap(s) + ip * self.MR * kc * it
        b_base = self._bp() + jp * self.NR * kc * it
        a_acc = a_base + k[:, None] * a_row + np.arange(na, dtype=np.int64)[None, :] * self.vec
        b_acc = b_base + k[:, None] * nr * it
        per_k = np.concatenate([a_acc, b_acc], axis=1).reshape(-1)
        sizes_k = np.tile(np.r_[np.full(na, min(self.vec, a_row), np.int32), np.int32(nr * it)], kc)
        oa, ob, oc = self._off(bi)
        rows = np.arange(ic + ir, ic + ir + mr, dtype=np.int64)
        c_acc = self.c.base + oc + rows * self.c.rs + (jc + jr) * self.c.cs
        c_two = np.repeat(c_acc, 2)
        addr = np.concatenate([per_k, c_two])
        write = np.concatenate([np.zeros(len(per_k), bool), np.tile([False, True], mr)])
        size = np.concatenate([sizes_k, np.full(2 * mr, nr * it, np.int32)])
        return addr, write, size


def blas_trace(program: Program, kernel: Kernel, lay: Layout, *, cores: int, vec: int,
               data: Mapping[str, np.ndarray] | None = None) -> KernelTrace:
    """The cpu backend's BLAS path for a contraction kernel: packing passes, blocked GEMM, epilogue."""
    kernel = read_in_place(kernel, program.buffers)
    c, batch, m, n = contract_roles(kernel)
    dt = c.dtype
    it = itemsize(dt)
    M, N, B = _extent(m), _extent(n), _extent(batch)
    phases: list[KernelTrace] = []
    lhs_b = bool({a.name for a in batch} & _free(c.lhs))
    rhs_b = bool({a.name for a in batch} & _free(c.rhs))

    def operand(e: Expr, first, second, name: str, depends_on_batch: bool):
        view = operand_view(e, program.buffers, first, second, batch) if e.dtype == dt else None
        if view is not None:
            buf, tr = view
            R, C = _extent(first), _extent(second)
            base = lay.bases[buf]
            per_batch = R * C * it if batch and any(a.name in _free(e) for a in batch) else 0
            if tr:
                return _Matrix(base, R, C, it, R * it, it), per_batch, None
            return _Matrix(base, R, C, C * it, it, it), per_batch, None
        R, C = _extent(first), _extent(second)
        lay.add(f"{kernel.name}{name}", (R, C), it)
        pack = _pack_kernel(kernel.name + name, e, first, second, batch if depends_on_batch else [],
                            f"{kernel.name}{name}", dt)
        return _Matrix(lay.bases[f"{kernel.name}{name}"], R, C, C * it, it, it), 0, pack

    A, a_step, pack_a = operand(c.lhs, m, c.axes, "_A", lhs_b)
    Bm, b_step, pack_b = operand(c.rhs, c.axes, n, "_B", rhs_b)
    cbuf = direct_output(kernel, c, program.buffers)
    if cbuf is not None:
        c_step = M * N * it                 # the output is [batch..., M..., N...] (its unit axes perhaps dropped)
        Cm = _Matrix(lay.bases[cbuf], M, N, N * it, it, it)
        epi = None
    else:
        lay.add(f"{kernel.name}_C", (M, N), it)
        Cm = _Matrix(lay.bases[f"{kernel.name}_C"], M, N, N * it, it, it)
        c_step = 0
        epi = _epilogue_kernel(kernel, c, batch, m, n, f"{kernel.name}_C")
    progs = dict(program.buffers)
    for nm_ in (f"{kernel.name}_A", f"{kernel.name}_B", f"{kernel.name}_C"):
        if nm_ in lay.bases and nm_ not in progs:
            from ..ir.kernel import Buffer
            progs[nm_] = Buffer(nm_, lay.shapes[nm_], dt, "temp")
    prog2 = Program(program.name, progs, program.inputs, program.outputs, program.kernels, program.aliases)

    def pass_trace(k: Kernel | None, b_index: int | None) -> KernelTrace | None:
        if k is None:
            return None
        kk = _fix_batch(k, batch, b_index) if b_index is not None else k
        return CpuPointTrace(prog2, kk, lay, cores=cores, parallel=True, data=data)

    def per_batch(bi: int):
        if pack_a is not None and (lhs_b or bi == 0):
            yield pass_trace(pack_a, bi if lhs_b else None)
        if pack_b is not None and (rhs_b or bi == 0):
            yield pass_trace(pack_b, bi if rhs_b else None)
        yield BlasGemmTrace(f"{kernel.name}.gemm", A, Bm, Cm, lay, cores=cores, vec=vec,
                            batch=[(bi * a_step, bi * b_step, bi * c_step)])
        if epi is not None:
            yield pass_trace(epi, bi)

    for bi in range(B):
        phases += [p for p in per_batch(bi) if p is not None]
    seq = SequenceTrace(kernel.name, phases, "vector")
    seq.notes.append("BLAS GEMM modelled with BLIS Haswell blocking; accesses are vector-sized")
    return seq


def blas_regions(program: Program, kernel: Kernel) -> int:
    """Parallel regions the cpu backend's BLAS path runs for a contraction kernel: one per packing pass of an
    operand that is not a plain view (per batch point when it depends on the batch) and one per batch point for
    an epilogue that BLAS cannot write in place (np.dot itself runs in the BLAS library's own threads)."""
    kernel = read_in_place(kernel, program.buffers)
    c, batch, m, n = contract_roles(kernel)
    B = _extent(batch)
    out = 0
    for e, first, second in ((c.lhs, m, c.axes), (c.rhs, c.axes, n)):
        if e.dtype != c.dtype or operand_view(e, program.buffers, first, second, batch) is None:
            out += B if {a.name for a in batch} & _free(e) else 1
    if direct_output(kernel, c, program.buffers) is None:
        out += B
    return out


def shift_trace(program: Program, kernel: Kernel, plan: ShiftPlan, lay: Layout, *, cores: int, vec: int,
                data: Mapping[str, np.ndarray] | None = None) -> KernelTrace:
    """The cpu backend's shifted-GEMM convolution (`ShiftPlan`): the weights repacked per tap, then per batch
    point the zeroed padded buffer, the input planes copied into it, one GEMM per tap reading the padded buffer
    at the tap's offset (leading dimension `plan.row`) and accumulating into `_C`, and the epilogue."""
    from ..ir import expr as E
    from ..ir.kernel import Buffer
    c, batch, m, n = contract_roles(kernel)
    dt = c.dtype
    it = itemsize(dt)
    M, C = _extent(m), plan.chan.extent
    (r_ax, s_ax), S = plan.taps, plan.taps[1].extent
    (hp, wp), (hin, win), (oy, ox) = plan.padded, plan.size, plan.off
    L, taps = plan.out[0] * wp, r_ax.extent * S
    names = {x: f"{kernel.name}_{x}" for x in "WXC"}
    for x, shape in (("W", (taps, M, C)), ("X", (C, plan.row)), ("C", (M, L))):
        lay.add(names[x], shape, it)
    progs = dict(program.buffers)
    for x in names.values():
        progs.setdefault(x, Buffer(x, lay.shapes[x], dt, "temp"))
    prog2 = Program(program.name, progs, program.inputs, program.outputs, program.kernels, program.aliases)
    mflat = E.linear(tuple(a.var for a in m), tuple(a.extent for a in m))
    tap = E.add(E.mul(r_ax.var, E.const(S)), s_ax.var)
    repack = Kernel(kernel.name + ".weights", "row", tuple(m),
                    [Store(names["W"], (plan.chan, r_ax, s_ax), (tap, mflat, plan.chan.var), c.lhs)])
    ch = Axis("_c", C)
    zero = Kernel(kernel.name + ".zero", "row", (ch,),
                  [Store(names["X"], (Axis("_i", plan.row),), (ch.var, Idx("_i")), Const(0.0, dt))])
    y0, x0 = max(0, -oy), max(0, -ox)
    ya, xa = Axis("_y", min(hp, hin - oy) - y0), Axis("_x", min(wp, win - ox) - x0)
    y, x = E.add(ya.var, E.const(y0)), E.add(xa.var, E.const(x0))
    lead = (batch[0].var,) if batch else ()
    copy = Kernel(kernel.name + ".pad", "row", (*batch, ch),
                  [Store(names["X"], (ya, xa), (ch.var, E.add(E.mul(y, E.const(wp)), x)),
                         Load(plan.buf, (*lead, ch.var, E.add(y, E.const(oy)), E.add(x, E.const(ox))), dt))])
    epi = _epilogue_kernel(kernel, c, batch, m, n, names["C"], E.add(E.mul(n[0].var, E.const(wp)), n[1].var))

    def point(k: Kernel, bi: int | None) -> KernelTrace:
        kk = _fix_batch(k, batch, bi) if bi is not None and batch else k
        return CpuPointTrace(prog2, kk, lay, cores=cores, parallel=True, data=data)

    wb, xb_, cb = lay.bases[names["W"]], lay.bases[names["X"]], lay.bases[names["C"]]
    phases: list[KernelTrace] = [point(repack, None)]
    for bi in range(_extent(batch)):
        phases += [point(zero, None), point(copy, bi)]
        for t in range(taps):
            off = plan.offset(t // S, t % S)
            phases.append(BlasGemmTrace(f"{kernel.name}.gemm", _Matrix(wb + t * M * C * it, M, C, C * it, it, it),
                                        _Matrix(xb_ + off * it, C, L, plan.row * it, it, it),
                                        _Matrix(cb, M, L, L * it, it, it), lay, cores=cores, vec=vec))
        phases.append(point(epi, bi))
    seq = SequenceTrace(kernel.name, phases, "vector")
    seq.notes.append(f"convolution as {taps} shifted GEMMs per batch point over a zero-padded copy; BLAS GEMM "
                     "modelled with BLIS Haswell blocking; accesses are vector-sized")
    return seq


def _free(e: Expr) -> set[str]:
    return {n.name for n in e.walk() if isinstance(n, Idx)}


def _pack_kernel(name: str, e: Expr, first, second, batch, buf: str, dt: str) -> Kernel:
    """`buf[flat(first), flat(second)] = e` over first (outer) x second (inner loop), per batch point."""
    from ..ir import expr as E
    fl = E.linear(tuple(a.var for a in first), tuple(a.extent for a in first))
    sl = E.linear(tuple(a.var for a in second), tuple(a.extent for a in second))
    value = e if e.dtype == dt else Cast(e, dt)
    outer = tuple(batch) + tuple(first)
    return Kernel(name, "row", outer, [Store(buf, tuple(second), (fl, sl), value)])


def _fix_batch(k: Kernel, batch, bi: int) -> Kernel:
    """The kernel restricted to one batch point (batch axes replaced by their values)."""
    from ..ir.expr import const, substitute
    vals = _unravel(np.array(bi), [a.extent for a in batch])
    mapping = {a.name: const(int(v)) for a, v in zip(batch, vals)}
    names = {a.name for a in batch}
    stages = [s.replace(lambda x: substitute(x, mapping)) for s in k.stages]
    return Kernel(k.name, k.kind, tuple(a for a in k.outer if a.name not in names), stages, dict(k.row_buffers),
                  dict(k.locals))


def _epilogue_kernel(kernel: Kernel, c: Contract, batch, m, n, cbuf: str, cols: Expr | None = None) -> Kernel:
    """The epilogue stages per output point, reading the accumulator at `cbuf[m, cols]` (default: N flattened)."""
    from ..ir import expr as E
    mflat = E.linear(tuple(a.var for a in m), tuple(a.extent for a in m))
    nflat = cols if cols is not None else E.linear(tuple(a.var for a in n), tuple(a.extent for a in n))
    acc = Load(cbuf, (mflat, nflat), c.dtype)
    stages = [s.replace(lambda e: e.map(lambda x: acc if isinstance(x, Local) and x.name == c.local else None))
              for s in kernel.stages[1:]]
    return Kernel(kernel.name + ".epilogue", "elementwise", tuple(batch) + tuple(m) + tuple(n), stages)


# ---- gpu (cuda backend) --------------------------------------------------------------------------------------

def _sectors(addr: np.ndarray, mask: np.ndarray | None, write: np.ndarray) -> Trace:
    """Rows of 32 lanes (one warp access each) -> the distinct 32-byte sectors of each row, in order."""
    sec = addr >> 5
    if mask is not None:
        sec = np.where(mask, sec, -1)
    srt = np.sort(sec, axis=-1)
    keep = np.ones(srt.shape, bool)
    keep[..., 1:] = srt[..., 1:] != srt[..., :-1]
    keep &= srt >= 0
    w = np.broadcast_to(write[..., None], srt.shape)
    return Trace(srt[keep] << 5, w[keep], SECTOR)


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _contiguous_across_points(k: Kernel) -> bool:
    """Consecutive outer points read consecutive addresses (the innermost outer axis indexes the last dimension
    of every load and no stage axis does)."""
    if not k.outer:
        return False
    inner = k.outer[-1].name
    stage_names = {a.name for s in k.stages for a in _stage_axes(s)}
    loads = [n for s in k.stages for x in s.exprs() for n in x.walk()
             if isinstance(n, Load) and n.buf not in k.row_buffers and n.index]
    return bool(loads) and all(inner in _free(ld.index[-1]) and not (_free(ld.index[-1]) & stage_names)
                               for ld in loads)


def _pad_threads(addr: np.ndarray, mask: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad axis 1 (threads) of (blocks, threads, A) arrays to n with inactive lanes."""
    nb, t, A = addr.shape
    if t == n:
        return addr, mask
    return (np.concatenate([addr, np.zeros((nb, n - t, A), np.int64)], axis=1),
            np.concatenate([mask, np.zeros((nb, n - t, A), bool)], axis=1))


def _warp_rows(addr: np.ndarray, mask: np.ndarray, write: np.ndarray):
    """(blocks, rows, 32) lane addresses -> per row its distinct sectors (sorted), a keep mask and write flags."""
    sec = np.where(mask, addr >> 5, -1)
    srt = np.sort(sec, axis=-1)
    keep = np.ones(srt.shape, bool)
    keep[..., 1:] = srt[..., 1:] != srt[..., :-1]
    keep &= srt >= 0
    return srt, keep, np.broadcast_to(write[..., None], srt.shape)


def _join_rows(parts) -> Trace:
    """Concatenate `_warp_rows` results along the rows (per block), then flatten block by block."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return _empty_trace()
    srt = np.concatenate([p[0] for p in parts], axis=1)
    keep = np.concatenate([p[1] for p in parts], axis=1)
    write = np.concatenate([p[2] for p in parts], axis=1)
    return Trace(srt[keep] << 5, write[keep], SECTOR)


@dataclass
class GpuLaunch:
    """How the cuda backend launches a kernel (from the artifact's resources, or the documented default)."""
    template: str = "point"
    grid: tuple[int, int, int] = (1, 1, 1)
    block: int = 256
    threads_per_point: int = 1
    points_per_block: int = 1
    tile: dict = field(default_factory=dict)            # BM, BN, BK, lhs_k_contiguous, rhs_k_contiguous
    row_scratch: dict = field(default_factory=dict)     # row buffer -> shared | local | global
    source: str = "default"

    @staticmethod
    def from_resources(res: Mapping[str, Any]) -> GpuLaunch:
        t = res.get("template", "point")
        return GpuLaunch(template=t, grid=tuple(res.get("grid", (1, 1, 1))),
                         block=int(res.get("threads_per_block", 256)),
                         threads_per_point=int(res.get("threads_per_point", 1)),
                         points_per_block=int(res.get("points_per_block", 1)),
                         tile={k: res[k] for k in ("BM", "BN", "BK", "lhs_k_contiguous", "rhs_k_contiguous")
                               if k in res},
                         row_scratch=dict(res.get("row_scratch", {})), source="artifact")

    @staticmethod
    def default(kernel: Kernel, smem_limit: int = 48 * 1024) -> GpuLaunch:
        """The cuda backend's default schedule (knobs.default_schedule, codegen version 1), restated here:
        tiled GEMM for contractions with an epilogue (128 x 128 x 8 tiles when M, N >= 512, else 64 x 64 x 16);
        one thread per point for elementwise kernels, stages of at most 16 iterations, and loads contiguous
        across points; otherwise T threads per point (32..512, about 8 iterations each) and 256 / T points per
        block, row scratch in shared memory when it fits `smem_limit`."""
        P = max(kernel.points(), 1)
        roles = contract_roles(kernel)
        if roles is not None:
            c, batch, m, n = roles
            M, N, K, B = _extent(m), _extent(n), _extent(c.axes), _extent(batch)
            if M >= 512 and N >= 512:
                BM = BN = 128
                BK = 8
            else:
                BM = 64 if M >= 48 else max(16, _next_pow2(M))
                BN = 64 if N >= 48 else max(16, _next_pow2(N))
                BK = 16 if K >= 16 else max(4, _next_pow2(K))
            TM, TN = (8, 8) if BM == 128 else (4 if BM >= 64 else 2, 4 if BN >= 64 else 2)
            threads = (BM // TM) * (BN // TN)
            lk = bool(c.axes) and any(c.axes[-1].name in _free(ld.index[-1]) for ld in
                                      (x for x in c.lhs.walk() if isinstance(x, Load) and x.index))
            rk = bool(c.axes) and any(c.axes[-1].name in _free(ld.index[-1]) for ld in
                                      (x for x in c.rhs.walk() if isinstance(x, Load) and x.index))
            return GpuLaunch("tiled", (-(-N // BN), -(-M // BM), B), threads, 1, 1,
                             {"BM": BM, "BN": BN, "BK": BK, "lhs_k_contiguous": lk, "rhs_k_contiguous": rk})
        L = max([_extent(_stage_axes(s)) for s in kernel.stages] + [1])
        point = (kernel.kind == "elementwise" or L <= 16 or (_contiguous_across_points(kernel) and P >= 2048)
                 or (kernel.kind == "scan" and P >= 4096))
        if point:
            rows = {n: ("local" if int(np.prod(sh)) * itemsize(dt) <= 2048 else "global")
                    for n, (sh, dt) in kernel.row_buffers.items()}
            return GpuLaunch("point", (max(1, min(-(-P // 256), 1 << 20)), 1, 1), 256, row_scratch=rows)
        if any(isinstance(s, Sort) for s in kernel.stages):
            T = min(512, max(32, _next_pow2(L) // 2))
        else:
            T = min(512, max(32, _next_pow2(-(-L // 8))))
        R = max(1, min(256 // T, _next_pow2(P)))
        used = T * R * 8
        rows = {}
        for n, (sh, dt) in kernel.row_buffers.items():
            nbytes = R * int(np.prod(sh)) * itemsize(dt)
            rows[n] = "shared" if used + nbytes <= smem_limit else "global"
            used += nbytes if rows[n] == "shared" else 0
        return GpuLaunch("row", (max(1, min(-(-P // R), 1 << 20)), 1, 1), T * R, T, R, row_scratch=rows)


class GpuTrace(KernelTrace):
    """One stream per SM; block b runs on SM b mod SMs. A step is one stage segment of a block (one block of a
    tiled GEMM): step u of SM s is segment u mod U of block s + (u div U) * SMs."""

    granularity = "sector"

    def __init__(self, program: Program, kernel: Kernel, lay: Layout, launch: GpuLaunch, sms: int,
                 data: Mapping[str, np.ndarray] | None = None):
        self.kernel = kernel.name
        self.k = kernel
        self.launch = launch
        self.lay = lay
        self.streams = sms
        self.notes = []
        gx, gy, gz = launch.grid
        self.blocks = int(gx * gy * gz)
        self.program = program
        place = {n: launch.row_scratch.get(n, "global") for n in kernel.row_buffers}
        self.acc = _PointAccesses(program, kernel, lay, data or {}, row_place=place, sort_scratch=False)
        if launch.template == "tiled":
            if contract_roles(kernel) is None:
                raise TraceError(f"kernel {kernel.name} is launched tiled but is not a contraction with an "
                                 f"epilogue")
            self.units = 1
        else:
            self.units = max(1, self.acc.units)
        self.period = self.units
        self.steps = -(-self.blocks // sms) * self.units
        self.global_end = lay.end
        if launch.source != "artifact":
            self.notes.append("launch configuration: the cuda backend's default (no artifact)")

    def generate(self, lo: int, hi: int) -> list[Trace]:
        return self.generate_streams(lo, hi, range(self.streams))

    def estimate_accesses(self, probes: int = 3) -> float:
        """From a few blocks: the first, middle and last SM over a few steps at three places."""
        if self.steps == 0:
            return 0.0
        width = max(1, min(self.steps, self.period))
        sms = sorted({0, self.streams // 2, self.streams - 1})
        seen = blocks = 0.0
        for s0 in sorted({int(x) for x in np.linspace(0, self.steps - width, probes)}):
            ts = self.generate_streams(s0, s0 + width, sms)
            seen += sum(len(t) for t in ts)
            blocks += sum(1 for sm in sms for u in range(s0 // self.units, -(-(s0 + width) // self.units))
                          if sm + u * self.streams < self.blocks)
        return seen / max(blocks, 1.0) * self.blocks

    def generate_streams(self, lo: int, hi: int, streams: Sequence[int]) -> list[Trace]:
        out = []
        U = self.units
        for s in streams:
            runs: list[tuple[list[int], int, int]] = []    # (blocks, first segment, end segment)
            u = lo
            while u < hi:
                rnd, seg = divmod(u, U)
                b = s + rnd * self.streams
                if b >= self.blocks:
                    break
                end = min(hi - rnd * U, U)
                if runs and runs[-1][1] == seg == 0 and runs[-1][2] == end == U:
                    runs[-1][0].append(b)
                else:
                    runs.append(([b], seg, end))
                u = (rnd + 1) * U
            out.append(_concat([self._blocks(bs, a, e) for bs, a, e in runs]))
        return out

    def _blocks(self, blocks: list[int], seg_lo: int, seg_hi: int) -> Trace:
        t = self.launch.template
        if t == "tiled":
            return _concat([self._tiled(b) for b in blocks])
        parts = []
        step = max(1, _CHUNK // max(1, self.launch.block * self._per_thread()))
        for i in range(0, len(blocks), step):
            bs = np.array(blocks[i:i + step], np.int64)
            parts.append(self._row(bs, seg_lo, seg_hi) if t == "row" else self._point(bs, seg_lo, seg_hi))
        return _concat(parts)

    def _per_thread(self) -> int:
        if not hasattr(self, "_ppt"):
            P = self.acc.points
            self._ppt = max(1, self.acc.block(np.array([0]), 0, self.units).addr.shape[1]) if P else 1
            if self.launch.template == "row":
                self._ppt = max(1, -(-self._ppt // self.launch.threads_per_point) * self.launch.points_per_block)
        return self._ppt

    # point: thread g handles points g, g + G, ...
    def _point(self, bs: np.ndarray, seg_lo: int, seg_hi: int) -> Trace:
        B = self.launch.block
        G = self.blocks * B
        P = self.acc.points
        self.acc.set_scratch(self.lay.scratch(0))
        parts = []
        nb = len(bs)
        it = 0
        while True:
            pts = (bs[:, None] * B + np.arange(B, dtype=np.int64)[None, :] + it * G).reshape(-1)
            valid = pts < P
            if not valid.any():
                break
            blk = self.acc.block(np.minimum(pts, P - 1), seg_lo, seg_hi)
            if self.acc.rows:           # global scratch: one slot per thread of the grid
                blk = self._slots(blk, pts - it * G)
            A = blk.addr.shape[1]
            if A:
                m = self._valid_mask(blk, valid)
                W = -(-B // 32)
                addr, m = _pad_threads(blk.addr.reshape(nb, B, A), m.reshape(nb, B, A), W * 32)
                addr = addr.reshape(nb, W, 32, A).transpose(0, 3, 1, 2).reshape(nb, A * W, 32)
                m = m.reshape(nb, W, 32, A).transpose(0, 3, 1, 2).reshape(nb, A * W, 32)
                w = np.broadcast_to(np.repeat(blk.write, W)[None, :], (nb, A * W))
                parts.append(_warp_rows(addr, m, w))
            it += 1
        return _join_rows(parts)

    def _slots(self, blk: _Block, slots: np.ndarray) -> _Block:
        lo = self.lay.scratch(0)
        hi = lo + self.acc.row_bytes
        inside = (blk.addr >= lo) & (blk.addr < hi)
        addr = np.where(inside, blk.addr + slots[:, None] * self.acc.row_bytes, blk.addr)
        return _Block(addr, blk.mask, blk.write, blk.size)

    @staticmethod
    def _valid_mask(blk: _Block, valid: np.ndarray) -> np.ndarray:
        P, A = blk.addr.shape
        return np.broadcast_to(valid[:, None], (P, A)) if blk.mask is None else blk.mask & valid[:, None]

    # row: R points per block, T threads per point striding over each stage's iterations
    def _row(self, bs: np.ndarray, seg_lo: int, seg_hi: int) -> Trace:
        T, R = self.launch.threads_per_point, self.launch.points_per_block
        P = self.acc.points
        groups = -(-P // R)
        G = self.launch.grid[0]
        nb = len(bs)
        out = []
        it = 0
        while True:
            g = bs + it * G
            if not (g < groups).any():
                break
            pts = (g[:, None] * R + np.arange(R, dtype=np.int64)[None, :]).reshape(-1)
            valid = (pts < P) & np.repeat(g < groups, R)
            pts = np.minimum(pts, P - 1)
            env = self.acc._env(pts)
            parts = []
            self.acc.set_scratch(self.lay.scratch(0))
            for si, j0, j1 in self.acc.segments[seg_lo:seg_hi]:
                if si < 0:
                    continue
                hoisted, loop = self.acc.stage_parts(si, env, nb * R, j0, j1)
                if self.acc.rows:       # global row scratch: slot = block * R + r
                    slots = (np.repeat(bs, R) * R + np.tile(np.arange(R), nb)).astype(np.int64)
                    hoisted, loop = self._slots(hoisted, slots), self._slots(loop, slots)
                s = self.k.stages[si]
                if hoisted.addr.shape[1]:      # every thread of a point reads it once
                    parts.append(self._spread(hoisted, valid, nb, R, T, every=True))
                if not _stage_axes(s) or isinstance(s, Sort):
                    parts.append(self._spread(loop, valid, nb, R, T, every=False))
                else:
                    parts.append(self._strided(loop, valid, nb, R, T, j1 - j0))
            out.append(_join_rows(parts))
            it += 1
        return _concat(out) if len(out) > 1 else (out[0] if out else _empty_trace())

    def _spread(self, blk: _Block, valid: np.ndarray, nb: int, R: int, T: int, *, every: bool):
        """Per-point accesses issued by each of the T threads of a point (`every`), or by its first thread."""
        P, A = blk.addr.shape
        if A == 0:
            return None
        m = self._valid_mask(blk, valid)
        addr = np.repeat(blk.addr.reshape(nb, R, 1, A), T, axis=2)
        mm = np.repeat(m.reshape(nb, R, 1, A), T, axis=2)
        if not every:
            mm = mm.copy()
            mm[:, :, 1:, :] = False
        W = -(-(R * T) // 32)
        addr, mm = _pad_threads(addr.reshape(nb, R * T, A), mm.reshape(nb, R * T, A), W * 32)
        addr = addr.reshape(nb, W, 32, A).transpose(0, 3, 1, 2).reshape(nb, A * W, 32)
        mm = mm.reshape(nb, W, 32, A).transpose(0, 3, 1, 2).reshape(nb, A * W, 32)
        return _warp_rows(addr, mm, np.broadcast_to(np.repeat(blk.write, W)[None, :], (nb, A * W)))

    def _strided(self, blk: _Block, valid: np.ndarray, nb: int, R: int, T: int, n: int):
        """Loop accesses (P, n * per): thread t of a point runs iterations t, t + T, ...; warps are 32
        consecutive threads (thread r * T + t) of a block."""
        P, A = blk.addr.shape
        if A == 0:
            return None
        per = A // n
        addr = blk.addr.reshape(P, n, per)
        mask = self._valid_mask(blk, valid).reshape(P, n, per)
        steps = -(-n // T)
        padn = steps * T - n
        if padn:
            addr = np.concatenate([addr, np.zeros((P, padn, per), np.int64)], axis=1)
            mask = np.concatenate([mask, np.zeros((P, padn, per), bool)], axis=1)
        # (nb, R, steps, T, per) -> (nb, steps, per, R * T)
        addr = addr.reshape(nb, R, steps, T, per).transpose(0, 2, 4, 1, 3).reshape(nb, steps * per, R * T)
        mask = mask.reshape(nb, R, steps, T, per).transpose(0, 2, 4, 1, 3).reshape(nb, steps * per, R * T)
        W = -(-(R * T) // 32)
        if W * 32 != R * T:
            z = W * 32 - R * T
            addr = np.concatenate([addr, np.zeros((nb, steps * per, z), np.int64)], axis=2)
            mask = np.concatenate([mask, np.zeros((nb, steps * per, z), bool)], axis=2)
        addr = addr.reshape(nb, steps * per * W, 32)
        mask = mask.reshape(nb, steps * per * W, 32)
        write = np.broadcast_to(np.repeat(np.tile(blk.write.reshape(n, per)[0], steps), W)[None, :],
                                (nb, steps * per * W))
        return _warp_rows(addr, mask, write)

    # tiled GEMM: per block a BM x BN tile; A and B tiles per BK step; the epilogue stores the tile
    def _tiled(self, b: int) -> Trace:
        c, batch, m, n = contract_roles(self.k)
        tile = self.launch.tile
        BM, BN, BK = int(tile.get("BM", 64)), int(tile.get("BN", 64)), int(tile.get("BK", 16))
        gx, gy, _ = self.launch.grid
        bx, rest = b % gx, b // gx
        by, bz = rest % gy, rest // gy
        M, N, K = _extent(m), _extent(n), _extent(c.axes)
        m0, n0 = by * BM, bx * BN
        rows = np.arange(m0, m0 + BM, dtype=np.int64)
        cols = np.arange(n0, n0 + BN, dtype=np.int64)
        benv = {}
        for a, v in zip(batch, _unravel(np.array(bz), [a.extent for a in batch])):
            benv[a.name] = np.asarray(v)
        parts = []
        lk = bool(tile.get("lhs_k_contiguous", True))
        rk = bool(tile.get("rhs_k_contiguous", False))
        for k0 in range(0, K, BK):
            ks = np.arange(k0, k0 + BK, dtype=np.int64)
            parts.append(self._operand(c.lhs, benv, m, rows, M, c.axes, ks, K, k_fast=lk))
            parts.append(self._operand(c.rhs, benv, n, cols, N, c.axes, ks, K, k_fast=rk))
        parts.append(self._epilogue(benv, m, n, rows, cols, M, N))
        return _concat(parts)

    def _operand(self, e: Expr, benv, free, idx, F, kaxes, ks, K, *, k_fast: bool) -> Trace:
        """Load an operand tile: (free x k) elements, lanes along k when k is contiguous, else along free."""
        if k_fast:
            fv, kv = idx[:, None], ks[None, :]
        else:
            kv, fv = ks[:, None], idx[None, :]
        valid = (fv < F) & (kv < K)
        env = dict(benv)
        for a, v in zip(free, _unravel(np.minimum(fv, F - 1), [a.extent for a in free])):
            env[a.name] = v
        for a, v in zip(kaxes, _unravel(np.minimum(kv, K - 1), [a.extent for a in kaxes])):
            env[a.name] = v
        g = _Grid(env, self.acc.data, self.lay, self.acc.rows, self.acc.on_chip)
        cols = g.loads([e])
        if not cols:
            return _empty_trace()
        shape = np.broadcast_shapes(valid.shape, *(c.addr.shape for c in cols))
        flat = int(np.prod(shape))
        addr = np.stack([np.broadcast_to(c.addr, shape).reshape(-1) for c in cols])     # (A, elements)
        mask = np.stack([(np.broadcast_to(valid, shape) if c.mask is None else np.broadcast_to(c.mask & valid, shape))
                         .reshape(-1) for c in cols])
        W = -(-flat // 32)
        pad = W * 32 - flat
        if pad:
            addr = np.concatenate([addr, np.zeros((len(cols), pad), np.int64)], axis=1)
            mask = np.concatenate([mask, np.zeros((len(cols), pad), bool)], axis=1)
        addr = addr.reshape(len(cols), W, 32).transpose(1, 0, 2)
        mask = mask.reshape(len(cols), W, 32).transpose(1, 0, 2)
        return _sectors(addr, mask, np.zeros((W, len(cols)), bool))

    def _epilogue(self, benv, m, n, rows, cols, M, N) -> Trace:
        valid = (rows[:, None] < M) & (cols[None, :] < N)
        env = dict(benv)
        for a, v in zip(m, _unravel(np.minimum(rows, M - 1)[:, None], [a.extent for a in m])):
            env[a.name] = v
        for a, v in zip(n, _unravel(np.minimum(cols, N - 1)[None, :], [a.extent for a in n])):
            env[a.name] = v
        g = _Grid(env, self.acc.data, self.lay, {})
        colsx: list[_Column] = []
        for s in self.k.stages[1:]:
            if isinstance(s, Assign):
                colsx += g.loads([s.value])
            else:
                colsx += g.loads([*s.index, s.value])
                colsx.append(g.store(s.buf, s.index))
        if not colsx:
            return _empty_trace()
        shape = valid.shape
        addr = np.stack([np.broadcast_to(c.addr, shape).reshape(-1) for c in colsx])
        mask = np.stack([(valid if c.mask is None else np.broadcast_to(c.mask, shape) & valid).reshape(-1)
                         for c in colsx])
        flat = addr.shape[1]
        W = -(-flat // 32)
        pad = W * 32 - flat
        if pad:
            addr = np.concatenate([addr, np.zeros((len(colsx), pad), np.int64)], axis=1)
            mask = np.concatenate([mask, np.zeros((len(colsx), pad), bool)], axis=1)
        addr = addr.reshape(len(colsx), W, 32).transpose(1, 0, 2)
        mask = mask.reshape(len(colsx), W, 32).transpose(1, 0, 2)
        write = np.broadcast_to(np.array([c.write for c in colsx])[None, :], (W, len(colsx)))
        return _sectors(addr, mask, write)


# ---- building the traces of a program ---------------------------------------------------------------------

def vector_bytes(target: Target) -> int:
    """The width of one vector load on a cpu target (64 with AVX-512, 32 with AVX2, else 16)."""
    isa = set(target.cpu.isa) if target.cpu else set()
    return 64 if "avx512f" in isa else 32 if "avx2" in isa or "avx" in isa else 16


def cpu_trace(program: Program, kernel: Kernel, target: Target, *, schedule: Mapping[str, Any] | None = None,
              lay: Layout | None = None, data: Mapping[str, np.ndarray] | None = None) -> KernelTrace:
    """The trace of `kernel` as the cpu backend runs it with `schedule` (parallel, impl) on `target`."""
    lay = lay or layout(program)
    sched = dict(schedule or {})
    cores = target.cpu.cores if target.cpu else target.compute_units
    parallel = bool(sched.get("parallel", True))
    impl = sched.get("impl", "blas" if kernel.kind == "contract" else None)
    roles = contract_roles(kernel)
    if roles is not None and impl == "blas" and roles[0].dtype in ("float32", "float64"):
        plan = shift_plan(kernel) if sched.get("window") in ("shift", "winograd") else None
        if plan is not None:
            t = shift_trace(program, kernel, plan, lay, cores=cores, vec=vector_bytes(target), data=data)
            if sched["window"] == "winograd":
                t.notes.append("Winograd F(2x2, 3x3) traced as the shifted GEMMs over the same padded copy: its "
                               "transformed tiles and 16 smaller GEMMs are not traced")
            return t
        return blas_trace(program, kernel, lay, cores=cores, vec=vector_bytes(target), data=data)
    t = CpuPointTrace(program, kernel, lay, cores=cores, parallel=parallel, data=data)
    if roles is not None and impl == "loops":
        t.notes.append("integer contraction: traced in the loop-IR order (the backend's i-k-j loops differ)")
    return t


def gpu_trace(program: Program, kernel: Kernel, target: Target, *, resources: Mapping[str, Any] | None = None,
              lay: Layout | None = None, data: Mapping[str, np.ndarray] | None = None) -> KernelTrace:
    """The trace of `kernel` as the cuda backend launches it on `target` (one stream per SM)."""
    lay = lay or layout(program)
    if resources and "template" in resources:
        launch = GpuLaunch.from_resources(resources)
    else:
        limit = target.gpu.shared_mem_per_block_bytes if target.gpu else 48 * 1024
        launch = GpuLaunch.default(kernel, limit)
    return GpuTrace(program, kernel, lay, launch, target.compute_units, data)


# ---- simulating a program's traces ------------------------------------------------------------------------

def footprint_trace(program: Program, lay: Layout, line: int = 64) -> Trace:
    """One access per line of every buffer in the layout (the program's global buffers and the packing buffers
    its traces added), inputs first and written buffers last, as stores: the caches' contents in the steady
    state of repeated runs when all of it fits (see `simulate_program`)."""
    first, last = [], []
    for name, base in lay.bases.items():
        if name in program.aliases:
            continue
        nbytes = int(np.prod(lay.shapes[name], dtype=np.int64)) * lay.itemsizes[name]
        lines = np.arange(base // line, (base + max(nbytes, 1) - 1) // line + 1, dtype=np.int64) * line
        b = program.buffers.get(name)
        written = b is None or b.role in ("output", "temp")
        (last if written else first).append((lines, written))
    parts = first + last
    if not parts:
        return _empty_trace()
    addr = np.concatenate([p[0] for p in parts])
    write = np.concatenate([np.full(len(p[0]), p[1]) for p in parts])
    return Trace(addr, write, line)


_COUNTERS = ("load_hits", "load_misses", "store_hits", "store_misses", "writebacks", "write_through_bytes")


@dataclass(frozen=True)
class LevelTraffic:
    """One cache level for one kernel; counts are totals over the kernel (extrapolated when sampled)."""

    name: str
    line_bytes: int
    write_back: bool
    load_hits: float
    load_misses: float
    store_hits: float
    store_misses: float
    writebacks: float
    write_through_bytes: float
    hit_rate: float
    hit_rate_ci: float = 0.0            # half-width of the confidence interval (0 when simulated whole)

    @property
    def accesses(self) -> float:
        return self.load_hits + self.load_misses + self.store_hits + self.store_misses

    @property
    def fills(self) -> float:
        return self.load_misses + (self.store_misses if self.write_back else 0.0)

    @property
    def bytes_from_below(self) -> float:
        return self.fills * self.line_bytes

    @property
    def bytes_to_below(self) -> float:
        return self.writebacks * self.line_bytes + self.write_through_bytes


@dataclass(frozen=True)
class KernelCache:
    """Simulated cache behaviour of one kernel on one hierarchy."""

    kernel: str
    levels: tuple[LevelTraffic, ...]
    memory_name: str
    accesses: float                     # requests issued by the cores (trace entries)
    access_bytes: float                 # bytes those requests read or write
    dram_read_bytes: float
    dram_write_bytes: float
    dram_ci: float                      # half-width of the interval of dram_read + dram_write
    exact: bool                         # the whole trace was simulated
    simulated: int                      # accesses simulated (warm-ups included)
    seconds: float
    granularity: str
    method: str
    notes: tuple[str, ...] = ()

    def level(self, name: str) -> LevelTraffic:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise KeyError(f"no cache level {name!r}; levels: {', '.join(lv.name for lv in self.levels)}")

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes


def _counts(sim: CacheSimulator) -> np.ndarray:
    """Counters of every level (rows) plus dram read/write and accesses/bytes, as one array."""
    r = sim.result()
    rows = [[getattr(lv, c) for c in _COUNTERS] for lv in r.levels]
    return np.array(rows + [[r.dram_read_bytes, r.dram_write_bytes, r.accesses, 0, 0, 0]], float)


def _run(sim: CacheSimulator, traces: Sequence[Trace]) -> float:
    """Simulate traces (one per stream); returns the bytes they request."""
    ts = [t for t in traces]
    if not any(len(t) for t in ts):
        return 0.0
    sim.run(ts)
    return float(sum(t.bytes for t in ts))


def _line_filter(t: Trace, bits: int, depth: int = 8) -> Trace:
    """Drop accesses to a line (with the same write flag) touched by one of the `depth` accesses just before:
    for warm-ups, which only need to leave the lines in the caches, not count their hits."""
    if len(t) < 2:
        return t
    key = (t.addr >> bits) * 2 + t.write
    keep = np.ones(len(t), bool)
    for d in range(1, min(depth, len(t) - 1) + 1):
        keep[d:] &= key[d:] != key[:-d]
    out = Trace.__new__(Trace)
    out.addr, out.write, out.size = t.addr[keep], t.write[keep], t.size[keep]
    return out


def _tcrit(n: int, confidence: float) -> float:
    from scipy.special import stdtrit  # Student t quantile (scipy.stats takes seconds to import)
    return float(stdtrit(max(n - 1, 1), 0.5 + confidence / 2))


def _kernel_result(name: str, h: Hierarchy, counts: np.ndarray, rates: list[list[float]] | None, dram: list[float],
                   access_bytes: float, exact: bool, simulated: int, seconds: float, trace: KernelTrace,
                   method: str, confidence: float, notes: Sequence[str] = ()) -> KernelCache:
    levels = []
    for i, lv in enumerate(h.levels):
        c = counts[i]
        acc = c[0] + c[1] + c[2] + c[3]
        if rates:
            xs = np.array([r[i] for r in rates if np.isfinite(r[i])])
            rate = float(xs.mean()) if xs.size else math.nan
            ci = float(_tcrit(xs.size, confidence) * xs.std(ddof=1) / math.sqrt(xs.size)) if xs.size > 1 else math.inf
        else:
            rate = (c[0] + c[2]) / acc if acc else math.nan
            ci = 0.0
        levels.append(LevelTraffic(lv.name, lv.line_bytes, lv.write_policy == "write-back", *map(float, c), rate, ci))
    if trace.granularity == "sector" and h.levels[-1].write_policy == "write-back":
        # a GPU's L2 does not fetch a sector that a store writes whole: drop the simulator's write-allocate fetches
        counts = counts.copy()
        counts[-1][0] = max(0.0, counts[-1][0] - counts[len(h.levels) - 1][3] * h.levels[-1].line_bytes)
        notes = [*notes, "no DRAM fetch for sectors written whole (L2 store misses)"]
    dci = 0.0
    if len(dram) > 1:
        xs = np.array(dram)
        dci = float(_tcrit(xs.size, confidence) * xs.std(ddof=1) / math.sqrt(xs.size))
    return KernelCache(name, tuple(levels), h.memory_name, float(counts[-1][2]), access_bytes, float(counts[-1][0]),
                       float(counts[-1][1]), dci, exact, simulated, seconds, trace.granularity, method,
                       tuple(dict.fromkeys([*trace.notes, *notes])))


def _scaled(h: Hierarchy, factor: float) -> Hierarchy:
    """Shared levels shrunk to `factor` of their sets (a subset of the cores keeps its share)."""
    from .cachesim import CacheLevel
    levels = []
    for lv in h.levels:
        if not lv.shared:
            levels.append(lv)
            continue
        sets = max(1, round(lv.sets * factor))
        levels.append(CacheLevel(lv.name, sets * lv.ways * lv.line_bytes, lv.line_bytes, lv.ways, True,
                                 lv.write_policy))
    return Hierarchy(levels, h.memory_name)


class _Subset(KernelTrace):
    """Some streams of a trace."""

    def __init__(self, t: KernelTrace, streams: Sequence[int]):
        self.t, self.sel = t, list(streams)
        self.kernel, self.steps, self.streams = t.kernel, t.steps, len(self.sel)
        self.granularity, self.notes = t.granularity, t.notes
        self.period = getattr(t, "period", 1)
        self.global_end = getattr(t, "global_end", None)

    def generate(self, lo: int, hi: int) -> list[Trace]:
        if hasattr(self.t, "generate_streams"):
            return self.t.generate_streams(lo, hi, self.sel)
        ts = self.t.generate(lo, hi)
        return [ts[i] for i in self.sel]


class _Density:
    """Cumulative accesses over steps, linear within each segment of `KernelTrace.segments`."""

    def __init__(self, segments: Sequence[tuple[int, float]]):
        self.steps = np.concatenate([[0], np.cumsum([max(n, 0) for n, _ in segments])]).astype(float)
        self.acc = np.concatenate([[0.0], np.cumsum([max(a, 1e-9 * n) for n, a in segments])])
        self.total = float(self.acc[-1])

    def step_at(self, a: float) -> int:
        return int(np.interp(a, self.acc, self.steps))

    def acc_at(self, step: int) -> float:
        return float(np.interp(step, self.steps, self.acc))


def _windows(t: KernelTrace, h: Hierarchy, est: float, budget: int, samples: int, rng: np.random.Generator,
             confidence: float, cores: int, method: str, extra_notes: Sequence[str] = (), prewarm: Trace | None = None,
             flush: bool = False):
    """Access sampling: `samples` strata holding equal shares of the accesses; in each, a window of steps starting
    at a random access and holding about `budget / 3 / samples` of them, after a (line-filtered, capped) warm-up,
    itself after `prewarm` (the program's footprint) when given. Each window's counts are scaled by its stratum's
    accesses over its own, so a trace whose steps differ in density (a GEMM then its epilogue) is weighed by
    where its accesses are, not by where its steps are; a trace of even density is sampled as by its steps."""
    dens = _Density(t.segments() if isinstance(t, SequenceTrace) else [(t.steps, est)])
    est = dens.total
    period = max(1, int(getattr(t, "period", 1)))      # steps of one point / block: windows cover whole ones
    want = budget / 3 / samples                        # accesses per window
    stratum = est / samples
    biggest = max(((lv.size_bytes * (1 if lv.shared else cores)) // lv.line_bytes, lv.line_bytes)
                  for lv in h.levels)
    need_lines, bits = biggest[0], int(h.levels[-1].line_bytes).bit_length() - 1
    warm_cap = int(2 * budget / 3 / samples)         # accesses generated for one warm-up (before filtering)
    rates, drams, counts, nbytes = [], [], [], 0.0
    simulated = 0
    capped = False
    wins = []
    for i in range(samples):
        a0 = i * stratum + rng.uniform(0, max(stratum - want, 0.0))
        lo = dens.step_at(a0) // period * period
        hi = max(lo + period, -(-dens.step_at(dens.acc_at(lo) + min(want, stratum)) // period) * period)
        lo, hi = max(0, min(lo, t.steps - period)), min(hi, t.steps)
        wins.append(hi - lo)
        sim = CacheSimulator(h, cores=cores)
        if prewarm is not None:
            _run(sim, [prewarm])
            simulated += len(prewarm)
        # warm-up: extend backwards (doubling) until it touches as many lines as the largest cache holds, reaches
        # the start of the trace, or the cap
        chunks: list[list[Trace]] = []
        seen = np.zeros(0, np.int64)
        n = lines = 0
        a, warm = lo, hi - lo
        while a > 0:
            b, a = a, max(0, lo - warm)
            raw = t.generate(a, b)
            n += sum(len(x) for x in raw)
            part = [_line_filter(x, bits) for x in raw]
            chunks.insert(0, part)
            seen = np.union1d(seen, np.concatenate([x.addr >> bits for x in part]))
            lines = len(seen)
            if lines >= need_lines or n >= warm_cap:
                break
            warm *= 2
        capped |= lines < need_lines and a > 0
        for part in chunks:
            simulated += int(sum(len(x) for x in part))
            _run(sim, part)
        sim.reset_stats()
        body = t.generate(lo, hi)
        nb = _run(sim, body)
        c = _counts(sim)
        if flush or (lines < need_lines and a > 0 and prewarm is None):
            # flushed after the kernel, or the largest cache not full yet (so it writes back less than in the
            # steady state): every line of a global buffer the window stores to is one line written to memory
            end = getattr(t, "global_end", None)
            if end is not None:
                st = np.concatenate([x.addr[(x.write != 0) & (x.addr < end)] >> bits for x in body])
                c[-1][1] = max(c[-1][1], float(len(np.unique(st))) * (1 << bits))
        simulated += int(c[-1][2])
        # the window stands for its stratum: scaled by the accesses its steps hold by the estimate (for an even
        # trace, steps / window steps / samples), so an estimate that is off in level does not bias the counts
        scale = stratum / max(dens.acc_at(hi) - dens.acc_at(lo), 1e-9)
        counts.append(c * scale)
        nbytes += nb * scale
        rates.append([r.hit_rate for r in sim.result().levels])
        drams.append((c[-1][0] + c[-1][1]) * scale * samples)
    mean = np.sum(counts, axis=0)
    notes = [f"sampled: {samples} windows of {min(wins)}-{max(wins)} of {t.steps} steps, each standing for "
             f"1/{samples} of the accesses, {confidence:.0%} intervals", *extra_notes]
    if prewarm is not None:
        notes.append("windows start from the program's data in the caches (it fits the last level)")
    elif capped:
        notes.append("warm-ups capped before filling the largest cache: reuse at longer distances is missed; "
                     "memory writes counted as the lines of global buffers stored to")
    return mean, rates, drams, nbytes, simulated, notes


def simulate_program(traces: Sequence[KernelTrace], hierarchy: Hierarchy, *, cores: int | None = None,
                     budget: int = 2_000_000, samples: int = 8, seed: int = 0, warm: bool = True,
                     flush: bool = False, footprint: Trace | None = None,
                     confidence: float = 0.95) -> list[KernelCache]:
    """Hit rates and traffic of each kernel of a program.

    When the whole program fits `budget` simulated accesses it is simulated whole; with `warm=True` it runs
    twice and the second run is counted (what repeated timing runs see: data that fits stays cached); with
    `warm=False, flush=True` each kernel starts from empty caches and its dirty lines are written back at its
    end (how GPU profilers replay kernels: caches flushed in between). Otherwise
    each kernel is simulated whole when it fits its share of the budget, else sampled: `samples` windows of
    steps at random offsets in equal strata, each after a warm-up on the accesses before it (line-filtered,
    doubled until it touches as many lines as the largest cache holds, within a cap); counts are extrapolated
    per step and hit rates averaged over the windows, with a Student-t interval. Traces with many streams
    (GPU SMs) are sampled by groups of consecutive SMs on a hierarchy whose shared levels are shrunk to the
    group's share (data shared with other SMs is then under-represented). With `warm=True` and a `footprint`
    (`footprint_trace`) that fits the last-level cache, each sampled window starts from that footprint loaded,
    the steady state of repeated runs whose data stays cached.
    """
    import time as _time
    cores = cores or max([t.streams for t in traces] + [1])
    rng = np.random.default_rng(seed)
    ests = [t.estimate_accesses() for t in traces]
    total = sum(ests)
    out: list[KernelCache] = []
    warm = warm and not flush
    if total * (2 if warm else 1) <= budget:
        t0 = _time.perf_counter()
        sim = CacheSimulator(hierarchy, cores=cores)
        gen = [t.all() for t in traces]
        if warm:
            for g in gen:
                _run(sim, g)
            sim.reset_stats()
        before = _counts(sim)
        simulated = int(total) if warm else 0
        for t, g in zip(traces, gen):
            if flush:
                sim = CacheSimulator(hierarchy, cores=cores)
                before = _counts(sim)
            nb = _run(sim, g)
            if flush:
                sim.flush()
            after = _counts(sim)
            c = after - before
            before = after
            simulated += int(c[-1][2])
            how = "whole" + (" (second of two runs)" if warm and not flush else ", flushed" if flush else "")
            out.append(_kernel_result(t.kernel, hierarchy, c, None, [], nb, True, simulated,
                                      _time.perf_counter() - t0, t, how, confidence))
        return out
    share = max(budget // max(len(traces), 1), 1)
    for t, est in zip(traces, ests):
        t0 = _time.perf_counter()
        if est <= share:
            sim = CacheSimulator(hierarchy, cores=cores)
            g = t.all()
            if warm and not flush and 2 * est <= share:
                _run(sim, g)
                sim.reset_stats()
            nb = _run(sim, g)
            if flush:
                sim.flush()
            c = _counts(sim)
            out.append(_kernel_result(t.kernel, hierarchy, c, None, [], nb, True, int(c[-1][2]),
                                      _time.perf_counter() - t0, t, "whole" + (", flushed" if flush else ""),
                                      confidence))
            continue
        if t.streams > 8 and t.streams >= 4 * samples:
            out.append(_sm_groups(t, hierarchy, est, share, samples, rng, confidence, t0))
            continue
        pre = footprint if warm and footprint is not None and len(footprint) and \
            footprint.bytes <= hierarchy.levels[-1].size_bytes * 0.9 else None
        mean, rates, drams, nb, simulated, notes = _windows(t, hierarchy, est, share, samples, rng, confidence,
                                                            cores, "windows", prewarm=pre, flush=flush)
        out.append(_kernel_result(t.kernel, hierarchy, mean, rates, drams, nb, False, simulated,
                                  _time.perf_counter() - t0, t, "windows", confidence, notes))
    return out


def _sm_groups(t: KernelTrace, h: Hierarchy, est: float, budget: int, samples: int, rng: np.random.Generator,
               confidence: float, t_start: float) -> KernelCache:
    import time as _time
    k = max(1, t.streams // (4 * samples))
    hs = _scaled(h, k / t.streams)
    per_group = est * k / t.streams
    rates, drams, counts = [], [], []
    nbytes = 0.0
    simulated = 0
    notes = [f"sampled: {samples} groups of {k} of {t.streams} SMs, shared caches scaled to {k}/{t.streams}"]
    for _ in range(samples):
        s0 = int(rng.integers(0, t.streams - k + 1))
        sub = _Subset(t, range(s0, s0 + k))
        if per_group <= budget / samples:
            sim = CacheSimulator(hs, cores=k)
            nb = _run(sim, sub.all())
            c = _counts(sim)
            sim.flush()          # dirty lines left at the end are written back before the data is used again
            c[-1][1] = _counts(sim)[-1][1]
            simulated += int(c[-1][2])
            rates.append([r.hit_rate for r in sim.result().levels])
        else:
            c, rr, _, nb, sim_n, wn = _windows(sub, hs, per_group, budget // samples, 2, rng, confidence, k,
                                               "windows", flush=True)
            simulated += sim_n
            rates.append([float(np.nanmean([r[i] for r in rr])) for i in range(len(h.levels))])
            c = np.asarray(c)
            notes += [n for n in wn if n not in notes and n.startswith("warm")]
        scale = t.streams / k
        counts.append(c * scale)
        nbytes += nb * scale
        drams.append((c[-1][0] + c[-1][1]) * scale)
    mean = np.mean(counts, axis=0)
    return _kernel_result(t.kernel, h, mean, rates, drams, nbytes / samples, False, simulated,
                          _time.perf_counter() - t_start, t, "sm-groups", confidence, notes)

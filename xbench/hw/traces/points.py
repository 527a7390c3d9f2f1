"""Layout, index grids and per-point accesses: the traces of kernels the cpu backend runs as loops, and the
base every other trace builds on (see the package's documentation)."""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import itemsize
from ...ir.expr import Call, Cast, Const, Expr, Idx, Load, Local, Select
from ...ir.kernel import Assign, Axis, Contract, Kernel, Program, Reduce, Scan, ScatterAdd, Sort, Store
from ...ir.scalar import lookup
from ..cachesim import Trace

ALIGN = 4096
SEGMENT = 8192            # stage iterations per unit of a cpu trace
_CHUNK = 1 << 21          # addresses materialised at once


class TraceError(ValueError):
    """A kernel whose access pattern cannot be traced (the message says why)."""

    def __init__(self, message: str):
        super().__init__(f"xbench: {message}")


class _Unknown(Exception):
    pass



def _free(e: Expr) -> set[str]:
    return {n.name for n in e.walk() if isinstance(n, Idx)}


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

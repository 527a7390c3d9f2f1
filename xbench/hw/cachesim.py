"""A set-associative LRU cache-hierarchy simulator for address traces, compiled with numba.

Model
-----
- Each level is set-associative with true LRU replacement; the set of a line is `line_number % sets`.
- Levels are chained: a miss at level k fetches the whole line from level k+1 (or memory), then installs it
  at level k, evicting the least recently used line of the set. The hierarchy is non-inclusive and
  non-exclusive (NINE): a line evicted from level k+1 stays wherever else it is cached.
- Write policies, per level:
  * "write-back" (with write-allocate): a store miss fetches the line, then marks it dirty; evicting a dirty
    line writes it back to the next level as a store of the whole line (which may itself miss and allocate
    there); clean evictions vanish.
  * "write-through" (no write-allocate): a store updates the line if present (it never becomes dirty) and
    is always forwarded to the next level as a store of the bytes written; a store miss does not allocate.
    NVIDIA's L1 is modelled this way.
- Loads and stores update the LRU order on hits. `lru_on_store_hit=False` leaves the order alone on store
  hits, as pycachesim does; the tests use that mode to compare counts with pycachesim exactly.
- Private levels have one copy per core (SM); shared levels one copy. Several address streams (one per core)
  are interleaved round-robin, `chunk` accesses at a time. Private copies are not kept coherent: a line
  written by one core is not invalidated in another core's private cache.
- An access of `size` bytes that crosses line boundaries touches every line it covers.
- Counted per level (and per core for private levels): load and store hits and misses, evictions, dirty
  write-backs, write-throughs. Memory traffic: lines fetched by the last level, lines written back from it
  and bytes written through it. `flush()` writes every dirty line down (as at the end of a kernel).

Traces
------
A `Trace` is three arrays of equal length: byte addresses (int64), sizes in bytes (int32) and write flags.
Give one Trace per core/SM (a list) to simulate private caches under a shared level.

    >>> h = Hierarchy([CacheLevel("l1", 32 * 1024, 64, 8), CacheLevel("l2", 512 * 1024, 64, 8, shared=True)])
    >>> r = simulate(h, Trace(np.arange(0, 1 << 20, 4), write=False, size=4))
    >>> r.level("l1").hit_rate   # 15 of every 16 float32 loads hit a 64-byte line
    0.9375
"""
from __future__ import annotations

import math
import platform
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .target import Target, get_target

# statistics columns, per cache copy
LOAD_HIT, LOAD_MISS, STORE_HIT, STORE_MISS, EVICT, WRITEBACK, WT_COUNT, WT_BYTES = range(8)
N_STATS = 8
_U0, _U1, _U2, _U3, _U8 = (np.uint64(k) for k in (0, 1, 2, 3, 8))    # unsigned indices
_BITS, _WAYS, _SETS, _MASK, _OFF, _ROW, _WB, _BIG = (np.uint64(k) for k in range(8))    # `_run`'s level table
_MEMO_MASK = 15          # lines remembered at the entry level, less one (a power of two)
_AHEAD = 16              # accesses ahead whose sets are prefetched
_BIG_WAYS = 1 << 14      # ways of a level (all copies; 16 bytes each) from which its sets are prefetched
WRITE_POLICIES = ("write-back", "write-through")


class CacheSimError(ValueError):
    def __init__(self, message: str):
        super().__init__(f"xbench: {message}")


# --- configuration -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CacheLevel:
    """One cache level: `size_bytes` must be sets × ways × line_bytes for a whole number of sets."""

    name: str
    size_bytes: int
    line_bytes: int
    ways: int
    shared: bool = False
    write_policy: str = "write-back"

    def __post_init__(self) -> None:
        if self.line_bytes <= 0 or self.line_bytes & (self.line_bytes - 1):
            raise CacheSimError(f"cache {self.name}: line_bytes = {self.line_bytes}; write a power of two")
        if self.ways <= 0:
            raise CacheSimError(f"cache {self.name}: ways = {self.ways}; write a positive number")
        way_bytes = self.line_bytes * self.ways
        if self.size_bytes <= 0 or self.size_bytes % way_bytes:
            lower = max(way_bytes, self.size_bytes // way_bytes * way_bytes)
            raise CacheSimError(f"cache {self.name}: {self.size_bytes} bytes is not a whole number of sets of "
                                f"{self.ways} × {self.line_bytes} bytes; write e.g. {lower}")
        if self.write_policy not in WRITE_POLICIES:
            raise CacheSimError(f"cache {self.name}: write_policy = {self.write_policy!r}; write one of "
                                f"{WRITE_POLICIES}")

    @property
    def sets(self) -> int:
        return self.size_bytes // (self.line_bytes * self.ways)


@dataclass(frozen=True)
class Hierarchy:
    """Cache levels from closest to farthest; memory lies beyond the last."""

    levels: tuple[CacheLevel, ...]
    memory_name: str = "dram"

    def __init__(self, levels: Sequence[CacheLevel], memory_name: str = "dram"):
        object.__setattr__(self, "levels", tuple(levels))
        object.__setattr__(self, "memory_name", memory_name)
        if not self.levels:
            raise CacheSimError("a hierarchy needs at least one cache level")
        names = [lv.name for lv in self.levels]
        if len(set(names)) != len(names):
            raise CacheSimError(f"cache level names repeat: {names}")
        for a, b in zip(self.levels, self.levels[1:]):
            if b.line_bytes < a.line_bytes:
                raise CacheSimError(f"line size shrinks from {a.name} ({a.line_bytes} B) to {b.name} "
                                    f"({b.line_bytes} B); lines may only grow towards memory")
            if a.shared and not b.shared:
                raise CacheSimError(f"{b.name} is private but lies below the shared {a.name}; a level below a "
                                    f"shared level must be shared too")

    def shared_share(self, factor: float) -> Hierarchy:
        """The hierarchy with its shared levels shrunk to `factor` of their sets (what a subset of the cores
        keeps of them when only its streams are simulated)."""
        levels = []
        for lv in self.levels:
            if not lv.shared:
                levels.append(lv)
                continue
            sets = max(1, round(lv.sets * factor))
            levels.append(CacheLevel(lv.name, sets * lv.ways * lv.line_bytes, lv.line_bytes, lv.ways, True,
                                     lv.write_policy))
        return Hierarchy(levels, self.memory_name)

    @classmethod
    def from_target(cls, target: Target | str, *, granularity: str = "line", l1_bytes: int | None = None,
                    shared_mem_carveout: int = 0) -> Hierarchy:
        """The hardware caches of a target (GPU: per-SM L1 -> shared L2; CPU: L1 -> L2 -> L3).

        granularity: "line" simulates whole lines; "sector" uses the 32-byte sectors of NVIDIA caches as
        the unit (what Nsight Compute's sector hit rates count). On a GPU the L1 gets the combined
        L1/shared capacity minus `shared_mem_carveout` bytes (e.g. `Occupancy.shared_mem_config_bytes`),
        unless `l1_bytes` is given. A size that is not a whole number of sets is rounded down to one.
        """
        t = get_target(target) if isinstance(target, str) else target
        if granularity not in ("line", "sector"):
            raise CacheSimError(f"granularity = {granularity!r}; write 'line' or 'sector'")
        levels = []
        for m in t.caches:
            assert m.size_bytes is not None and m.line_bytes is not None
            line = m.sector_bytes if granularity == "sector" and m.sector_bytes else m.line_bytes
            size = m.size_bytes
            if t.kind == "gpu" and m.name == "l1":
                size = l1_bytes if l1_bytes is not None else size - shared_mem_carveout
            ways = m.associativity or 16
            way_bytes = line * ways
            if size < way_bytes:
                raise CacheSimError(f"{t.name} {m.name}: {size} bytes left for the cache is less than one set")
            levels.append(CacheLevel(m.name, size // way_bytes * way_bytes, line, ways,
                                     shared=m.scope in ("shared", "device"),
                                     write_policy=m.write_policy or "write-back"))
        if not levels:
            raise CacheSimError(f"{t.name} has no hardware-managed cache levels to simulate")
        return cls(levels, memory_name=t.memory.name)


# --- traces --------------------------------------------------------------------------------------------

class Trace:
    """Byte addresses (int64), access sizes in bytes (int32) and write flags (uint8), one entry per access."""

    __slots__ = ("addr", "size", "write")

    def __init__(self, addr: Any, write: Any = False, size: Any = 4):
        a = np.ascontiguousarray(addr, dtype=np.int64).reshape(-1)
        n = a.shape[0]
        w = np.asarray(write)
        w = np.full(n, bool(w), np.uint8) if w.ndim == 0 else np.ascontiguousarray(w, dtype=np.uint8).reshape(-1)
        s = np.asarray(size)
        s = np.full(n, int(s), np.int32) if s.ndim == 0 else np.ascontiguousarray(s, dtype=np.int32).reshape(-1)
        if w.shape[0] != n or s.shape[0] != n:
            raise CacheSimError(f"trace arrays differ in length: {n} addresses, {w.shape[0]} write flags, "
                                f"{s.shape[0]} sizes")
        if n and (a.min() < 0 or s.min() <= 0):
            raise CacheSimError("trace addresses must be >= 0 and sizes >= 1 byte")
        self.addr, self.write, self.size = a, w, s

    def __len__(self) -> int:
        return int(self.addr.shape[0])

    def __getitem__(self, key: slice) -> Trace:
        t = Trace.__new__(Trace)
        t.addr, t.write, t.size = self.addr[key], self.write[key], self.size[key]
        return t

    @property
    def bytes(self) -> int:
        return int(self.size.sum(dtype=np.int64))

    @staticmethod
    def concat(traces: Sequence[Trace]) -> Trace:
        """One trace after the other."""
        t = Trace.__new__(Trace)
        t.addr = np.concatenate([x.addr for x in traces])
        t.write = np.concatenate([x.write for x in traces])
        t.size = np.concatenate([x.size for x in traces])
        return t

    def _take(self, order: np.ndarray) -> Trace:
        t = Trace.__new__(Trace)
        t.addr, t.write, t.size = self.addr[order], self.write[order], self.size[order]
        return t

    @staticmethod
    def interleave(traces: Sequence[Trace], chunk: int = 1) -> Trace:
        """Merge streams that share one core into one, round-robin `chunk` accesses at a time (e.g. the warps
        resident on an SM, each a stream of warp-level requests)."""
        if chunk < 1:
            raise CacheSimError(f"chunk = {chunk}; write at least 1")
        whole = Trace.concat(traces)
        pos = np.concatenate([np.arange(len(t), dtype=np.int64) for t in traces])
        src = np.concatenate([np.full(len(t), i, np.int64) for i, t in enumerate(traces)])
        return whole._take(np.lexsort((pos % chunk, src, pos // chunk)))

    def coalesce(self, group: int = 32, unit: int = 32) -> Trace:
        """GPU memory coalescing: each run of `group` consecutive accesses (the 32 threads of a warp executing
        one instruction, in lane order) becomes one access per distinct `unit`-byte aligned segment it touches
        (32-byte sectors by default), in order of first touch; a segment is a write if any thread wrote it."""
        if group < 1 or unit < 1 or unit & (unit - 1):
            raise CacheSimError(f"group = {group}, unit = {unit}; write a positive group and a power-of-two unit")
        if not len(self):
            return self
        first = self.addr // unit
        last = (self.addr + self.size - 1) // unit
        span = (last - first + 1).astype(np.int64)
        rep = np.repeat(np.arange(len(self), dtype=np.int64), span)
        seg = np.repeat(first, span) + (np.arange(rep.size) - np.repeat(np.cumsum(span) - span, span))
        warp = rep // group
        key = np.stack([warp, seg], axis=1)
        uniq, first_at, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
        written = np.zeros(len(uniq), bool)
        np.logical_or.at(written, inverse.reshape(-1), self.write[rep].astype(bool))
        order = np.argsort(first_at, kind="stable")
        return Trace(uniq[order, 1] * unit, written[order], unit)

    def __repr__(self) -> str:
        return f"Trace({len(self)} accesses, {int(self.write.sum())} writes)"


def _as_streams(streams: Trace | Sequence[Trace]) -> list[Trace]:
    if isinstance(streams, Trace):
        return [streams]
    out = list(streams)
    if not out or not all(isinstance(s, Trace) for s in out):
        raise CacheSimError("give a Trace or a list of Traces (one per core / SM)")
    return out


# --- the compiled engine ---------------------------------------------------------------------------------

@intrinsic
def _prefetch(typingctx, arr, idx):
    """Ask the host CPU to bring the cache line of arr[idx] close, for writing (no effect on results)."""
    def codegen(context, builder, sig, args):
        ary = context.make_array(sig.args[0])(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]], wraparound=False)
        i32 = ir.IntType(32)
        ptr = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]),
                                            "llvm.prefetch.p0i8")
        builder.call(fn, [ptr, i32(1), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.void(arr, idx), codegen


@njit(inline="always")
def _first_way(P, r, line):
    """Index in `state` of the first way of `line`'s set, at the level whose row in `_run`'s table starts at r."""
    m = P[r + _MASK]
    st = (line & m) if m >= 0 else np.int64(np.uint64(line) % np.uint64(P[r + _SETS]))
    return np.uint64(P[r + _OFF] + 2 * st * P[r + _WAYS])


@njit(inline="always")
def _search(state, j, ways, line):
    """One pass over the set whose first way is at state[j]: where `line` is (0: absent), and the way to
    replace (the first empty one, else the least recently used) with its stamp."""
    hit = _U0
    v = j + _U1
    oldest = state[v]
    for _ in range(ways):
        if state[j] == line:
            hit = j + _U1
        stamp = state[j + _U1]
        if stamp < oldest:
            v = j + _U1
            oldest = stamp
        j += _U2
    return hit, v, oldest


@njit(inline="always")
def _touch(state, hit, now, store, lru_store):
    """A hit at state[hit] (a stamp): a load makes it the most recently used; a store also marks it dirty,
    and moves it in the LRU order only with `lru_store`. Returns the clock."""
    if not store:
        now += 1
        state[hit] = 2 * now + (state[hit] & 1)
    elif lru_store:
        now += 1
        state[hit] = 2 * now + 1
    else:
        state[hit] |= 1
    return now


@njit(inline="always")
def _prefetch_set(state, j, ways):
    """Prefetch the host cache lines of the set starting at state[j] (`state` starts on a line boundary)."""
    k = j & ~np.uint64(7)
    while k < j + np.uint64(2 * ways):
        _prefetch(state, k)
        k += np.uint64(8)


@contextmanager
def _conditional_moves_kept():
    """Compile with LLVM's x86 pass that turns conditional moves in loops into branches switched off: the
    search for the least recently used way would branch on every new minimum, which random traces mispredict
    (about twice as slow on them)."""
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    if x86:
        llvm.set_option("", "-x86-cmov-converter=false")
    try:
        yield
    finally:
        if x86:
            llvm.set_option("", "-x86-cmov-converter=true")


@njit(cache=True, nogil=True)
def _run(level0, lv_sets, lv_ways, lv_bits, lv_mask, lv_wb, lv_private, lv_base, copy_off, state, stats, mem, clock,
         addr, size, write, starts, ends, cores, chunk, lru_store):
    """Simulate requests entering at level `level0` (0 for a trace; deeper for write-backs of a flush).

    `state` holds two int64 per way, side by side so a set's ways share host cache lines: the line number
    (-1 when empty) and 2 × last-use time + dirty bit (0 when empty). Hits at the entry level take a short
    path. A miss descends level by level until a hit (or memory), installing the line at each level that
    allocates as it passes: only the order of last uses within a set matters, and nothing below a level
    touches that level's sets. A dirty victim's write-back (a store of the whole line to the level below)
    waits until the descent is over; write-backs pending at several levels run deepest first, each
    descending in turn. The engine is one function (with inlined helpers): calls between numba functions
    with many array arguments cost more than the simulation itself.

    Indices into `state` and levels are unsigned (numba checks signed ones for negative values); those into
    `state` point at a way's second word, so 0 means none. Each level remembers where the stream last found
    or put a line (the entry level, for 16 lines by line number) and checks that way before searching the
    set. Levels whose state (all copies) outgrows the host's caches have their sets prefetched: the deepest
    for the access `_AHEAD` places ahead while the entry level misses often, any for a dirty victim.
    """
    n_levels = lv_sets.shape[0]
    n_streams = starts.shape[0]
    pos = starts.copy()
    nl = np.uint64(n_levels)
    l0 = np.uint64(level0)
    # per level, a row of 8 (one more stands for memory): line bits, ways, sets, set mask (-1: sets is not a
    # power of two), for the core being simulated its copy's first index in `state` and its row of `stats`,
    # write-back?, prefetched?
    P = np.zeros((n_levels + 1) * 8, np.int64)
    for lv in range(n_levels):
        copies = (lv_base[lv + 1] if lv + 1 < n_levels else stats.shape[0]) - lv_base[lv]
        P[8 * lv:8 * lv + 4] = (lv_bits[lv], lv_ways[lv], lv_sets[lv], lv_mask[lv])
        P[8 * lv + 6] = lv_wb[lv]
        P[8 * lv + 7] = copies * lv_sets[lv] * lv_ways[lv] >= _BIG_WAYS
    pf = -1                                  # the deepest prefetched level (its row), for the accesses ahead
    for lv in range(level0, n_levels):
        if P[8 * lv + 7]:
            pf = 8 * lv
    pfr = np.uint64(max(pf, 0))
    wbq = np.full(n_levels, -1, np.int64)    # per level, the address of a dirty victim to write back (-1: none)
    lmemo = np.zeros(n_levels, np.uint64)    # per level below the entry, where the stream last found or put a line
    memo = np.zeros(_MEMO_MASK + 1, np.uint64)   # at the entry level, the same for recent lines, by line number
    b0 = lv_bits[level0]
    lsize0 = np.int64(1) << b0
    ways0 = lv_ways[level0]
    sets0 = lv_sets[level0]
    m0 = lv_mask[level0]
    wb0 = lv_wb[level0]
    now = clock[0]
    ahead = False                            # prefetch for the accesses ahead
    remaining = True
    while remaining:
        remaining = False
        for s_ in range(n_streams):
            p = pos[s_]
            e_ = ends[s_]
            if p >= e_:
                continue
            q = min(p + chunk, e_)
            core = cores[s_]
            for lv in range(n_levels):
                cp = lv_base[lv] + (core if lv_private[lv] else 0)
                P[8 * lv + 4] = 2 * copy_off[cp]
                P[8 * lv + 5] = cp
                lmemo[lv] = 2 * copy_off[cp] + 1    # a way of this copy: trusted only if it holds the line
            cp0 = P[8 * level0 + 5]
            off0 = np.uint64(P[8 * level0 + 4])
            memo[:] = off0 + _U1          # a way of this copy: trusted only if it holds the line
            load_hits = 0
            store_hits = 0
            for i in range(p - _AHEAD if ahead else p, q):
                if ahead:
                    k = i + _AHEAD
                    if k < q:
                        b = P[pfr + _BITS]
                        line = addr[k] >> b
                        if k >= 2 and line != addr[k - 1] >> b and line != addr[k - 2] >> b:  # (not just fetched)
                            _prefetch_set(state, _first_way(P, pfr, line), P[pfr + _WAYS])
                    if i < p:
                        continue
                a0 = addr[i]
                end = a0 + size[i]
                w = write[i]
                for line0 in range(a0 >> b0, ((end - 1) >> b0) + 1):
                    slot = np.uint64(line0 & _MEMO_MASK)
                    hit = memo[slot]
                    if state[hit - _U1] != line0:
                        st = (line0 & m0) if m0 >= 0 else np.int64(np.uint64(line0) % np.uint64(sets0))
                        hit, v, oldest = _search(state, off0 + np.uint64(2 * st * ways0), ways0, line0)
                        if hit or w == 0 or wb0:     # (a store does not allocate at a write-through level)
                            memo[slot] = hit if hit else v
                    if hit and (w == 0 or wb0):
                        if w == 0:
                            load_hits += 1
                        else:
                            store_hits += 1
                        now = _touch(state, hit, now, w != 0, lru_store)
                        continue
                    # a miss, or a store hit at a write-through entry level
                    la = line0 << b0
                    a = max(a0, la)
                    ln = min(end, la + lsize0) - a
                    op = 1 if w else 0
                    lv = l0
                    pending = 0                   # write-backs waiting in `wbq`
                    while True:
                        # descend until a hit, or memory
                        while lv < nl:
                            r = lv << _U3
                            bits = P[r + _BITS]
                            line = a >> bits
                            if lv != l0 and state[lmemo[lv] - _U1] == line:
                                hit = lmemo[lv]
                            elif lv != l0:        # (the entry level was searched above)
                                hit, v, oldest = _search(state, _first_way(P, r, line), P[r + _WAYS], line)
                            cp = np.uint64(P[r + _ROW])
                            if op == 0 or P[r + _WB]:
                                if hit:
                                    lmemo[lv] = hit
                                    stats[cp, 0 if op == 0 else 2] += 1
                                    now = _touch(state, hit, now, op != 0, lru_store)
                                    break
                                lmemo[lv] = v
                                if op == 0:
                                    stats[cp, 1] += 1
                                else:
                                    stats[cp, 3] += 1
                                if oldest != 0:            # (the victim's stamp, from the search)
                                    stats[cp, 4] += 1
                                    if oldest & 1:
                                        stats[cp, 5] += 1
                                        if lv + _U1 < nl:
                                            wbq[lv] = state[v - _U1] << bits
                                            pending += 1
                                            if P[r + _U8 + _BIG]:
                                                j = _first_way(P, r + _U8, wbq[lv] >> P[r + _U8 + _BITS])
                                                _prefetch_set(state, j, P[r + _U8 + _WAYS])
                                        else:
                                            mem[1] += np.int64(1) << bits
                                state[v - _U1] = line
                                now += 1
                                state[v] = 2 * now + op    # a store miss installs the line dirty
                                op = 0                     # and the line is fetched from below
                                a = line << bits
                                ln = np.int64(1) << bits
                            else:
                                # a store at a write-through level: update if present (never dirty), forward
                                if hit:
                                    lmemo[lv] = hit
                                    stats[cp, 2] += 1
                                    if lru_store:
                                        now += 1
                                        state[hit] = 2 * now
                                else:
                                    stats[cp, 3] += 1
                                stats[cp, 6] += 1
                                stats[cp, 7] += ln
                            lv += _U1
                        if lv == nl:                   # a line fetched, or bytes written
                            if op == 0:
                                mem[0] += ln
                            else:
                                mem[1] += ln
                        if pending == 0:
                            break
                        # write back the deepest dirty victim: a store of the whole line to the level below
                        lv = nl - _U2
                        while wbq[lv] < 0:
                            lv -= _U1
                        a = wbq[lv]
                        wbq[lv] = -1
                        pending -= 1
                        op = 1
                        ln = np.int64(1) << P[(lv << _U3) + _BITS]
                        lv += _U1
            stats[cp0, 0] += load_hits
            stats[cp0, 2] += store_hits
            ahead = pf >= 0 and 4 * (load_hits + store_hits) < 3 * (q - p)
            pos[s_] = q
            if q < e_:
                remaining = True
    clock[0] = now


@njit(cache=True, nogil=True)
def _take_dirty(sets, ways, bits, off, state):
    """Addresses of the dirty lines of one cache copy, set by set, most recently used first (the order of
    pycachesim's force_write_back); their dirty bits are cleared."""
    out = np.empty(sets * ways, np.int64)
    n = 0
    for s in range(sets):
        base = 2 * (off + s * ways)
        order = np.argsort(-state[base + 1:base + 2 * ways:2])
        for k in order:
            e = base + 2 * k + 1
            if state[e] & 1:
                out[n] = state[e - 1] << bits
                n += 1
                state[e] -= 1
    return out[:n]


# --- results ---------------------------------------------------------------------------------------------

class LevelCounts:
    """What a cache level's counters add up to: its accesses and the traffic with the level below (a simulation's
    level, `LevelStats`, and one kernel's share of it, `traces.LevelTraffic`)."""

    @property
    def accesses(self):
        return self.load_hits + self.load_misses + self.store_hits + self.store_misses

    @property
    def fills(self):
        """Lines fetched from below (load misses, and store misses of a write-allocate level)."""
        return self.load_misses + (self.store_misses if self.write_back else 0)

    @property
    def bytes_from_below(self):
        return self.fills * self.line_bytes

    @property
    def bytes_to_below(self):
        return self.writebacks * self.line_bytes + self.write_through_bytes


@dataclass(frozen=True)
class LevelStats(LevelCounts):
    name: str
    line_bytes: int
    write_back: bool
    load_hits: int
    load_misses: int
    store_hits: int
    store_misses: int
    evictions: int            # valid lines replaced (clean or dirty)
    writebacks: int           # dirty lines written to the next level (incl. by flush)
    write_throughs: int       # stores forwarded by a write-through level
    write_through_bytes: int
    per_core: np.ndarray      # (copies, 8) raw counters; one row for a shared level

    @property
    def hits(self) -> int:
        return self.load_hits + self.store_hits

    @property
    def misses(self) -> int:
        return self.load_misses + self.store_misses


    @property
    def hit_rate(self) -> float:
        return self.hits / self.accesses if self.accesses else math.nan

    @property
    def load_hit_rate(self) -> float:
        n = self.load_hits + self.load_misses
        return self.load_hits / n if n else math.nan


@dataclass(frozen=True)
class SimResult:
    levels: tuple[LevelStats, ...]
    memory_name: str
    accesses: int              # trace entries simulated
    dram_read_bytes: int
    dram_write_bytes: int
    seconds: float             # wall time of the simulation

    def level(self, name: str) -> LevelStats:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise CacheSimError(f"no level {name!r}; levels: {', '.join(lv.name for lv in self.levels)}")

    @property
    def dram_bytes(self) -> int:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def accesses_per_second(self) -> float:
        return self.accesses / self.seconds if self.seconds > 0 else math.inf

    def as_metrics(self) -> dict[str, float]:
        """Report columns, all 'simulated': <level>_hit_rate, dram read/write bytes."""
        out: dict[str, float] = {f"{lv.name}_hit_rate": lv.hit_rate for lv in self.levels}
        out[f"{self.memory_name}_read_bytes"] = self.dram_read_bytes
        out[f"{self.memory_name}_write_bytes"] = self.dram_write_bytes
        return out

    def __str__(self) -> str:
        head = f"{'level':<6} {'accesses':>12} {'hit rate':>9} {'misses':>11} {'writebacks':>11} {'from below':>12}"
        rows = [head]
        for lv in self.levels:
            rows.append(f"{lv.name:<6} {lv.accesses:>12,} {lv.hit_rate:>9.2%} {lv.misses:>11,} {lv.writebacks:>11,} "
                        f"{_mb(lv.bytes_from_below):>12}")
        rows.append(f"{self.memory_name}: read {_mb(self.dram_read_bytes)}, written {_mb(self.dram_write_bytes)}; "
                    f"{self.accesses:,} accesses in {self.seconds:.3g} s")
        return "\n".join(rows)


def _mb(n: float) -> str:
    return f"{n / 1e6:.3f} MB"


# --- the simulator -------------------------------------------------------------------------------------------

def _aligned(n: int) -> np.ndarray:
    """An int64 array starting at a 64-byte boundary, so that sets of 4, 8, 16 ways fill whole host cache lines."""
    buf = np.empty(n + 8, np.int64)
    k = (-buf.ctypes.data % 64) // 8
    return buf[k:k + n]


class CacheSimulator:
    """Stateful simulator: run traces, reset counters (after a warm-up), flush, inspect.

    `cores` is the number of private copies of each private level; stream i runs on core i % cores.
    """

    def __init__(self, hierarchy: Hierarchy, cores: int = 1, *, lru_on_store_hit: bool = True):
        if cores < 1:
            raise CacheSimError(f"cores = {cores}; write at least 1")
        self.hierarchy = hierarchy
        self.cores = cores
        self.lru_on_store_hit = lru_on_store_hit
        lv = hierarchy.levels
        n = len(lv)
        self._sets = np.array([x.sets for x in lv], np.int64)
        self._ways = np.array([x.ways for x in lv], np.int64)
        self._bits = np.array([x.line_bytes.bit_length() - 1 for x in lv], np.int64)
        self._mask = np.array([x.sets - 1 if x.sets & (x.sets - 1) == 0 else -1 for x in lv], np.int64)
        self._wb = np.array([x.write_policy == "write-back" for x in lv], np.int64)
        self._private = np.array([not x.shared for x in lv], np.int64)
        self._copies = np.array([1 if x.shared else cores for x in lv], np.int64)
        self._base = np.zeros(n, np.int64)
        self._base[1:] = np.cumsum(self._copies)[:-1]
        entries = np.repeat(self._sets * self._ways, self._copies)
        self._off = np.zeros(len(entries), np.int64)
        self._off[1:] = np.cumsum(entries)[:-1]
        total = int(entries.sum())
        self._state = _aligned(2 * total)               # per way: line number (-1: empty), 2 × last use + dirty
        self._state[0::2] = -1
        self._state[1::2] = 0
        self._stats = np.zeros((len(entries), N_STATS), np.int64)
        self._mem = np.zeros(2, np.int64)
        self._clock = np.zeros(1, np.int64)
        self._accesses = 0
        self._seconds = 0.0

    def run(self, streams: Trace | Sequence[Trace], *, chunk: int = 64) -> CacheSimulator:
        """Simulate the streams, interleaved round-robin `chunk` accesses at a time."""
        ss = _as_streams(streams)
        if chunk < 1:
            raise CacheSimError(f"chunk = {chunk}; write at least 1")
        lengths = np.array([len(s) for s in ss], np.int64)
        ends = np.cumsum(lengths)
        starts = ends - lengths
        whole = ss[0] if len(ss) == 1 else Trace.concat(ss)
        cores = np.arange(len(ss), dtype=np.int64) % self.cores
        t0 = time.perf_counter()
        self._call_run(0, whole, starts, ends, cores, chunk)
        self._seconds += time.perf_counter() - t0
        self._accesses += int(lengths.sum())
        return self

    def _call_run(self, level0: int, trace: Trace, starts: np.ndarray, ends: np.ndarray, cores: np.ndarray,
                  chunk: int) -> None:
        args = (np.int64(level0), self._sets, self._ways, self._bits, self._mask, self._wb, self._private, self._base,
                self._off, self._state, self._stats, self._mem, self._clock, trace.addr, trace.size, trace.write,
                starts, ends, cores, np.int64(chunk), self.lru_on_store_hit)
        if _run.signatures:
            _run(*args)
        else:
            with _conditional_moves_kept():     # the first call compiles the engine (or loads it from the cache)
                _run(*args)

    def flush(self) -> CacheSimulator:
        """Write every dirty line down to memory, level by level (counted as write-backs)."""
        t0 = time.perf_counter()
        levels = self.hierarchy.levels
        for li, lv in enumerate(levels):
            for j in range(int(self._copies[li])):
                cp = int(self._base[li]) + j
                lines = _take_dirty(lv.sets, lv.ways, int(self._bits[li]), int(self._off[cp]), self._state)
                self._stats[cp, WRITEBACK] += len(lines)
                if li + 1 == len(levels):
                    self._mem[1] += len(lines) * lv.line_bytes
                elif len(lines):
                    trace = Trace(lines, write=True, size=lv.line_bytes)
                    n = np.array([len(lines)], np.int64)
                    core = np.array([0 if lv.shared else j], np.int64)
                    self._call_run(li + 1, trace, np.zeros(1, np.int64), n, core, len(lines))
        self._seconds += time.perf_counter() - t0
        return self

    def reset_stats(self) -> CacheSimulator:
        """Zero the counters and keep the cache contents (call after a warm-up)."""
        self._stats[:] = 0
        self._mem[:] = 0
        self._accesses = 0
        self._seconds = 0.0
        return self

    def contains(self, addr: int, level: str | int = 0, core: int = 0) -> bool:
        li = self._level_index(level)
        lv = self.hierarchy.levels[li]
        line = int(addr) >> int(self._bits[li])
        cp = int(self._base[li]) + (0 if lv.shared else core % self.cores)
        base = int(self._off[cp]) + (line % lv.sets) * lv.ways
        return bool(np.any(self._state[2 * base:2 * (base + lv.ways):2] == line))

    def _level_index(self, level: str | int) -> int:
        if isinstance(level, int):
            return level
        for i, lv in enumerate(self.hierarchy.levels):
            if lv.name == level:
                return i
        raise CacheSimError(f"no level {level!r}; levels: {', '.join(x.name for x in self.hierarchy.levels)}")

    def result(self) -> SimResult:
        levels = []
        for i, lv in enumerate(self.hierarchy.levels):
            rows = self._stats[self._base[i]:self._base[i] + self._copies[i]].copy()
            tot = rows.sum(axis=0)
            levels.append(LevelStats(
                name=lv.name, line_bytes=lv.line_bytes, write_back=lv.write_policy == "write-back",
                load_hits=int(tot[LOAD_HIT]), load_misses=int(tot[LOAD_MISS]), store_hits=int(tot[STORE_HIT]),
                store_misses=int(tot[STORE_MISS]), evictions=int(tot[EVICT]), writebacks=int(tot[WRITEBACK]),
                write_throughs=int(tot[WT_COUNT]), write_through_bytes=int(tot[WT_BYTES]), per_core=rows))
        return SimResult(levels=tuple(levels), memory_name=self.hierarchy.memory_name, accesses=self._accesses,
                         dram_read_bytes=int(self._mem[0]), dram_write_bytes=int(self._mem[1]),
                         seconds=self._seconds)


def simulate(hierarchy: Hierarchy | Target | str, streams: Trace | Sequence[Trace], *, cores: int | None = None,
             chunk: int = 64, flush: bool = False, lru_on_store_hit: bool = True) -> SimResult:
    """Simulate `streams` (one Trace per core/SM) on a cold hierarchy and return the counters.

    `hierarchy` may be a target (or its name): its hardware caches are used (`Hierarchy.from_target`).
    `cores` defaults to the number of streams. `flush=True` writes the dirty lines back at the end.
    """
    h = hierarchy if isinstance(hierarchy, Hierarchy) else Hierarchy.from_target(hierarchy)
    ss = _as_streams(streams)
    sim = CacheSimulator(h, cores=cores or len(ss), lru_on_store_hit=lru_on_store_hit)
    sim.run(ss, chunk=chunk)
    if flush:
        sim.flush()
    return sim.result()


# --- sampling ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Estimate:
    value: float
    stderr: float        # standard error of the mean over samples
    ci: float            # half-width of the confidence interval (Student t)

    def __str__(self) -> str:
        return f"{self.value:.4g} ± {self.ci:.2g}"


@dataclass(frozen=True)
class SampledResult:
    method: str
    hit_rates: dict[str, Estimate]       # per level
    dram_read_bytes: Estimate            # extrapolated to the whole trace
    dram_write_bytes: Estimate
    fraction: float                      # share of the trace's accesses that were counted
    simulated_fraction: float            # share simulated, warm-ups included (the cost)
    confidence: float
    samples: tuple[SimResult, ...]

    def __str__(self) -> str:
        rates = ", ".join(f"{k} {v}" for k, v in self.hit_rates.items())
        return (f"sampled ({self.method}, {len(self.samples)} samples, {self.fraction:.1%} of accesses counted, "
                f"{self.confidence:.0%} intervals): hit rates {rates}; DRAM read {self.dram_read_bytes} B, "
                f"written {self.dram_write_bytes} B")


def _estimate(xs: Sequence[float], confidence: float) -> Estimate:
    from scipy import stats

    arr = np.asarray(xs, float)
    arr = arr[np.isfinite(arr)]
    if arr.size == 0:
        return Estimate(math.nan, math.nan, math.nan)
    if arr.size == 1:
        return Estimate(float(arr[0]), math.inf, math.inf)
    se = float(arr.std(ddof=1) / math.sqrt(arr.size))
    return Estimate(float(arr.mean()), se, float(stats.t.ppf(0.5 + confidence / 2, arr.size - 1) * se))


def _warm(h: Hierarchy, ss: list[Trace], start: int, warm: int, adapt: bool, chunk: int,
          lru_on_store_hit: bool) -> tuple[CacheSimulator, int]:
    """A simulator warmed on the accesses before `start`; returns it and the accesses simulated to warm it."""
    spent = 0
    filled_before = -1.0
    while True:
        sim = CacheSimulator(h, cores=len(ss), lru_on_store_hit=lru_on_store_hit)
        lo = max(0, start - warm)
        if start > lo:
            sim.run([s[lo:start] for s in ss], chunk=chunk)
            spent += sim._accesses
        filled = float(np.count_nonzero(sim._state[1::2])) / (sim._state.size // 2)
        if not adapt or lo == 0 or filled >= 0.999 or filled - filled_before < 0.001:
            sim.reset_stats()
            return sim, spent
        filled_before = filled
        warm *= 2


def simulate_sampled(hierarchy: Hierarchy | Target | str, streams: Trace | Sequence[Trace], *,
                     method: str = "windows", samples: int = 8, window: int | None = None,
                     warmup: int | None = None, fraction: float = 0.125, seed: int = 0, chunk: int = 64,
                     confidence: float = 0.95, lru_on_store_hit: bool = True) -> SampledResult:
    """Estimate hit rates and DRAM traffic of a trace too large to simulate whole, with an error bar.

    method="windows" (time sampling): the streams' index range is cut into `samples` equal strata; in each,
    a window of `window` accesses per stream (default: 1/8 of a stratum) is placed at a random offset and
    simulated after a warm-up on the accesses just before it, whose counts are discarded. By default the
    warm-up adapts: it starts as long as the window and doubles until every set of every level is full
    (an LRU set's contents then no longer depend on the cold start: it holds its `ways` most recent distinct
    lines) or stops filling, or the trace's start is reached. `warmup=N` fixes it at N accesses per stream.
    Hit rates are the mean over windows; DRAM bytes per access are averaged and multiplied by the trace's
    length.

    method="streams" (core sampling, for many SMs): each sample simulates a random `fraction` of the streams
    (without replacement) whole, on a hierarchy whose shared levels are shrunk by the same fraction, so
    each simulated core keeps its share of the shared capacity. DRAM bytes are scaled up by the ratio of
    all accesses to the simulated ones. Data shared between cores is under-represented (a line another,
    unsampled core would have brought into L2 is a miss here): prefer windows when cores share much data.
    Fewer sets also change which lines conflict: when every core's data sits at the same offset modulo the
    way size (e.g. per-core buffers aligned to 4 MiB), they crowd fewer sets of the full cache than of the
    shrunk one and the estimate can be far off (L2 hit rate 0.52 sampled against 0.35 whole in such a test).

    The error is the spread across samples: `stderr` = sample standard deviation / sqrt(samples), `ci` the
    Student-t half-width at `confidence`. The samples measure warmed caches: the compulsory misses of a cold
    start (at most one per line of each cache) are not in the estimate. The spread does not include a bias
    of the method (too short a warm-up, or lost sharing); check one full simulation at a smaller size when
    unsure.
    """
    h = hierarchy if isinstance(hierarchy, Hierarchy) else Hierarchy.from_target(hierarchy)
    ss = _as_streams(streams)
    if samples < 2:
        raise CacheSimError(f"samples = {samples}; an error bar needs at least 2")
    rng = np.random.default_rng(seed)
    total = sum(len(s) for s in ss)
    results: list[SimResult] = []
    counted = simulated = 0
    if method == "windows":
        n = max(len(s) for s in ss)
        stratum = n // samples
        win = window or max(1, stratum // 8)
        if win > stratum:
            raise CacheSimError(f"window of {win} accesses does not fit {samples} strata of {stratum}; use a "
                                f"smaller window or fewer samples")
        for i in range(samples):
            start = i * stratum + int(rng.integers(0, stratum - win + 1))
            sim, warmed = _warm(h, ss, start, win if warmup is None else warmup, warmup is None, chunk,
                                lru_on_store_hit)
            simulated += warmed
            sim.run([s[start:start + win] for s in ss], chunk=chunk)
            results.append(sim.result())
        counted = sum(r.accesses for r in results)
        scale = [total / r.accesses if r.accesses else math.nan for r in results]
    elif method == "streams":
        k = max(1, round(fraction * len(ss)))
        if k >= len(ss):
            raise CacheSimError(f"fraction {fraction} of {len(ss)} streams keeps all of them; sample fewer")
        hs = h.shared_share(k / len(ss))
        for _ in range(samples):
            pick = sorted(rng.choice(len(ss), size=k, replace=False))
            r = simulate(hs, [ss[j] for j in pick], chunk=chunk, lru_on_store_hit=lru_on_store_hit)
            results.append(r)
        counted = sum(r.accesses for r in results) // samples
        simulated = sum(r.accesses for r in results) - counted * samples
        scale = [total / r.accesses if r.accesses else math.nan for r in results]
    else:
        raise CacheSimError(f"method = {method!r}; write 'windows' or 'streams'")
    rates = {lv.name: _estimate([r.levels[i].hit_rate for r in results], confidence)
             for i, lv in enumerate(h.levels)}
    return SampledResult(
        method=method, hit_rates=rates,
        dram_read_bytes=_estimate([r.dram_read_bytes * f for r, f in zip(results, scale)], confidence),
        dram_write_bytes=_estimate([r.dram_write_bytes * f for r, f in zip(results, scale)], confidence),
        fraction=counted / total, simulated_fraction=(simulated + sum(r.accesses for r in results)) / total,
        confidence=confidence,
        samples=tuple(results))

"""The cache simulator against pycachesim (same traces, same geometry, its semantics mirrored), against an
independent pure-Python LRU model for the default store policy, and against hand-computed sequences."""
from __future__ import annotations

import itertools
from collections import OrderedDict

import numpy as np
import pytest
from cachesim import Cache

from xbench.hw.cachesim import (
    CacheLevel,
    CacheSimError,
    CacheSimulator,
    Hierarchy,
    Trace,
    simulate,
    simulate_sampled,
)

# --- traces (byte offsets from 0: pycachesim keeps addresses in C longs but its scalar API reads 32 bits) ----


def stream_triad(n: int = 40_000, elem: int = 8, gap: int = 4096 + 192) -> Trace:
    """a[i] = b[i] + s * c[i]: load b, load c, store a."""
    b0, c0, a0 = 0, n * elem + gap, 2 * (n * elem + gap)
    i = np.arange(n, dtype=np.int64) * elem
    addr = np.stack([b0 + i, c0 + i, a0 + i], axis=1).reshape(-1)
    write = np.tile([False, False, True], n)
    return Trace(addr, write, elem)


def strided_columns(rows: int = 512, cols: int = 512, ncols: int = 64, elem: int = 4) -> Trace:
    """Walk down columns of a row-major matrix: load M[i, j], store M[i, j]."""
    j, i = np.meshgrid(np.arange(ncols), np.arange(rows), indexing="ij")
    base = (i * cols + j).reshape(-1).astype(np.int64) * elem
    return Trace(np.repeat(base, 2), np.tile([False, True], base.size), elem)


def random_access(n: int = 200_000, span: int = 2 << 20, elem: int = 8, writes: float = 0.3, seed: int = 1) -> Trace:
    rng = np.random.default_rng(seed)
    return Trace(rng.integers(0, span // elem, n) * elem, rng.random(n) < writes, elem)


def blocked_matmul(n: int = 40, tile: int = 8, elem: int = 4) -> Trace:
    """C[i, j] += A[i, k] * B[k, j] over tiles (ii, jj, kk), inner order i, j, k: load A, load B, load C, store C."""
    a0, b0, c0 = 0, n * n * elem + 320, 2 * (n * n * elem + 320)
    idx = []
    for ii, jj, kk in itertools.product(range(0, n, tile), repeat=3):
        i, j, k = np.meshgrid(np.arange(ii, ii + tile), np.arange(jj, jj + tile), np.arange(kk, kk + tile),
                              indexing="ij")
        i, j, k = i.reshape(-1), j.reshape(-1), k.reshape(-1)
        c = c0 + (i * n + j) * elem
        idx.append(np.stack([a0 + (i * n + k) * elem, b0 + (k * n + j) * elem, c, c], axis=1).reshape(-1))
    addr = np.concatenate(idx).astype(np.int64)
    return Trace(addr, np.tile([False, False, False, True], addr.size // 4), elem)


def unaligned(n: int = 60_000, elem: int = 8, seed: int = 2) -> Trace:
    """8-byte accesses at 4 mod 8 offsets: some straddle two lines."""
    rng = np.random.default_rng(seed)
    addr = 4 + rng.integers(0, 1 << 15, n) * elem
    addr[: n // 2] = 4 + np.arange(n // 2) * elem
    return Trace(addr, rng.random(n) < 0.25, elem)


TRACES = {"stream": stream_triad, "strided": strided_columns, "random": random_access, "matmul": blocked_matmul,
          "unaligned": unaligned}

GEOMETRIES = {
    "single": Hierarchy([CacheLevel("l1", 32 * 1024, 64, 8)]),
    "two-level": Hierarchy([CacheLevel("l1", 8 * 1024, 64, 4), CacheLevel("l2", 64 * 1024, 64, 8)]),
    # 48 sets (not a power of two) and line sizes growing 64 -> 128 -> 256
    "three-level": Hierarchy([CacheLevel("l1", 6 * 1024, 64, 3), CacheLevel("l2", 24 * 1024, 128, 4),
                              CacheLevel("l3", 384 * 1024, 256, 12)]),
    # GPU-like: write-through, no-write-allocate L1 over a write-back L2
    "write-through": Hierarchy([CacheLevel("l1", 16 * 1024, 128, 4, write_policy="write-through"),
                                CacheLevel("l2", 128 * 1024, 128, 16)]),
}


# --- pycachesim as the oracle ----------------------------------------------------------------------------------

def _py_caches(h: Hierarchy, copies: int = 1) -> tuple[list[Cache], list[Cache]]:
    """pycachesim caches for `h`: the private first levels (one per copy, when the rest is shared) and the
    chain below them."""
    below = None
    chain = []
    for lv in reversed(h.levels[1:]):
        wb = lv.write_policy == "write-back"
        below = Cache(lv.name, lv.sets, lv.ways, lv.line_bytes, "LRU", write_back=wb, write_allocate=wb,
                      load_from=below, store_to=below)
        chain.insert(0, below)
    first = h.levels[0]
    wb = first.write_policy == "write-back"
    tops = [Cache(f"{first.name}_{c}", first.sets, first.ways, first.line_bytes, "LRU", write_back=wb,
                  write_allocate=wb, load_from=below, store_to=below) for c in range(copies)]
    return tops, chain


def _feed(cache: Cache, t: Trace) -> None:
    """Send a trace to a pycachesim cache in order (its loadstore walks (loads, stores) pairs in C)."""
    cuts = np.flatnonzero(np.diff(t.size)) + 1
    for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(t)]):
        pairs = [(None, [a]) if w else ([a], None)
                 for a, w in zip(t.addr[lo:hi].tolist(), t.write[lo:hi].tolist())]
        cache.loadstore(pairs, length=int(t.size[lo]))


def _compare(ours, tops: list[Cache], chain: list[Cache], *, check_first_level_requests: bool) -> None:
    py_levels = [tops] + [[c] for c in chain]
    for lv, pys in zip(ours.levels, py_levels):
        hit = sum(c.backend.HIT_count for c in pys)
        miss = sum(c.backend.MISS_count for c in pys)
        evict = sum(c.backend.EVICT_count for c in pys)
        assert lv.load_hits == hit, (lv.name, "hits")
        # pycachesim counts a store miss only where it allocates (write-back levels)
        assert lv.load_misses + (lv.store_misses if lv.write_back else 0) == miss, (lv.name, "misses")
        assert (lv.writebacks if lv.write_back else lv.write_throughs) == evict, (lv.name, "evictions")
        if lv is not ours.levels[0] or check_first_level_requests:
            load = sum(c.backend.LOAD_count for c in pys)
            store = sum(c.backend.STORE_count for c in pys)
            assert lv.load_hits + lv.load_misses + (lv.store_misses if lv.write_back else 0) == load, lv.name
            assert lv.store_hits + lv.store_misses == store, lv.name
    last = py_levels[-1][0]
    assert ours.dram_read_bytes == last.backend.MISS_count * last.cl_size
    wb = ours.levels[-1].write_back
    assert ours.dram_write_bytes == (last.backend.EVICT_count * last.cl_size if wb else last.backend.EVICT_byte)


@pytest.mark.parametrize("trace_name", list(TRACES))
@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_single_stream_matches_pycachesim(geometry: str, trace_name: str) -> None:
    h, t = GEOMETRIES[geometry], TRACES[trace_name]()
    ours = simulate(h, t, lru_on_store_hit=False)
    tops, chain = _py_caches(h)
    _feed(tops[0], t)
    _compare(ours, tops, chain, check_first_level_requests=trace_name != "unaligned")
    assert ours.accesses == len(t)
    # the trace must reach the farthest level, or the comparison proves little there
    assert ours.levels[-1].misses > 0


@pytest.mark.parametrize("geometry", ["two-level", "three-level", "write-through"])
def test_flush_matches_pycachesim_force_write_back(geometry: str) -> None:
    h, t = GEOMETRIES[geometry], blocked_matmul(40, 8)
    sim = CacheSimulator(h, lru_on_store_hit=False).run(t).flush()
    tops, chain = _py_caches(h)
    _feed(tops[0], t)
    for c in tops + chain:
        c.backend.force_write_back()
    _compare(sim.result(), tops, chain, check_first_level_requests=True)
    assert not (sim._state[1::2] & 1).any()     # no dirty line left


@pytest.mark.parametrize("chunk", [1, 7, 64])
@pytest.mark.parametrize("geometry", ["two-level", "write-through"])
def test_private_first_levels_over_a_shared_level_match_pycachesim(geometry: str, chunk: int) -> None:
    base = GEOMETRIES[geometry]
    h = Hierarchy([base.levels[0]] + [CacheLevel(lv.name, lv.size_bytes, lv.line_bytes, lv.ways, True,
                                                 lv.write_policy) for lv in base.levels[1:]])
    n = 4_000 if chunk == 1 else 30_000
    streams = [random_access(n, 256 << 10, seed=s) for s in range(3)]
    streams[1] = Trace(streams[1].addr + (128 << 10), streams[1].write, 8)   # overlaps streams 0 and 2 in part
    streams.append(blocked_matmul(24, 8) if chunk > 1 else stream_triad(n // 3))
    ours = simulate(h, streams, chunk=chunk, lru_on_store_hit=False)
    tops, chain = _py_caches(h, copies=len(streams))
    pos = [0] * len(streams)
    while any(p < len(s) for p, s in zip(pos, streams)):
        for i, s in enumerate(streams):
            if pos[i] < len(s):
                _feed(tops[i], s[pos[i]:pos[i] + chunk])
                pos[i] += chunk
    _compare(ours, tops, chain, check_first_level_requests=True)
    per_core_hits = ours.levels[0].per_core[:, 0]
    assert per_core_hits.tolist() == [c.backend.HIT_count for c in tops]


# --- an independent model of the default policy (LRU order also updated by store hits) ------------------------

class RefHierarchy:
    """Recursive, dictionary-based model of the documented semantics; slow, small traces only."""

    def __init__(self, h: Hierarchy, cores: int):
        self.h = h
        self.sets = [[[OrderedDict() for _ in range(lv.sets)] for _ in range(1 if lv.shared else cores)]
                     for lv in h.levels]
        self.stats = [[0] * 5 for _ in h.levels]   # load hit, load miss, store hit, store miss, writebacks
        self.mem = [0, 0]

    def _set(self, k: int, core: int, line: int) -> OrderedDict:
        lv = self.h.levels[k]
        return self.sets[k][0 if lv.shared else core][line % lv.sets]

    def _below(self, k: int, op: str, addr: int, n: int, core: int) -> None:
        if k + 1 < len(self.h.levels):
            self.access(k + 1, op, addr, n, core)
        else:
            self.mem[0 if op == "load" else 1] += n

    def _install(self, k: int, core: int, line: int, dirty: bool) -> None:
        lv = self.h.levels[k]
        s = self._set(k, core, line)
        if len(s) == lv.ways:
            victim, was_dirty = s.popitem(last=False)
            if was_dirty:
                self.stats[k][4] += 1
                self._below(k, "store", victim * lv.line_bytes, lv.line_bytes, core)
        s[line] = dirty

    def access(self, k: int, op: str, addr: int, n: int, core: int) -> None:
        lv = self.h.levels[k]
        line = addr // lv.line_bytes
        s = self._set(k, core, line)
        present = line in s
        if present:
            s.move_to_end(line)
        if op == "load" or lv.write_policy == "write-back":
            col = (0 if present else 1) + (0 if op == "load" else 2)
            self.stats[k][col] += 1
            if present:
                if op == "store":
                    s[line] = True
                return
            self._below(k, "load", line * lv.line_bytes, lv.line_bytes, core)
            self._install(k, core, line, op == "store")
            return
        self.stats[k][2 if present else 3] += 1
        self._below(k, "store", addr, n, core)

    def run(self, streams: list[Trace], chunk: int) -> None:
        l0 = self.h.levels[0].line_bytes
        for lo in range(0, max(len(s) for s in streams), chunk):
            for c, t in enumerate(streams):
                for a, n, w in zip(t.addr[lo:lo + chunk].tolist(), t.size[lo:lo + chunk].tolist(),
                                   t.write[lo:lo + chunk].tolist()):
                    for line in range(a // l0, (a + n - 1) // l0 + 1):
                        start = max(a, line * l0)
                        end = min(a + n, (line + 1) * l0)
                        self.access(0, "store" if w else "load", start, end - start, c)


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
def test_default_policy_matches_reference_model(geometry: str) -> None:
    base = GEOMETRIES[geometry]
    h = Hierarchy([base.levels[0]] + [CacheLevel(lv.name, lv.size_bytes, lv.line_bytes, lv.ways, True,
                                                 lv.write_policy) for lv in base.levels[1:]])
    streams = [random_access(6_000, 96 << 10, writes=0.4, seed=s) for s in range(2)] + [unaligned(6_000)]
    ours = simulate(h, streams, chunk=5)
    ref = RefHierarchy(h, cores=len(streams))
    ref.run(streams, chunk=5)
    for lv, st in zip(ours.levels, ref.stats):
        assert [lv.load_hits, lv.load_misses, lv.store_hits, lv.store_misses, lv.writebacks] == st, lv.name
    assert [ours.dram_read_bytes, ours.dram_write_bytes] == ref.mem
    # and the store-hit policy matters on this trace: pycachesim's order gives different counts
    other = simulate(h, streams, chunk=5, lru_on_store_hit=False)
    assert [lv.hits for lv in other.levels] != [lv.hits for lv in ours.levels]


# --- hand-computed ----------------------------------------------------------------------------------------------

def test_two_way_lru_eviction_sequence() -> None:
    # 2 sets × 2 ways × 16-byte lines; lines A=0, B=32, C=64 all map to set 0, D=16 to set 1
    h = Hierarchy([CacheLevel("l1", 64, 16, 2)])
    A, B, C, D = 0, 32, 64, 16
    seq = [A, B, A, C, B, A, A, D, C]
    #      m  m  h  m(evicts B)  m(evicts A)  m(evicts C)  h  m(set 1)  m(evicts B)
    sim = CacheSimulator(h)
    hits = []
    for a in seq:
        before = sim.result().levels[0].load_hits
        sim.run(Trace([a], False, 4))
        hits.append(sim.result().levels[0].load_hits - before)
    assert hits == [0, 0, 1, 0, 0, 0, 1, 0, 0]
    r = sim.result().levels[0]
    assert (r.load_hits, r.load_misses, r.evictions) == (2, 7, 4)
    assert [sim.contains(x) for x in (A, B, C, D)] == [True, False, True, True]
    assert sim.contains(A + 15) and not sim.contains(B + 8)


def test_write_back_and_write_allocate_by_hand() -> None:
    h = Hierarchy([CacheLevel("l1", 32, 16, 2)])     # one set, two ways
    A, B, C = 0, 16, 32
    t = Trace([A, B, C, A], write=[True, False, False, False], size=4)
    r = simulate(h, t)
    lv = r.levels[0]
    # store A: miss, line fetched (write-allocate) and dirtied; B: miss; C: miss, evicts A (dirty) -> written back;
    # A: miss again, evicts B (clean)
    assert (lv.store_misses, lv.load_misses, lv.load_hits, lv.evictions, lv.writebacks) == (1, 3, 0, 2, 1)
    assert (r.dram_read_bytes, r.dram_write_bytes) == (4 * 16, 16)


def test_write_through_forwards_bytes_and_does_not_allocate() -> None:
    h = Hierarchy([CacheLevel("l1", 64, 16, 2, write_policy="write-through"), CacheLevel("l2", 256, 16, 4)])
    t = Trace([0, 0, 0, 4], write=[True, False, True, True], size=4)
    r = simulate(h, t)
    l1, l2 = r.levels
    # store 0: L1 miss (no allocate), forwarded; load 0: L1 miss -> fetched; store 0 and 4: L1 hits, forwarded
    assert (l1.store_misses, l1.store_hits, l1.load_misses, l1.write_throughs, l1.write_through_bytes) == (1, 2, 1, 3, 12)
    # L2: first store misses and allocates, then the load and the stores hit
    assert (l2.store_misses, l2.store_hits, l2.load_hits) == (1, 2, 1)
    assert r.dram_read_bytes == 16 and r.dram_write_bytes == 0
    assert simulate(h, t, flush=True).dram_write_bytes == 16


def test_access_spanning_lines_touches_each_line() -> None:
    h = Hierarchy([CacheLevel("l1", 1024, 64, 4)])
    r = simulate(h, Trace([60, 0, 64], False, [8, 4, 4]))
    assert (r.levels[0].load_misses, r.levels[0].load_hits) == (2, 2)


def test_interleave_merges_streams_round_robin() -> None:
    a, b = Trace([0, 1, 2], False, 4), Trace([10, 11, 12, 13], True, 4)
    t = Trace.interleave([a, b], chunk=2)
    assert t.addr.tolist() == [0, 1, 10, 11, 2, 12, 13]
    assert t.write.tolist() == [0, 0, 1, 1, 0, 1, 1]
    # one stream made of the two, simulated on one core, equals the two streams on one core with chunk 2
    h = GEOMETRIES["two-level"]
    streams = [random_access(5_000, 64 << 10, seed=s) for s in range(2)]
    merged = simulate(h, Trace.interleave(streams, chunk=3))
    split = simulate(h, streams, cores=1, chunk=3)
    assert [(lv.hits, lv.misses) for lv in merged.levels] == [(lv.hits, lv.misses) for lv in split.levels]


def test_coalesce_turns_warp_accesses_into_sectors() -> None:
    # a warp reading 32 consecutive float32 touches 4 sectors; two warps, 8 sectors
    t = Trace(np.arange(64) * 4, False, 4).coalesce()
    assert t.addr.tolist() == list(range(0, 256, 32)) and set(t.size.tolist()) == {32}
    # a warp reading with a 128-byte stride touches 32 sectors; writes mark their sectors
    s = Trace(np.arange(32) * 128, np.arange(32) % 2 == 0, 4).coalesce()
    assert len(s) == 32 and s.write.tolist() == [1, 0] * 16
    # an access straddling a sector boundary touches both; a sector is written if any lane wrote it
    u = Trace([30, 0], [False, True], 4).coalesce()
    assert u.addr.tolist() == [0, 32] and u.write.tolist() == [1, 0]


# --- from targets, sampling, errors -------------------------------------------------------------------------------

def test_hierarchy_from_gpu_target() -> None:
    h = Hierarchy.from_target("h100")
    l1, l2 = h.levels
    assert (l1.size_bytes, l1.line_bytes, l1.write_policy, l1.shared) == (256 * 1024, 128, "write-through", False)
    assert (l2.size_bytes, l2.sets, l2.shared, l2.write_policy) == (50 << 20, 25600, True, "write-back")
    hs = Hierarchy.from_target("a100", granularity="sector", shared_mem_carveout=164 * 1024)
    assert (hs.levels[0].size_bytes, hs.levels[0].line_bytes, hs.levels[1].line_bytes) == (28 * 1024, 32, 32)
    (l2a,) = Hierarchy.from_target("ascend-910b").levels     # the buffers are scratchpads: only L2 is a cache
    assert (l2a.name, l2a.size_bytes, l2a.line_bytes, l2a.shared) == ("l2", 192 << 20, 512, True)
    # many SMs streaming disjoint rows: each SM's L1 sees 7 of 8 float32 loads of a 32-byte sector hit
    streams = [Trace(np.arange(s * 65536, (s + 1) * 65536, 4), False, 4) for s in range(8)]
    r = simulate(hs, streams)
    assert r.levels[0].hit_rate == pytest.approx(7 / 8)
    assert r.levels[0].per_core.shape == (8, 8)


def _mixed_streams(n_streams: int, n: int, hot: int, cold: int, seed: int, *, vary: bool = False,
                   spread: bool = True) -> list[Trace]:
    """Per core: 80 % of accesses to a private hot set, the rest to a private cold set; the per-core buffers
    are 4 MiB apart, shifted by a random number of lines when `spread`."""
    rng = np.random.default_rng(seed)
    streams = []
    for s in range(n_streams):
        c = cold * (1 + s % 4) // 2 if vary else cold
        base = s * (1 << 22) + (int(rng.integers(0, 4096)) * 64 if spread else 0)
        h_ = rng.integers(0, hot, n) // 8 * 8 + base
        c_ = rng.integers(0, c, n) // 8 * 8 + base + (1 << 21)
        streams.append(Trace(np.where(rng.random(n) < 0.8, h_, c_), rng.random(n) < 0.2, 8))
    return streams


def _covers(h: Hierarchy, full, est, n_streams: int) -> None:
    # the samples see warmed caches; the full run also pays the cold start, at most one miss per line
    for lv, cfg in zip(full.levels, h.levels):
        e = est.hit_rates[lv.name]
        cold = cfg.sets * cfg.ways * (1 if cfg.shared else n_streams) / lv.accesses
        assert 0 < e.ci < 0.05, (est.method, lv.name, e)
        assert abs(e.value - lv.hit_rate) <= e.ci + cold, (est.method, lv.name, e, lv.hit_rate)
    cold_bytes = h.levels[-1].size_bytes
    assert abs(est.dram_read_bytes.value - full.dram_read_bytes) <= est.dram_read_bytes.ci + cold_bytes
    assert 0 < est.fraction < 0.5 and est.fraction < est.simulated_fraction


@pytest.mark.parametrize("spread", [True, False])
def test_time_window_sampling_covers_the_full_simulation(spread: bool) -> None:
    h = Hierarchy([CacheLevel("l1", 16 * 1024, 64, 4), CacheLevel("l2", 256 * 1024, 64, 8, shared=True)])
    streams = _mixed_streams(16, 60_000, 12 << 10, 1 << 20, seed=5, spread=spread)
    full = simulate(h, streams)
    _covers(h, full, simulate_sampled(h, streams, method="windows", samples=10, seed=3), len(streams))
    with pytest.raises(CacheSimError, match="at least 2"):
        simulate_sampled(h, streams, samples=1)


def test_core_sampling_covers_the_full_simulation() -> None:
    h = Hierarchy([CacheLevel("l1", 16 * 1024, 64, 4), CacheLevel("l2", 1 << 20, 64, 8, shared=True)])
    streams = _mixed_streams(32, 30_000, 8 << 10, 48 << 10, seed=6, vary=True)
    full = simulate(h, streams)
    est = simulate_sampled(h, streams, method="streams", samples=10, fraction=0.25, seed=4)
    _covers(h, full, est, len(streams))


def test_bad_configurations_are_explained() -> None:
    with pytest.raises(CacheSimError, match="power of two"):
        CacheLevel("l1", 3000, 48, 2)
    with pytest.raises(CacheSimError, match="whole number of sets"):
        CacheLevel("l1", 3000, 64, 2)
    with pytest.raises(CacheSimError, match="lines may only grow"):
        Hierarchy([CacheLevel("l1", 4096, 128, 2), CacheLevel("l2", 8192, 64, 2)])
    with pytest.raises(CacheSimError, match="shared"):
        Hierarchy([CacheLevel("l1", 4096, 64, 2, shared=True), CacheLevel("l2", 8192, 64, 2)])
    with pytest.raises(CacheSimError, match="differ in length"):
        Trace([0, 8], [True], [4, 4, 4])

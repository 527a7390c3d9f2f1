"""Simulating a program's traces through a cache hierarchy: whole, or in sampled windows."""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...ir.kernel import Program
from ..cachesim import CacheSimulator, Hierarchy, LevelCounts, Trace
from .points import KernelTrace, Layout, SequenceTrace, _empty_trace

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
class LevelTraffic(LevelCounts):
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
    hs = h.shared_share(k / t.streams)
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

"""Speed of xbench's cache simulator, in accesses per second, beside pycachesim on the same traces.

    python benchmarks/cachesim_speed.py [--size N]

Traces: a float32 stream, a STREAM triad, a column walk, random float64 accesses over 64 MiB, and a tiled
matmul; on this machine's cache geometry (L1 -> L2 -> L3, from sysfs) and on an H100 (per-SM L1 over a
shared L2, 132 SM streams). pycachesim runs the single-stream CPU cases with the same geometry in its own
store-hit LRU order; the hit and miss counts of both are checked equal before the speeds are compared.
Each time is the median of 3 runs; compilation is excluded (numba caches it on disk).
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xbench.hw.cachesim import CacheLevel, Hierarchy, Trace, simulate
from xbench.hw.calibrate import read_caches


def stream(n: int) -> Trace:
    return Trace(np.arange(n, dtype=np.int64) * 4, False, 4)


def triad(n: int) -> Trace:
    m = n // 3
    i = np.arange(m, dtype=np.int64) * 8
    addr = np.stack([i, i + m * 8 + 4096, i + 2 * (m * 8 + 4096)], axis=1).reshape(-1)
    return Trace(addr, np.tile([False, False, True], m), 8)


def columns(n: int, rows: int = 4096, cols: int = 4096) -> Trace:
    k = n // rows
    j, i = np.meshgrid(np.arange(k), np.arange(rows), indexing="ij")
    return Trace((i * cols + j).reshape(-1).astype(np.int64) * 4, False, 4)


def random(n: int) -> Trace:
    rng = np.random.default_rng(0)
    return Trace(rng.integers(0, (64 << 20) // 8, n) * 8, rng.random(n) < 0.3, 8)


def matmul(n: int, tile: int = 32) -> Trace:
    size = round((n / 4) ** (1 / 3) / tile) * tile or tile
    a0, b0, c0 = 0, size * size * 4 + 256, 2 * (size * size * 4 + 256)
    parts = []
    for ii, jj, kk in itertools.product(range(0, size, tile), repeat=3):
        i, j, k = (x.reshape(-1) for x in np.meshgrid(np.arange(ii, ii + tile), np.arange(jj, jj + tile),
                                                       np.arange(kk, kk + tile), indexing="ij"))
        c = c0 + (i * size + j) * 4
        parts.append(np.stack([a0 + (i * size + k) * 4, b0 + (k * size + j) * 4, c, c], axis=1).reshape(-1))
    addr = np.concatenate(parts).astype(np.int64)
    return Trace(addr, np.tile([False, False, False, True], addr.size // 4), 4)


def gpu_elementwise(n: int, sms: int = 132) -> list[Trace]:
    """y = x + 1 over float32, each SM taking a contiguous slice: load x[i], store y[i]."""
    per = n // (2 * sms)
    out = []
    for s in range(sms):
        i = (s * per + np.arange(per, dtype=np.int64)) * 4
        out.append(Trace(np.stack([i, i + (n << 2)], axis=1).reshape(-1), np.tile([False, True], per), 4))
    return out


def local_hierarchy() -> Hierarchy:
    return Hierarchy([CacheLevel(f"l{c['level']}", c["size"], c["line"], c["ways"], shared=c["sharing"] > 1)
                      for c in read_caches()])


def timed(fn, runs: int = 3) -> tuple[float, float, object]:
    """Median wall seconds and median CPU seconds of this thread (what a busy machine does not inflate)."""
    wall, cpu, out = [], [], None
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.thread_time()
        out = fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return statistics.median(wall), statistics.median(cpu), out


def pycachesim_run(h: Hierarchy, t: Trace):
    from cachesim import Cache

    below = None
    caches = []
    for lv in reversed(h.levels):
        below = Cache(lv.name, lv.sets, lv.ways, lv.line_bytes, "LRU", load_from=below, store_to=below)
        caches.insert(0, below)
    pairs = [(None, [a]) if w else ([a], None) for a, w in zip(t.addr.tolist(), t.write.tolist())]
    length = int(t.size[0])
    c0 = time.thread_time()
    caches[0].loadstore(pairs, length=length)
    return time.thread_time() - c0, caches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=4_000_000, help="accesses per trace (default 4,000,000)")
    ap.add_argument("--no-peer", action="store_true", help="skip pycachesim")
    n = ap.parse_args().size
    peer = not ap.parse_args().no_peer
    cpu = local_hierarchy()
    h100 = Hierarchy.from_target("h100")
    simulate(cpu, stream(1000))          # load or compile the engine outside the timings
    print("cache geometry here: " + ", ".join(f"{lv.name} {lv.size_bytes >> 10} KiB {lv.ways}-way "
                                              f"{lv.line_bytes} B{' shared' if lv.shared else ''}" for lv in cpu.levels))
    print("accesses per second of CPU time (this thread), and per second of wall time for xbench")
    print(f"{'trace':<22} {'hierarchy':<9} {'accesses':>10} {'xbench cpu':>12} {'xbench wall':>12} "
          f"{'pycachesim cpu':>15} {'ratio':>6}  {'L1 hit':>7}")
    cases = [("float32 stream", cpu, stream(n)), ("triad (float64)", cpu, triad(n)),
             ("column walk", cpu, columns(n)), ("random 64 MiB, 30% st", cpu, random(n)),
             ("tiled matmul", cpu, matmul(n)), ("elementwise, 132 SMs", h100, gpu_elementwise(n))]
    total_acc = total_cpu = 0.0
    for name, h, t in cases:
        accesses = len(t) if isinstance(t, Trace) else sum(len(x) for x in t)
        wall, cpu_s, r = timed(lambda h=h, t=t: simulate(h, t, lru_on_store_hit=False))
        total_acc += accesses
        total_cpu += cpu_s
        line = (f"{name:<22} {'cpu' if h is cpu else 'h100':<9} {accesses:>10,} {accesses / cpu_s:>12,.0f} "
                f"{accesses / wall:>12,.0f}")
        if peer and isinstance(t, Trace):
            psecs, caches = pycachesim_run(h, t)
            for lv, c in zip(r.levels, caches):
                assert lv.load_hits == c.backend.HIT_count and lv.misses == c.backend.MISS_count, (name, lv.name)
            line += f" {accesses / psecs:>15,.0f} {psecs / cpu_s:>5.1f}x"
        else:
            line += f" {'-':>15} {'-':>6}"
        print(line + f"  {r.levels[0].hit_rate:>7.2%}", flush=True)
    print(f"all traces: {total_acc / total_cpu:,.0f} accesses per CPU second (xbench)")


if __name__ == "__main__":
    main()

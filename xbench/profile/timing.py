"""The one timing protocol: warm up, repeat, report the median with its spread, flag noisy runs.

Like `triton.testing.do_bench`, but for the host: each sample times a batch of calls long enough to be well above
the clock's resolution; the median of the samples is the result and the interquartile range its spread.
A run whose spread exceeds 10 % of the median is flagged noisy (never hidden: it is reported as such).
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

NOISY = 0.10


def fmt_time(ms: float | None) -> str:
    """A duration with three significant digits in the unit that suits it (ns, µs, ms, s). The number is
    always four characters wide (' 314', '31.4', '3.14'), so tables of times keep their columns."""
    if ms is None:
        return "—"
    v, unit = ms * 1e6, "ns"
    for name, scale in (("ns", 1.0), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)):
        v, unit = float(f"{ms * 1e6 / scale:.3g}"), name
        if v < 1000:
            break
    num = f"{v:4.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"
    return f"{num} {unit}"


@dataclass(frozen=True)
class Timing:
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    samples: int
    calls_per_sample: int

    @property
    def spread(self) -> float:
        """Interquartile range relative to the median."""
        return (self.q3_ms - self.q1_ms) / self.median_ms if self.median_ms else 0.0

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY

    def __str__(self) -> str:
        flag = " (noisy)" if self.noisy else ""
        return f"{self.median_ms:.3f} ms ±{self.spread * 50:.0f}%{flag}"


def bench(fn: Callable[[], object], *, warmup: int = 2, samples: int = 7, min_sample_s: float = 0.02,
          max_total_s: float = 10.0) -> Timing:
    """Time `fn()` (call it with its arguments bound)."""
    for _ in range(warmup):
        fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    calls = max(1, int(min_sample_s / once))
    samples = max(3, min(samples, int(max_total_s / (once * calls)) or 3))
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) * 1e3 / calls)
    q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    return Timing(statistics.median(times), q[0], q[2], min(times), len(times), calls)

"""Timing runs against each other in one process: first calls (compilation) one by one, then warm-up calls, then
repeats that go round every run in turn, so the machine's drift (other work on its cores) hits all of them alike.
Each phase's samples become a `Timing` (median, quartiles, min) from the profiler's protocol, flagged noisy past
its threshold. CPU time (`process_time`, all the process's threads) is kept beside wall time: on a loaded machine
wall time includes waiting for a core."""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..profile.timing import Timing

LEAST = 5          # samples a run keeps when its time budget is spent


def timing(seconds: Sequence[float]) -> Timing:
    ms = sorted(s * 1e3 for s in seconds)
    q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [ms[0]] * 3
    return Timing(statistics.median(ms), q[0], q[2], ms[0], len(ms), 1)


@dataclass
class FirstCall:
    wall_s: float
    cpu_s: float
    phases: dict[str, float]


def first_call(step: Callable[[], dict[str, float]]) -> FirstCall:
    t, c = time.perf_counter(), time.process_time()
    phases = step()
    return FirstCall(time.perf_counter() - t, time.process_time() - c, phases)


def alternate(steps: dict[str, Callable[[], dict[str, float]]], repeats: int, warmup: int = 1,
              progress: Callable[[str], None] | None = None, budget_s: float | None = None,
              least: int = LEAST) -> dict[str, dict[str, Timing]]:
    """`steps[name]()` returns the seconds of each of its phases; per name and phase, the Timing of `repeats`
    samples taken in turn with the others. With `budget_s`, a run whose samples have taken that long stops at
    `least` samples or wherever it has passed them (torch's bfloat16 steps on a CPU without bfloat16 instructions
    take seconds each, and ten of them per engine held the suite for minutes); the others go on."""
    for _ in range(warmup):
        for fn in steps.values():
            fn()
    samples: dict[str, dict[str, list[float]]] = {k: {} for k in steps}
    spent = dict.fromkeys(steps, 0.0)
    for i in range(repeats):
        for name, fn in steps.items():
            if budget_s is not None and i >= least and spent[name] >= budget_s:
                continue
            t = time.perf_counter()
            for phase, s in fn().items():
                samples[name].setdefault(phase, []).append(s)
            spent[name] += time.perf_counter() - t
        if progress:
            progress(f"repeat {i + 1}/{repeats}")
    return {k: {p: timing(v) if not p.endswith(":cpu") else cpu_timing(v) for p, v in phases.items()}
            for k, phases in samples.items()}


def cpu_timing(seconds: Sequence[float]) -> Timing:
    """CPU-time samples: where the kernel accounts CPU time by the scheduler's tick (as this machine's does, in
    4 ms steps), a short interval's CPU time is a sampled count, so the mean, not the median, is the estimate;
    it is kept as the Timing's median."""
    t = timing(seconds)
    return Timing(sum(seconds) * 1e3 / len(seconds), t.q1_ms, t.q3_ms, t.min_ms, t.samples, 1)

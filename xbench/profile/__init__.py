"""Profiling: one call of an operator measured, simulated and predicted on every backend and target.

    rep = xb.profile(xb.ops.softmax, x)                      # cpu, cuda, ascend; cpu-local, h100, a100, 910B
    rep["time_ms", "cpu"].value, rep["l1_hit_rate", "cpu"], rep["registers_per_thread", "cuda", "h100"]
    print(rep.table()); rep.to_pandas(); rep.to_dict()

The metrics come from collectors (`xbench.profile.collectors`); pass `collectors=[...]` to add your own.
"""
from __future__ import annotations

import sys
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .collectors import COLLECTORS, Collector, Context, Failed
from .report import SOURCES, Metric, Report, unavailable
from .timing import Timing, bench

DEFAULT_BACKENDS = ("cpu", "cuda", "ascend")
DEFAULT_TARGETS = ("cpu-local", "h100", "a100", "ascend-910b")


def profile(op: Any, *args: Any, backends: Sequence[str] = DEFAULT_BACKENDS,
            targets: Sequence[str] = DEFAULT_TARGETS, timing: bool = True, budget: int = 2_000_000,
            schedule: Mapping | None = None, collectors: Iterable[Collector] | None = None,
            extra_collectors: Iterable[Collector] = (), bench_options: Mapping | None = None,
            simulate_cuda: bool = False, cpu_model: Any = None, check_elements: int = 1 << 22,
            checks: Mapping[str, Any] | None = None, **kwargs: Any) -> Report:
    """Profile `op(*args, **kwargs)`: counts, compile times, errors against the float64 reference, timings
    (where the backend runs on its hardware), toolchain resources, simulated cache behaviour and predicted
    times, for each backend in `backends` and each target in `targets` (see `xbench.hw.list_targets()`).

    `budget` caps the accesses the cache simulator spends per target (0 turns simulation off); `schedule` is
    passed to the cpu compile (or a mapping backend -> schedule); `bench_options` to `xbench.profile.bench`;
    `simulate_cuda=True` runs the CUDA simulator for the error check even on large inputs (slow);
    `cpu_model` gives the cpu model's constants (`xbench.hw.predict.CpuModel`) instead of calibrating them;
    outputs of more than `check_elements` elements are compared with the reference on evenly spaced rows
    (the note says how many; 0 compares everything). A simulated backend of an annotated operator is compared at
    sizes of its own (`xbench.profile.checks`: every dim distinct, loops past one trip; the note names them);
    `checks` ({backend: Check}) gives checks already made, reported as they are.
    Targets may be names or `Target` objects.
    A backend or target that is missing or fails does not stop the profile: its metrics say
    "unavailable: <reason>".
    """
    if not hasattr(op, "lower") or not hasattr(op, "compile"):
        raise TypeError(f"profile() takes an xbench operator (an @xb.tensor_op or xb.ops.<name>), got "
                        f"{type(op).__name__}")
    opts: dict[str, Any] = {"simulate_cuda": simulate_cuda, "cpu_model": cpu_model, "check_elements": check_elements,
                            "checks": dict(checks or {})}
    if bench_options:
        opts["bench"] = dict(bench_options)
    ctx = Context(op, args, dict(kwargs), tuple(backends), tuple(targets), timing=timing, budget=budget,
                  schedule=schedule, options=opts)
    records: list[Metric] = []
    for t in targets:
        try:
            ctx.target(t)
        except Failed as e:
            records.append(unavailable("predicted_time_ms", str(e), unit="ms", source="predicted",
                                       target=getattr(t, "name", str(t))))
    for c in list(collectors if collectors is not None else COLLECTORS) + list(extra_collectors):
        why = c.applies(ctx)
        if why is not None:
            continue
        records.extend(c.collect(ctx))
    try:
        program = ctx.program
        kernels = [k.name for k in program.kernels]
        shapes = ", ".join(f"{n}: {program.buffers[n].type_str()}" for n in program.inputs)
    except Failed:
        kernels, shapes = [], ""
    details = {k[0] if isinstance(k, tuple) and len(k) == 1 else k: v for k, (ok, v) in ctx._memo.items()
               if ok and (k in ("counts",) or (isinstance(k, tuple) and k[0] in ("caches", "prediction")))}
    return Report(op.name, records, shapes=shapes, kernels=kernels, details=details)


__all__ = ["SOURCES", "Collector", "Context", "Metric", "Report", "Timing", "bench", "calibrate", "profile",
           "unavailable"]


def calibrate(force: bool = False, **kwargs: Any):
    """Measure (or load) the local CPU's target, 'cpu-local' (see `xbench.hw.calibrate.calibrate`)."""
    from ..hw.calibrate import calibrate as _calibrate
    return _calibrate(force, **kwargs)


class _CallableModule(types.ModuleType):
    """`xb.profile` is this package and the function at once: `xb.profile(op, x)`, `xb.profile.Report`,
    `import xbench.profile.collectors`."""

    def __call__(self, op: Any, *args: Any, **kwargs: Any) -> Report:
        return profile(op, *args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

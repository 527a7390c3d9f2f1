"""The roofline bound of profiled kernels, and the check that no time beats it.

A kernel's bound is the larger of its flops over the peak of their dtype and unit and its compulsory bytes over
the bandwidth of the memory level its data come from: the device memory, or for repeated warm runs (the cpu
timing) the closest cache whose total size holds the bytes the kernels touch. A time under its bound puts the
point above its roof, which no kernel can do: the roof (a calibration taken on a busy host) or the count is
wrong, so the fraction is flagged instead of reported.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..hw.target import Target, TargetError
from .report import Metric

ABOVE_ROOF = 1.02          # a time this much under its bound is flagged (2 %: timer and rounding slack)


def roof_level(target: Target, nbytes: float, warm: bool):
    """The memory level the bound is priced at (module docstring)."""
    if warm:
        for m in target.memory_levels:
            if m.is_cache and m.bandwidth and m.total_bytes and nbytes <= m.total_bytes:
                return m
    return target.memory


def compute_time(c, target: Target) -> float:
    """Seconds of a kernel's flops at the peak of each (dtype, unit) it does them in."""
    t = 0.0
    for (dt, u), f in c.flops.items():
        try:
            peak = target.peak_flops(dt, u)
        except TargetError:
            try:
                peak = target.peak_flops(dt)
            except TargetError:
                peak = target.peak_flops("float32")
        t += f / peak
    return t


def roof_time(cs: Sequence, target: Target, warm: bool = False) -> tuple[float, str]:
    """(seconds, name of the memory level): the roofline bound of the kernels `cs` (KernelCounts)."""
    level = roof_level(target, sum(c.bytes for c in cs), warm)
    return sum(max(compute_time(c, target), c.bytes / level.bandwidth) for c in cs), level.name


def above_roof(seconds: float, bound: float) -> bool:
    return seconds * ABOVE_ROOF < bound


def pct_of_roofline(cs: Sequence, target: Target, seconds: float, source: str, backend: str, *,
                    warm: bool) -> Metric:
    """The bound over the time, in %; flagged (no value) when the time beats its bound."""
    roof, level = roof_time(cs, target, warm)
    where = f"roofline bound {roof * 1e3:.3g} ms on {target.name} ({level} roof)"
    if not above_roof(seconds, roof):
        return Metric("pct_of_roofline", 100.0 * roof / seconds, "%", source, backend, target.name, note=where)
    fix = ("recalibrate this machine on a quiet host (xb.profile.calibrate(force=True))"
           if target.kind == "cpu" and source == "measured" else "the model or the target's numbers are wrong")
    return Metric("pct_of_roofline", None, "%", source, backend, target.name,
                  note=f"flagged: above its roof ({100.0 * roof / seconds:.0f} % of the {where}); {fix}")

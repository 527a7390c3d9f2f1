"""The hardware layer: target descriptions with sources, the local CPU's calibration, the CUDA occupancy
calculator and the cache simulator. Nothing here runs user code. The local CPU is measured by
`xbench.hw.calibrate.calibrate()` (or on first `get_target("cpu-local")`).

    from xbench.hw import get_target, occupancy, simulate, Hierarchy, Trace
    get_target("h100").peak_flops("float16", unit="tensor")
    occupancy("sm_90", 256, 64, dynamic_smem=48 * 1024).occupancy
    simulate(Hierarchy.from_target("h100"), [Trace(addrs_sm0), Trace(addrs_sm1)]).level("l2").hit_rate
"""
from __future__ import annotations

from typing import Any

from .occupancy import Occupancy, OccupancyError, occupancy
from .target import CpuSpec, GpuLimits, MemoryLevel, NpuSpec, Target, TargetError, get_target, list_targets

_LAZY = {  # numba-compiled modules load on first use
    "CacheLevel": "cachesim", "CacheSimError": "cachesim", "CacheSimulator": "cachesim", "Hierarchy": "cachesim",
    "SampledResult": "cachesim", "SimResult": "cachesim", "Trace": "cachesim", "simulate": "cachesim",
    "simulate_sampled": "cachesim",
}

__all__ = ["CacheLevel", "CacheSimError", "CacheSimulator", "CpuSpec", "GpuLimits", "Hierarchy", "MemoryLevel",
           "NpuSpec", "Occupancy", "OccupancyError", "SampledResult", "SimResult", "Target", "TargetError", "Trace",
           "get_target", "list_targets", "occupancy", "simulate", "simulate_sampled"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module 'xbench.hw' has no attribute {name!r}")

"""Fixtures for the profiler tests: a small synthetic CPU target (known caches, so cache behaviour can be computed
by hand and simulated in milliseconds) and a fixed cpu model (no calibration)."""
from __future__ import annotations

import pytest

from xbench.hw.predict import CpuModel
from xbench.hw.target import Target, build_target


def small_cpu(cores: int = 2, l1: int = 4096, l2: int = 32768, l3: int = 262144, dram_bw: float = 20e9) -> Target:
    def v(x, src="test value"):
        return {"value": x, "source": src}

    def level(name, size, ways, bw, scope):
        return {"name": name, "scope": scope, "managed": "hardware", "size_bytes": v(size), "line_bytes": v(64),
                "associativity": v(ways), "write_policy": v("write-back"), "bandwidth_bytes_per_s": v(bw)}

    data = {
        "schema": 1, "name": "test-cpu", "kind": "cpu", "full_name": "test CPU",
        "clock": {"boost_hz": v(3e9)}, "compute": {"units": v(cores), "unit_name": "core"},
        "peak": {"float32": {"vector": v(100e9 * cores)}, "float64": {"vector": v(50e9 * cores)}},
        "memory": [level("l1", l1, 4, 200e9 * cores, "per_core"), level("l2", l2, 8, 100e9 * cores, "per_core"),
                   level("l3", l3, 16, 60e9, "shared"),
                   {"name": "dram", "scope": "device", "managed": "memory", "size_bytes": v(1 << 34),
                    "bandwidth_bytes_per_s": v(dram_bw)}],
        "cpu": {"model_name": "test", "cores": v(cores), "isa": ["avx2", "fma"],
                "single_core_peak": {"float32": v(100e9), "float64": v(50e9)}},
    }
    return build_target(data, "tests/profile/conftest.py")


@pytest.fixture(scope="session")
def cpu() -> Target:
    return small_cpu()


def fixed_model(t: Target) -> CpuModel:
    """Round constants: 1 us per serial kernel call, 5 us per parallel region, 8 us per kernel run as tasks, 2 us
    host time per run."""
    return CpuModel(host="test", cores=t.compute_units, threads=t.compute_units, call_us=1.0, parallel_us=5.0,
                    task_us=8.0, run_us=2.0, c_op_ns=0.02,
                    c_access_ns=0.05, fn_ns={"exp": 0.5, "erf": 0.8, "tanh": 0.6}, blas_flops={"float32": 100e9,
                                                                                           "float64": 50e9},
                    bw_1core={"l1": 200e9, "l2": 100e9, "l3": 40e9, "dram": 15e9}, measured="test")


@pytest.fixture(scope="session")
def model(cpu) -> CpuModel:
    return fixed_model(cpu)

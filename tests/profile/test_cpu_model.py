"""The cpu model's micro-benchmarks: measured once per machine state and cached, plausible values."""
from __future__ import annotations

import json

import pytest

from xbench.hw import predict as P


def test_calibration_measures_then_reuses(cpu, tmp_path, monkeypatch) -> None:
    stored_at = tmp_path / "cpu-model.json"       # the model apart; compiled micro-benchmarks stay cached
    monkeypatch.setattr(P, "_model_path", lambda: stored_at)
    m = P.calibrate_cpu_model(cpu, ["exp", "reduce_sum"], quick=True)
    assert m.cores == cpu.compute_units and m.threads >= 1
    assert 0 < m.call_us < 10_000 and 0 < m.parallel_us < 100_000 and 0 < m.task_us < 100_000 and 0 <= m.run_us < 10_000
    assert 0 < m.c_op_ns == pytest.approx(2 / cpu.cpu.single_core_peak["float32"] * 1e9)
    # costs per element: at least one vector operation, at most a microsecond
    for name in ("simple", "exp", "reduce_sum"):
        assert m.c_op_ns <= m.fn_ns[name] < 1000, name
    assert m.c_access_ns == pytest.approx(4e9 / m.bw_1core["l1"])
    for n in P.BLAS_SIZES[::2]:
        assert 1e7 < m.blas_flops[f"float32@{n}"] < 1e13
    assert P.blas_rate(m, "float32", 2 * 64 ** 3) == pytest.approx(m.blas_flops["float32@64"])
    assert set(m.bw_1core) == {"l1", "l2", "l3", "dram"} and all(v > 1e8 for v in m.bw_1core.values())
    stored = json.loads(stored_at.read_text())
    assert stored["fn_ns"] == m.fn_ns
    # loaded again without measuring; a function not measured yet is added
    again = P.calibrate_cpu_model(cpu, ["exp"], quick=True)
    assert again.measured == m.measured and again.fn_ns == m.fn_ns
    more = P.calibrate_cpu_model(cpu, ["exp", "tanh"], quick=True)
    assert more.measured == m.measured and "tanh" in more.fn_ns and more.fn_ns["exp"] == m.fn_ns["exp"]

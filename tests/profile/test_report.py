"""The profile Report: every metric present with a plausible value and the right source for softmax and matmul
on the cpu, lookup and formatting, cuda and ascend metrics from those backends, and clean degradation."""
from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

import xbench as xb
from xbench.profile import Metric, Report, profile, unavailable

rng = np.random.default_rng(0)
FAST = {"bench_options": {"samples": 3, "min_sample_s": 0.005, "max_total_s": 1.0}}

CPU_METRICS = {
    "flops": "counted", "bytes": "counted", "arithmetic_intensity": "counted", "compile_ms": "measured",
    "max_abs_error": "measured", "max_rel_error": "measured", "time_ms": "measured", "gflops": "measured",
    "gbytes_per_s": "measured", "pct_of_roofline": "measured", "l1_hit_rate": "simulated",
    "l2_hit_rate": "simulated", "l3_hit_rate": "simulated", "dram_bytes": "simulated",
    "predicted_time_ms": "predicted",
}


@pytest.fixture(scope="module")
def softmax_report(cpu, model) -> Report:
    x = rng.standard_normal((64, 256)).astype(np.float32)
    return profile(xb.ops.softmax, x, backends=("cpu",), targets=(cpu,), cpu_model=model, **FAST)


@pytest.fixture(scope="module")
def matmul_report(cpu, model) -> Report:
    a = rng.standard_normal((48, 32)).astype(np.float32)
    b = rng.standard_normal((32, 40)).astype(np.float32)
    return profile(xb.ops.matmul, a, b, backends=("cpu",), targets=(cpu,), cpu_model=model, **FAST)


@pytest.mark.parametrize("which", ["softmax", "matmul"])
def test_every_cpu_metric_is_present_with_its_source(which, softmax_report, matmul_report) -> None:
    rep = softmax_report if which == "softmax" else matmul_report
    for name, source in CPU_METRICS.items():
        m = rep[name] if source == "counted" else rep[name, "cpu"]
        assert m.available, (name, m.note)
        assert m.source == source, name
        if source != "counted":
            assert (m.backend, m.target) == ("cpu", "test-cpu")
    assert not [m for m in rep.records if not m.available]


def test_softmax_values(softmax_report) -> None:
    rep, n, d = softmax_report, 64, 256
    assert rep.value("flops") == 5 * n * d
    assert rep.value("bytes") == 2 * 4 * n * d
    assert rep.value("arithmetic_intensity") == pytest.approx(5 / 8)
    t = rep["time_ms", "cpu"]
    assert 0 < t.low <= t.value <= t.high < 10_000
    assert rep.value("gflops", "cpu") == pytest.approx(5 * n * d / (t.value / 1e3) / 1e9)
    assert rep.value("gbytes_per_s", "cpu") == pytest.approx(8 * n * d / (t.value / 1e3) / 1e9)
    assert 0 < rep.value("pct_of_roofline", "cpu") <= 100
    assert rep.value("max_abs_error", "cpu") < 1e-5 and rep["max_abs_error", "cpu"].note == "within tolerance"
    for lv in ("l1", "l2", "l3"):
        assert 0 <= rep.value(f"{lv}_hit_rate", "cpu") <= 100
    # 2 x 64 KiB does not fit the 32 KiB L2 of the test CPU but does its 256 KiB L3: no memory traffic when warm
    assert rep.value("l1_hit_rate", "cpu") > 90
    assert rep.value("dram_bytes", "cpu") == 0
    assert rep.value("predicted_time_ms", "cpu") > 0
    assert rep.value("compile_ms", "cpu") >= 0


def test_matmul_values(matmul_report) -> None:
    rep = matmul_report
    assert rep.value("flops") == 2 * 48 * 40 * 32
    assert rep.value("bytes") == 4 * (48 * 32 + 32 * 40 + 48 * 40)
    assert rep["l1_hit_rate", "cpu"].note.endswith("vector accesses")
    assert rep.value("max_abs_error", "cpu") < 1e-4


def test_lookup(softmax_report) -> None:
    rep = softmax_report
    assert rep["time_ms", "cpu"] is rep["time_ms", "test-cpu"] is rep["time_ms", "cpu", "test-cpu"]
    assert float(rep["flops"]) == rep.value("flops")
    assert ("time_ms", "cpu") in rep and ("time_ms", "h100") not in rep and "nothing" not in rep
    with pytest.raises(KeyError, match="no metric 'nothing'; it has: .*flops"):
        rep["nothing"]
    with pytest.raises(KeyError, match="not reported for h100; it is for: cpu/test-cpu"):
        rep["time_ms", "h100"]
    two = Report("op", [Metric("time_ms", 1.0, "ms", backend="cpu", target="a"),
                        Metric("time_ms", 2.0, "ms", backend="cpu", target="b")])
    with pytest.raises(KeyError, match="several places"):
        two["time_ms", "cpu"]
    assert two["time_ms", "cpu", "b"].value == 2.0
    assert [m.value for m in two.filter("time_ms", target="a")] == [1.0]


def test_table_and_serialisations(softmax_report) -> None:
    rep = softmax_report
    text = rep.table()
    lines = text.splitlines()
    assert lines[0] == "softmax input: f32[64,256]: 15 metrics"
    assert lines[1].split() == ["metric", "where", "value", "source", "note"]
    row = next(line for line in lines if line.startswith("flops "))
    assert row.split()[:5] == ["flops", "operator", "81.9", "kFLOP", "counted"]
    assert str(rep) == text
    d = json.loads(rep.to_json())
    assert d["op"] == "softmax" and len(d["records"]) == len(rep)
    again = Report.from_dict(d)
    assert [(m.name, m.value, m.source, m.where) for m in again] == [(m.name, m.value, m.source, m.where) for m in rep]
    df = rep.to_pandas()
    assert df.shape[0] == len(rep) and set(df["source"]) == {"counted", "measured", "simulated", "predicted"}
    html = rep._repr_html_()
    # grouped by where the metrics apply: a header row per group, a row per metric
    groups = rep.groups()
    assert list(groups) == ["operator", "cpu/test-cpu"]
    assert html.count("<tr") == len(rep) + len(groups) and "predicted_time_ms" in html
    assert html.count("<details open class='xb-group'") == len(groups)
    assert "<summary>operator (counted)</summary>" in html
    assert re.search(r"<summary>cpu on test-cpu \(measured, [a-z, ]+\)</summary>", html)
    grouped = rep.grouped_text()
    assert grouped.splitlines()[1] == "operator (counted)" and "cpu on test-cpu (" in grouped


def test_metric_rules() -> None:
    with pytest.raises(ValueError, match="source 'guessed'"):
        Metric("x", 1, source="guessed")
    m = unavailable("registers_per_thread", "xbench: ptxas was not found\nmore", source="toolchain", backend="cuda")
    assert not m.available and m.note == "unavailable: ptxas was not found" and m.text() == m.note
    with pytest.raises(TypeError, match="not a number"):
        float(m)
    assert Metric("t", 1.5, "ms").text() == "1.5 ms" and Metric("b", 2.5e6, "B").text() == "2.5 MB"
    assert Metric("r", 97.25, "%").text() == "97.2 %"


def test_missing_backend_and_target_degrade_cleanly(cpu, model) -> None:
    x = rng.standard_normal((8, 16)).astype(np.float32)
    rep = profile(xb.ops.softmax, x, backends=("cpu", "nosuch"), targets=(cpu, "tpu-v9"), cpu_model=model,
                  timing=False)
    m = rep["compile_ms", "nosuch"]
    assert not m.available and "no backend named 'nosuch'" in m.note
    assert not rep["max_abs_error", "nosuch"].available
    bad = rep["predicted_time_ms", "tpu-v9"]
    assert not bad.available and "unknown target 'tpu-v9'" in bad.note
    assert rep["predicted_time_ms", "cpu"].available
    assert "time_ms" not in rep.names          # timing=False


def test_collectors_are_pluggable(cpu, model) -> None:
    class Rows:
        name = "rows"

        def applies(self, ctx):
            return None

        def collect(self, ctx):
            yield Metric("output_rows", ctx.program.buffers["out"].shape[0], "", "counted")

    x = rng.standard_normal((5, 16)).astype(np.float32)
    rep = profile(xb.ops.softmax, x, backends=("cpu",), targets=(cpu,), cpu_model=model, timing=False,
                  extra_collectors=[Rows()])
    assert rep.value("output_rows") == 5
    only = profile(xb.ops.softmax, x, backends=("cpu",), targets=(cpu,), collectors=[Rows()])
    assert only.names == ["output_rows"]


def test_cuda_metrics_from_ptxas_and_the_occupancy_calculator(cpu, model) -> None:
    """The cuda backend is installed in the test environment: its toolchain metrics are reported per GPU target
    (sm_90 for the H100, sm_80 for the A100); there is no GPU here, so no timing and a predicted time."""
    x = rng.standard_normal((32, 128)).astype(np.float32)
    rep = profile(xb.ops.softmax, x, backends=("cuda",), targets=("h100", "a100"), timing=True)
    for t in ("h100", "a100"):
        regs = rep["registers_per_thread", "cuda", t]
        assert regs.source == "toolchain" and 1 <= regs.value <= 255
        assert rep.value("spill_bytes", "cuda", t) >= 0 and rep.value("stack_bytes", "cuda", t) >= 0
        assert rep.value("shared_mem_bytes", "cuda", t) >= 0
        assert 0 < rep.value("occupancy_theoretical", "cuda", t) <= 100
        assert rep.value("occupancy_limiter", "cuda", t) in ("warps", "registers", "shared_memory", "blocks",
                                                           "barriers")
        assert rep["predicted_time_ms", "cuda", t].value > 0
        assert 0 <= rep.value("l1_hit_rate", "cuda", t) <= 100
        assert rep["dram_bytes", "cuda", t].value == pytest.approx(2 * x.nbytes, rel=0.01)
        assert "ptxas" in rep["registers_per_thread", "cuda", t].note
    assert "sm_90" in rep["registers_per_thread", "cuda", "h100"].note
    assert "sm_80" in rep["registers_per_thread", "cuda", "a100"].note
    if xb.backends.get("cuda").available()[1].endswith("simulator (no CUDA GPU found)"):
        assert not rep["time_ms", "cuda"].available and "simulator" in rep["time_ms", "cuda"].note
    # the simulator checks a small case against the reference
    assert rep.value("max_abs_error", "cuda") < 1e-5


def test_ascend_metrics_from_the_twin() -> None:
    x = rng.standard_normal((48, 256)).astype(np.float32)
    rep = profile(xb.ops.softmax, x, backends=("ascend",), targets=("ascend-910b",))
    ub = rep["ub_bytes", "ascend"]
    assert ub.source == "toolchain" and 0 < ub.value <= 196608
    assert rep.value("ub_utilization", "ascend") == pytest.approx(100 * ub.value / 196608)
    mte = rep["mte_bytes", "ascend"]
    assert mte.source == "simulated" and mte.value == 2 * x.nbytes
    assert rep["vector_cycles", "ascend"].value > 0 and rep.value("cube_cycles", "ascend") == 0
    assert rep.value("max_abs_error", "ascend") < 1e-5
    assert rep["predicted_time_ms", "ascend"].value > 0
    assert not rep["time_ms", "ascend"].available and "twin" in rep["time_ms", "ascend"].note
    assert not rep["l2_hit_rate", "ascend"].available
    assert math.isfinite(rep.value("pct_of_roofline", "ascend"))

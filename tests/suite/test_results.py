"""The results document: its schema, merging runs from two machines, and the reports drawn from it (synthetic
rows with hand-computed ratios; the runner's own rows are checked in test_runner)."""
from __future__ import annotations

import json

import pytest

from xbench.suite.report import chart_data, html, table, targets
from xbench.suite.results import SCHEMA, Results, merge


def _doc(host: str, started: str, gpu: str | None = None) -> tuple[Results, str]:
    res, run = Results.new_run("test", {})
    res.runs[run]["machine"]["host"] = host
    res.runs[run]["machine"]["gpu"] = gpu
    res.runs[run]["started"] = started
    return res, run


def _row(workload="bert", precision="float32", platform="cpu", engine="xbench", source="measured",
         metric="step_ms", value=1.0, unit="ms", mode="train"):
    return dict(workload=workload, domain="nlp", mode=mode, size="bench", precision=precision, platform=platform,
                engine=engine, source=source, metric=metric, value=value, unit=unit)


def here() -> Results:
    res, run = _doc("cpu-box", "2026-01-01T00:00:00+00:00")
    for engine, ms in (("eager", 30.0), ("xbench", 20.0), ("inductor", 25.0)):
        res.add(run, **_row(engine=engine, value=ms))
        res.add(run, **_row(engine=engine, metric="samples_per_s", value=8 / (ms / 1e3), unit="samples/s"))
    for target, sps in (("h100", 4000.0), ("a100", 2000.0), ("ascend-910b", 1800.0)):
        res.add(run, **_row(platform=target, source="predicted", metric="samples_per_s", value=sps, unit="samples/s"))
        res.add(run, **_row(platform=target, source="predicted", metric="ratio_to_reference", value=sps / 2000.0,
                            unit="x") | {"detail": {"reference": "a100", "of": "samples_per_s"}})
    for precision, peak in (("float32", 100e6), ("bfloat16", 60e6)):
        res.add(run, **_row(precision=precision, metric="peak_activation_bytes", value=peak, unit="B"))
    res.varlen.append({"run": run, "size": "bench", "requests": 3, "lengths": [8, 100, 256], "buckets": [16, 128, 256],
                       "p50_ms": {"eager padded": 5.0, "xbench bucketed": 3.0},
                       "p99_ms": {"eager padded": 6.0, "xbench bucketed": 5.5}, "compiles": 3, "dynamo_graphs": 3,
                       "warmup_s": 1.0, "max_logit_diff": {}})
    return res


def test_a_document_round_trips_and_bad_ones_are_refused(tmp_path):
    res = here()
    p = tmp_path / "r.json"
    res.save(p)
    data = json.loads(p.read_text())
    assert data["schema"] == SCHEMA and len(data["rows"]) == len(res.rows)
    back = Results.load(p)
    assert back.value(engine="xbench", metric="step_ms") == 20.0
    with pytest.raises(ValueError, match="schema"):
        Results.from_dict({**data, "schema": "other/1"})
    broken = dict(data, rows=[{k: v for k, v in data["rows"][0].items() if k != "metric"}])
    with pytest.raises(ValueError, match="row 0 has no metric"):
        Results.from_dict(broken)
    with pytest.raises(ValueError, match="needs size, mode"):
        res.add(next(iter(res.runs)), workload="bert", value=1.0)


def test_a_gpu_machine_adds_measured_columns_and_the_later_run_wins():
    mine = here()
    gpu, run = _doc("gpu-box", "2026-01-02T00:00:00+00:00", gpu="NVIDIA H100 80GB HBM3")
    gpu.add(run, **_row(platform="h100", metric="samples_per_s", value=3000.0, unit="samples/s"))
    later, run2 = _doc("cpu-box", "2026-01-03T00:00:00+00:00")
    later.add(run2, **_row(engine="xbench", value=16.0))
    both = merge(mine, gpu, later)
    assert len(both.runs) == 3
    assert both.value(platform="h100", source="measured", metric="samples_per_s") == 3000.0
    assert both.value(platform="h100", source="predicted", metric="samples_per_s") == 4000.0
    assert both.value(platform="cpu", engine="xbench", metric="step_ms") == 16.0       # the later run's
    assert len(both.find(platform="cpu", engine="xbench", metric="step_ms")) == 1
    assert merge(both, both).rows == both.rows                                        # merging is idempotent


def test_the_report_checks_the_targets_with_the_numbers():
    res = here()
    ts = {t.claim: t for t in targets(res)}
    step = ts["BERT training step, float32 (bench): >= 1.2x eager"]
    assert step.measured == "1.50x" and step.ok                                    # 30 ms / 20 ms
    ind = ts["BERT training step, float32 (bench): >= Inductor"]
    assert ind.measured == "1.25x" and ind.ok
    mem = ts["BERT (xbench) bf16 peak activation memory <= 0.55x float32 (bench)"]
    assert mem.measured == "0.60x" and not mem.ok
    assert ts["variable-length BERT (bench): xbench p99 below eager padded"].ok
    text = table(res)
    assert "1.50x" in text and "ascend-910b/a100" in text and "0.90x" in text      # 1800 / 2000
    assert "Targets: 3 of 4 met" in text


def test_the_chart_shows_every_platform_against_the_reference():
    res = here()
    data = chart_data(res)
    assert data["workloads"] == ["BERT"] and data["reference"] == "a100"
    assert data["platforms"]["h100"] == [2.0] and data["platforms"]["a100"] == [1.0]
    assert data["platforms"]["cpu"] == [pytest.approx(400.0 / 2000.0)]             # 8 samples / 20 ms
    assert data["speedups"]["xbench"] == [1.5]
    page = html(res)
    assert page.startswith("<!doctype html>") and "<svg" in page and "missed" in page


def test_recording_the_machine_leaves_the_cuda_simulator_available():
    # asking whether there is a GPU must not import numba.cuda in GPU mode on a machine without one
    import subprocess
    import sys
    code = ("from xbench.suite.results import machine; m = machine(); import numpy as np, xbench as xb; "
            "x = np.arange(6, dtype=np.float32); print(m['gpu'], float(xb.ops.add(x, x, backend='cuda').sum()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["None", "30.0"]


def test_the_cli_leaves_the_openmp_threads_at_the_users_settings_and_records_them():
    """The process's one OpenMP runtime (torch's; numba's loops and torch's MKL bind to it) reads OMP_WAIT_POLICY
    when torch is imported: the CLI imports torch with the user's setting and changes nothing after, and a run
    records the setting and the BLAS xbench's GEMMs call (torch's MKL, on those threads)."""
    import os
    import subprocess
    import sys

    import torch
    code = ("import os, sys\n"
            "from xbench.suite import cli, results\n"
            "m = results.machine()\n"
            "print(m['omp_wait_policy'] or '-', os.environ.get('OMP_WAIT_POLICY', '-'), m['blas'])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "XBENCH_BLAS")}
    blas = "mkl" if torch.backends.mkl.is_available() else "openblas"
    for given, want in ((None, f"- - {blas}"), ("ACTIVE", f"ACTIVE ACTIVE {blas}")):
        out = subprocess.run([sys.executable, "-c", code], env={**env, **({"OMP_WAIT_POLICY": given} if given else {})},
                             capture_output=True, text=True, check=True).stdout.split("\n")[-2]
        assert out == want, (given, out)

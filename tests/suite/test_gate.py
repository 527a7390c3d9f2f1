"""The accuracy gate on cpu: every workload at its tiny size, its outputs and its 10-step loss curve against
torch eager in float32 and a float64 run of the same model (each workload compiled once)."""
from __future__ import annotations

import pytest

from xbench.suite.gate import STEPS, compare_curves, compare_outputs, gate
from xbench.suite.workloads import WORKLOADS


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_passes_the_gate_on_cpu(name):
    r = gate(WORKLOADS[name], "cpu", "tiny", STEPS)
    assert not r.error, r.error
    assert r.ok, str(r)
    kinds = [c.what for c in r.checks]
    assert kinds[:2] == ["outputs", f"{STEPS}-step loss curve"]
    if WORKLOADS[name].mode == "decode":
        assert kinds[2:] == ["greedy tokens", "decode logits"]
    curve = r.checks[1]
    assert curve.xbench <= curve.allowed and curve.allowed > 0
    assert r.recompiled == 0        # every graph compiled by the first step: the suite's first calls are whole


def test_the_gate_fails_what_is_off():
    import torch
    exact = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = exact.float() + torch.tensor([1e-7, 0.0, 0.0])
    assert compare_outputs(exact.float(), eager, exact, "x").ok
    assert not compare_outputs(exact.float() * (1 + 1e-4), eager, exact, "x").ok
    assert compare_curves([1.0, 0.5], [1.0, 0.5], [1.0, 0.5]).ok
    bad = compare_curves([1.0, 0.52], [1.0, 0.5], [1.0, 0.5])
    assert not bad.ok and "step 1" in bad.worst
    assert not compare_curves([1.0, float("nan")], [1.0, 0.5], [1.0, 0.5]).ok


def test_without_steps_the_gate_judges_one_inference():
    r = gate(WORKLOADS["mobilenet_v2"], "cpu", "tiny", 0)
    assert not r.error, r.error
    assert [c.what for c in r.checks] == ["inference outputs"] and r.ok, str(r)
    assert 0 <= r.checks[0].xbench <= r.checks[0].allowed


def test_simulated_backends_gate_an_inference_workload_on_its_inference(monkeypatch):
    from xbench.suite import runner
    from xbench.suite.results import Results
    asked = []
    monkeypatch.setattr(runner, "gate", lambda w, backend, size, steps: asked.append((w.name, backend, steps)) or
                        type("G", (), {"ok": True, "to_dict": lambda self: {}})())
    o = runner.SuiteOptions(gate_steps={"cpu": STEPS, "ascend": 2})
    for name in ("mobilenet_v2", "resnet"):
        for backend in ("cpu", "ascend"):
            runner._gate(Results(), "r", name, backend, o)
    assert asked == [("mobilenet_v2", "cpu", STEPS), ("mobilenet_v2", "ascend", 0),
                     ("resnet", "cpu", STEPS), ("resnet", "ascend", 2)]


def test_a_run_the_simulator_refuses_is_not_run_and_not_bisected(monkeypatch):
    from xbench.backends import cuda
    from xbench.suite import runner
    from xbench.suite.report import gate_rows
    from xbench.suite.results import Results
    # every cuda run asks the simulator's guard first, as it does without a GPU, so the test means the same on a
    # machine with one; the guard refuses before anything is launched
    monkeypatch.setattr(cuda.CudaArtifact, "run", lambda art, *arrays: cuda._sim_guard(art))
    monkeypatch.setenv("XBENCH_CUDASIM_MAX_S", "1e-9")
    monkeypatch.setattr(runner, "_bisect", lambda *a: pytest.fail("a refused run was bisected"))
    res = Results()
    runner._gate(res, "r", "two_tower", "cuda", runner.SuiteOptions(gate_steps={"cuda": 2}))
    (g,) = res.gate
    assert not g["ok"] and not g["error"] and "simulator (Python threads) would take about" in g["not_run"]
    assert gate_rows(res)[1][0][1:] == ["not run: simulator limit"]

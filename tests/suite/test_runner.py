"""`python -m xbench suite --quick` on one workload: the rows it writes (measured, predicted from the kernels the
workload compiled to, the gate), the JSON and HTML files, and refusals of bad options."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from xbench.suite import cli
from xbench.suite.results import Results


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("suite")
    code = cli.main(["--quick", "--only", "deepfm", "--no-varlen", "--no-progress", "--json", str(d / "r.json"),
                     "--html", str(d / "r.html")])
    return code, Results.load(d / "r.json"), (d / "r.html").read_text()


def test_the_quick_run_measures_predicts_and_gates(quick_run):
    code, res, page = quick_run
    assert code == 0 and not res.errors
    for engine in ("eager", "xbench"):
        step = res.find(workload="deepfm", engine=engine, platform="cpu", metric="step_ms")[0]
        sps = res.value(workload="deepfm", engine=engine, platform="cpu", metric="samples_per_s")
        assert step["q1"] <= step["value"] <= step["q3"] and step["samples"] == 3
        assert sps == pytest.approx(8 / (step["value"] / 1e3), rel=1e-3)              # batch of 8
        assert res.value(workload="deepfm", engine=engine, metric="first_call_s") > 0
    for target in ("h100", "a100", "ascend-910b"):
        pred = res.find(workload="deepfm", platform=target, source="predicted", metric="step_ms")[0]
        assert pred["value"] > 0 and pred["detail"]["kernels"] > 0 and pred["detail"]["fallback_ops"] == 0
        assert 0 < res.value(workload="deepfm", platform=target, metric="pct_peak_bandwidth") <= 100
    assert res.value(workload="deepfm", platform="a100", metric="ratio_to_reference") == 1.0
    h100 = res.value(workload="deepfm", platform="h100", source="predicted", metric="samples_per_s")
    a100 = res.value(workload="deepfm", platform="a100", source="predicted", metric="samples_per_s")
    assert res.value(workload="deepfm", platform="h100", metric="ratio_to_reference") == pytest.approx(h100 / a100,
                                                                                                    rel=1e-3)
    gate = res.gate[0]
    assert gate["workload"] == "deepfm" and gate["backend"] == "cpu" and gate["ok"] and gate["steps"] == 3
    (info,) = res.runs.values()
    stages = info["stages"]
    assert set(stages) == {"first calls (eager)", "first calls (xbench)", "timed repeats", "predictions",
                           "gate on cpu"}
    assert stages["gate on cpu"] == pytest.approx(gate["seconds"], abs=0.2)
    assert 0 < sum(stages.values()) <= info["seconds"]
    assert "<svg" in page and "DeepFM" in page


def test_predictions_are_the_hardware_model_over_the_recorded_programs():
    import torch

    from xbench.hw.predict import predict_program
    from xbench.hw.target import get_target
    from xbench.suite.engines import runs
    from xbench.suite.predict import compiled_programs, predict_phase
    from xbench.suite.workloads import WORKLOADS
    r = runs(WORKLOADS["deepfm"], "tiny", ("xbench",), ("float32",))[0]
    r.step()
    session = r.sessions["step"].session
    programs = compiled_programs(session)
    assert [g.kind for g in session.graphs] == ["forward", "backward"] and len(programs) == 2
    want = sum(predict_program(c.program, "h100").time_s for c in programs)
    params = sum(p.numel() for p in r.base.parameters())
    p = predict_phase(session, "h100", parameters=params)
    bw = get_target("h100").bandwidth("memory")
    assert p.seconds == pytest.approx(want + 20 * params / bw)
    assert p.kernels == sum(len(c.program.kernels) for c in programs)
    assert isinstance(r.last.loss, torch.Tensor)


def test_a_phase_is_priced_by_the_calls_of_its_last_run():
    """GPT-2's decode phase calls its graph once per token after the first: its prediction is that graph's
    times the calls, per token the graph's once; each run's calls are that run's, not a running total."""
    from xbench.hw.predict import predict_program
    from xbench.suite.engines import runs
    from xbench.suite.predict import compiled_programs, count_programs, predict_phase
    from xbench.suite.workloads import WORKLOADS
    w = WORKLOADS["gpt2"]
    r = runs(w, "tiny", ("xbench",), ("float32",))[0]
    for _ in range(2):
        r.step()
    (decode, n), = r.calls["decode"]
    (prefill, one), = r.calls["prefill"]
    assert n == w.decode_tokens[0] - 1 and one == 1 and decode.calls == 2 * n
    assert compiled_programs(r.sessions["decode"].session) == [decode]
    p = predict_phase(r.sessions["decode"].session, "a100", calls=r.calls["decode"])
    assert p.seconds == pytest.approx(n * predict_program(decode.program, "a100").time_s)
    assert p.kernels == n * len(decode.program.kernels)
    assert predict_phase(r.sessions["decode"].session, "a100").seconds == pytest.approx(p.seconds / n)
    counted = predict_phase(r.sessions["decode"].session, "a100", calls=r.calls["decode"],
                            counts=count_programs([decode.program]))           # counted once for every target
    assert (counted.seconds, counted.bytes, counted.kernels) == (p.seconds, p.bytes, p.kernels)


def test_bad_options_are_refused_with_the_names(capsys):
    assert cli.main(["--only", "bertt"]) == 2
    err = capsys.readouterr().err
    assert "unknown workload(s) bertt" in err and "did you mean 'bert'?" in err


def test_merge_reads_result_files(quick_run, tmp_path):
    _, res, _ = quick_run
    a = tmp_path / "a.json"
    res.save(a)
    out = tmp_path / "m.json"
    assert cli.main(["--merge", str(a), str(a), "--json", str(out)]) == 0
    assert json.loads(out.read_text())["rows"] == res.to_dict()["rows"]


def test_torch_failing_a_peer_is_reported_apart_and_only_xbench_failures_fail_the_run(tmp_path, capsys):
    from xbench.suite.report import table
    res = Results(errors=[
        {"run": "r", "workload": "lstm_lm", "stage": "first call", "engine": "eager/bfloat16",
         "error": "RuntimeError: could not create a primitive descriptor for the LSTM forward propagation primitive"}])
    peer = tmp_path / "peer.json"
    res.save(peer)
    assert cli.main(["--merge", str(peer)]) == 0
    out = capsys.readouterr().out
    assert "torch could not run these peers here" in out and "lstm_lm first call eager/bfloat16" in out
    assert res.peer_errors == res.errors and res.own_errors == []
    res.errors.append({"run": "r", "workload": "lstm_lm", "stage": "first call", "engine": "xbench/bfloat16",
                       "error": "BackendError: boom"})
    own = tmp_path / "own.json"
    res.save(own)
    assert cli.main(["--merge", str(own)]) == 1
    text = table(Results.load(own))
    assert text.index("Errors\n  lstm_lm first call xbench/bfloat16") < text.index("torch could not run")


def test_lowering_without_compiling_gives_the_programs_the_bridge_compiles():
    from xbench.suite.engines import runs
    from xbench.suite.predict import compiled_programs, lower_model, predict_programs
    from xbench.suite.workloads import WORKLOADS, build
    model, batch = build("resnet", "tiny")                 # batch norm: its running stats stay on torch
    lowered = lower_model(model, batch)
    assert [x.kind for x in lowered] == ["forward", "backward"] and "xbench_0" in lowered[0].graph
    r = runs(WORKLOADS["resnet"], "tiny", ("xbench",), ("float32",))[0]
    r.step()
    compiled = compiled_programs(r.sessions["step"].session)
    assert [len(x.program.kernels) for x in lowered] == [len(c.program.kernels) for c in compiled]
    a = predict_programs([x.program for x in lowered], "ascend-910b")
    b = predict_programs([c.program for c in compiled], "ascend-910b")
    assert a.seconds == pytest.approx(b.seconds) and a.kernels == b.kernels


def test_a_stopped_run_keeps_the_workloads_it_finished(monkeypatch, tmp_path):
    from xbench.suite import runner

    def measure(res, run, name, o, bar, clock):
        if name == "deepfm":
            raise KeyboardInterrupt
        res.add(run, workload=name, mode="train", size=o.size, precision="float32", platform="cpu",
                engine="xbench", source="measured", metric="step_ms", value=1.5, unit="ms")

    monkeypatch.setattr(runner, "_measure", measure)
    path = tmp_path / "partial.json"
    with pytest.raises(KeyboardInterrupt):
        runner.run_suite(replace(runner.quick(only=("two_tower", "deepfm")), gate_backends=()), progress=False,
                         save_to=str(path))
    kept = Results.load(path)
    assert [(r["workload"], r["value"]) for r in kept.rows] == [("two_tower", 1.5)]


def test_the_published_size_is_predicted_for_xbench_kernels_and_at_each_chips_bound(monkeypatch):
    """The seeds' ResNet-50 claim compares chips: besides xbench's own kernels (whose cuda contractions run on CUDA
    cores) every kernel is priced at each chip's roofline bound, contractions on its matrix unit."""
    from xbench.hw.predict import launch_time, program_counts, roofline_time
    from xbench.hw.target import get_target
    from xbench.suite import runner
    from xbench.suite.predict import lower_model
    from xbench.suite.report import targets
    from xbench.suite.workloads import WORKLOADS, build
    monkeypatch.setitem(WORKLOADS, "resnet", replace(WORKLOADS["resnet"], published=lambda seed: build("resnet", "tiny")))
    res, run = Results.new_run("test", {})
    runner._published(res, run, "resnet", runner.SuiteOptions(precisions=("float32",)), runner.Progress(1, False))
    assert not res.errors
    model, batch = build("resnet", "tiny")
    params = sum(p.numel() for p in model.parameters())
    q = dict(workload="resnet", size="published", precision="float32")
    lowered = [x.program for x in lower_model(model, batch)]
    bound = {}
    for name in ("a100", "ascend-910b"):
        t = get_target(name)
        kernels = [c for p in lowered for c in program_counts(p)]
        bound[name] = sum(launch_time(t) + roofline_time(c, t) for c in kernels) + 20 * params / t.bandwidth("memory")
    want = bound["a100"] / bound["ascend-910b"]
    assert res.value(**q, platform="ascend-910b", metric="hardware_ratio_to_reference") == pytest.approx(want, rel=1e-3)
    own = (res.value(**q, platform="ascend-910b", metric="samples_per_s")
           / res.value(**q, platform="a100", metric="samples_per_s"))
    assert res.value(**q, platform="ascend-910b", metric="ratio_to_reference") == pytest.approx(own, rel=1e-3)
    (claim,) = [t for t in targets(res) if "seeds' claim" in t.claim]
    assert claim.measured.startswith(f"{100 * want:.0f} % at each chip's roofline bound")
    assert f"xbench's own kernels: {100 * own:.0f} %" in claim.measured and claim.ok is None

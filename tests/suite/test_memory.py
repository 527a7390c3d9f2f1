"""Peak activation memory: the bytes autograd saves, counted exactly on a model small enough to do by hand, the
child-process measurement of a workload (torch's profiler records, xbench's arrays through tracemalloc), and the
suite's, on the runs it has just timed."""
from __future__ import annotations

from dataclasses import replace

import torch

from xbench.suite.engines import Run
from xbench.suite.memory import in_child, measure
from xbench.suite.workloads import Workload, _Output


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 1)

    def forward(self, x, t):
        y = self.l2(torch.relu(self.l1(x)))
        return _Output(torch.nn.functional.mse_loss(y, t), y)


def test_saved_activations_of_an_mlp_are_counted_exactly():
    torch.manual_seed(0)
    w = Workload("mlp", "test", lambda size, seed: None, "an MLP")
    run = Run(w, "eager", "float32", MLP(), {"x": torch.randn(4, 8), "t": torch.randn(4, 1)})
    run.step()
    m = measure(run)
    # relu's output [4, 16] (for relu's backward and l2's weight gradient) and l2's output [4, 1] (for the loss);
    # x, t and the weights are not activations
    assert m["saved_bytes"] == 4 * 16 * 4 + 4 * 1 * 4
    # the peak holds at least those plus l1's output, the gradients flowing back and the loss
    assert m["torch_peak_bytes"] >= m["saved_bytes"] + 4 * 16 * 4
    assert m["peak_bytes"] == m["torch_peak_bytes"]                  # eager: torch's allocator only


def test_what_an_earlier_profile_left_alive_is_not_in_the_next_steps_peak():
    from torch.profiler import ProfilerActivity, profile
    torch.manual_seed(0)
    w = Workload("mlp", "test", lambda size, seed: None, "an MLP")
    run = Run(w, "eager", "float32", MLP(), {"x": torch.randn(4, 8), "t": torch.randn(4, 1)})
    run.step()
    first = measure(run)["torch_peak_bytes"]
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True):
        kept = torch.ones(1 << 20)               # 4 MiB allocated while a profile was on, still alive below
    assert measure(run)["torch_peak_bytes"] == first < kept.nbytes


def test_a_workload_in_a_child_process():
    rows = in_child(["dlrm"], "tiny")
    got = {(r["engine"], r["precision"]): r for r in rows}
    assert set(got) == {(e, p) for e in ("eager", "xbench") for p in ("float32", "bfloat16")}
    for (engine, _), r in got.items():
        assert r["saved_bytes"] > 0 and r["peak_bytes"] >= r["saved_bytes"] / 2
        if engine == "xbench":              # xbench's activations are its own arrays, seen by tracemalloc
            assert r["numpy_peak_bytes"] > r["torch_peak_bytes"]
            assert r["peak_bytes"] == r["numpy_peak_bytes"] + r["torch_peak_bytes"]


def test_the_suite_measures_memory_on_the_runs_it_has_just_timed():
    # no second compile: the eager and xbench runs of the timing measure one more step each, in this process,
    # with xbench's host pool emptied and keeping nothing (its reuse would hide the step's allocations)
    from xbench.backends.cpu.runtime import POOL
    from xbench.suite.runner import quick, run_suite
    limit = POOL.limit
    res = run_suite(replace(quick(only=("deepfm",)), gate_backends=(), varlen=False, memory=True), progress=False)
    assert not res.errors and POOL.limit == limit
    for engine in ("eager", "xbench"):
        peak = res.find(workload="deepfm", engine=engine, metric="peak_activation_bytes")[0]
        saved = res.value(workload="deepfm", engine=engine, metric="saved_activation_bytes")
        assert saved > 0 and peak["value"] >= saved / 2
        if engine == "xbench":
            assert peak["detail"]["numpy_peak_bytes"] > peak["detail"]["torch_peak_bytes"]

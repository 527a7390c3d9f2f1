"""Buffer lifetimes across a training step: a backward graph lets each activation the forward saved for it go
after the last kernel that reads it (AOTAutograd hands its inputs over in a list the program empties), so they
are freed while the backward runs instead of all living to its end; and the step's peak shows it."""
from __future__ import annotations

import weakref

import torch

from xbench.suite.engines import Run
from xbench.suite.memory import measure_here
from xbench.suite.workloads import Workload, _Output
from xbench.torch import recording
from xbench.torch.graph import GraphOp


class Deep(torch.nn.Module):
    def __init__(self, width: int, depth: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(depth))

    def forward(self, x, t):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return _Output(torch.nn.functional.mse_loss(x, t), x)


def kept_to_the_end(self, args):
    """The call before programs consumed their inputs: the caller's list holds every input to the end."""
    return self.run(list(args), *self.arguments(args))


def alive_at_each_backward_kernel(monkeypatch) -> tuple[int, list[int]]:
    """How many of the forward's saved activations are still alive as each kernel of the backward starts."""
    torch.manual_seed(0)
    model = Deep(32, 6)
    compiled = torch.compile(model, backend="xbench")
    x, t = torch.randn(16, 32), torch.randn(16, 32)
    with recording() as session:
        compiled(x, t).loss.backward()                       # both graphs compiled
    (fw,), (bw,) = ([g.partitions[0] for g in session.graphs if g.kind == kind] for kind in ("forward", "backward"))
    # the backward's kernels are ordered counting on its inputs being handed over; the forward's weights are held
    assert bw.operator.donates_inputs and not fw.operator.donates_inputs
    refs, alive = [], []
    (fw_c,), (bw_c,) = fw._cache.values(), bw._cache.values()
    consume = fw_c.artifact.consume

    def keep_refs(arrays):
        outs = consume(arrays)
        refs.extend(weakref.ref(a) for a in outs[2:])         # after the loss and the model's output: the saved
        return outs
    monkeypatch.setattr(fw_c.artifact, "consume", keep_refs)
    module = bw_c.artifact.module
    for name in module.KERNELS:
        def counted(*a, _fn=getattr(module, name)):
            alive.append(sum(r() is not None for r in refs))
            return _fn(*a)
        monkeypatch.setattr(module, name, counted)
    model.zero_grad()
    with recording():
        compiled(x, t).loss.backward()
    return len(refs), alive


def test_a_backward_graph_frees_each_saved_activation_after_its_last_reader(monkeypatch):
    saved, alive = alive_at_each_backward_kernel(monkeypatch)
    assert saved >= 6 and alive[0] == saved                  # every tanh output, alive as the backward begins
    assert alive == sorted(alive, reverse=True)              # let go one by one...
    assert alive[-1] <= 1                                    # ...and gone before the last kernel


def test_held_by_the_caller_they_would_all_live_to_the_end(monkeypatch):
    monkeypatch.setattr(GraphOp, "consume", kept_to_the_end)
    saved, alive = alive_at_each_backward_kernel(monkeypatch)
    assert saved >= 6 and alive == [saved] * len(alive)


def test_a_steps_peak_falls_by_what_is_freed_early(monkeypatch):
    torch.manual_seed(0)
    w = Workload("deep", "test", lambda size, seed: None, "a deep MLP")
    batch = {"x": torch.randn(512, 256), "t": torch.randn(512, 256)}

    def peak(engine: str) -> dict:
        run = Run(w, engine, "float32", Deep(256, 6), batch)
        run.step()
        return measure_here(run)
    eager, xbench = peak("eager"), peak("xbench")
    monkeypatch.setattr(GraphOp, "consume", kept_to_the_end)
    kept = peak("xbench")
    # six tanh outputs of 512 x 256 float32 (the last one also the model's output, which the loss keeps)
    assert eager["saved_bytes"] == xbench["saved_bytes"] == kept["saved_bytes"] == 6 * 512 * 256 * 4
    # held to the end, the activations are all there when the last weight gradients (256 x 256 each) are made;
    # freed early, they are gone before all but the first two of the six are
    assert kept["peak_bytes"] - xbench["peak_bytes"] >= (6 - 2) * 256 * 256 * 4
    assert xbench["peak_bytes"] < 1.25 * eager["peak_bytes"]

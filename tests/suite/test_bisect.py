"""`xb.torch.bisect` in a real model: a planted operator that is off by 1e-3 in one element is named (its op,
shapes, dtype, error and the model's line), and a right model has nothing to report."""
from __future__ import annotations

import importlib

import torch

import xbench as xb
from xbench.suite.workloads import build
from xbench.torch import aten


def _planted_gelu(monkeypatch):
    right = aten.rule_for(torch.ops.aten.gelu.default)[0]

    def off_in_one_element(x, approximate="none"):
        y = right(x, approximate=approximate)
        first = xb.iota(y.shape, y.ndim - 1) == 3
        for axis in range(y.ndim - 1):
            first = first & (xb.iota(y.shape, axis) == 0)
        return y + xb.where(first, 1e-3, 0.0) * xb.abs(y)

    monkeypatch.setitem(aten.RULES, "gelu", off_in_one_element)
    torch._dynamo.reset()


def test_bisect_names_a_planted_wrong_operator(monkeypatch):
    _planted_gelu(monkeypatch)
    model, batch = build("bert", "tiny")
    r = xb.torch.bisect(model, batch, target="cpu")
    assert r.found, str(r)
    d = r.departure
    assert (d.op, d.kind, d.dtype) == ("aten.gelu.default", "forward", "float32")
    assert d.shapes == "([2, 8, 64])"
    assert d.where.endswith("transformers/activations.py:" + d.where.rsplit(":", 1)[1])
    assert d.xbench_error > d.allowed > 0 and d.eager_error < d.allowed
    assert d.op_alone_wrong is True and "1 of 1024 values" in d.own_check
    assert r.compiles <= 12                                             # narrowed down, not op by op
    assert "aten.gelu.default" in str(r)


def test_bisect_of_a_right_model_finds_nothing():
    model, batch = build("bert", "tiny")
    r = xb.torch.bisect(model, batch, target="cpu")
    assert not r.found and [g.split("_", 1)[1] for g in r.graphs] == ["forward", "backward"]
    assert "no op departs" in str(r)


def _batch_norm_graph():
    bisect_mod = importlib.import_module("xbench.torch.bisect")
    # the second batch norm's input is centred: its mean is rounding, its inputs are of size ~1
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.Conv2d(3, 4, 1, bias=False),
                                torch.nn.BatchNorm2d(4)).train()
    (fwd,) = bisect_mod.capture(model, (torch.randn(2, 3, 5, 5),), {}, backward=False)
    return bisect_mod, fwd


def test_the_references_keep_the_inputs_a_graph_writes_in_place():
    bisect_mod, fwd = _batch_norm_graph()
    assert any(n.target is torch.ops.aten.copy_.default for n in fwd.gm.graph.nodes)    # the running statistics
    b = bisect_mod._Bisector(fwd, "cpu", {})
    placeholders = [n for n in fwd.gm.graph.nodes if n.op == "placeholder"]
    for n, a in zip(placeholders, fwd.args):
        assert torch.equal(b.eager[n], a) and torch.equal(b.exact[n], a.double())


def test_a_mean_of_centred_data_is_judged_at_its_inputs_scale():
    bisect_mod, fwd = _batch_norm_graph()
    b = bisect_mod._Bisector(fwd, "cpu", {})
    # training batch norm is decomposed around its statistics (`torch/saving.py`): var_mean gives (var, mean)
    stats = [n for n in fwd.gm.graph.nodes if n.target == torch.ops.aten.var_mean.correction][1]
    mean = next(u for u in stats.users if u.args[1] == 1)
    exact = b.exact[mean]
    assert exact.abs().max() < 1e-6
    assert not b.judge(mean, (exact + 1e-7).float())[0]     # inputs of size ~1: 1e-7 is rounding, 80x eager's here
    assert b.judge(mean, (exact + 1e-2).float())[0]                       # a wrong mean still departs

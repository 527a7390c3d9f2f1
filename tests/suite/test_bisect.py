"""`xb.torch.bisect` in a real model: a planted operator that is off by 1e-3 in one element is named (its op,
shapes, dtype, error and the model's line), and a right model has nothing to report."""
from __future__ import annotations

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

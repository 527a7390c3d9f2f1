"""Real models through the bridge, ported by one changed line: forward logits and a 20-step training run on cpu
against torch eager (and float64), and inference on cuda (numba's simulator here) and ascend (the twin) at tiny
sizes. Weights are random from configs; nothing is downloaded."""
from __future__ import annotations

import copy

import pytest
import torch

from xbench.suite.workloads import build

from .accuracy import assert_as_accurate, assert_curves_as_accurate, double

MODELS = ["bert", "gpt2", "vit", "resnet", "mobilenet_v2", "dlrm"]
STEPS = 20


def train(model, batch, steps: int = STEPS):
    """SGD with momentum for `steps` steps on one batch: the losses, and the first step's logits."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses, first = [], None
    for _ in range(steps):
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(out.loss))
        first = out.logits.detach().clone() if first is None else first
    return losses, first


@pytest.mark.parametrize("name", MODELS)
def test_training_on_cpu_follows_eager(name):
    model, batch = build(name, "tiny")
    eager = copy.deepcopy(model)
    exact, batch64 = double(model, batch)
    model = torch.compile(model, backend="xbench")                  # the one changed line
    got, logits = train(model, batch)
    want, eager_logits = train(eager, batch)
    exact_losses, exact_logits = train(exact, batch64)
    assert_as_accurate(logits, eager_logits, exact_logits, f"{name} logits")
    assert_curves_as_accurate(got, want, exact_losses, f"{name} loss curve")
    assert got[-1] < got[0]                                          # it learns


@pytest.mark.parametrize("target", ["cuda", "ascend"])
@pytest.mark.parametrize("name", MODELS)
def test_inference_on_other_targets(name, target):
    model, batch = build(name, "tiny")
    model.eval()
    exact, batch64 = double(model, batch)
    compiled = torch.compile(model, backend="xbench", options={"target": target})
    with torch.no_grad():
        got = compiled(**batch).logits
        eager = model(**batch).logits
        want = exact(**batch64).logits
    assert_as_accurate(got, eager, want, f"{name} on {target}")

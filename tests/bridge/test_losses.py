"""ATen's loss calls (a reduction by number, BCE-with-logits' pos_weight ahead of it) run on xbench, not torch."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import xbench as xb


def test_aten_losses_lower_with_their_own_argument_order():
    torch.manual_seed(0)
    x = torch.randn(6, 5, requires_grad=True)
    t, pw = torch.rand(6, 5), torch.rand(5) + 0.5

    def loss(x):
        return (F.binary_cross_entropy_with_logits(x, t, pos_weight=pw) + F.smooth_l1_loss(x, t, reduction="sum")
                + F.huber_loss(x, t, delta=0.5) + F.soft_margin_loss(x, t.sign()))

    with xb.torch.recording() as session:
        got = torch.compile(loss, backend="xbench")(x)
        got.backward()
    grad, x.grad = x.grad.clone(), None
    want = loss(x)
    want.backward()
    assert [f for g in session.graphs for f in g.fallbacks] == []
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad, x.grad, rtol=1e-5, atol=1e-5)

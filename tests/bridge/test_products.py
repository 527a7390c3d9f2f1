"""A sum of matrix products (a recurrent weight's gradient, accumulated step by step) becomes one product over
concatenated operands: the same values as the sum, in the graph and through the bridge."""
from __future__ import annotations

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from xbench.torch.products import batch_products

aten = torch.ops.aten


def _targets(gm) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _sum_of_products(xs, ys, extra):
    total = extra
    for x, y in zip(xs, ys):
        total = total + (x.t() @ y).t().t()       # a product under two transposes, as autograd leaves it
    return total


def _trace(fn, *args):
    return make_fx(fn, tracing_mode="fake")(*args)


def test_three_or_more_products_become_one_over_the_concatenations():
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(5, 7, generator=g) for _ in range(4)]
    ys = [torch.randn(5, 3, generator=g) for _ in range(4)]
    extra = torch.randn(7, 3, generator=g)
    gm = _trace(_sum_of_products, xs, ys, extra)
    assert _targets(gm).count(aten.mm.default) == 4
    assert batch_products(gm) == 1
    assert _targets(gm).count(aten.mm.default) == 1 and _targets(gm).count(aten.add.Tensor) == 1
    (mm,) = [n for n in gm.graph.nodes if n.target is aten.mm.default]
    assert tuple(mm.meta["val"].shape) == (7, 3) and tuple(mm.args[0].meta["val"].shape) == (7, 20)
    want = extra + sum(x.t() @ y for x, y in zip(xs, ys))
    torch.testing.assert_close(gm(xs, ys, extra), want, rtol=1e-6, atol=1e-6)


def test_transposed_products_and_what_is_left_alone():
    g = torch.Generator().manual_seed(1)
    a = [torch.randn(4, 6, generator=g) for _ in range(3)]
    b = [torch.randn(6, 2, generator=g) for _ in range(3)]

    def transposed(a, b):                   # t(a @ b) = t(b) @ t(a): a [2, 4] result
        return (a[0] @ b[0]).t() + (a[1] @ b[1]).t() + (a[2] @ b[2]).t()

    gm = _trace(transposed, a, b)
    assert batch_products(gm) == 1 and _targets(gm).count(aten.mm.default) == 1
    torch.testing.assert_close(gm(a, b), sum((x @ y).t() for x, y in zip(a, b)), rtol=1e-6, atol=1e-6)

    def two(a, b):                          # too few products to be worth the concatenations
        return a[0] @ b[0] + a[1] @ b[1]

    assert batch_products(_trace(two, a, b)) == 0

    def shared(a, b):                       # a product read elsewhere too stays; two are left: no rewrite
        p = a[0] @ b[0]
        return p + a[1] @ b[1] + a[2] @ b[2], p * 2

    gm = _trace(shared, a, b)
    assert batch_products(gm) == 0 and _targets(gm).count(aten.mm.default) == 3


def test_an_lstm_language_models_training_step_through_the_bridge_matches_eager():
    from xbench.suite.engines import runs
    from xbench.suite.workloads import WORKLOADS, dynamo_settings
    w = WORKLOADS["lstm_lm"]                       # tiny: 8 steps of a batch of 2, width 8 (gates 32)
    eager, bridge = runs(w, "tiny", ("eager", "xbench"), ("float32",))
    with dynamo_settings(w):
        for r in (eager, bridge):
            r.step()
    torch.testing.assert_close(bridge.last.loss, eager.last.loss, rtol=1e-5, atol=1e-6)
    for p, q in zip(bridge.base.parameters(), eager.base.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-6)          # after one SGD step from the same weights
    (backward,) = [g for g in bridge.sessions["step"].session.graphs if g.kind == "backward"]
    products = [n for n in backward.graph.graph.nodes if n.target is aten.mm.default]
    # the recurrent weight's gradient: one product over the 8 steps' [2, 32] gate gradients, not eight
    assert sum(tuple(n.meta["val"].shape) == (32, 8) for n in products) == 2       # its and the input weight's
    assert any(tuple(n.args[0].meta["val"].shape) == (32, 16) for n in products)


def test_a_product_added_twice_counts_twice():
    g = torch.Generator().manual_seed(2)
    a = [torch.randn(4, 6, generator=g) for _ in range(2)]
    b = [torch.randn(6, 5, generator=g) for _ in range(2)]

    def twice(a, b):
        p = a[0] @ b[0]
        return p + p + a[1] @ b[1]

    gm = _trace(twice, a, b)
    assert batch_products(gm) == 1 and _targets(gm).count(aten.mm.default) == 1
    torch.testing.assert_close(gm(a, b), 2 * a[0] @ b[0] + a[1] @ b[1], rtol=1e-6, atol=1e-6)

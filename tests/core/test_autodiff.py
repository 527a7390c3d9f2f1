"""Reverse-mode autodiff: gradients against central finite differences in float64, on the reference and cpu
backends, for every primitive family and the core operators."""
import numpy as np
import pytest

import xbench as xb
from xbench import Tensor

ops = xb.ops
rng = np.random.default_rng(3)


def f64(*shape):
    return rng.standard_normal(shape)


def finite_difference(op, args, i, eps=1e-6, **kw):
    """d sum(op(args) * weights) / d args[i], central differences on the reference backend."""
    out = op.run(*args, backend="reference", **kw)
    weights = np.random.default_rng(0).standard_normal(np.shape(out))

    def f(a):
        call = list(args)
        call[i] = a
        return float((op.run(*call, backend="reference", **kw) * weights).sum())

    x = np.array(args[i], dtype=np.float64)
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += eps
        xm[idx] -= eps
        grad[idx] = (f(xp) - f(xm)) / (2 * eps)
    return grad, weights


def check_grad(op, *args, argnums=(0,), backends=("reference", "cpu"), **kw):
    for i in argnums:
        want, weights = finite_difference(op, args, i, **kw)
        names = list(op.signature.parameters)[:len(args)]
        weighted = _weighted(op, names, [isinstance(a, np.ndarray) for a in args], weights, kw)
        g = xb.grad(weighted, argnums=i)
        for backend in backends:
            got = g.run(*args, backend=backend)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{op.name} d/d{names[i]} on {backend}")


def _weighted(op, names, is_tensor, weights, kw):
    """sum(op(*args) * weights) as an operator with op's parameters (tensors where the arguments are arrays)."""
    import inspect
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=Tensor if t else inspect.Parameter.empty) for n, t in zip(names, is_tensor)]

    def body(**args):
        return (op(*[args[n] for n in names], **kw) * weights).sum()

    body.__signature__ = inspect.Signature(params)
    return xb.tensor_op(body, name=f"weighted_{op.name}")


def test_unary_and_binary_math():
    @xb.tensor_op
    def f(a: Tensor, b: Tensor):
        return (xb.exp(a) * xb.tanh(b) + xb.log(a * a + 1) / (b * b + 2) - xb.sqrt(xb.abs(a) + 1)
                + xb.sigmoid(a) * xb.erf(b) + xb.maximum(a, b) + xb.minimum(a, 0.1) + (a * a + 1) ** b
                + xb.rsqrt(b * b + 1) + xb.sin(a) * xb.cos(b) + xb.atan2(a, b + 5) + xb.log1p(xb.abs(b)))

    check_grad(f, f64(3, 4), f64(3, 4), argnums=(0, 1))


def test_reductions_and_movement():
    @xb.tensor_op
    def f(x: Tensor):
        y = x.reshape(4, 6).T[1:5:2] * x.max() + x.sum(axis=(0, 1))
        z = xb.concat([y, xb.flip(y, 0)], axis=1)
        return z.mean(0) * xb.pad(x, ((0, 0), (1, 2), (0, 0)), mode="reflect").sum() + x.prod(axis=1).sum()

    check_grad(f, f64(2, 3, 4))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "circular"])
def test_pad_modes(mode):
    @xb.tensor_op
    def f(x: Tensor):
        return xb.pad(x, ((2, 1), (0, 3)), mode=mode) * 1.5

    check_grad(f, f64(4, 5))


def test_indexing_gather_scatter_sort():
    @xb.tensor_op
    def f(x: Tensor, table: Tensor):
        idx = np.array([[2, 0], [1, 2]])
        picked = xb.gather(table, idx, axis=0)                     # embedding
        return (picked.sum(-1) * x[:, ::-2].sum(-1)[:2, None]).sum() + xb.sort(x, axis=1)[:, -1].sum() \
            + xb.take_along_axis(x, xb.argsort(x, 1), 1)[:, 0].sum() + xb.cumsum(x, 0).sum()

    check_grad(f, f64(3, 5), f64(3, 4), argnums=(0, 1))


def test_core_operators():
    x = f64(3, 7)
    check_grad(ops.softmax, x)
    check_grad(ops.log_softmax, x, dim=0)
    check_grad(ops.layer_norm, x, 7, f64(7), f64(7), argnums=(0, 2, 3))
    check_grad(ops.rms_norm, x, 7, f64(7), argnums=(0, 2))
    check_grad(ops.gelu, x)
    check_grad(ops.gelu, x, approximate="tanh")
    check_grad(ops.linear, f64(4, 5), f64(3, 5), f64(3), argnums=(0, 1, 2))
    check_grad(ops.matmul, f64(2, 3, 4), f64(4, 2), argnums=(0, 1))


def test_attention_conv_pool():
    q, k, v = f64(1, 2, 5, 3), f64(1, 2, 5, 3), f64(1, 2, 5, 3)
    check_grad(ops.scaled_dot_product_attention, q, k, v, argnums=(0, 1, 2), is_causal=True)
    x, w, b = f64(1, 2, 6, 5), f64(3, 2, 3, 3), f64(3)
    check_grad(ops.conv2d, x, w, b, argnums=(0, 1, 2), stride=2, padding=1, backends=("reference",))
    check_grad(ops.conv2d, x, w, b, argnums=(0, 1), padding=1, dilation=2)
    check_grad(ops.max_pool2d, x, 3, 2, 1)
    check_grad(ops.avg_pool2d, x, 2, 1, 0)


def test_value_and_grad_and_vjp():
    @xb.tensor_op
    def loss(w: Tensor["D"], x: Tensor["N", "D"]):
        return ((x @ w) ** 2).mean()

    w, x = f64(4), f64(6, 4)
    value, g = xb.value_and_grad(loss)(w, x)
    np.testing.assert_allclose(value, ((x @ w) ** 2).mean())
    np.testing.assert_allclose(g, 2 * x.T @ (x @ w) / 6, rtol=1e-10)

    @xb.tensor_op
    def f(a: Tensor["N"], b: Tensor["N"]):
        return a * b, xb.exp(a)

    a, b = f64(5), f64(5)
    (y1, y2), pullback = xb.vjp(f, a, b)
    ga, gb = pullback(np.ones(5), np.full(5, 2.0))
    np.testing.assert_allclose(ga, b + 2 * np.exp(a))
    np.testing.assert_allclose(gb, a)


def test_gradient_errors_are_clear():
    @xb.tensor_op
    def vector(x: Tensor["N"]):
        return x * 2

    with pytest.raises(xb.XbenchError, match=r"output has shape \(3,\), not a scalar"):
        xb.grad(vector)(np.ones(3))

    @xb.tensor_op
    def count(x: Tensor["N"], n: Tensor["N"]):
        return (x * n).sum()

    with pytest.raises(xb.XbenchError, match="argument 'n' is not a float tensor"):
        xb.grad(count, argnums=1)(np.ones(3), np.ones(3, np.int64))


def test_backward_is_one_fused_graph():
    @xb.tensor_op
    def loss(x: Tensor["N", "D"], w: Tensor["D"]):
        return (ops.rms_norm(x, x.shape[-1], w) ** 2).sum()

    prog = xb.grad(loss, argnums=0).lower(f64(8, 16), f64(16))
    assert all(k.kind in ("row", "reduce", "elementwise", "contract") for k in prog.kernels)
    assert len(prog.kernels) <= 3

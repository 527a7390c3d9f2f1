"""A sum over rows into contiguous outputs (a bias gradient) reads each row once, rows outside."""
import numpy as np
import pytest

import xbench as xb


@xb.tensor_op
def bias_grad(g: xb.Tensor["B", "S", "H"]):
    return g.sum(axis=(0, 1)) * 0.5


@xb.tensor_op
def row_sums(g: xb.Tensor["B", "S", "H"]):
    return g.sum(axis=-1)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_bias_gradient_sums_rows_into_chunks_of_outputs(dtype):
    g = np.random.default_rng(0).standard_normal((3, 50, 600)).astype(dtype)     # 600 outputs: 3 parts
    art = bias_grad.compile("cpu", g)
    assert "_c_acc[_p - _c_lo] += " in art.source
    want = g.astype(np.float64).sum(axis=(0, 1)) * 0.5
    np.testing.assert_allclose(art.run(g)[0].astype(np.float64), want, rtol=2e-3 if dtype == np.float16 else 1e-5,
                               atol=5e-2 if dtype == np.float16 else 1e-4)


def test_a_sum_along_the_contiguous_axis_keeps_one_output_at_a_time():
    g = np.random.default_rng(1).standard_normal((3, 50, 600)).astype(np.float32)
    art = row_sums.compile("cpu", g)
    assert "_c_acc" not in art.source
    np.testing.assert_allclose(art.run(g)[0], g.astype(np.float64).sum(axis=-1), rtol=1e-5, atol=1e-4)


@xb.tensor_op
def layer_norm_weight_grad(g: xb.Tensor["B", "S", "H"], x: xb.Tensor["B", "S", "H"], mean: xb.Tensor["B", "S", 1],
                           rstd: xb.Tensor["B", "S", 1]):
    return (g * ((x - mean) * rstd)).sum(axis=(0, 1))


def test_terms_that_read_a_per_row_scalar_still_sum_rows_into_chunks():
    rng = np.random.default_rng(2)
    g, x = (rng.standard_normal((2, 40, 300)).astype(np.float32) for _ in range(2))
    mean = x.mean(axis=-1, keepdims=True)
    rstd = (1 / np.sqrt(x.var(axis=-1, keepdims=True) + 1e-5)).astype(np.float32)
    art = layer_norm_weight_grad.compile("cpu", g, x, mean, rstd)
    assert "_c_acc[_p - _c_lo] += " in art.source
    want = (g.astype(np.float64) * (x - mean.astype(np.float64)) * rstd).sum(axis=(0, 1))
    np.testing.assert_allclose(art.run(g, x, mean, rstd)[0], want, rtol=1e-5, atol=1e-4)


@xb.tensor_op
def head_bias_grad(g: xb.Tensor["B", "H", "S", "D"]):
    b, h, s, d = g.shape
    return g.permute(0, 2, 1, 3).reshape(b * s, h * d).sum(axis=0)


def test_a_bias_gradient_read_through_a_permute_sums_rows_into_chunks():
    """Attention's query bias gradient, summed from [batch, heads, tokens, head width]: one output axis over
    heads and width, which the loads index as (i // width, i % width), runs of a head's width."""
    g = np.random.default_rng(3).standard_normal((2, 4, 30, 16)).astype(np.float32)
    art = head_bias_grad.compile("cpu", g)
    assert "_c_acc[_p - _c_lo] += " in art.source
    want = g.astype(np.float64).transpose(0, 2, 1, 3).reshape(60, 64).sum(axis=0)
    np.testing.assert_allclose(art.run(g)[0], want, rtol=1e-5, atol=1e-4)

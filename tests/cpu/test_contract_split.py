"""A contraction summed over an axis that leads both operands (NCHW data summed over its batch) is a sum of
GEMMs over plain views, with nothing packed; a 1x1 window's axes of extent 1 do not stop a view; where only one
operand is a view per point and the other would be packed large, it is packed one point at a time."""

import re

import ml_dtypes
import numpy as np
import pytest
import torch

import xbench as xb
from xbench.backends.cpu import bf16gemm, contract
from xbench.ir import expr as E
from xbench.ir.contraction import without_units
from xbench.ir.kernel import Axis


@xb.tensor_op
def weight_grad(g: xb.Tensor["N", "O", "H", "W"], x: xb.Tensor["N", "I", "H", "W"]):
    return xb.einsum("nohw,nihw->oi", g, x)


def test_a_batch_summed_contraction_is_a_sum_of_gemms_over_views():
    rng = np.random.default_rng(0)
    g = rng.standard_normal((3, 24, 8, 8)).astype(np.float32)
    x = rng.standard_normal((3, 40, 8, 8)).astype(np.float32)
    art = weight_grad.compile("cpu", g, x)
    assert "_xb_dot_add(g[k0].reshape(24, 64), x[k0].reshape(40, 64).T, out)" in art.source
    assert "_A = " not in art.source and "_B = " not in art.source        # neither operand is packed
    want = np.einsum("nohw,nihw->oi", g.astype(np.float64), x)
    np.testing.assert_allclose(art.run(g, x)[0], want, rtol=1e-5, atol=1e-4)


def test_axes_of_extent_one_fold_out_of_an_index():
    k, r = Axis("k", 8), Axis("r", 1)
    e = E.Load("x", (E.Idx("k"), E.add(E.Idx("k"), E.Idx("r"))), "float32")
    assert without_units(e, (k, r)) == E.Load("x", (E.Idx("k"), E.Idx("k")), "float32")
    assert without_units(e, (k,)) is e


def test_a_1x1_convolution_trains_through_the_bridge_with_a_scalar_loss_gradient():
    # the backward graph reads the loss's 0-d gradient inside the contraction's parallel loops; numba cannot
    # index a 0-d array there, so it is read once before them
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(16, 8, 1, bias=False)
    x = torch.randn(4, 16, 8, 8, requires_grad=True)

    def loss(x):
        return conv(x).square().sum()

    compiled = torch.compile(loss, backend="xbench")
    compiled(x).backward()
    got = conv.weight.grad.clone(), x.grad.clone()
    conv.weight.grad = x.grad = None
    loss(x).backward()
    torch.testing.assert_close(got[0], conv.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got[1], x.grad, rtol=1e-4, atol=1e-4)


def test_a_depthwise_window_over_its_whole_input_multiplies_views_of_the_right_shape():
    # per (batch, channel) a [1, 9] @ [9, 1] product: the input's [3, 3] plane read as a [9, 1] column
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 3, 3)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    got = xb.ops.conv2d.compile("cpu", x, w, None, groups=6).run(x, w)[0]
    want = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(), groups=6)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_a_flattened_batch_and_sequence_is_read_through_a_reshaped_view():
    # x.reshape(40, 32) indexes x as x[m // 10, m % 10, k]: that is x.reshape(40, 32)[m, k], no packing
    @xb.tensor_op
    def flat(x: xb.Tensor["B", "S", "H"], w: xb.Tensor["H", "O"]):
        return xb.ops.mm(x.reshape(40, 32), w), xb.ops.mm(x.reshape(40, 32).T, x.reshape(40, 32))

    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((4, 10, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    art = flat.compile("cpu", x, w)
    assert "_xb_dot(x.reshape(40, 32), w, out)" in art.source
    assert "_xb_dot(x.reshape(40, 32).T, x.reshape(40, 32), out1)" in art.source
    x2 = x.astype(np.float64).reshape(40, 32)
    got = art.run(x, w)
    np.testing.assert_allclose(got[0], x2 @ w, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got[1], x2.T @ x2, rtol=1e-5, atol=1e-4)


@xb.tensor_op
def heads_attention(p: xb.Tensor["B", "H", "L", "S"], x: xb.Tensor["S", "D"], bias: xb.Tensor["D"]):
    # [batch of 1, heads] products of softmax-like rows with a head's slice of a projection (its bias added)
    v = (x + bias).reshape(x.shape[0], p.shape[1], -1).transpose(1, 0, 2)
    return p @ v


def test_a_batched_operand_with_a_unit_batch_axis_is_read_through_a_view():
    # p[0, h] is a plain [L, S] matrix: the batch axis of extent 1 reads at 0 and nothing is copied
    rng = np.random.default_rng(3)
    p = rng.standard_normal((1, 4, 16, 24)).astype(np.float32)
    x, bias = rng.standard_normal((24, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    art = heads_attention.compile("cpu", p, x, bias)
    assert "_xb_dot(p[0, " in art.source and "_A = " not in art.source
    v = (x.astype(np.float64) + bias).reshape(24, 4, 8).transpose(1, 0, 2)
    np.testing.assert_allclose(art.run(p, x, bias)[0], p.astype(np.float64) @ v, rtol=1e-5, atol=1e-4)


def test_a_heads_transposed_operand_is_packed_along_its_contiguous_reads():
    # q @ (k + bias)^T per head: k's head slice runs along the summed axis at an offset fixed by the head, so
    # it is packed row by row as [N, K] (contiguous reads and writes) and handed to BLAS as its transpose
    @xb.tensor_op
    def scores(q: xb.Tensor["H", "L", "D"], k: xb.Tensor["S", "E"], bias: xb.Tensor["E"]):
        kh = (k + bias).reshape(k.shape[0], q.shape[0], -1).transpose(1, 2, 0)
        return q @ kh

    rng = np.random.default_rng(4)
    q = rng.standard_normal((4, 16, 8)).astype(np.float32)
    k, bias = rng.standard_normal((24, 32)).astype(np.float32), rng.standard_normal(32).astype(np.float32)
    art = scores.compile("cpu", q, k, bias)
    assert "_B = _xb_new((24, 8)" in art.source and ", _B.T, " in art.source
    kh = (k.astype(np.float64) + bias).reshape(24, 4, 8).transpose(1, 2, 0)
    np.testing.assert_allclose(art.run(q, k, bias)[0], q.astype(np.float64) @ kh, rtol=1e-5, atol=1e-4)


def test_factors_that_do_not_move_along_the_summed_axis_apply_to_the_product():
    # (p / row_sum) @ v, and (q * 0.125) @ k^T: the factors are one value per output row (or for all of it), so
    # BLAS reads p and q in place and the division or scale is applied to the product's rows
    @xb.tensor_op
    def normalised(p: xb.Tensor["H", "L", "S"], total: xb.Tensor["H", "L"], v: xb.Tensor["H", "S", "D"],
                   q: xb.Tensor["H", "L", "D"]):
        probs = p / total.reshape(p.shape[0], p.shape[1], 1)
        return probs @ v, (q * 0.125) @ v.transpose(0, 2, 1)

    rng = np.random.default_rng(5)
    p = rng.random((4, 16, 24)).astype(np.float32)
    total = (p.sum(-1) + 1).astype(np.float32)
    v, q = rng.standard_normal((4, 24, 8)).astype(np.float32), rng.standard_normal((4, 16, 8)).astype(np.float32)
    art = normalised.compile("cpu", p, total, v, q)
    assert "_xb_dot(p[" in art.source and "_xb_dot(q[" in art.source and "_A = " not in art.source
    p64, v64 = p.astype(np.float64), v.astype(np.float64)
    got = art.run(p, total, v, q)
    np.testing.assert_allclose(got[0], (p64 / total[..., None]) @ v64, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], (q.astype(np.float64) * 0.125) @ v64.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


def test_a_factor_along_the_summed_axis_stays_in_the_operand():
    # p / w[s] varies along the summed axis: it cannot leave the sum, and the operand is packed as before
    @xb.tensor_op
    def weighted(p: xb.Tensor["L", "S"], w: xb.Tensor["S"], v: xb.Tensor["S", "D"]):
        return (p / w) @ v

    rng = np.random.default_rng(6)
    p, v = rng.standard_normal((16, 24)).astype(np.float32), rng.standard_normal((24, 8)).astype(np.float32)
    w = (rng.random(24) + 0.5).astype(np.float32)
    art = weighted.compile("cpu", p, w, v)
    assert "_A = " in art.source
    np.testing.assert_allclose(art.run(p, w, v)[0], (p.astype(np.float64) / w) @ v, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_large_windowed_weight_gradient_packs_its_input_one_image_at_a_time(monkeypatch, dtype):
    # a strided 7x7 convolution's weight gradient (ResNet's stem): the input's windows are packed for one image,
    # multiplied and added into the gradient, then the next image's: not all images' windows at once. Where the
    # GEMM reads bfloat16 pairs, each core takes its own images (3 over 2 cores: uneven) into a part of its own
    monkeypatch.setattr(contract, "PACK_SPLIT_BYTES", 0)
    rng = np.random.default_rng(7)
    g = rng.standard_normal((3, 8, 8, 8)).astype(dtype)
    x = rng.standard_normal((3, 3, 16, 16)).astype(dtype)
    w = rng.standard_normal((8, 3, 7, 7)).astype(dtype)
    art = xb.ops.convolution_backward.compile("cpu", g, x, w, None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1,
                                              [False, True, False])
    if dtype == np.float32 or not bf16gemm.available():
        assert "for _k in range(3):" in art.source
    else:
        assert re.search(r"for _k in range\(_t \* 3 // (\d), \(_t \+ 1\) \* 3 // \1\):", art.source)
        assert "_xb_gemm_bf16_serial(" in art.source and "_Cs[0, _p, _j] + _Cs[1, _p, _j]" in art.source
    tg, tx, tw = (torch.from_numpy(a.astype(np.float64)) for a in (g, x, w))
    tw.requires_grad_()
    torch.nn.functional.conv2d(tx, tw, stride=2, padding=3).backward(tg)
    (dw,) = [o for o in art.run(g, x, w) if np.shape(o) == (8, 3, 7, 7)]
    tol = 1e-4 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(dw.astype(np.float64), tw.grad.numpy(), rtol=tol, atol=tol * 10)

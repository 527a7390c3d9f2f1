"""PyTorch's semantics at the edges that the grid's samples cannot show: what is refused (and why), and padding
with negative widths in every mode against PyTorch itself, every pair of widths on a small input."""
import itertools

import numpy as np
import pytest
import torch

import xbench as xb

ops = xb.ops


def _run(op, *args, **kwargs):
    return op.run(*args, backend="reference", **kwargs)


def test_padding_with_negative_widths_matches_pytorch_in_every_mode():
    x = np.arange(1, 25, dtype=np.float32).reshape(1, 2, 3, 4)
    for mode in ("constant", "reflect", "replicate", "circular"):
        for left, right in itertools.product(range(-4, 5), repeat=2):
            pad = (left, right, 0, 0)
            try:
                want = torch.nn.functional.pad(torch.from_numpy(x), pad, mode).numpy()
            except RuntimeError:
                want = None
            if want is None or (mode == "circular" and max(left, right) > 4 - max(-left, 0) - max(-right, 0)):
                # PyTorch refuses it, or (circular, wrapping the cropped dim more than once) reads memory it has
                # not written: refused here with the reason
                with pytest.raises((ValueError, xb.XbenchError)):
                    _run(ops.pad, x, pad, mode)
                continue
            np.testing.assert_array_equal(_run(ops.pad, x, pad, mode), want, err_msg=f"{mode} {pad}")


def test_tensor_split_refuses_a_tensor_of_indices_and_says_why():
    x = np.arange(10.0, dtype=np.float32)
    with pytest.raises(Exception, match="decide the pieces' shapes"):
        _run(ops.tensor_split, x, np.array([2, 5]))
    pieces = _run(ops.tensor_split, x, [np.int64(2), np.int64(5)])
    assert [p.tolist() for p in pieces] == [[0, 1], [2, 3, 4], [5, 6, 7, 8, 9]]


def test_narrow_takes_a_zero_d_tensor_start_read_at_run_time():
    x = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    first = ops.narrow.run(x, 1, np.array(1), 2, backend="cpu")
    compiled = len(ops.narrow.specializations)
    again = ops.narrow.run(x, 1, np.array(-2), 2, backend="cpu")      # the same compiled operator, a new start
    np.testing.assert_array_equal(first, torch.narrow(torch.from_numpy(x), 1, torch.tensor(1), 2).numpy())
    np.testing.assert_array_equal(again, torch.narrow(torch.from_numpy(x), 1, torch.tensor(-2), 2).numpy())
    assert len(ops.narrow.specializations) == compiled
    with pytest.raises(Exception, match="0-d integer tensor"):
        _run(ops.narrow, x, 1, np.array(1.0), 2)


def test_what_pytorch_refuses_is_refused():
    x = np.ones((3, 4), np.float32)
    with pytest.raises(Exception, match="p must be positive"):
        _run(ops.renorm, x, -np.inf, 0, 1.0)
    with pytest.raises(Exception, match="maxnorm"):
        _run(ops.renorm, x, 2, 0, -1.0)
    with pytest.raises(Exception, match="k must be 1"):
        _run(ops.topk, np.float32(1.5), 2)
    with pytest.raises(Exception, match="out of range"):
        _run(ops.softmax, np.asarray(np.float32(1.5)), 1)       # a 0-d tensor takes dims 0 and -1 only
    with pytest.raises(Exception, match="correction or unbiased"):
        _run(ops.var, x, 1, 0, unbiased=True)


def test_zero_d_results_are_zero_d():
    x = np.asarray(np.float32(1.5))
    for op, args in ((ops.softmax, (0,)), (ops.cumsum, (-1,)), (ops.logsumexp, (0,)), (ops.gather, (0, np.array(0)))):
        assert np.shape(_run(op, x, *args)) == ()
    values, indices = _run(ops.max, x, -1, True)
    assert values.shape == indices.shape == () and int(indices) == 0


def test_backward_ops_cover_the_aten_names_real_graphs_contain():
    # the operators the notes on real training graphs list as missing, by their ATen names
    names = ["convolution_backward", "max_pool2d_with_indices_backward", "_embedding_bag", "_embedding_bag_backward",
             "_embedding_bag_dense_backward", "_scaled_dot_product_flash_attention_for_cpu_backward",
             "_log_softmax_backward_data", "_softmax_backward_data", "nll_loss_backward", "native_layer_norm_backward",
             "native_batch_norm_backward", "gelu_backward", "tanh_backward", "threshold_backward",
             "native_dropout_backward", "select_backward", "hardswish_backward", "hardsigmoid_backward",
             "_native_batch_norm_legit_functional", "_scaled_dot_product_flash_attention_for_cpu", "convolution"]
    for n in names:
        assert xb.ops.info(n).torch not in (None,), n


def test_convolution_backward_leaves_masked_outputs_empty():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 2, 5, 5)), rng.standard_normal((3, 2, 3, 3))
    g = rng.standard_normal((1, 3, 3, 3))
    gi, gw, gb = _run(ops.convolution_backward, g, x, w, None, (1, 1), (0, 0), (1, 1), False, (0, 0), 1,
                      [False, True, False])
    assert gi.shape == (0,) and gb.shape == (0,) and gw.shape == (3, 2, 3, 3)
    want = torch.ops.aten.convolution_backward(*(torch.from_numpy(a) for a in (g, x, w)), None, [1, 1], [0, 0],
                                               [1, 1], False, [0, 0], 1, [False, True, False])
    assert want[0] is None and want[2] is None
    np.testing.assert_allclose(gw, want[1].numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name, extra", [("upsample_bilinear2d_backward", (False,)),
                                         ("upsample_bicubic2d_backward", (True,)),
                                         ("upsample_nearest2d_backward", ())])
@pytest.mark.parametrize("out", [(9, 5), (2, 3)])
def test_an_upsamplings_gradient_gathers_only_from_the_outputs_each_input_feeds(name, extra, out):
    # an infinite or NaN output gradient reaches the inputs that output reads, and only those (a transposed tap
    # padded with 0 times some output would spread it), as ATen's backward kernels
    g = np.linspace(-1, 1, 2 * 3 * out[0] * out[1]).reshape(2, 3, *out)
    g[0, 1, 1, 2], g[1, 2, -1, 0] = np.inf, np.nan
    size = (2, 3, 4, 3)
    want = getattr(torch.ops.aten, name)(torch.from_numpy(g), list(out), list(size), *extra).numpy()
    assert np.isfinite(want).sum() > want.size // 2
    for backend in ("reference", "cpu"):
        got = getattr(ops, name).run(g, out, size, *extra, backend=backend)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


def test_an_upsampling_that_keeps_an_axis_copies_it_without_reading_the_neighbours():
    # ATen's linear kernels read one point per output along an axis of unchanged size: a NaN stays where it is
    x = np.linspace(-1, 1, 2 * 4 * 3).reshape(1, 2, 4, 3)
    x[0, 1, 2, 1] = np.nan
    want = torch.ops.aten.upsample_bilinear2d(torch.from_numpy(x), [7, 3], False).numpy()
    assert np.isnan(want[..., 1]).any() and not np.isnan(want[..., [0, 2]]).any()
    for backend in ("reference", "cpu"):
        got = ops.upsample_bilinear2d.run(x, (7, 3), False, backend=backend)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_moments_and_norms_are_summed_in_float32_as_pytorchs(dtype):
    # squares of 1e4 overflow float16 (above 65504); the standard deviation and the norm do not
    x = torch.tensor([[1e4, -1e4, 5e3, 0.0, 2e3], [3.0, 1.0, 4.0, 1.0, 5.0]], dtype=getattr(torch, dtype))
    a = x.view(torch.int16).numpy().view(xb.dtypes.to_numpy(dtype)) if dtype == "bfloat16" else x.numpy()
    cases = [(ops.std, (a, -1), torch.std(x, -1)), (ops.var, (a, -1), torch.var(x, -1)),
             (ops.norm, (a, "fro", -1), torch.norm(x, "fro", -1)),
             (ops.linalg_vector_norm, (a, 2, -1), torch.linalg.vector_norm(x, 2, -1)),
             (ops.std_mean, (a, -1), torch.std_mean(x, -1)[0])]
    for op, args, want in cases:
        for backend in ("reference", "cpu"):
            got = op.run(*args, backend=backend)
            got = np.asarray(got[0] if isinstance(got, (tuple, list)) else got, np.float64)
            np.testing.assert_allclose(got, want.double().numpy(), rtol=1e-2, err_msg=f"{op.name} {backend}")

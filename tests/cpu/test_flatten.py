"""Inner loops that every read and write walks in memory order run as one loop (`backends/cpu/flatten.py`), over
views with those dimensions as one, which LLVM vectorises: a reduction's, an elementwise store's, a GEMM
operand's packing and its epilogue. Any other use of the loops keeps the nest."""
import ml_dtypes
import numpy as np
import pytest
import torch

import xbench as xb

rng = np.random.default_rng(11)


@xb.tensor_op
def channel_sums(x, g):
    return (x * g).sum(axis=(0, 2, 3)), x.max(axis=(0, 2, 3))


@xb.tensor_op
def transposed_sum(x, y):
    return (x + y.transpose(0, 1, 3, 2)).sum(axis=(2, 3))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_sum_and_a_max_over_each_images_rows_and_columns_run_as_one_loop(dtype):
    x = rng.standard_normal((4, 6, 5, 7)).astype(dtype)
    g = rng.standard_normal((4, 6, 5, 7)).astype(dtype)
    x[1, 2, 3, 4] = np.nan                                   # the max propagates NaN through the flat loop too
    art = channel_sums.compile("cpu", x, g)
    assert ".reshape((4, 6, 35))" in art.source
    s, m = (np.asarray(v, np.float64) for v in art.run(x, g))
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    want_s = (x64 * g64).sum(axis=(0, 2, 3))
    tol = 1e-5 if dtype == np.float32 else 0.02 * np.nanmax(np.abs(want_s))
    np.testing.assert_allclose(s[np.arange(6) != 2], want_s[np.arange(6) != 2], atol=tol)
    assert np.isnan(s[2]) and np.isnan(m[2])
    np.testing.assert_array_equal(m[np.arange(6) != 2], x64.max(axis=(0, 2, 3))[np.arange(6) != 2])


def test_a_read_that_walks_the_axes_in_another_order_keeps_the_nest():
    x, y = rng.standard_normal((3, 4, 6, 6)).astype(np.float32), rng.standard_normal((3, 4, 6, 6)).astype(np.float32)
    art = transposed_sum.compile("cpu", x, y)
    assert ".reshape(" not in art.source
    np.testing.assert_allclose(art.run(x, y)[0], (x + y.transpose(0, 1, 3, 2)).sum(axis=(2, 3)), atol=1e-5)


@xb.tensor_op
def affine_relu(x, g, b):
    return xb.maximum(x * g + b, 0.0)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_an_elementwise_store_over_each_images_rows_and_columns_runs_as_one_loop(dtype, parallel):
    x = rng.standard_normal((4, 6, 5, 7)).astype(dtype)
    g, b = (rng.standard_normal((1, 6, 1, 1)).astype(dtype) for _ in range(2))       # per channel
    art = affine_relu.compile("cpu", x, g, b, schedule={"k0_elementwise": {"parallel": parallel}})
    assert ".reshape((4, 6, 35))" in art.source and "in range(35)" in art.source
    assert ("_xb_parallel_for(" in art.source) == parallel
    x64, g64, b64 = (np.asarray(v, np.float64) for v in (x, g, b))
    want = np.maximum(x64 * g64 + b64, 0)
    got = np.asarray(art.run(x, g, b)[0], np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-2, atol=1e-5)


@xb.tensor_op
def add_rows(x, y):
    return x + y


def test_a_read_broadcast_along_part_of_the_loops_keeps_the_nest():
    x, y = rng.standard_normal((3, 4, 5, 7)).astype(np.float32), rng.standard_normal((3, 4, 5, 1)).astype(np.float32)
    art = add_rows.compile("cpu", x, y)
    assert ".reshape(" not in art.source
    np.testing.assert_array_equal(art.run(x, y)[0], x + y)


@xb.tensor_op
def relu6_pointwise_conv(x, scale, w):
    return xb.ops.conv2d(xb.ops.clamp(x * scale, 0.0, 6.0), w)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_gemm_packs_an_activated_operand_and_writes_its_output_one_loop_per_image(dtype):
    # a 1x1 convolution over a batch of 6x6 maps: the GEMM's columns are (image, row, column), packed and
    # written back 36 at a time
    x = rng.standard_normal((8, 16, 6, 6)).astype(dtype)
    scale = np.linspace(0.5, 4, 16).astype(dtype).reshape(16, 1, 1)
    w = rng.standard_normal((12, 16, 1, 1)).astype(dtype)
    art = relu6_pointwise_conv.compile("cpu", x, scale, w)
    assert [k.kind for k in art.program.kernels] == ["contract"]
    assert art.source.count("in range(36)") == 2 and "_B[_p, " in art.source
    x64, s64, w64 = (np.asarray(v, np.float64) for v in (x, scale, w))
    want = torch.nn.functional.conv2d(torch.from_numpy(np.clip(x64 * s64, 0, 6)), torch.from_numpy(w64)).numpy()
    got = np.asarray(art.run(x, scale, w)[0], np.float64)
    tol = 1e-4 if dtype == np.float32 else 0.02 * np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=tol)


def test_an_empty_nest_keeps_its_loops():
    x = np.zeros((2, 0, 3), np.float32)
    art = affine_relu.compile("cpu", x, np.ones((1, 1, 1), np.float32), np.ones((1, 1, 1), np.float32))
    assert art.run(x, np.ones((1, 1, 1), np.float32), np.ones((1, 1, 1), np.float32))[0].shape == (2, 0, 3)

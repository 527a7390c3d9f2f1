"""Category 10 (pooling) against the reference backend and PyTorch."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import xbench as xb

from .helpers import check, f32

ops = xb.ops


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode",
                         [(2, None, 0, 1, False), (3, 2, 1, 1, True), ((3, 2), (2, 1), (1, 0), (2, 1), False),
                          (3, 2, 0, 1, True)])
def test_max_pool2d_with_indices(kernel, stride, padding, dilation, ceil_mode):
    x = f32(2, 3, 9, 10)
    kw = dict(stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)
    tkw = dict(kw, stride=stride or kernel)
    check(ops.max_pool2d_with_indices, x, kernel, **kw,
          torch_fn=lambda x, k: F.max_pool2d(x, k, **tkw, return_indices=True))
    check(ops.max_pool2d, x, kernel, **kw, torch_fn=lambda x, k: F.max_pool2d(x, k, **tkw))


def test_max_pool_1d_3d_and_unbatched():
    x = f32(2, 3, 11)
    check(ops.max_pool1d_with_indices, x, 3, 2, 1,
          torch_fn=lambda x, *a: F.max_pool1d(x, 3, 2, 1, return_indices=True))
    check(ops.max_pool1d, x, 4, torch_fn=lambda x, k: F.max_pool1d(x, k))
    x3 = f32(1, 2, 5, 6, 7)
    check(ops.max_pool3d_with_indices, x3, 2, (1, 2, 2), (1, 0, 1),
          torch_fn=lambda x, *a: F.max_pool3d(x, 2, (1, 2, 2), (1, 0, 1), return_indices=True))
    check(ops.max_pool3d, x3, 3, torch_fn=lambda x, k: F.max_pool3d(x, k))
    check(ops.max_pool2d, f32(3, 8, 8), 2, torch_fn=lambda x, k: F.max_pool2d(x, k))


def test_max_pool_integer_input():
    x = np.random.default_rng(0).integers(-50, 50, (1, 2, 6, 6)).astype(np.int32)
    out, idx = ops.max_pool2d_with_indices(x, 2, padding=1)
    want, widx = F.max_pool2d(torch.from_numpy(x).double(), 2, padding=1, return_indices=True)
    np.testing.assert_array_equal(out, want.numpy().astype(np.int32))
    np.testing.assert_array_equal(idx, widx.numpy())


@pytest.mark.parametrize("kernel,stride,padding,ceil_mode,count_include_pad,divisor_override",
                         [(2, None, 0, False, True, None), (3, 2, 1, True, True, None), (3, 2, 1, True, False, None),
                          ((3, 2), (1, 2), (1, 1), False, False, None), (3, 1, 1, False, True, 5)])
def test_avg_pool2d(kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x = f32(2, 3, 9, 10)
    kw = dict(stride=stride, padding=padding, ceil_mode=ceil_mode, count_include_pad=count_include_pad,
              divisor_override=divisor_override)
    check(ops.avg_pool2d, x, kernel, **kw, torch_fn=lambda x, k: F.avg_pool2d(x, k, **kw))


def test_avg_pool_1d_3d():
    x = f32(2, 3, 10)
    check(ops.avg_pool1d, x, 3, 2, 1, True, False,
          torch_fn=lambda x, *a: F.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False))
    x3 = f32(1, 2, 5, 6, 7)
    check(ops.avg_pool3d, x3, 2, 2, 1, torch_fn=lambda x, *a: F.avg_pool3d(x, 2, 2, 1))


@pytest.mark.parametrize("size,out", [((10,), 3), ((7,), 7), ((5,), 8)])
def test_adaptive_1d(size, out):
    x = f32(2, 3, *size)
    check(ops.adaptive_avg_pool1d, x, out, torch_fn=lambda x, o: F.adaptive_avg_pool1d(x, o))
    check(ops.adaptive_max_pool1d, x, out, torch_fn=lambda x, o: F.adaptive_max_pool1d(x, o, return_indices=True))


@pytest.mark.parametrize("size,out", [((9, 10), (4, 3)), ((8, 8), 4), ((5, 7), (None, 3)), ((6, 5), (1, 1))])
def test_adaptive_2d(size, out):
    x = f32(2, 3, *size)
    check(ops._adaptive_avg_pool2d, x, out, torch_fn=lambda x, o: F.adaptive_avg_pool2d(x, o))
    check(ops.adaptive_max_pool2d, x, out, torch_fn=lambda x, o: F.adaptive_max_pool2d(x, o, return_indices=True))
    assert ops.adaptive_avg_pool2d is ops._adaptive_avg_pool2d


def test_adaptive_avg_pool3d():
    x = f32(1, 2, 5, 6, 7)
    check(ops.adaptive_avg_pool3d, x, (2, 3, 4), torch_fn=lambda x, o: F.adaptive_avg_pool3d(x, o))


def test_max_unpool2d_inverts_max_pool():
    x = f32(2, 3, 8, 9)
    values, idx = ops.max_pool2d_with_indices(x, 2)
    check(ops.max_unpool2d, values, idx, (8, 9),
          torch_fn=lambda v, i, o: F.max_unpool2d(v, i, 2, output_size=o))
    # overlapping windows name one position several times: it receives the value once
    values, idx = ops.max_pool2d_with_indices(x, 3, 1)
    check(ops.max_unpool2d, values, idx, (8, 9),
          torch_fn=lambda v, i, o: F.max_unpool2d(v, i, 3, 1, output_size=o))

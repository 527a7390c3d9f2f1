"""Category 9 (convolution) against the reference backend and PyTorch."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import xbench as xb

from .helpers import check, f32, tt

ops = xb.ops
TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, "same", 2, 2),
                                                            (3, 2, 1, 4)])
def test_conv1d(stride, padding, dilation, groups):
    x, w, b = f32(2, 4, 17), f32(8, 4 // groups, 3), f32(8)
    kw = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    check(ops.conv1d, x, w, b, torch_fn=lambda x, w, b: F.conv1d(x, w, b, **kw), **TOL, **kw)


def test_conv1d_unbatched_and_valid():
    x, w = f32(3, 10), f32(5, 3, 4)
    check(ops.conv1d, x, w, padding="valid", torch_fn=lambda x, w: F.conv1d(x, w, padding="valid"), **TOL)


@pytest.mark.parametrize("stride,padding,groups", [(1, 1, 1), ((2, 1), (0, 2), 2)])
def test_conv2d_grouped(stride, padding, groups):
    x, w = f32(2, 4, 9, 8), f32(6, 4 // groups, 3, 2)
    kw = dict(stride=stride, padding=padding, groups=groups)
    check(ops.conv2d, x, w, torch_fn=lambda x, w: F.conv2d(x, w, **kw), **TOL, **kw)


@pytest.mark.parametrize("stride,padding,dilation", [(1, 0, 1), (2, 1, (1, 2, 1))])
def test_conv3d(stride, padding, dilation):
    x, w, b = f32(1, 2, 6, 7, 5), f32(3, 2, 2, 3, 2), f32(3)
    kw = dict(stride=stride, padding=padding, dilation=dilation)
    check(ops.conv3d, x, w, b, torch_fn=lambda x, w, b: F.conv3d(x, w, b, **kw), **TOL, **kw)


def test_conv_depthwise2d():
    x, w, b = f32(2, 3, 8, 9), f32(6, 1, 3, 3), f32(6)
    check(ops._conv_depthwise2d, x, w, (3, 3), b, stride=(1, 2), padding=1, dilation=1,
          torch_fn=lambda x, w, k, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, groups=3), **TOL)
    # (ATen's _conv_depthwise2d has only a CUDA kernel; on the CPU PyTorch runs it as a grouped conv2d)


@pytest.mark.parametrize("stride,padding,output_padding,groups,dilation",
                         [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (3, 2, 1, 2, 1), ((2, 1), (0, 1), (1, 0), 1, (1, 2))])
def test_conv_transpose2d(stride, padding, output_padding, groups, dilation):
    x, w, b = f32(2, 4, 5, 6), f32(4, 6 // groups, 3, 3), f32(6)
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups, dilation=dilation)
    check(ops.conv_transpose2d, x, w, b, torch_fn=lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), **TOL, **kw)


def test_conv_transpose1d_and_3d():
    x, w = f32(2, 3, 7), f32(3, 2, 4)
    check(ops.conv_transpose1d, x, w, stride=2, padding=1,
          torch_fn=lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1), **TOL)
    x, w = f32(1, 2, 3, 4, 3), f32(2, 2, 2, 2, 2)
    check(ops.conv_transpose3d, x, w, stride=2, output_padding=1,
          torch_fn=lambda x, w: F.conv_transpose3d(x, w, stride=2, output_padding=1), **TOL)


@pytest.mark.parametrize("kernel,stride,padding,output_padding,groups", [
    (8, 8, 0, 0, 1),                  # patch embedding: a tap per phase
    (1, 2, 0, 1, 1),                  # 1x1 downsampling: phases without a tap
    ((7, 3), (4, 2), (3, 1), (1, 0), 2),  # overlapping, grouped, per-axis geometry
    ((3, 2), (2, 1), 1, (1, 0), 1),   # strided along one axis only
    (5, 3, 2, 2, 1)])
def test_strided_conv_transpose_by_phases(kernel, stride, padding, output_padding, groups):
    """Strided transposed convolutions (and so strided convolutions' input gradients) run as one stride-1
    convolution over the phases; kernels shorter, as long as and longer than the stride."""
    x, b = f32(2, 4, 5, 6), f32(6)
    w = f32(4, 6 // groups, *((kernel,) * 2 if isinstance(kernel, int) else kernel))
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups)
    check(ops.conv_transpose2d, x, w, b, torch_fn=lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), **TOL, **kw)


def test_strided_convolution_backward_by_phases():
    """SegFormer's spatial reduction (an 8x8 convolution of stride 8) and a strided 3x3 with a remainder."""
    for (x, w, st, pad) in [(f32(2, 8, 32, 32), f32(8, 8, 8, 8), 8, 0), (f32(2, 3, 9, 10), f32(4, 3, 3, 3), 2, 1)]:
        g = f32(*F.conv2d(tt(x), tt(w), stride=st, padding=pad).shape)
        args = (g, x, w, None, (st, st), (pad, pad), (1, 1), False, (0, 0), 1, [True, True, False])
        check(ops.convolution_backward, *args, outputs=[0, 1], **TOL,
              torch_fn=lambda *a: torch.ops.aten.convolution_backward(*a))


def test_conv_transpose2d_is_the_adjoint_of_conv2d():
    # <conv2d(x, w), y> == <x, conv_transpose2d(y, w)>: the defining property, independent of PyTorch
    x, w = f32(1, 3, 9, 9).astype(np.float64), f32(4, 3, 3, 3).astype(np.float64)
    y = ops.conv2d(x, w, stride=2, padding=1)
    g = f32(*y.shape).astype(np.float64)
    back = ops.conv_transpose2d(g, w, stride=2, padding=1)
    np.testing.assert_allclose((y * g).sum(), (x * back).sum(), rtol=1e-10)


@pytest.mark.parametrize("kernel,dilation,padding,stride", [((2, 3), 1, 0, 1), (3, 2, 1, 2)])
def test_im2col_col2im(kernel, dilation, padding, stride):
    x = f32(2, 3, 9, 10)
    kw = dict(dilation=dilation, padding=padding, stride=stride)
    cols = check(ops.im2col, x, kernel, torch_fn=lambda x, k: F.unfold(x, k, **kw), **kw)[0]
    check(ops.col2im, cols, (9, 10), kernel, torch_fn=lambda c, o, k: F.fold(c, o, k, **kw), **TOL, **kw)


def test_conv_errors_name_the_problem():
    with pytest.raises(ValueError, match="groups=2"):
        ops.conv1d(f32(1, 3, 8), f32(4, 1, 3), groups=2)
    with pytest.raises(ValueError, match="'same' needs stride 1"):
        ops.conv1d(f32(1, 3, 8), f32(4, 3, 3), stride=2, padding="same")

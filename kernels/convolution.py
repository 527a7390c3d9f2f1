"""Convolution as a contraction over sliding windows:
O[n, k, h, w] = sum_{c, r, s} I[n, c, h*stride + r*dilation - pad, w*stride + s*dilation - pad] * W[k, c, r, s].

Transposed convolution is the same contraction over the input with stride-1 zeros inserted between its samples
(the adjoint of a strided convolution), with the kernel flipped and its in/out channels swapped per group."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor

from ._samples import convolution as S
from ._util import pair

register = xb.ops.register


def _torch_depthwise(torch, self, weight, kernel_size, bias=None, stride=1, padding=0, dilation=1):
    """ATen's _conv_depthwise2d has only a CUDA kernel; on the CPU it is conv2d with groups = channels."""
    return torch.nn.functional.conv2d(self, weight, bias, stride, padding, dilation, groups=self.shape[-3])


def _padding(padding, kernel, dilation, stride, nd: int, name: str) -> list[tuple[int, int]]:
    """(low, high) padding per spatial axis; PyTorch's "valid" and "same" strings included."""
    if isinstance(padding, str):
        if padding == "valid":
            return [(0, 0)] * nd
        if padding != "same":
            raise ValueError(f"{name}: padding must be an int, a tuple, 'valid' or 'same', got {padding!r}")
        if any(s != 1 for s in stride):
            raise ValueError(f"{name}: padding='same' needs stride 1, got stride {stride}")
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return [(t // 2, t - t // 2) for t in total]
    return [(p, p) for p in pair(padding, nd)]


def _convnd(input, weight, bias, stride, padding, dilation, groups: int, nd: int, name: str):
    unbatched = input.ndim == nd + 1
    if unbatched:
        input = input[None]
    if input.ndim != nd + 2 or weight.ndim != nd + 2:
        raise ValueError(f"{name}: input must be [N, C, {nd} spatial dims] (or unbatched) and weight "
                         f"[out_channels, in_channels / groups, {nd} kernel dims]; got {tuple(input.shape)} and "
                         f"{tuple(weight.shape)}")
    n, c = input.shape[:2]
    k, cg = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    if c != cg * groups or k % groups:
        raise ValueError(f"{name}: {c} input channels and {k} output channels do not fit weight "
                         f"{tuple(weight.shape)} with groups={groups}")
    stride, dilation = pair(stride, nd), pair(dilation, nd)
    pads = _padding(padding, kernel, dilation, stride, nd, name)
    x = xb.pad(input, ((0, 0), (0, 0)) + tuple(pads))
    spatial = tuple(range(2, 2 + nd))
    win = xb.sliding_window(x, kernel, axes=spatial, stride=stride, dilation=dilation)   # n c o... k...
    outs = tuple(win.shape[2:2 + nd])
    o, r = "hwd"[:nd], "rst"[:nd]          # output and kernel axes in the einsum
    if groups == 1:
        wb = xb.broadcast_to(weight[None], (n,) + tuple(weight.shape))
        out = xb.einsum(f"nkc{r},nc{o}{r}->nk{o}", wb, win)
    else:
        win = win.reshape((n, groups, cg) + outs + kernel)
        wg = weight.reshape((groups, k // groups, cg) + kernel)
        wg = xb.broadcast_to(wg[None], (n,) + tuple(wg.shape))
        out = xb.einsum(f"ngkc{r},ngc{o}{r}->ngk{o}", wg, win).reshape((n, k) + outs)
    if bias is not None:
        out = out + bias.reshape((1, k) + (1,) * nd)
    return out[0] if unbatched else out


@register("convolution", samples=S.conv_cases(1), torch="torch.nn.functional.conv1d", grad=True)
def conv1d(input: Tensor, weight: Tensor, bias: Tensor = None, stride=1, padding=0, dilation=1, groups: int = 1):
    """[N, C, L] input, [out_channels, in_channels / groups, kL] weight (PyTorch's conv1d)."""
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")


@register("convolution", samples=S.conv_cases(2), torch="torch.nn.functional.conv2d", grad=True)
def conv2d(input: Tensor, weight: Tensor, bias: Tensor = None, stride=1, padding=0, dilation=1, groups: int = 1):
    """NCHW input, [out_channels, in_channels / groups, kH, kW] weight (PyTorch's conv2d)."""
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")


@register("convolution", samples=S.conv_cases(3), torch="torch.nn.functional.conv3d", grad=True)
def conv3d(input: Tensor, weight: Tensor, bias: Tensor = None, stride=1, padding=0, dilation=1, groups: int = 1):
    """NCDHW input, [out_channels, in_channels / groups, kD, kH, kW] weight (PyTorch's conv3d)."""
    return _convnd(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


@register("convolution", aliases=("conv_depthwise2d",), samples=S.depthwise_cases, torch=_torch_depthwise,
          grad=True)
def _conv_depthwise2d(self: Tensor, weight: Tensor, kernel_size, bias: Tensor = None, stride=1, padding=0,
                      dilation=1):
    """Depthwise 2-D convolution (ATen's `_conv_depthwise2d`): groups = in_channels, weight
    [in_channels * multiplier, 1, kH, kW]."""
    if tuple(weight.shape[2:]) != pair(kernel_size):
        raise ValueError(f"_conv_depthwise2d: kernel_size {kernel_size} differs from the weight's "
                         f"{tuple(weight.shape[2:])}")
    return _convnd(self, weight, bias, stride, padding, dilation, self.shape[-3], 2, "_conv_depthwise2d")


def _dilate(x, axis: int, s: int):
    """Insert s - 1 zeros between neighbouring samples along `axis`."""
    if s == 1:
        return x
    n = x.shape[axis]
    shape = tuple(x.shape)
    y = x.reshape(shape[:axis + 1] + (1,) + shape[axis + 1:])
    widths = [(0, 0)] * y.ndim
    widths[axis + 1] = (0, s - 1)
    y = xb.pad(y, widths).reshape(shape[:axis] + (n * s,) + shape[axis + 1:])
    return y[(slice(None),) * axis + (slice(0, (n - 1) * s + 1),)]


def _conv_transposend(input, weight, bias, stride, padding, output_padding, groups: int, dilation, nd: int,
                      name: str):
    unbatched = input.ndim == nd + 1
    if unbatched:
        input = input[None]
    if input.ndim != nd + 2 or weight.ndim != nd + 2:
        raise ValueError(f"{name}: input must be [N, C, {nd} spatial dims] (or unbatched) and weight "
                         f"[in_channels, out_channels / groups, {nd} kernel dims]; got {tuple(input.shape)} and "
                         f"{tuple(weight.shape)}")
    c, kg = weight.shape[:2]
    kernel = tuple(weight.shape[2:])
    if input.shape[1] != c or c % groups:
        raise ValueError(f"{name}: input has {input.shape[1]} channels, weight {tuple(weight.shape)} expects {c} "
                         f"(divisible by groups={groups})")
    stride, dilation = pair(stride, nd), pair(dilation, nd)
    padding, output_padding = pair(padding, nd), pair(output_padding, nd)
    for op_, s, d in zip(output_padding, stride, dilation):
        if op_ >= max(s, d):
            raise ValueError(f"{name}: output_padding {output_padding} must be smaller than stride or dilation")
    if any(s > 1 for s in stride) and all(d == 1 for d in dilation):
        out = _polyphase_transposed(input, weight, stride, padding, output_padding, groups, nd)
        if bias is not None:
            out = out + bias.reshape((1, out.shape[1]) + (1,) * nd)
        return out[0] if unbatched else out
    x = input
    for i, s in enumerate(stride):
        x = _dilate(x, 2 + i, s)
    widths = [(0, 0), (0, 0)] + [(d * (k - 1) - p, d * (k - 1) - p + op_)
                                 for k, d, p, op_ in zip(kernel, dilation, padding, output_padding)]
    x = xb.pad(x, widths)
    # W'[g*kg + o, i, ...] = W[g*cg + i, o, flipped ...]
    cg = c // groups
    w = weight.reshape((groups, cg, kg) + kernel)
    w = w.permute((0, 2, 1) + tuple(range(3, 3 + nd))).reshape((groups * kg, cg) + kernel)
    w = xb.flip(w, tuple(range(2, 2 + nd)))
    out = _convnd(x, w, bias, 1, 0, dilation, groups, nd, name)
    return out[0] if unbatched else out


def _polyphase_transposed(x, weight, stride, padding, output_padding, groups: int, nd: int):
    """A strided transposed convolution (dilation 1) as one stride-1 convolution, without the zeros.
    Output position j = s*q + f (phase f) takes taps r = s*m + f only: out[s*q + f] = sum_m x[q - m] W[s*m + f].
    So each phase is a convolution of x with a kernel of ceil(k / s) taps, and all phases are one convolution whose
    output channels are (channel, phase...), interleaved afterwards; phases past the kernel (k < s) are zeros.
    The zero-inserted input instead did s**nd times the arithmetic (64x for an 8x8 patch embedding's gradient)."""
    n, c, kg = x.shape[0], weight.shape[0], weight.shape[1]
    kernel = tuple(weight.shape[2:])
    cg = c // groups
    taps = [-(-k // s) for k, s in zip(kernel, stride)]                   # M: taps per phase
    phases = [min(k, s) for k, s in zip(kernel, stride)]                  # P: phases with a tap
    outs = [(i - 1) * s - 2 * p + k + op_ for i, s, p, k, op_ in
            zip(x.shape[2:], stride, padding, kernel, output_padding)]
    qs = [-(-(o + p) // s) for o, p, s in zip(outs, padding, stride)]      # Q: positions per phase
    # W[g*cg + i, j, s*m + f] -> W'[(g, j, f...), i, M - 1 - m]
    w = xb.pad(weight, ((0, 0), (0, 0)) + tuple((0, m * s - k) for m, s, k in zip(taps, stride, kernel)))
    split = sum(((m, s) for m, s in zip(taps, stride)), ())
    w = w.reshape((groups, cg, kg) + split)
    w = w[(slice(None),) * 3 + sum(((slice(None), slice(0, f)) for f in phases), ())]
    order = (0, 2) + tuple(4 + 2 * i for i in range(nd)) + (1,) + tuple(3 + 2 * i for i in range(nd))
    w = w.permute(order).reshape((groups * kg * int(np.prod(phases)), cg) + tuple(taps))
    w = xb.flip(w, tuple(range(2, 2 + nd)))
    # x[q - m] for q < Q: M - 1 zeros before, cut or padded to Q + M - 1 positions
    x = xb.pad(x, ((0, 0), (0, 0)) + tuple((m - 1, max(0, q - i)) for m, q, i in zip(taps, qs, x.shape[2:])))
    x = x[(slice(None), slice(None)) + tuple(slice(0, q + m - 1) for q, m in zip(qs, taps))]
    y = _convnd(x, w, None, 1, 0, 1, groups, nd, "conv_transpose")         # [n, (g, j, f...), q...]
    y = y.reshape((n, groups * kg) + tuple(phases) + tuple(qs))
    y = y.permute((0, 1) + sum(((2 + nd + i, 2 + i) for i in range(nd)), ()))   # [n, c', q0, f0, q1, f1, ...]
    y = xb.pad(y, ((0, 0), (0, 0)) + sum((((0, 0), (0, s - f)) for s, f in zip(stride, phases)), ()))
    y = y.reshape((n, groups * kg) + tuple(q * s for q, s in zip(qs, stride)))
    return y[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(padding, outs))]


@register("convolution", samples=S.conv_transpose_cases(1), torch="torch.nn.functional.conv_transpose1d", grad=True)
def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor = None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):
    """Transposed 1-D convolution; weight [in_channels, out_channels / groups, kL]."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups, dilation, 1,
                             "conv_transpose1d")


@register("convolution", samples=S.conv_transpose_cases(2), torch="torch.nn.functional.conv_transpose2d", grad=True)
def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor = None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):
    """Transposed 2-D convolution; weight [in_channels, out_channels / groups, kH, kW]."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups, dilation, 2,
                             "conv_transpose2d")


@register("convolution", samples=S.conv_transpose_cases(3), torch="torch.nn.functional.conv_transpose3d", grad=True)
def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor = None, stride=1, padding=0, output_padding=0,
                     groups: int = 1, dilation=1):
    """Transposed 3-D convolution; weight [in_channels, out_channels / groups, kD, kH, kW]."""
    return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                             "conv_transpose3d")


def _aten_geometry(weight, stride, padding, dilation, output_padding, name: str):
    nd = weight.ndim - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"{name}: weight must have 3 to 5 dims ([out, in / groups, kernel...]), got {weight.shape}")
    return nd, pair(stride, nd), pair(padding, nd), pair(dilation, nd), pair(output_padding, nd)


@register("convolution", samples=S.aten_conv_cases, torch="torch.ops.aten.convolution", grad=True)
def convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride, padding, dilation, transposed: bool,
                output_padding, groups: int):
    """ATen's convolution: 1-, 2- or 3-D (from the weight's rank), transposed or not; what conv{1,2,3}d and
    conv_transpose{1,2,3}d call."""
    nd, stride, padding, dilation, output_padding = _aten_geometry(weight, stride, padding, dilation,
                                                                   output_padding, "convolution")
    if transposed:
        return _conv_transposend(input, weight, bias, stride, padding, output_padding, groups, dilation, nd,
                                 "convolution")
    return _convnd(input, weight, bias, stride, padding, dilation, groups, nd, "convolution")


def _conv_weight_grad(grad_output, input, kernel, stride, padding, dilation, groups: int, nd: int):
    """d(loss)/d(weight) of a convolution: each tap's input window (of the padded input) against grad_output,
    summed over the batch and the output positions; [out, in / groups, kernel...]."""
    n, c = input.shape[:2]
    k = grad_output.shape[1]
    x = xb.pad(input, ((0, 0), (0, 0)) + tuple((p, p) for p in padding))
    win = xb.sliding_window(x, kernel, axes=tuple(range(2, 2 + nd)), stride=stride, dilation=dilation)
    outs = tuple(grad_output.shape[2:])
    # windows past the output (when the padded input leaves a remainder) are not part of the forward
    win = win[(slice(None), slice(None)) + tuple(slice(0, o) for o in outs)]
    o, r = "hwd"[:nd], "rst"[:nd]
    if groups == 1:
        return xb.einsum(f"nk{o},nc{o}{r}->kc{r}", grad_output, win)
    cg, kg = c // groups, k // groups
    gg = grad_output.reshape((n, groups, kg) + outs)
    wg = win.reshape((n, groups, cg) + outs + tuple(kernel))
    return xb.einsum(f"ngk{o},ngc{o}{r}->gkc{r}", gg, wg).reshape((k, cg) + tuple(kernel))


def _torch_conv_backward(torch, grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
                         output_padding, groups, output_mask):
    """ATen's convolution_backward, its undefined (masked) outputs as empty tensors."""
    res = torch.ops.aten.convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                                              transposed, output_padding, groups, output_mask)
    like = (input, weight, weight)
    return tuple(r if r is not None else torch.zeros(0, dtype=t.dtype) for r, t in zip(res, like))


@register("convolution", samples=S.conv_backward_cases, torch=_torch_conv_backward)
def convolution_backward(grad_output: Tensor, input: Tensor, weight: Tensor, bias_sizes, stride, padding, dilation,
                         transposed: bool, output_padding, groups: int, output_mask):
    """ATen's convolution_backward: (grad_input, grad_weight, grad_bias) of convolution(input, weight, bias, ...)
    given grad_output; each output output_mask leaves out is an empty tensor. grad_input is the adjoint
    convolution (a transposed one for a convolution, a plain one for a transposed convolution); grad_weight
    correlates input windows with grad_output (with the roles of input and grad_output swapped when
    transposed); grad_bias sums grad_output over the batch and the positions."""
    nd, stride, padding, dilation, output_padding = _aten_geometry(weight, stride, padding, dilation,
                                                                   output_padding, "convolution_backward")
    kernel = tuple(weight.shape[2:])
    spatial = tuple(range(2, 2 + nd))
    gi = gw = gb = None
    if output_mask[0]:
        if transposed:
            gi = _convnd(grad_output, weight, None, stride, padding, dilation, groups, nd, "convolution_backward")
            gi = gi[(slice(None), slice(None)) + tuple(slice(0, m) for m in input.shape[2:])]
        else:
            extra = tuple(i - ((o - 1) * s - 2 * p + d * (k - 1) + 1) for i, o, s, p, d, k in
                          zip(input.shape[2:], grad_output.shape[2:], stride, padding, dilation, kernel))
            gi = _conv_transposend(grad_output, weight, None, stride, padding, extra, groups, dilation, nd,
                                   "convolution_backward")
        gi = gi.astype(input.dtype)
    if output_mask[1]:
        if transposed:     # y = conv_transpose(x): x plays grad_output's part of a convolution of y
            gw = _conv_weight_grad(input, grad_output, kernel, stride, padding, dilation, groups, nd)
        else:
            gw = _conv_weight_grad(grad_output, input, kernel, stride, padding, dilation, groups, nd)
        gw = gw.astype(weight.dtype)
    if output_mask[2]:
        gb = grad_output.sum(axis=(0,) + spatial).astype(grad_output.dtype)
    return tuple(g if g is not None else xb.zeros((0,), t.dtype) for g, t in zip((gi, gw, gb), (input, weight, weight)))


@register("convolution", samples=S.im2col_cases, torch="torch.nn.functional.unfold", grad=True)
def im2col(input: Tensor, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding blocks as columns (`F.unfold`): [N, C, H, W] -> [N, C * kH * kW, L], L = number of blocks."""
    unbatched = input.ndim == 3
    x = input[None] if unbatched else input
    (kh, kw), (ph, pw) = pair(kernel_size), pair(padding)
    x = xb.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = xb.sliding_window(x, (kh, kw), axes=(2, 3), stride=pair(stride), dilation=pair(dilation))
    n, c, oh, ow = win.shape[:4]
    out = win.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kh * kw, oh * ow)
    return out[0] if unbatched else out


@register("convolution", aliases=("fold",), samples=S.col2im_cases, torch="torch.nn.functional.fold", grad=True)
def col2im(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Sums sliding blocks back into an image (`F.fold`, the transpose of im2col): [N, C * kH * kW, L] ->
    [N, C, H, W]; overlapping taps add up."""
    unbatched = input.ndim == 2
    x = input[None] if unbatched else input
    (h, w), (kh, kw) = pair(output_size), pair(kernel_size)
    (dh, dw), (ph, pw), (sh, sw) = pair(dilation), pair(padding), pair(stride)
    hp, wp = h + 2 * ph, w + 2 * pw
    oh, ow = (hp - dh * (kh - 1) - 1) // sh + 1, (wp - dw * (kw - 1) - 1) // sw + 1
    n, ckk, length = x.shape
    if ckk % (kh * kw) or length != oh * ow:
        raise ValueError(f"col2im: input {tuple(input.shape)} does not hold {kh}x{kw} blocks of a {h}x{w} image "
                         f"({oh * ow} blocks expected)")
    c = ckk // (kh * kw)
    r, s, i, j = np.meshgrid(np.arange(kh), np.arange(kw), np.arange(oh), np.arange(ow), indexing="ij")
    target = ((i * sh + r * dh) * wp + (j * sw + s * dw)).reshape(-1)        # padded position of every tap
    plane = xb.zeros((n, c, hp * wp), x.dtype)
    out = xb.scatter_add(plane, target, x.reshape(n, c, kh * kw * length), axis=2).reshape(n, c, hp, wp)
    out = out[:, :, ph:ph + h, pw:pw + w]
    return out[0] if unbatched else out

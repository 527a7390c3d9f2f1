"""Pooling as reductions over sliding windows (1-, 2- and 3-D, PyTorch's NC... layouts; unbatched inputs too).

Window divisors (avg pooling) and adaptive bin edges depend only on shapes, so they are computed here in numpy
and enter the graph as constants. Max pooling's indices are flat positions in each input plane (h * W + w), as
PyTorch returns them; its offsets (int8) are positions in each window, which a training graph keeps instead."""
from __future__ import annotations

import importlib
import math

import numpy as np

import xbench as xb
from xbench import Tensor

from ._samples import pooling as S
from ._util import pair

register = xb.ops.register


def _torch_max_with_indices(nd: int):
    def fn(torch, self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
        f = getattr(torch.nn.functional, f"max_pool{nd}d")
        return f(self, kernel_size, stride, padding, dilation, ceil_mode=ceil_mode, return_indices=True)
    fn.__name__ = fn.__qualname__ = f"max_pool{nd}d(return_indices=True)"
    return fn


def _low_memory_prims(torch):
    importlib.import_module("torch._inductor.inductor_prims")     # registers torch.ops.prims._low_memory_*
    return torch.ops.prims


def _torch_max_with_offsets(torch, self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    k = pair(kernel_size, 2)
    return _low_memory_prims(torch)._low_memory_max_pool_with_offsets(
        self, k, pair(stride, 2) if stride else k, pair(padding, 2), pair(dilation, 2), ceil_mode)


def _torch_offsets_to_indices(torch, offsets, kernel_size, input_size, stride, padding, dilation):
    k = pair(kernel_size, 2)
    return _low_memory_prims(torch)._low_memory_max_pool_offsets_to_indices(
        offsets, k, pair(input_size, 2), pair(stride, 2) if stride else k, pair(padding, 2), pair(dilation, 2))


def _torch_adaptive_max(nd: int):
    def fn(torch, self, output_size):
        return getattr(torch.nn.functional, f"adaptive_max_pool{nd}d")(self, output_size, return_indices=True)
    fn.__name__ = fn.__qualname__ = f"adaptive_max_pool{nd}d(return_indices=True)"
    return fn


def _torch_unpool(torch, self, indices, output_size):
    return torch.nn.functional.max_unpool2d(self, indices, 2, output_size=output_size)


def _out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size (with ceil_mode the last window must start inside the input or padding)."""
    span = size + 2 * p - d * (k - 1) - 1
    if span < 0:
        raise ValueError(f"pooling window {k} (dilation {d}) does not fit a size-{size} axis with padding {p}")
    out = (math.ceil(span / s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _lowest(dtype):
    return -math.inf if xb.dtypes.is_float(dtype) else int(np.iinfo(np.dtype(str(dtype))).min)


class _Geometry:
    """Kernel, stride, padding and dilation per spatial axis, with output sizes and extra right padding."""

    def __init__(self, name, x, nd, kernel_size, stride, padding, dilation, ceil_mode):
        if x.ndim not in (nd + 1, nd + 2):
            raise ValueError(f"{name}: input must be [N, C, {nd} spatial dims] or [C, {nd} spatial dims], got "
                             f"{tuple(x.shape)}")
        self.k = pair(kernel_size, nd)
        # ATen's default stride is an empty list: the kernel size
        self.s = pair(kernel_size if stride is None or (not isinstance(stride, int) and len(stride) == 0) else stride,
                      nd)
        self.p, self.d = pair(padding, nd), pair(dilation, nd)
        for k, p in zip(self.k, self.p):
            if p > k // 2:
                raise ValueError(f"{name}: padding {self.p} must be at most half the kernel size {self.k}")
        self.size = tuple(x.shape[-nd:])
        self.out = tuple(_out_size(n, k, s, p, d, ceil_mode)
                         for n, k, s, p, d in zip(self.size, self.k, self.s, self.p, self.d))
        # right padding so every output window fits: ceil_mode windows may run past the padded input
        self.extra = tuple(max(0, (o - 1) * s + d * (k - 1) + 1 - (n + 2 * p))
                           for o, n, k, s, p, d in zip(self.out, self.size, self.k, self.s, self.p, self.d))

    def windows(self, x, value):
        nd = len(self.k)
        lead = ((0, 0),) * (x.ndim - nd)
        x = xb.pad(x, lead + tuple((p, p + e) for p, e in zip(self.p, self.extra)), value=value)
        return xb.sliding_window(x, self.k, stride=self.s, dilation=self.d)      # ... o1..od k1..kd


def _window_index(tap, k, s, p, d, out, size):
    """Flat input-plane positions (h * W + w) of window position `tap` (row-major over the kernel) of each output."""
    nd, index = len(k), None
    for i in range(nd):
        inner = int(np.prod(k[i + 1:]))
        r = (tap // inner) % k[i] if i else tap // inner
        o = xb.arange(out[i]).reshape((out[i],) + (1,) * (nd - 1 - i))
        coord = o * s[i] - p[i] + r * d[i]
        index = coord if index is None else index * size[i] + coord
    return index


def _max_pool(name, input, nd, kernel_size, stride, padding, dilation, ceil_mode, returns="values"):
    """`returns`: "values", "indices" (values and int64 plane positions) or "offsets" (values and int8 window
    positions)."""
    g = _Geometry(name, input, nd, kernel_size, stride, padding, dilation, ceil_mode)
    win = g.windows(input, _lowest(input.dtype))
    taps = int(np.prod(g.k))
    flat = win.reshape(tuple(win.shape[:win.ndim - nd]) + (taps,))
    values = flat.max(axis=-1)
    if returns == "values":
        return values
    tap = flat.argmax(axis=-1)                                                    # ... o1..od
    if returns == "offsets":
        return values, tap.astype("int8")
    return values, _window_index(tap, g.k, g.s, g.p, g.d, g.out, g.size)


def _avg_pool(name, input, nd, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    g = _Geometry(name, input, nd, kernel_size, stride, padding, 1, ceil_mode)
    total = g.windows(input, 0).sum(axis=tuple(range(-nd, 0)))
    if divisor_override:
        return total * (1.0 / divisor_override)
    count = np.ones((), np.float64)
    for n, o, k, s, p in zip(g.size, g.out, g.k, g.s, g.p):
        start = np.arange(o) * s - p
        end = np.minimum(start + k, n + p)
        if not count_include_pad:
            start, end = np.maximum(start, 0), np.minimum(end, n)
        count = np.multiply.outer(count, (end - start).astype(np.float64))
    if np.all(count == count.flat[0]):
        return total * (1.0 / float(count.flat[0]))
    # 16-bit inputs are scaled in float32 and rounded once, back to their own dtype (as PyTorch returns them)
    w = (1.0 / count).astype(np.float32 if total.dtype != "float64" else np.float64)
    return (total * xb.asarray(w)).astype(input.dtype)


# ---- max pooling -----------------------------------------------------------------------------------------

@register("pooling", samples=S.pool_cases(1, "max"), torch="torch.nn.functional.max_pool1d", grad=True)
def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    return _max_pool("max_pool1d", input, 1, kernel_size, stride, padding, dilation, ceil_mode)


@register("pooling", samples=S.pool_cases(2, "max"), torch="torch.nn.functional.max_pool2d", grad=True)
def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    return _max_pool("max_pool2d", input, 2, kernel_size, stride, padding, dilation, ceil_mode)


@register("pooling", samples=S.pool_cases(3, "max"), torch="torch.nn.functional.max_pool3d", grad=True)
def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    return _max_pool("max_pool3d", input, 3, kernel_size, stride, padding, dilation, ceil_mode)


@register("pooling", samples=S.pool_cases(1, "max"), torch=_torch_max_with_indices(1), grad=True)
def max_pool1d_with_indices(self: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    """(values, int64 indices into each input row); the first maximum of a window wins."""
    return _max_pool("max_pool1d_with_indices", self, 1, kernel_size, stride, padding, dilation, ceil_mode,
                     "indices")


@register("pooling", samples=S.pool_cases(2, "max"), torch=_torch_max_with_indices(2), grad=True)
def max_pool2d_with_indices(self: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    """(values, int64 indices h * W + w into each input plane); the first maximum of a window wins."""
    return _max_pool("max_pool2d_with_indices", self, 2, kernel_size, stride, padding, dilation, ceil_mode,
                     "indices")


@register("pooling", samples=S.pool_cases(3, "max"), torch=_torch_max_with_indices(3), grad=True)
def max_pool3d_with_indices(self: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    """(values, int64 indices (d * H + h) * W + w into each input volume)."""
    return _max_pool("max_pool3d_with_indices", self, 3, kernel_size, stride, padding, dilation, ceil_mode,
                     "indices")


@register("pooling", samples=S.pool_cases(2, "max"), torch=_torch_max_with_offsets)
def max_pool2d_with_offsets(self: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    """(values, int8 offsets): each maximum's position in its window, row-major over the kernel (the first of equal
    ones). What a training graph keeps for the backward instead of int64 indices, an eighth of their bytes;
    `max_pool2d_offsets_to_indices` turns them back (torch's prims._low_memory_max_pool_with_offsets)."""
    if int(np.prod(pair(kernel_size, 2))) > 127:
        raise ValueError(f"max_pool2d_with_offsets: a {pair(kernel_size, 2)} window has more positions than int8 "
                         "holds (use max_pool2d_with_indices)")
    return _max_pool("max_pool2d_with_offsets", self, 2, kernel_size, stride, padding, dilation, ceil_mode,
                     "offsets")


@register("pooling", samples=S.offsets_cases(2), torch=_torch_offsets_to_indices, dtypes=("int8",))
def max_pool2d_offsets_to_indices(offsets: Tensor, kernel_size, input_size, stride, padding, dilation):
    """The int64 indices h * W + w into each input plane of `max_pool2d_with_offsets`'s window offsets."""
    k, size = pair(kernel_size, 2), pair(input_size, 2)
    s = pair(stride if stride else kernel_size, 2)
    return _window_index(offsets.astype("int64"), k, s, pair(padding, 2), pair(dilation, 2),
                         tuple(offsets.shape[-2:]), size)


def _max_pool_backward(name, nd, grad_output, self, indices):
    """grad_output added into zeros shaped like self at each output's flat index in its plane (windows that
    overlap add up)."""
    if tuple(indices.shape) != tuple(grad_output.shape):
        raise ValueError(f"{name}: indices {tuple(indices.shape)} must be shaped like grad_output "
                         f"{tuple(grad_output.shape)}")
    planes = int(np.prod(self.shape[:self.ndim - nd]))
    plane = int(np.prod(self.shape[self.ndim - nd:]))
    outs = int(np.prod(grad_output.shape[grad_output.ndim - nd:]))
    # per plane: each plane's additions are its own, so the scatter splits across threads by plane
    offsets = xb.clamp(indices.astype("int64"), 0, plane - 1).reshape((planes, outs))
    return xb.scatter_add_along_axis(xb.zeros((planes, plane), grad_output.dtype), offsets,
                                     grad_output.reshape((planes, outs)), axis=1).reshape(tuple(self.shape))


def _torch_max_backward(nd: int):
    def fn(torch, grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):
        return getattr(torch.ops.aten, f"max_pool{nd}d_with_indices_backward")(
            grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices)
    fn.__name__ = fn.__qualname__ = f"torch.ops.aten.max_pool{nd}d_with_indices_backward"
    return fn


@register("pooling", samples=S.max_pool_backward_cases(2), torch=_torch_max_backward(2))
def max_pool2d_with_indices_backward(grad_output: Tensor, self: Tensor, kernel_size, stride, padding, dilation,
                                     ceil_mode: bool, indices: Tensor):
    """The gradient of max_pool2d_with_indices: each output's gradient goes to the input position its index
    names (h * W + w in its plane); the window arguments are those of the forward (only the indices matter)."""
    return _max_pool_backward("max_pool2d_with_indices_backward", 2, grad_output, self, indices)


@register("pooling", samples=S.max_pool_backward_cases(3), torch=_torch_max_backward(3))
def max_pool3d_with_indices_backward(grad_output: Tensor, self: Tensor, kernel_size, stride, padding, dilation,
                                     ceil_mode: bool, indices: Tensor):
    """The gradient of max_pool3d_with_indices ((d * H + h) * W + w indices)."""
    return _max_pool_backward("max_pool3d_with_indices_backward", 3, grad_output, self, indices)


# ---- average pooling -------------------------------------------------------------------------------------

@register("pooling", samples=S.pool_cases(1, "avg"), torch="torch.nn.functional.avg_pool1d", grad=True)
def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True):
    return _avg_pool("avg_pool1d", input, 1, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@register("pooling", samples=S.pool_cases(2, "avg"), torch="torch.nn.functional.avg_pool2d", grad=True)
def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int = None):
    return _avg_pool("avg_pool2d", input, 2, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


@register("pooling", samples=S.pool_cases(3, "avg"), torch="torch.nn.functional.avg_pool3d", grad=True)
def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int = None):
    return _avg_pool("avg_pool3d", input, 3, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# ---- adaptive pooling ------------------------------------------------------------------------------------

def _bins(n: int, out: int) -> tuple[np.ndarray, np.ndarray, int]:
    """PyTorch's adaptive bins: [floor(i * n / out), ceil((i + 1) * n / out)); their largest width."""
    i = np.arange(out)
    start = (i * n) // out
    end = -((-(i + 1) * n) // out)
    return start, end, int((end - start).max())


def _adaptive(name, input, nd, output_size, kind):
    if input.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{name}: input must be [N, C, {nd} spatial dims] or [C, {nd} spatial dims], got "
                         f"{tuple(input.shape)}")
    size = tuple(input.shape[-nd:])
    wanted = (output_size,) * nd if isinstance(output_size, int) else tuple(output_size)
    if len(wanted) != nd:
        raise ValueError(f"{name}: output_size {output_size} needs {nd} sizes")
    outs = tuple(n if o is None else int(o) for n, o in zip(size, wanted))
    bins = [_bins(n, o) for n, o in zip(size, outs)]
    # one index table per axis, shaped to broadcast to [o1..od, k1..kd]; taps past a bin's end repeat its last
    # element (harmless for the max, weighted by 0 for the mean)
    tables, weights = [], np.ones((), np.float64)
    for i, (start, end, kmax) in enumerate(bins):
        j = np.arange(kmax)
        shape = [1] * (2 * nd)
        shape[i], shape[nd + i] = len(start), kmax
        tables.append(np.minimum(start[:, None] + j[None, :], end[:, None] - 1).reshape(shape))
        w = np.where(start[:, None] + j[None, :] < end[:, None], 1.0 / (end - start)[:, None], 0.0)
        weights = weights * w.reshape(shape)
    lead = (slice(None),) * (input.ndim - nd)
    taps = input[lead + tuple(tables)]                                            # ... o1..od k1..kd
    if kind == "avg":
        w = weights.astype(np.float64 if input.dtype == "float64" else np.float32)
        return (taps * xb.asarray(w)).sum(axis=tuple(range(-nd, 0))).astype(input.dtype)   # 16 bits stay 16
    kprod = int(np.prod([b[2] for b in bins]))
    flat = taps.reshape(tuple(taps.shape[:taps.ndim - nd]) + (kprod,))
    values = flat.max(axis=-1)
    if kind == "max":
        return values
    tap = flat.argmax(axis=-1)
    index = None
    for i, (start, _, kmax) in enumerate(bins):
        inner = int(np.prod([b[2] for b in bins[i + 1:]]))
        r = (tap // inner) % kmax if i else tap // inner
        coord = xb.asarray(start.astype(np.int64)).reshape((len(start),) + (1,) * (nd - 1 - i)) + r
        index = coord if index is None else index * size[i] + coord
    return values, index


@register("pooling", samples=S.adaptive_cases(1), torch="torch.nn.functional.adaptive_avg_pool1d", grad=True)
def adaptive_avg_pool1d(self: Tensor, output_size):
    """Mean over PyTorch's adaptive bins of each row: [N, C, L] -> [N, C, output_size]."""
    return _adaptive("adaptive_avg_pool1d", self, 1, output_size, "avg")


@register("pooling", aliases=("adaptive_avg_pool2d",), samples=S.adaptive_cases(2),
          torch="torch.nn.functional.adaptive_avg_pool2d", grad=True)
def _adaptive_avg_pool2d(self: Tensor, output_size):
    """Mean over adaptive bins of each plane: [N, C, H, W] -> [N, C, oH, oW] (ATen's name)."""
    return _adaptive("_adaptive_avg_pool2d", self, 2, output_size, "avg")



@register("pooling", samples=S.adaptive_cases(3), torch="torch.nn.functional.adaptive_avg_pool3d", grad=True)
def adaptive_avg_pool3d(self: Tensor, output_size):
    return _adaptive("adaptive_avg_pool3d", self, 3, output_size, "avg")


@register("pooling", samples=S.adaptive_cases(1), torch=_torch_adaptive_max(1), grad=True)
def adaptive_max_pool1d(self: Tensor, output_size):
    """(values, int64 indices) of the maximum of each adaptive bin."""
    return _adaptive("adaptive_max_pool1d", self, 1, output_size, "argmax")


@register("pooling", samples=S.adaptive_cases(2), torch=_torch_adaptive_max(2), grad=True)
def adaptive_max_pool2d(self: Tensor, output_size):
    """(values, int64 indices h * W + w) of the maximum of each adaptive bin."""
    return _adaptive("adaptive_max_pool2d", self, 2, output_size, "argmax")


# ---- unpooling -------------------------------------------------------------------------------------------

@register("pooling", samples=S.max_unpool2d_cases, torch=_torch_unpool, grad=("self",),
          notes="out-of-range indices are clamped (PyTorch raises)")
def max_unpool2d(self: Tensor, indices: Tensor, output_size):
    """The partial inverse of max_pool2d_with_indices (ATen's signature): each value goes to its flat index
    h * W + w in a zero [..., H, W] plane. Indices out of range are clamped (xbench's gather/scatter rule;
    PyTorch raises). A position named several times (overlapping windows) receives the value once."""
    h, w = pair(output_size)
    lead = tuple(self.shape[:-2])
    planes = int(np.prod(lead))
    if tuple(indices.shape) != tuple(self.shape):
        raise ValueError(f"max_unpool2d: indices {tuple(indices.shape)} must match the input {tuple(self.shape)}")
    base = (xb.arange(planes) * (h * w)).reshape(lead + (1, 1))
    target = (xb.clamp(indices.astype("int64"), 0, h * w - 1) + base).reshape(-1)
    zeros = xb.zeros((planes * h * w,), self.dtype)
    total = xb.scatter_add(zeros, target, self.reshape(-1), axis=0)
    hits = xb.scatter_add(xb.zeros((planes * h * w,), self.dtype), target, xb.ones((target.shape[0],), self.dtype),
                          axis=0)
    hits = xb.maximum(hits, 1)
    out = total / hits if xb.dtypes.is_float(self.dtype) else total // hits
    return out.reshape(lead + (h, w))

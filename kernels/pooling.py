"""Pooling as reductions over sliding windows."""
from __future__ import annotations

import math

import xbench as xb
from xbench import Tensor

from ._util import pair

register = xb.ops.register


def _ceil_pad(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """Extra right padding so ceil_mode keeps the last partial window (PyTorch's rule: it must start inside)."""
    if not ceil_mode:
        return 0
    out = math.ceil((size + 2 * p - d * (k - 1) - 1) / s) + 1
    if (out - 1) * s >= size + p:
        out -= 1
    return max(0, (out - 1) * s + d * (k - 1) + 1 - (size + 2 * p))


@register("pooling")
def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False):
    (kh, kw) = pair(kernel_size)
    (sh, sw) = pair(stride if stride is not None else kernel_size)
    (ph, pw), (dh, dw) = pair(padding), pair(dilation)
    h, w = input.shape[-2:]
    eh, ew = _ceil_pad(h, kh, sh, ph, dh, ceil_mode), _ceil_pad(w, kw, sw, pw, dw, ceil_mode)
    lead = ((0, 0),) * (input.ndim - 2)
    x = xb.pad(input, lead + ((ph, ph + eh), (pw, pw + ew)), value=-math.inf)
    win = xb.sliding_window(x, (kh, kw), stride=(sh, sw), dilation=(dh, dw))
    return win.max(axis=(-2, -1))


@register("pooling")
def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True):
    (kh, kw) = pair(kernel_size)
    (sh, sw) = pair(stride if stride is not None else kernel_size)
    (ph, pw) = pair(padding)
    h, w = input.shape[-2:]
    eh, ew = _ceil_pad(h, kh, sh, ph, 1, ceil_mode), _ceil_pad(w, kw, sw, pw, 1, ceil_mode)
    lead = ((0, 0),) * (input.ndim - 2)
    x = xb.pad(input, lead + ((ph, ph + eh), (pw, pw + ew)))
    total = xb.sliding_window(x, (kh, kw), stride=(sh, sw)).sum(axis=(-2, -1))
    if count_include_pad and not (eh or ew):
        return total * (1.0 / (kh * kw))
    # divisor per window: in-bounds taps (or padded taps within the original padding when counting pad)
    ones = xb.ones((h, w), input.dtype)
    lo, hi = (ph, pw), (ph + eh, pw + ew)
    if count_include_pad:
        ones = xb.pad(xb.ones((h + 2 * ph, w + 2 * pw), input.dtype), ((0, eh), (0, ew)))
    else:
        ones = xb.pad(ones, ((lo[0], hi[0]), (lo[1], hi[1])))
    count = xb.sliding_window(ones, (kh, kw), stride=(sh, sw)).sum(axis=(-2, -1))
    return total / count

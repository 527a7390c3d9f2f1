"""Convolution as a contraction over sliding windows:
O[n, k, h, w] = sum_{c, r, s} I[n, c, h*stride + r*dilation - pad, w*stride + s*dilation - pad] * W[k, c, r, s]."""
from __future__ import annotations

import xbench as xb
from xbench import Tensor

from ._util import pair

register = xb.ops.register


@register("convolution")
def conv2d(input: Tensor, weight: Tensor, bias: Tensor = None, stride=1, padding=0, dilation=1, groups: int = 1):
    """NCHW input, [out_channels, in_channels / groups, kH, kW] weight (PyTorch's conv2d)."""
    n, c, h, w = input.shape
    k, cg, r, s = weight.shape
    if c != cg * groups or k % groups:
        raise ValueError(f"conv2d: {c} input channels, weight expects {cg} x {groups} groups")
    (sh, sw), (dh, dw) = pair(stride), pair(dilation)
    ph, pw = pair(padding)
    x = xb.pad(input, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = xb.sliding_window(x, (r, s), axes=(2, 3), stride=(sh, sw), dilation=(dh, dw))   # n c oh ow r s
    oh, ow = win.shape[2], win.shape[3]
    if groups == 1:
        wb = xb.broadcast_to(weight[None], (n, k, c, r, s))
        out = xb.einsum("nkcrs,nchwrs->nkhw", wb, win)
    else:
        win = win.reshape(n, groups, cg, oh, ow, r, s)
        wg = xb.broadcast_to(weight.reshape(groups, k // groups, cg, r, s)[None], (n, groups, k // groups, cg, r, s))
        out = xb.einsum("ngkcrs,ngchwrs->ngkhw", wg, win).reshape(n, k, oh, ow)
    if bias is not None:
        out = out + bias.reshape(1, k, 1, 1)
    return out

"""Scans."""
from __future__ import annotations

import xbench as xb
from xbench import Tensor

register = xb.ops.register


@register("reduction")
def cumsum(input: Tensor, dim: int):
    return xb.cumsum(input, dim)


@register("reduction")
def cumprod(input: Tensor, dim: int):
    return xb.cumprod(input, dim)

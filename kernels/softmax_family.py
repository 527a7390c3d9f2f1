"""Softmax and log-softmax (numerically stable: the row maximum is subtracted first)."""
from __future__ import annotations

import xbench as xb
from xbench import Tensor

register = xb.ops.register


@register("softmax")
def softmax(input: Tensor, dim: int = -1):
    e = xb.exp(input - input.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


@register("softmax")
def log_softmax(input: Tensor, dim: int = -1):
    shifted = input - input.max(axis=dim, keepdims=True)
    return shifted - xb.log(xb.exp(shifted).sum(axis=dim, keepdims=True))

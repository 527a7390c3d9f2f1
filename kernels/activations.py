"""Activation functions."""
from __future__ import annotations

import math

import xbench as xb
from xbench import Tensor

register = xb.ops.register

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)


def _gelu(x, approximate: str):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + xb.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return 0.5 * x * (1.0 + xb.erf(x * _INV_SQRT_2))


@register("activation")
def gelu(input: Tensor, approximate: str = "none"):
    """Gaussian error linear unit; `approximate="tanh"` for the tanh form."""
    return _gelu(input, approximate)


@register("activation")
def bias_gelu(input: Tensor, bias: Tensor, approximate: str = "none"):
    """gelu(input + bias), fused."""
    return _gelu(input + bias, approximate)


@register("activation")
def relu(input: Tensor):
    return xb.maximum(input, 0)


@register("activation")
def sigmoid(input: Tensor):
    return xb.sigmoid(input)


@register("activation")
def silu(input: Tensor):
    return input * xb.sigmoid(input)


@register("activation")
def tanh(input: Tensor):
    return xb.tanh(input)

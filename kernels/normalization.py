"""Normalisation layers."""
from __future__ import annotations

import xbench as xb
from xbench import Tensor

register = xb.ops.register


def _norm_axes(input, normalized_shape) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise ValueError(f"normalized_shape {shape} does not match the trailing dims of {input.shape}")
    return tuple(range(input.ndim - len(shape), input.ndim))


@register("normalization")
def layer_norm(input: Tensor, normalized_shape, weight: Tensor = None, bias: Tensor = None, eps: float = 1e-5):
    axes = _norm_axes(input, normalized_shape)
    mean = input.mean(axis=axes, keepdims=True)
    centered = input - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    out = centered * xb.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


@register("normalization")
def rms_norm(input: Tensor, normalized_shape, weight: Tensor = None, eps: float = 1e-6):
    axes = _norm_axes(input, normalized_shape)
    out = input * xb.rsqrt((input * input).mean(axis=axes, keepdims=True) + eps)
    return out if weight is None else out * weight

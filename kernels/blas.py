"""Matrix products."""
from __future__ import annotations

import xbench as xb
from xbench import Tensor

register = xb.ops.register


@register("blas")
def mm(input: Tensor, mat2: Tensor):
    """input [n, m] @ mat2 [m, p]."""
    return input @ mat2


@register("blas")
def bmm(input: Tensor, mat2: Tensor):
    """Batched: input [b, n, m] @ mat2 [b, m, p]."""
    return input @ mat2


@register("blas")
def matmul(input: Tensor, other: Tensor):
    """numpy/PyTorch matmul: 1-D operands promoted, batch dims broadcast."""
    return input @ other


@register("blas")
def linear(input: Tensor, weight: Tensor, bias: Tensor = None):
    """input @ weight.T + bias (weight is [out_features, in_features])."""
    out = input @ weight.mT
    return out if bias is None else out + bias

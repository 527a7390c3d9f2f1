"""Attention."""
from __future__ import annotations

import math

import xbench as xb
from xbench import Tensor

register = xb.ops.register


@register("attention")
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor = None,
                                 is_causal: bool = False, scale: float = None):
    """softmax(q @ k^T * scale + mask) @ v over [..., L, E] queries and [..., S, E] keys; a boolean
    `attn_mask` keeps True positions, a float one is added; `is_causal` masks j > i."""
    L, S = query.shape[-2], key.shape[-2]
    s = (query @ key.mT) * (1.0 / math.sqrt(query.shape[-1]) if scale is None else scale)
    if is_causal:
        keep = xb.iota((L, S), 0) >= xb.iota((L, S), 1)
        s = xb.where(keep, s, -math.inf)
    if attn_mask is not None:
        s = xb.where(attn_mask, s, -math.inf) if attn_mask.dtype == "bool" else s + attn_mask
    p = xb.exp(s - s.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ value

"""Embedding lookups."""
from __future__ import annotations

import xbench as xb
from xbench import Tensor

register = xb.ops.register


@register("embedding")
def embedding(input: Tensor, weight: Tensor):
    """Rows of `weight` [num_embeddings, dim] picked by the integer tensor `input`."""
    return xb.gather(weight, input, axis=0)

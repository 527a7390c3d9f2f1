"""Samples for embedding lookups and their gradients (embeddings.py)."""
from __future__ import annotations

import numpy as np

from xbench.ops import Sample

from .core import _tiny, custom


@custom
def embedding_cases(T, shapes, dtype):
    """embedding(input, weight, padding_idx, max_norm, norm_type): index tensors of rank 1-3, max_norm."""
    rng = shapes.rng("embedding")
    vocab, dim = (7, 4) if _tiny(shapes) else (50, 16)
    w = T((vocab, dim), "w")
    for shape in ((5,), (3, 4)) if _tiny(shapes) else ((5,), (3, 4), (2, 3, 17)):
        yield Sample((rng.integers(0, vocab, shape).astype(np.int64), w), note=f"indices {shape}")
    idx = rng.integers(0, vocab, (4, 3)).astype(np.int64)
    # PyTorch's gradient skips the padding row; xbench's autodiff of the lookup does not (no stop_gradient)
    yield Sample((idx, w), dict(padding_idx=1), note="padding_idx", grad=False)
    big = T((vocab, dim), "wb", low=-2.0, high=2.0)
    for p in (2.0, 1.0, float("inf")):
        yield Sample((idx, big), dict(max_norm=1.5, norm_type=p), note=f"max_norm 1.5, norm {p}", grad=False)


@custom
def embedding_backward_cases(T, shapes, dtype):
    """embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)."""
    rng = shapes.rng("embedding_backward")
    vocab, dim = (6, 3) if _tiny(shapes) else (20, 8)
    idx = rng.integers(0, vocab, (4, 5)).astype(np.int64)
    g = T((4, 5, dim), "g")
    yield Sample((g, idx, vocab, -1, False), note="plain")
    yield Sample((g, idx, vocab, int(idx[0, 0]), False), note="padding_idx")
    # PyTorch's double backward of this operator ignores scale_grad_by_freq, so torch.autograd is no oracle here
    yield Sample((g, idx, vocab, -1, True), note="scale_grad_by_freq", grad=False)


@custom
def one_hot_cases(T, shapes, dtype):
    for shape in ((7,), (3, 4)):
        yield Sample((T(shape, "i", ints=(0, 5)), 5), note=f"{shape}")
    yield Sample((T((2, 3), "j", ints=(0, 3)), 8), note="more classes than values")

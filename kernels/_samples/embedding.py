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


_FAST = ("float32", "float16", "bfloat16")     # weight dtypes of PyTorch's CPU fast path for sum bags


def _bag_problem(shapes, dtype, T, key):
    """weight [V, D], 1-D indices, offsets of 4 bags (the second empty); a row that repeats."""
    rng = shapes.rng("embedding_bag", key)
    vocab, dim, n = (7, 4, 8) if _tiny(shapes) else (20, 8, 12)
    w = T((vocab, dim), "w", key)
    idx = rng.integers(0, vocab, n).astype(np.int64)
    idx[5] = idx[4]
    offsets = np.array([0, 3, 3, 7], np.int64)
    return w, idx, offsets


def _np_bags(weight, indices, offsets, mode: int, padding_idx: int, include_last_offset: bool):
    """PyTorch's bookkeeping outputs of _embedding_bag on its CPU, in numpy: (offset2bag, bag_size,
    max_indices), offset2bag full (even where the forward returns it empty)."""
    n = len(indices)
    bags = len(offsets) - (1 if include_last_offset else 0)
    bag = (offsets[None, :] <= np.arange(n)[:, None]).sum(axis=1) - 1
    keep = indices != padding_idx if padding_idx >= 0 else np.ones(n, bool)
    size = np.array([np.sum(keep & (bag == b)) for b in range(bags)], indices.dtype)
    if mode == 0:
        return bag.astype(indices.dtype), np.zeros(bags, indices.dtype), np.zeros(bags, indices.dtype)
    if mode == 1:
        return bag.astype(indices.dtype), size, size.copy()
    rows = weight.astype(np.float64)[indices]
    best = np.zeros((bags, weight.shape[1]), indices.dtype)
    for b in range(bags):
        members = np.nonzero(keep & (bag == b))[0]
        if len(members):
            best[b] = indices[members[np.argmax(rows[members], axis=0)]]
    return bag.astype(indices.dtype), size, best


def _bag_configs(shapes):
    """(mode, per_sample_weights, include_last_offset, padding_idx, scale_grad_by_freq)."""
    configs = [(0, False, False, -1, False), (1, False, False, -1, False), (2, False, False, -1, False),
               (0, True, False, -1, False)]
    if not _tiny(shapes):
        configs += [(0, False, False, 3, True), (1, False, True, 3, False), (2, False, True, 5, False),
                    (0, True, False, 2, False), (1, False, False, -1, True)]
    return configs


@custom
def embedding_bag_cases(T, shapes, dtype):
    """_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, per_sample_weights,
    include_last_offset, padding_idx): sum, mean and max bags, an empty bag, per-sample weights, the last offset
    given, a padding row, int32 indices."""
    for j, (mode, psw, last, pad, sgf) in enumerate(_bag_configs(shapes)):
        w, idx, off = _bag_problem(shapes, dtype, T, j)
        off = np.append(off, len(idx)) if last else off
        ps = T(idx.shape, "psw", j, low=0.5, high=1.5) if psw else None
        if pad >= 0:
            idx[1] = pad
        yield Sample((w, idx, off, sgf, mode, False, ps, last, pad),
                     note=f"mode {mode}{' psw' if psw else ''}{' last offset' if last else ''} padding {pad}")
    w, idx, off = _bag_problem(shapes, dtype, T, "i32")
    yield Sample((w, idx.astype(np.int32), off.astype(np.int32), False, 1), note="int32 indices, mean")


def _bag_backward(T, shapes, dtype, dense: bool):
    for j, (mode, psw, last, pad, sgf) in enumerate(_bag_configs(shapes)):
        w, idx, off = _bag_problem(shapes, dtype, T, j)
        off = np.append(off, len(idx)) if last else off
        if pad >= 0:
            idx[1] = pad
        bag, size, best = _np_bags(w, idx, off, mode, pad, last)
        if not dense and mode == 0 and pad < 0 and dtype in _FAST:
            bag = np.zeros(0, idx.dtype)                 # the forward's fast path returns it empty
        ps = T(idx.shape, "psw", j, low=0.5, high=1.5) if psw else None
        g = T((len(off) - (1 if last else 0), w.shape[1]), "g", j)
        note = f"mode {mode}{' psw' if psw else ''} padding {pad}{' scale_grad_by_freq' if sgf else ''}"
        if dense:
            yield Sample((g, idx, bag, size, best, w.shape[0], sgf, mode, ps, pad), note=note)
        else:
            yield Sample((g, idx, off, bag, size, best, w.shape[0], sgf, mode, False, ps, pad), note=note)


@custom
def embedding_bag_backward_cases(T, shapes, dtype):
    """_embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices, num_weights,
    scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx) with the forward's bookkeeping (offset2bag
    empty where PyTorch's fast path leaves it so)."""
    yield from _bag_backward(T, shapes, dtype, dense=False)


@custom
def embedding_bag_dense_backward_cases(T, shapes, dtype):
    """_embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
    scale_grad_by_freq, mode, per_sample_weights, padding_idx)."""
    yield from _bag_backward(T, shapes, dtype, dense=True)


@custom
def embedding_bag_psw_backward_cases(T, shapes, dtype):
    """_embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx):
    sum bags, offset2bag as the forward returns it."""
    for j, pad in enumerate((-1, 2)):
        w, idx, off = _bag_problem(shapes, dtype, T, f"psw{j}")
        if pad >= 0:
            idx[1] = pad
        bag = _np_bags(w, idx, off, 0, pad, False)[0]
        if pad < 0 and dtype in _FAST:
            bag = np.zeros(0, idx.dtype)
        yield Sample((T((len(off), w.shape[1]), "g", j), w, idx, off, bag, 0, pad), note=f"padding {pad}")

"""Samples for the fused operators (fused.py)."""
from __future__ import annotations

import numpy as np

from xbench.dtypes import to_numpy
from xbench.ops import Sample, ShapeSet

from .core import _images, _mats, _tiny, cast, custom, distinct


def _rows(shapes: ShapeSet):
    """(tokens, hidden) problems."""
    return ((3, 8),) if _tiny(shapes) else ((1, 16), (17, 64), (2, 5, 128))


@custom
def gated_pair_cases(T, shapes, dtype):
    """Two same-shaped activations, and a broadcast gate."""
    for shape in _rows(shapes):
        yield Sample((T(shape, "a"), T(shape, "b")), note=f"{shape}")
    shape = _rows(shapes)[-1]
    yield Sample((T(shape, "a2"), T(shape[-1:], "b2")), note="broadcast B")


@custom
def gelu_and_mul_cases(T, shapes, dtype):
    for shape in _rows(shapes):
        yield Sample((T(shape, "a"), T(shape, "b")), note=f"{shape}")
        yield Sample((T(shape, "a"), T(shape, "b")), dict(approximate="tanh"), note=f"{shape} tanh")


@custom
def swiglu_cases(T, shapes, dtype):
    for shape in _rows(shapes):
        yield Sample((T(shape[:-1] + (2 * shape[-1],), "x"),), note=f"{shape[:-1] + (2 * shape[-1],)}")


@custom
def fused_add_rms_norm_cases(T, shapes, dtype):
    for shape in _rows(shapes):
        n = shape[-1]
        yield Sample((T(shape, "x"), T(shape, "r"), (n,), T((n,), "w")), note=f"{shape}")
    shape = _rows(shapes)[-1]
    yield Sample((T(shape, "x2"), T(shape, "r2"), (shape[-1],), T((shape[-1],), "w2"), 1e-3), note="eps 1e-3")


@custom
def skip_layer_norm_cases(T, shapes, dtype):
    for shape in _rows(shapes):
        n = shape[-1]
        yield Sample((T(shape, "x"), T(shape, "r"), (n,), T((n,), "w"), T((n,), "b")), note=f"{shape}")


@custom
def rope_cases(T, shapes, dtype):
    """apply_rotary_pos_emb(q, k, cos, sin, position_ids, rotary_interleaved): [batch, seq, heads, dim] without
    position ids, packed tokens with them, grouped-query k heads, both rotation styles."""
    b, s, hq, hk, d = (1, 3, 2, 1, 4) if _tiny(shapes) else (2, 7, 4, 2, 16)
    ang = np.arange(16)[:, None] * (1.0 / 10000.0 ** (np.arange(d // 2) / (d // 2)))[None, :]
    cos, sin = cast(np.cos(ang), dtype), cast(np.sin(ang), dtype)
    q, k = T((b, s, hq, d), "q"), T((b, s, hk, d), "k")
    for inter in (False, True):
        yield Sample((q, k, cos, sin), dict(rotary_interleaved=inter), note=f"4-D, interleaved={inter}")
    pos = shapes.rng("rope").integers(0, 16, (5,)).astype(np.int64)
    yield Sample((T((5, hq, d), "qt"), T((5, hk, d), "kt"), cos, sin, pos), note="tokens with position ids")
    yield Sample((T((5, hq, d), "qt"), T((5, hk, d), "kt"), cos, sin, pos, True), note="tokens, interleaved")


@custom
def cross_entropy_cases(T, shapes, dtype):
    """cross_entropy_loss(inp, target, weight, reduction, ignore_index, label_smoothing)."""
    rng = shapes.rng("cross_entropy")
    n, c = (4, 5) if _tiny(shapes) else (17, 10)
    x = T((n, c), "x")
    tgt = rng.integers(0, c, n).astype(np.int64)
    tgt_ign = tgt.copy()
    tgt_ign[::3] = -100
    w = T((c,), "w", low=0.5, high=2.0)
    for red in ("mean", "sum", "none"):
        yield Sample((x, tgt), dict(reduction=red), note=f"indices, {red}")
    yield Sample((x, tgt_ign, w), note="weights, ignore_index")
    yield Sample((x, tgt_ign), dict(label_smoothing=0.1), note="label smoothing, ignore_index")
    if not _tiny(shapes):
        yield Sample((x, tgt, w), dict(label_smoothing=0.2, reduction="sum"), note="weights, smoothing, sum")
        probs = rng.random((n, c))
        probs = cast(probs / probs.sum(1, keepdims=True), dtype)
        yield Sample((x, probs), note="probabilities")
        yield Sample((x, probs, w), dict(label_smoothing=0.1, reduction="none"), note="probabilities, weights")
        yield Sample((T((3, c, 4, 5), "img"), rng.integers(0, c, (3, 4, 5)).astype(np.int64)),
                     note="per-pixel targets")
        yield Sample((T((c,), "one"), np.asarray(np.int64(2))), note="unbatched")


@custom
def instance_norm_cases(T, shapes, dtype):
    """instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps)."""
    for n, c, h, w in _images(shapes):
        if h * w < 2:
            continue
        yield Sample((T((n, c, h, w), "x"), T((c,), "w"), T((c,), "b")), note=f"{(n, c, h, w)}")
    n, c, h, w = _images(shapes)[-1]
    yield Sample((T((n, c, w), "x1"),), note="1-D, no affine")
    yield Sample((T((n, c, h, w), "x2"), T((c,), "w2"), T((c,), "b2"), T((c,), "rm"),
                  T((c,), "rv", low=0.5, high=2.0), False), note="running statistics")


@custom
def matmul_bias_activation_cases(T, shapes, dtype):
    for m, k, n in _mats(shapes):
        yield Sample((T((m, k), "a"), T((k, n), "b"), T((n,), "bias")), note=f"{m}x{k}x{n} relu")
    m, k, n = _mats(shapes)[-1]
    for act in ("gelu", "silu", "none") if not _tiny(shapes) else ("gelu",):
        yield Sample((T((m, k), "a2"), T((k, n), "b2"), T((n,), "bias2")), dict(activation=act), note=act,
                     grad=act != "relu")


@custom
def topk_softmax_cases(T, shapes, dtype):
    tokens, experts = (3, 8) if _tiny(shapes) else (17, 64)
    g = cast(distinct(shapes, dtype, (tokens, experts), -1, "gate").astype(np.float64) * 0.125, dtype)
    yield Sample((g, 2), note="top 2")
    yield Sample((g, 4, True), note="top 4, renormalised")


@custom
def moe_align_cases(T, shapes, dtype):
    """moe_align_block_size(topk_ids, block_size, num_experts, expert_map, pad_sorted_ids)."""
    rng = shapes.rng("moe_align")
    tokens, k, experts = (5, 2, 4) if _tiny(shapes) else (33, 2, 8)
    ids = np.stack([rng.permutation(experts)[:k] for _ in range(tokens)]).astype(to_numpy(dtype))
    yield Sample((ids, 4, experts), note=f"{tokens} tokens, top {k}, {experts} experts, block 4")
    yield Sample((ids, 3, experts), dict(pad_sorted_ids=True), note="block 3, padded")
    if not _tiny(shapes):
        few = np.where(ids >= 6, 0, ids).astype(to_numpy(dtype))         # experts 6, 7 receive nothing
        yield Sample((few, 16, experts), note="unused experts, block 16")
        emap = rng.permutation(experts).astype(to_numpy(dtype))
        yield Sample((ids, 4, experts, emap), note="expert_map")


@custom
def reshape_and_cache_cases(T, shapes, dtype):
    """reshape_and_cache(key, value, key_cache, value_cache, slot_mapping): distinct slots, one skipped (-1)."""
    tokens, heads, d, x, blocks, bs = (3, 2, 4, 2, 2, 4) if _tiny(shapes) else (7, 3, 8, 4, 4, 4)
    slots = shapes.rng("cache").permutation(blocks * bs)[:tokens].astype(np.int64)
    slots[1] = -1
    yield Sample((T((tokens, heads, d), "k"), T((tokens, heads, d), "v"), T((blocks, heads, d // x, bs, x), "kc"),
                  T((blocks, heads, d, bs), "vc"), slots), note=f"{tokens} tokens into {blocks}x{bs} slots")

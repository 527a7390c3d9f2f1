"""Samples for attention (attention.py): [B, H, L, E] problems, masks, packed sequences, paged caches."""
from __future__ import annotations

import numpy as np

from xbench.ops import Sample, ShapeSet

from .core import _tiny, cast, custom


def _qkv_shapes(shapes: ShapeSet):
    """(B, H, L, S, E) attention problems: a tiny one for the slow backends, then longer and unaligned ones."""
    if _tiny(shapes):
        return ((1, 2, 5, 5, 4),)
    return ((1, 1, 1, 1, 4), (2, 3, 17, 17, 8), (2, 2, 9, 33, 16))


@custom
def sdpa_cases(T, shapes, dtype):
    """scaled_dot_product_attention: plain, causal, boolean and additive masks, scale, grouped-query heads,
    unbatched 3-D inputs."""
    rng = shapes.rng("sdpa")
    for b, h, lq, lk, e in _qkv_shapes(shapes):
        q, k, v = T((b, h, lq, e), "q"), T((b, h, lk, e), "k"), T((b, h, lk, e), "v")
        yield Sample((q, k, v), note=f"{(b, h, lq, lk, e)}")
        yield Sample((q, k, v), dict(is_causal=True), note=f"{(b, h, lq, lk, e)} causal")
    b, h, lq, lk, e = _qkv_shapes(shapes)[-1]
    q, k, v = T((b, h, lq, e), "q2"), T((b, h, lk, e), "k2"), T((b, h, lk, e), "v2")
    mask = rng.random((lq, lk)) < 0.7
    mask[:, 0] = True
    yield Sample((q, k, v, mask), note="boolean mask")
    yield Sample((q, k, v, T((b, 1, lq, lk), "bias")), dict(scale=0.3), note="additive mask, scale 0.3")
    if not _tiny(shapes):
        yield Sample((q, T((b, 1, lk, e), "k1"), T((b, 1, lk, e), "v1")), dict(enable_gqa=True), note="GQA")
        yield Sample((T((7, 8), "q3"), T((5, 8), "k3"), T((5, 6), "v3")), note="2-D, value width 6")
        dead = mask.copy()
        dead[1] = False
        yield Sample((q, k, v, dead), note="a row with no key (gives 0)", grad=False)


@custom
def flash_sdpa_cases(T, shapes, dtype):
    """_scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, return_debug_mask, scale)."""
    for b, h, lq, lk, e in _qkv_shapes(shapes):
        q, k, v = T((b, h, lq, e), "q"), T((b, h, lk, e), "k"), T((b, h, lk, e), "v")
        yield Sample((q, k, v), note=f"{(b, h, lq, lk, e)}")
        yield Sample((q, k, v, 0.0, True), dict(scale=0.25), note=f"{(b, h, lq, lk, e)} causal, scale")


@custom
def efficient_sdpa_cases(T, shapes, dtype):
    """_scaled_dot_product_efficient_attention(query, key, value, attn_bias, compute_log_sumexp, dropout_p,
    is_causal, scale)."""
    for b, h, lq, lk, e in _qkv_shapes(shapes):
        q, k, v = T((b, h, lq, e), "q"), T((b, h, lk, e), "k"), T((b, h, lk, e), "v")
        yield Sample((q, k, v, T((b, h, lq, lk), "bias"), True), note=f"{(b, h, lq, lk, e)} bias")
        yield Sample((q, k, v, None, True, 0.0, True), note=f"{(b, h, lq, lk, e)} causal")
    yield Sample((q, k, v, None, False), note="no log-sum-exp")


@custom
def flash_forward_cases(T, shapes, dtype):
    """_flash_attention_forward: dense [B, L, H, E] with causal, sliding window, ALiBi and grouped-query heads;
    varlen packed sequences (cum_seq int32)."""
    b, h, lq, lk, e = (1, 2, 4, 5, 4) if _tiny(shapes) else (2, 4, 9, 12, 8)
    q, k, v = T((b, lq, h, e), "q"), T((b, lk, h, e), "k"), T((b, lk, h, e), "v")
    yield Sample((q, k, v, None, None, lq, lk, 0.0, False, False), note="dense")
    yield Sample((q, k, v, None, None, lq, lk, 0.0, True, False), note="dense causal (bottom-right)")
    yield Sample((q, k, v, None, None, lq, lk, 0.0, False, False),
                 dict(window_size_left=2, window_size_right=1), note="sliding window 2/1")
    if not _tiny(shapes):
        slopes = np.asarray(2.0 ** -np.arange(1, h + 1), np.float32)
        yield Sample((q, k, v, None, None, lq, lk, 0.0, True, False), dict(alibi_slopes=slopes), note="ALiBi")
        yield Sample((q, T((b, lk, 2, e), "k2"), T((b, lk, 2, e), "v2"), None, None, lq, lk, 0.0, False, False),
                     note="GQA (2 kv heads)")
    cq = np.array([0, 3, 5, 9], np.int32) if not _tiny(shapes) else np.array([0, 2, 4], np.int32)
    ck = np.array([0, 4, 9, 12], np.int32) if not _tiny(shapes) else np.array([0, 3, 5], np.int32)
    tq, tk = int(cq[-1]), int(ck[-1])
    qp, kp, vp = T((tq, h, e), "qp"), T((tk, h, e), "kp"), T((tk, h, e), "vp")
    mq, mk = int(np.diff(cq).max()), int(np.diff(ck).max())
    yield Sample((qp, kp, vp, cq, ck, mq, mk, 0.0, False, False), note="varlen")
    yield Sample((qp, kp, vp, cq, ck, mq, mk, 0.0, True, False), note="varlen causal")


@custom
def flash_mla_cases(T, shapes, dtype):
    """flash_mla(q, block_table, blocked_k, max_seqlen_pad, block_size, b, s_q, cache_seqlens, h_q, h_kv, d, dv,
    causal) over a shuffled page table."""
    b, h_q, h_kv, d, dv, bs, pages_per = (2, 2, 1, 6, 4, 4, 3) if _tiny(shapes) else (2, 4, 2, 12, 8, 4, 4)
    rng = shapes.rng("flash_mla")
    table = rng.permutation(b * pages_per).reshape(b, pages_per).astype(np.int32)
    k = T((b * pages_per, bs, h_kv, d), "k")
    pad = pages_per * bs
    lens = np.array([pad - 3, pad - 1], np.int32)
    for s_q in (1, 2):
        yield Sample((T((b, s_q, h_q, d), "q", s_q), table, k, pad, bs, b, s_q, lens, h_q, h_kv, d, dv, True),
                     note=f"s_q={s_q}")


def _np_attention(q, k, v, scale, causal: bool, mask):
    """(output, logsumexp) in float64, heads of k and v broadcast to q's."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    s = q @ np.swapaxes(k, -1, -2) * scale
    if mask is not None:
        s = s + np.asarray(mask, np.float64)
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.arange(S)[None, :] <= np.arange(L)[:, None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    lse = (np.log(e.sum(axis=-1, keepdims=True)) + m)[..., 0]
    return (e / e.sum(axis=-1, keepdims=True)) @ v, lse


def _cpu_flash_problems(T, shapes, key: str):
    """(q, k, v, is_causal, attn_mask, scale) for _scaled_dot_product_flash_attention_for_cpu: plain, causal with
    a scale, an additive float mask, a key/value head broadcast to every query head."""
    for b, h, lq, lk, e in _qkv_shapes(shapes):
        q, k, v = T((b, h, lq, e), key + "q"), T((b, h, lk, e), key + "k"), T((b, h, lk, e), key + "v")
        yield q, k, v, False, None, None, f"{(b, h, lq, lk, e)}"
        yield q, k, v, True, None, 0.25, f"{(b, h, lq, lk, e)} causal, scale 0.25"
    if not _tiny(shapes):
        b, h, lq, lk, e = _qkv_shapes(shapes)[-1]
        q = T((b, h, lq, e), key + "q2")
        k, v = T((b, h, lk, e), key + "k2"), T((b, h, lk, e), key + "v2")
        yield q, k, v, False, T((b, 1, lq, lk), key + "mask"), None, "additive mask"
        yield q, T((b, 1, lk, e), key + "k1"), T((b, 1, lk, e), key + "v1"), False, None, None, "one kv head"


@custom
def flash_cpu_cases(T, shapes, dtype):
    """_scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal, attn_mask, scale)."""
    for q, k, v, causal, mask, scale, note in _cpu_flash_problems(T, shapes, ""):
        yield Sample((q, k, v, 0.0, causal), dict(attn_mask=mask, scale=scale), note=note)


@custom
def flash_cpu_backward_cases(T, shapes, dtype):
    """_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, query, key, value, out, logsumexp,
    dropout_p, is_causal, attn_mask, scale) with the forward's output and log-sum-exp."""
    lse_dtype = "float64" if dtype == "float64" else "float32"
    for q, k, v, causal, mask, scale, note in _cpu_flash_problems(T, shapes, "b"):
        out, lse = _np_attention(q, k, v, 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale, causal, mask)
        yield Sample((T(out.shape, "dout", note), q, k, v, cast(out, dtype), cast(lse, lse_dtype), 0.0, causal),
                     dict(attn_mask=mask, scale=scale), note=note)

"""Attention: torch.nn.functional.scaled_dot_product_attention and the ATen entry points behind it
(flash, memory-efficient and flash-attn's varlen forward).

All compute softmax(q @ k^T * scale + bias) @ v with the running maximum subtracted first, in float32 for 16-bit
inputs (the output is cast back; log-sum-exp results are float32, float64 for float64 inputs), and return the log-sum-exp of each query row
where the ATen operator does. A query row that may attend to no key gives 0 (PyTorch's safe softmax) and a
log-sum-exp of -inf. Dropout needs random numbers and is not provided: dropout_p must be 0. The ATen operators'
bookkeeping outputs (RNG state, cumulative lengths, debug masks) are not produced."""
from __future__ import annotations

import math

import numpy as np

import xbench as xb
from xbench import Tensor

from ._samples import attention as S

register = xb.ops.register
_LOW = ("float16", "bfloat16")


def _no_dropout(name: str, dropout_p: float) -> None:
    if dropout_p:
        raise ValueError(f"{name}: dropout_p={dropout_p} needs random numbers, which xbench attention does not "
                         "draw; pass dropout_p=0 (apply xb.ops.native_dropout to the output if you need it)")


def _repeat_heads(x, heads: int, axis: int):
    """Grouped-query attention: kv head h // (heads / kv_heads) serves query head h."""
    kv = x.shape[axis]
    if kv == heads:
        return x
    if heads % kv:
        raise ValueError(f"attention: {heads} query heads are not a multiple of {kv} key/value heads")
    shape = tuple(x.shape)
    y = xb.expand_dims(x, axis + 1)
    y = xb.broadcast_to(y, shape[:axis + 1] + (heads // kv,) + shape[axis + 1:])
    return y.reshape(shape[:axis] + (heads,) + shape[axis + 1:])


def _softmax_attention(q, k, v, scale: float, keep=None, bias=None):
    """(softmax(q k^T * scale + bias, masked by keep) @ v, logsumexp) over [..., L, E] x [..., S, E]."""
    dtype = q.dtype
    if dtype in _LOW:
        q, k, v = q.astype("float32"), k.astype("float32"), v.astype("float32")
        bias = bias.astype("float32") if bias is not None else None
    s = (q @ k.mT) * scale
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = xb.where(keep, s, -math.inf)
    m = s.max(axis=-1, keepdims=True)
    m = xb.where(m == -math.inf, 0.0, m)
    p = xb.exp(s - m)
    total = p.sum(axis=-1, keepdims=True)
    out = (p @ v) / xb.where(total == 0, 1.0, total)
    lse = (xb.log(total) + m)[..., 0]
    return out.astype(dtype), lse


def _scale(query, scale):
    return 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale


def _causal(L: int, S: int, bottom_right: bool = False):
    shift = S - L if bottom_right else 0
    return xb.iota((L, S), 1) <= xb.iota((L, S), 0) + shift


def _torch_sdpa(torch, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                enable_gqa=False):
    return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                                            scale=scale, enable_gqa=enable_gqa)


@register("attention", samples=S.sdpa_cases, torch=_torch_sdpa, grad=("query", "key", "value"))
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float = None,
                                 enable_gqa: bool = False):
    """softmax(q @ k^T * scale + mask) @ v over [..., L, E] queries and [..., S, E] keys; a boolean
    `attn_mask` keeps True positions, a float one is added; `is_causal` masks j > i (top-left aligned, as
    PyTorch); `enable_gqa` lets key/value have fewer heads (dim -3) than query."""
    _no_dropout("scaled_dot_product_attention", dropout_p)
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not both (as PyTorch)")
    L, S_ = query.shape[-2], key.shape[-2]
    if enable_gqa:
        key, value = _repeat_heads(key, query.shape[-3], key.ndim - 3), _repeat_heads(value, query.shape[-3],
                                                                                     value.ndim - 3)
    keep = bias = None
    if is_causal:
        keep = _causal(L, S_)
    elif attn_mask is not None:
        if attn_mask.dtype == "bool":
            keep = attn_mask
        else:
            bias = attn_mask
    return _softmax_attention(query, key, value, _scale(query, scale), keep, bias)[0]


def _torch_flash_cpu(torch, query, key, value, dropout_p=0.0, is_causal=False, return_debug_mask=False,
                     scale=None):
    """ATen's CUDA flash kernel has a CPU twin with the same contract: (output, logsumexp). ATen marks the
    logsumexp output non-differentiable; it is recomputed here with torch.logsumexp so that torch.autograd
    differentiates it as xbench does."""
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal,
                                                                          scale=scale)
    q, k = (t.to(lse.dtype) for t in (query, key))
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(query.shape[-1]) if scale is None else scale)
    if is_causal:
        keep = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return out, torch.logsumexp(s, -1)


@register("attention", samples=S.flash_sdpa_cases, torch=_torch_flash_cpu, grad=("query", "key", "value"))
def _scaled_dot_product_flash_attention(query: Tensor, key: Tensor, value: Tensor, dropout_p: float = 0.0,
                                        is_causal: bool = False, return_debug_mask: bool = False,
                                        scale: float = None):
    """(output [B, H, L, Ev], logsumexp [B, H, L]) for [B, H, L, E] inputs; is_causal is top-left
    aligned. (ATen's other outputs — cumulative lengths, RNG state, debug mask — are not produced.)"""
    _no_dropout("_scaled_dot_product_flash_attention", dropout_p)
    keep = _causal(query.shape[-2], key.shape[-2]) if is_causal else None
    return _softmax_attention(query, key, value, _scale(query, scale), keep)


def _heads_of(x, heads: int):
    """A key/value with one head, or with a divisor of `heads`, repeated to `heads` (dim -3)."""
    return x if x.shape[-3] == heads else _repeat_heads(x, heads, x.ndim - 3)


def _cpu_keep_bias(query, key, is_causal: bool, attn_mask):
    if attn_mask is not None and attn_mask.dtype == "bool":
        raise ValueError("_scaled_dot_product_flash_attention_for_cpu: attn_mask must be a float mask added to the "
                         "scores (PyTorch's CPU kernel takes no boolean one); use where(mask, 0, -inf)")
    return _causal(query.shape[-2], key.shape[-2]) if is_causal else None, attn_mask


@register("attention", samples=S.flash_cpu_cases, torch="torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
          grad=("query", "key", "value"))
def _scaled_dot_product_flash_attention_for_cpu(query: Tensor, key: Tensor, value: Tensor, dropout_p: float = 0.0,
                                                is_causal: bool = False, attn_mask: Tensor | None = None,
                                                scale: float = None):
    """ATen's CPU flash attention: (output [B, H, L, E], logsumexp [B, H, L]; float32 for 16-bit inputs) for
    [B, H, L, E] inputs; is_causal is top-left aligned; attn_mask is added to the scores; a key/value with one
    head serves every query head."""
    _no_dropout("_scaled_dot_product_flash_attention_for_cpu", dropout_p)
    keep, bias = _cpu_keep_bias(query, key, is_causal, attn_mask)
    heads = query.shape[-3]
    return _softmax_attention(query, _heads_of(key, heads), _heads_of(value, heads), _scale(query, scale), keep,
                              bias)


@register("attention", samples=S.flash_cpu_backward_cases,
          torch="torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward")
def _scaled_dot_product_flash_attention_for_cpu_backward(grad_out: Tensor, query: Tensor, key: Tensor,
                                                         value: Tensor, out: Tensor, logsumexp: Tensor,
                                                         dropout_p: float, is_causal: bool,
                                                         attn_mask: Tensor | None = None, scale: float = None):
    """(grad_query, grad_key, grad_value) of _scaled_dot_product_flash_attention_for_cpu from its output and
    log-sum-exp: P = exp(S - logsumexp), dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale,
    dK = dS^T Q * scale (in float32 for 16-bit inputs); a key/value head shared by several query heads sums
    their gradients."""
    _no_dropout("_scaled_dot_product_flash_attention_for_cpu_backward", dropout_p)
    keep, bias = _cpu_keep_bias(query, key, is_causal, attn_mask)
    sc, heads = _scale(query, scale), query.shape[-3]
    f32 = query.dtype in _LOW
    q, k, v, do, o = (t.astype("float32") if f32 else t for t in (query, _heads_of(key, heads),
                                                                     _heads_of(value, heads), grad_out, out))
    s = (q @ k.mT) * sc
    if bias is not None:
        s = s + (bias.astype("float32") if f32 else bias)
    if keep is not None:
        s = xb.where(keep, s, -math.inf)
    p = xb.exp(s - logsumexp.astype(s.dtype)[..., None])
    dv = p.mT @ do
    ds = p * (do @ v.mT - (do * o).sum(axis=-1, keepdims=True))
    dq = (ds @ k) * sc
    dk = (ds.mT @ q) * sc

    def shared(g, like):           # back to the key/value's heads
        hk = like.shape[-3]
        if hk == heads:
            return g
        lead = tuple(g.shape[:-3])
        return g.reshape(lead + (hk, heads // hk) + tuple(g.shape[-2:])).sum(axis=-3)
    return (dq.astype(query.dtype), shared(dk, key).astype(key.dtype), shared(dv, value).astype(value.dtype))


def _torch_math_attention(torch, q, k, v, bias=None, keep=None, scale=None):
    """The attention contract spelled with PyTorch tensors: (output, logsumexp), 0 for rows with no key."""
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if bias is not None:
        s = s + bias
    if keep is not None:
        s = s.masked_fill(~keep, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - torch.where(torch.isinf(lse), 0, lse)[..., None])
    return p @ v, lse


def _torch_efficient(torch, query, key, value, attn_bias, compute_log_sumexp, dropout_p=0.0, is_causal=False,
                     scale=None):
    """No CPU kernel in PyTorch: its math spelled in torch (upcast to float64 for 16-bit inputs)."""
    dt = query.dtype
    q, k, v = (t.double() if dt in (torch.float16, torch.bfloat16) else t for t in (query, key, value))
    keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril() if is_causal else None
    out, lse = _torch_math_attention(torch, q, k, v, attn_bias.to(q.dtype) if attn_bias is not None else None,
                                     keep, scale)
    lse_dt = torch.float64 if dt == torch.float64 else torch.float32
    lse = lse.to(lse_dt) if compute_log_sumexp else torch.zeros(*q.shape[:-2], 0, dtype=lse_dt)
    return out.to(dt), lse


@register("attention", samples=S.efficient_sdpa_cases, torch=_torch_efficient, grad=("query", "key", "value"))
def _scaled_dot_product_efficient_attention(query: Tensor, key: Tensor, value: Tensor, attn_bias: Tensor = None,
                                            compute_log_sumexp: bool = False, dropout_p: float = 0.0,
                                            is_causal: bool = False, scale: float = None):
    """(output, log_sumexp) for [B, H, L, E] inputs with an optional additive attn_bias (broadcast to
    [B, H, L, S]); log_sumexp is [B, H, L] when compute_log_sumexp, else empty [B, H, 0]
    (PyTorch's CUDA kernel pads L to a multiple of 32)."""
    _no_dropout("_scaled_dot_product_efficient_attention", dropout_p)
    keep = _causal(query.shape[-2], key.shape[-2]) if is_causal else None
    out, lse = _softmax_attention(query, key, value, _scale(query, scale), keep, attn_bias)
    if not compute_log_sumexp:
        return out, xb.zeros(tuple(query.shape[:-2]) + (0,), lse.dtype)
    return out, lse


def _segments(cum, total: int):
    """For each of `total` packed positions: its sequence (from cumulative starts `cum` [B + 1]), the sequence's
    start and length."""
    pos = xb.arange(total)
    seg = (cum[1:][None, :] <= pos[:, None]).astype("int64").sum(axis=1)
    seg = xb.minimum(seg, cum.shape[0] - 2)
    start = xb.gather(cum, seg, axis=0).astype("int64")
    length = (xb.gather(cum, seg + 1, axis=0) - xb.gather(cum, seg, axis=0)).astype("int64")
    return seg, pos - start, length


def _flash_keep(qi, kj, lq, lk, is_causal, window_left, window_right):
    """flash-attn's mask on local positions: bottom-right aligned causal and sliding windows."""
    shift = lk - lq
    keep = None
    left = window_left if window_left is not None and window_left >= 0 else None
    right = 0 if is_causal else (window_right if window_right is not None and window_right >= 0 else None)
    if right is not None:
        keep = kj <= qi + shift + right
    if left is not None:
        lo = kj >= qi + shift - left
        keep = lo if keep is None else keep & lo
    return keep


def _torch_flash_forward(torch, query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                         return_debug_mask, scale=None, window_size_left=None, window_size_right=None,
                         alibi_slopes=None):
    """PyTorch's _flash_attention_forward runs only on CUDA: flash-attn's contract (bottom-right causal,
    sliding windows, ALiBi, varlen packing) spelled with torch tensors, sequence by sequence."""
    dt = query.dtype
    q, k, v = (t.double() if dt in (torch.float16, torch.bfloat16) else t for t in (query, key, value))
    if cum_seq_q is None:
        seqs = [(q[b], k[b], v[b]) for b in range(q.shape[0])]
    else:
        cq, ck = [int(c) for c in cum_seq_q], [int(c) for c in cum_seq_k]
        seqs = [(q[a:b], k[c:d], v[c:d]) for a, b, c, d in zip(cq[:-1], cq[1:], ck[:-1], ck[1:])]
    outs, lses = [], []
    for b, seq in enumerate(seqs):
        qb, kb, vb = (t.transpose(0, 1) for t in seq)                        # heads first
        rep = qb.shape[0] // kb.shape[0]
        kb, vb = kb.repeat_interleave(rep, 0), vb.repeat_interleave(rep, 0)
        lq, lk = qb.shape[1], kb.shape[1]
        i, j = torch.arange(lq)[:, None], torch.arange(lk)[None, :]
        keep = torch.ones(lq, lk, dtype=torch.bool)
        right = 0 if is_causal else window_size_right
        if right is not None and right >= 0:
            keep &= j <= i + lk - lq + right
        if window_size_left is not None and window_size_left >= 0:
            keep &= j >= i + lk - lq - window_size_left
        bias = None
        if alibi_slopes is not None:
            slopes = alibi_slopes[b] if alibi_slopes.dim() == 2 else alibi_slopes
            bias = (-slopes[:, None, None] * (i + lk - lq - j).abs()).to(qb.dtype)
        o, lse = _torch_math_attention(torch, qb, kb, vb, bias, keep, scale)
        outs.append(o.transpose(0, 1))
        lses.append(lse)
    lse_dt = torch.float64 if dt == torch.float64 else torch.float32
    if cum_seq_q is None:
        return torch.stack(outs).to(dt), torch.stack(lses).to(lse_dt)
    return torch.cat(outs).to(dt), torch.cat(lses, 1).to(lse_dt)


@register("attention", samples=S.flash_forward_cases, torch=_torch_flash_forward,
          grad=("query", "key", "value"))
def _flash_attention_forward(query: Tensor, key: Tensor, value: Tensor, cum_seq_q: Tensor = None,
                             cum_seq_k: Tensor = None, max_q: int = 0, max_k: int = 0, dropout_p: float = 0.0,
                             is_causal: bool = False, return_debug_mask: bool = False, scale: float = None,
                             window_size_left: int = None, window_size_right: int = None,
                             alibi_slopes: Tensor = None):
    """flash-attn's forward (ATen's `_flash_attention_forward`): (output, softmax_logsumexp).

    Dense: query [B, Lq, H, E], key/value [B, Lk, Hk, E] (Hk divides H) -> output [B, Lq, H, Ev], lse [B, H, Lq].
    Varlen: cum_seq_q / cum_seq_k [B + 1] (cumulative starts) with packed query [total_q, H, E] and key/value
    [total_k, Hk, E] -> output [total_q, H, Ev], lse [H, total_q]; each sequence attends only to itself.
    is_causal and the sliding window (window_size_left / _right, -1 or None: unbounded) are bottom-right
    aligned (query i of a length-Lq sequence sees key j <= i + Lk - Lq); alibi_slopes [H] or [B, H] add
    -slope * |i + Lk - Lq - j|. max_q / max_k are accepted and not needed."""
    _no_dropout("_flash_attention_forward", dropout_p)
    scale = _scale(query, scale)
    varlen = cum_seq_q is not None
    if varlen != (cum_seq_k is not None):
        raise ValueError("_flash_attention_forward: give both cum_seq_q and cum_seq_k, or neither")
    heads = query.shape[-2]
    if not varlen:
        q, k, v = (t.permute(0, 2, 1, 3) for t in (query, key, value))          # [B, H, L, E]
        k, v = _repeat_heads(k, heads, 1), _repeat_heads(v, heads, 1)
        lq, lk = q.shape[2], k.shape[2]
        keep = _flash_keep(xb.iota((lq, lk), 0), xb.iota((lq, lk), 1), lq, lk, is_causal, window_size_left,
                           window_size_right)
        bias = None
        if alibi_slopes is not None:
            dist = xb.abs(xb.iota((lq, lk), 0) + (lk - lq) - xb.iota((lq, lk), 1)).astype("float32")
            slopes = alibi_slopes.reshape((1 if alibi_slopes.ndim == 1 else alibi_slopes.shape[0], heads, 1, 1))
            bias = -slopes.astype("float32") * dist
        out, lse = _softmax_attention(q, k, v, scale, keep, bias)
        return out.permute(0, 2, 1, 3), lse
    tq, tk = query.shape[0], key.shape[0]
    sq, qi, lq = _segments(cum_seq_q, tq)
    sk, kj, lk = _segments(cum_seq_k, tk)
    q, k, v = (t.permute(1, 0, 2) for t in (query, key, value))                  # [H, T, E]
    k, v = _repeat_heads(k, heads, 0), _repeat_heads(v, heads, 0)
    same = sq[:, None] == sk[None, :]
    local = _flash_keep(qi[:, None], kj[None, :], lq[:, None], lk[None, :], is_causal, window_size_left,
                        window_size_right)
    keep = same if local is None else same & local
    bias = None
    if alibi_slopes is not None:
        dist = xb.abs(qi[:, None] + (lk - lq)[:, None] - kj[None, :]).astype("float32")       # [Tq, Tk]
        if alibi_slopes.ndim == 2:                                   # per sequence: [B, H] -> [H, Tq, 1]
            slopes = xb.gather(alibi_slopes, sq, axis=0).permute(1, 0)[:, :, None]
        else:
            slopes = alibi_slopes.reshape(heads, 1, 1)
        bias = -slopes.astype("float32") * dist
    out, lse = _softmax_attention(q, k, v, scale, keep, bias)
    return out.permute(1, 0, 2), lse



def _torch_flash_mla(torch, q, block_table, blocked_k, max_seqlen_pad, block_size, b, s_q, cache_seqlens, h_q,
                     h_kv, d, dv, causal):
    """FlagGems' reference (per-batch attention over the first cache_seqlens[i] cached tokens), reading the
    pages through block_table."""
    dt = q.dtype
    qd = q.double() if dt in (torch.float16, torch.bfloat16) else q
    flat = blocked_k.reshape(-1, h_kv, d).to(qd.dtype)
    outs = []
    for i in range(b):
        n = int(cache_seqlens[i])
        j = torch.arange(n)
        loc = block_table[i].long()[j // block_size] * block_size + j % block_size
        k = flat[loc].transpose(0, 1).repeat_interleave(h_q // h_kv, 0)              # [h_q, n, d]
        v = k[..., :dv]
        keep = torch.ones(s_q, n, dtype=torch.bool).tril(n - s_q) if causal else None
        o, _ = _torch_math_attention(torch, qd[i].transpose(0, 1), k, v, None, keep, 1.0 / math.sqrt(d))
        outs.append(o.transpose(0, 1))
    return torch.stack(outs).to(dt)


@register("attention", samples=S.flash_mla_cases, torch=_torch_flash_mla, grad=("q", "blocked_k"))
def flash_mla(q: Tensor, block_table: Tensor, blocked_k: Tensor, max_seqlen_pad: int, block_size: int, b: int,
              s_q: int, cache_seqlens: Tensor, h_q: int, h_kv: int, d: int, dv: int, causal: bool):
    """Multi-head latent attention decode over a paged cache (FlagGems' flash_mla): q [b, s_q, h_q, d] attends
    to the first cache_seqlens[i] tokens of its sequence, token j living in page block_table[i, j // block_size]
    at offset j % block_size of blocked_k [pages, block_size, h_kv, d]; keys are the full d dims, values
    their first dv. causal masks bottom-right (query i of s_q sees j <= seqlen - s_q + i). -> [b, s_q, h_q, dv]."""
    if tuple(q.shape) != (b, s_q, h_q, d) or blocked_k.shape[-1] != d or blocked_k.shape[-2] != h_kv:
        raise ValueError(f"flash_mla: q {tuple(q.shape)} / blocked_k {tuple(blocked_k.shape)} do not match "
                         f"b={b}, s_q={s_q}, h_q={h_q}, h_kv={h_kv}, d={d}")
    j = np.arange(max_seqlen_pad)
    pages = block_table[:, j // block_size].astype("int64")                         # [b, J]
    loc = pages * block_size + xb.asarray(j % block_size)
    k = xb.gather(blocked_k.reshape(-1, h_kv, d), loc, axis=0)                       # [b, J, h_kv, d]
    k = _repeat_heads(k.permute(0, 2, 1, 3), h_q, 1)                                 # [b, h_q, J, d]
    v = k[..., :dv]
    seqlen = cache_seqlens.astype("int64").reshape(b, 1, 1, 1)
    jj = xb.iota((1, 1, s_q, max_seqlen_pad), 3)
    keep = jj < seqlen
    if causal:
        keep = keep & (jj <= seqlen - s_q + xb.iota((1, 1, s_q, max_seqlen_pad), 2))
    out, _ = _softmax_attention(q.permute(0, 2, 1, 3), k, v, 1.0 / math.sqrt(d), keep)
    return out.permute(0, 2, 1, 3)

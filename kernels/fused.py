"""Fused LLM operators (FlagGems' `flag_gems.fused`, not ATen): gated activations, residual norms, rotary
embeddings, cross-entropy, instance norm, a matmul with its epilogue and MoE gating. Where FlagGems updates
tensors in place, these operators return the updated values instead (xbench operators have no side effects).
Statistics of 16-bit inputs are computed in float32."""
from __future__ import annotations

import math

import xbench as xb
from xbench import Tensor
from xbench.ops import FLOATS

from ._samples import fused as S

register = xb.ops.register
_LOW = ("float16", "bfloat16")


def _wide(x):
    return x.astype("float32") if x.dtype in _LOW else x


def _silu(x):
    return x * xb.sigmoid(x)


def _gelu(x, approximate: str):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + xb.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return 0.5 * x * (1.0 + xb.erf(x * (1.0 / math.sqrt(2.0))))


# ---- gated activations ------------------------------------------------------------------------------------

def _torch_silu_and_mul(torch, A, B):
    return torch.nn.functional.silu(A) * B


@register("fused", samples=S.gated_pair_cases, torch=_torch_silu_and_mul, grad=True)
def silu_and_mul(A: Tensor, B: Tensor):
    """silu(A) * B (the SwiGLU gate of LLaMA-style MLPs), broadcasting."""
    return (_silu(_wide(A)) * _wide(B)).astype(A.dtype)


def _torch_gelu_and_mul(torch, x, y, approximate="none"):
    return torch.nn.functional.gelu(x, approximate=approximate) * y


@register("fused", samples=S.gelu_and_mul_cases, torch=_torch_gelu_and_mul, grad=("x", "y"))
def gelu_and_mul(x: Tensor, y: Tensor, approximate: str = "none"):
    """gelu(x) * y (GeGLU); approximate "none" (erf) or "tanh"."""
    return (_gelu(_wide(x), approximate) * _wide(y)).astype(x.dtype)


def _torch_swiglu(torch, input_tensor):
    a, b = input_tensor.chunk(2, dim=-1)
    return torch.nn.functional.silu(a) * b


@register("fused", samples=S.swiglu_cases, torch=_torch_swiglu, grad=True)
def swiglu(input_tensor: Tensor):
    """silu(a) * b for the two halves a, b of the last dim: [..., 2H] -> [..., H]."""
    n = input_tensor.shape[-1]
    if n % 2:
        raise ValueError(f"swiglu: the last dim must be even, got {n}")
    x = _wide(input_tensor)
    return (_silu(x[..., : n // 2]) * x[..., n // 2:]).astype(input_tensor.dtype)


# ---- residual norms ---------------------------------------------------------------------------------------

def _norm_axes(x, normalized_shape) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f"normalized_shape {shape} does not match the trailing dims of {tuple(x.shape)}")
    return tuple(range(x.ndim - len(shape), x.ndim))


def _torch_fused_add_rms_norm(torch, x, residual, normalized_shape, weight, eps=1e-5):
    h = x + residual
    hf = h.float() if h.dtype in (torch.float16, torch.bfloat16) else h
    dims = tuple(range(h.dim() - len(normalized_shape), h.dim()))
    out = hf * torch.rsqrt(hf.pow(2).mean(dims, keepdim=True) + eps) * weight
    return out.to(x.dtype), h


@register("fused", samples=S.fused_add_rms_norm_cases, torch=_torch_fused_add_rms_norm, grad=True)
def fused_add_rms_norm(x: Tensor, residual: Tensor, normalized_shape, weight: Tensor, eps: float = 1e-5):
    """(rms_norm(x + residual) * weight, x + residual): the normalised hidden state and the updated residual
    (FlagGems writes both into x and residual)."""
    h = x + residual
    axes = _norm_axes(h, normalized_shape)
    hf = _wide(h)
    out = hf * xb.rsqrt((hf * hf).mean(axis=axes, keepdims=True) + eps) * weight
    return out.astype(x.dtype), h


def _torch_skip_layer_norm(torch, x, residual, normalized_shape, weight, bias, eps=1e-5):
    h = x + residual
    hf = h.float() if h.dtype in (torch.float16, torch.bfloat16) else h
    return torch.nn.functional.layer_norm(hf, normalized_shape, weight.to(hf.dtype), bias.to(hf.dtype),
                                          eps).to(x.dtype)


@register("fused", samples=S.skip_layer_norm_cases, torch=_torch_skip_layer_norm, grad=True)
def skip_layer_norm(x: Tensor, residual: Tensor, normalized_shape, weight: Tensor, bias: Tensor, eps: float = 1e-5):
    """layer_norm(x + residual) * weight + bias."""
    h = _wide(x + residual)
    axes = _norm_axes(h, normalized_shape)
    centered = h - h.mean(axis=axes, keepdims=True)
    var = (centered * centered).mean(axis=axes, keepdims=True)
    return (centered * xb.rsqrt(var + eps) * weight + bias).astype(x.dtype)


# ---- rotary position embedding ----------------------------------------------------------------------------

def _rotate(x, cos, sin, interleaved: bool):
    """x [..., heads, D] with cos/sin [..., 1, D/2] broadcast over heads (NeoX halves or GPT-J pairs)."""
    d = x.shape[-1]
    if interleaved:
        pairs = x.reshape(tuple(x.shape[:-1]) + (d // 2, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        return xb.stack([a * cos - b * sin, b * cos + a * sin], -1).reshape(tuple(x.shape))
    a, b = x[..., : d // 2], x[..., d // 2:]
    return xb.concat([a * cos - b * sin, b * cos + a * sin], -1)


def _torch_rope(torch, q, k, cos, sin, position_ids=None, rotary_interleaved=False, inplace=False):
    if position_ids is None:
        position_ids = torch.arange(q.shape[-3]).expand(q.shape[:-2])
    c, s = cos[position_ids].unsqueeze(-2), sin[position_ids].unsqueeze(-2)

    def rot(x):
        if rotary_interleaved:
            a, b = x[..., 0::2], x[..., 1::2]
            return torch.stack([a * c - b * s, b * c + a * s], -1).flatten(-2)
        a, b = x.chunk(2, -1)
        return torch.cat([a * c - b * s, b * c + a * s], -1)
    return rot(q), rot(k)


@register("fused", samples=S.rope_cases, torch=_torch_rope, grad=("q", "k"))
def apply_rotary_pos_emb(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, position_ids: Tensor = None,
                         rotary_interleaved: bool = False, inplace: bool = False):
    """(q_embed, k_embed): q [..., q_heads, D] and k [..., k_heads, D] rotated by the angles whose cos/sin
    [max_seq_len, D/2] rows `position_ids` [...] pick (None: q is [batch, seq, heads, D] and the position is
    the index in seq). NeoX style rotates the halves (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin);
    rotary_interleaved rotates the pairs (x[2i], x[2i+1]) instead (GPT-J)."""
    d = q.shape[-1]
    if k.shape[-1] != d or cos.shape[-1] * 2 != d or tuple(sin.shape) != tuple(cos.shape):
        raise ValueError(f"apply_rotary_pos_emb: q {tuple(q.shape)} and k {tuple(k.shape)} need cos/sin "
                         f"[max_seq_len, {d // 2}], got {tuple(cos.shape)} and {tuple(sin.shape)}")
    if position_ids is None:
        if q.ndim != 4:
            raise ValueError(f"apply_rotary_pos_emb: without position_ids q must be [batch, seq, heads, dim], got "
                             f"{tuple(q.shape)}")
        pos = xb.iota(tuple(q.shape[:2]), 1)
    else:
        pos = position_ids
    c = xb.expand_dims(xb.gather(cos, pos, axis=0), -2)                     # [..., 1, D/2]
    s = xb.expand_dims(xb.gather(sin, pos, axis=0), -2)
    qf, kf = _wide(q), _wide(k)
    c, s = c.astype(qf.dtype), s.astype(qf.dtype)
    return (_rotate(qf, c, s, rotary_interleaved).astype(q.dtype),
            _rotate(kf, c, s, rotary_interleaved).astype(k.dtype))


# ---- losses and norms -------------------------------------------------------------------------------------

def _torch_cross_entropy(torch, inp, target, weight=None, reduction="mean", ignore_index=-100, label_smoothing=0.0):
    return torch.nn.functional.cross_entropy(inp, target, weight, reduction=reduction, ignore_index=ignore_index,
                                             label_smoothing=label_smoothing)


@register("fused", samples=S.cross_entropy_cases, torch=_torch_cross_entropy,
          grad=("inp",))
def cross_entropy_loss(inp: Tensor, target: Tensor, weight: Tensor = None, reduction: str = "mean",
                       ignore_index: int = -100, label_smoothing: float = 0.0):
    """torch.nn.functional.cross_entropy over logits inp [N, C, d...] (or [C]): integer class targets [N, d...]
    (ignore_index skipped, per-class `weight`, mean over the weights of the counted targets) or class
    probabilities of inp's shape; label_smoothing mixes in the uniform distribution."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"cross_entropy_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    x = _wide(inp)
    cdim = 0 if x.ndim == 1 else 1
    c = x.shape[cdim]
    shifted = x - x.max(axis=cdim, keepdims=True)
    logp = shifted - xb.log(xb.exp(shifted).sum(axis=cdim, keepdims=True))
    wshape = tuple(c if i == cdim else 1 for i in range(x.ndim))
    w = _wide(weight).astype(x.dtype).reshape(wshape) if weight is not None else None
    eps = label_smoothing
    if target.dtype in FLOATS:                                                # class probabilities
        t = _wide(target).astype(x.dtype)
        if eps:
            t = t * (1 - eps) + eps / c
        terms = -(logp * t) if w is None else -(logp * t * w)
        loss = terms.sum(axis=cdim)
        if reduction == "none":
            return loss.astype(inp.dtype)
        total = loss.sum()
        return (total if reduction == "sum" else total * (1.0 / max(loss.size, 1))).astype(inp.dtype)
    tgt = target.astype("int64")
    keep = tgt != ignore_index
    safe = xb.where(keep, tgt, 0)
    picked = xb.take_along_axis(logp, xb.expand_dims(safe, cdim), axis=cdim).squeeze(cdim)    # [N, d...]
    wt = xb.gather(_wide(weight).astype(x.dtype), safe, axis=0) if weight is not None else xb.ones_like(picked)
    wt = xb.where(keep, wt, 0)
    nll = -picked * wt
    if eps:
        smooth = -(logp if w is None else logp * w).sum(axis=cdim)
        smooth = xb.where(keep, smooth, 0)
    if reduction == "none":
        out = nll if not eps else (1 - eps) * nll + (eps / c) * smooth
        return out.astype(inp.dtype)
    denom = wt.sum() if reduction == "mean" else None
    total = nll.sum() if denom is None else nll.sum() / denom
    if eps:
        s = smooth.sum() if denom is None else smooth.sum() / denom
        total = (1 - eps) * total + (eps / c) * s
    return total.astype(inp.dtype)


def _torch_instance_norm(torch, input, weight=None, bias=None, running_mean=None, running_var=None,
                         use_input_stats=True, momentum=0.1, eps=1e-5, cudnn_enabled=False):
    rm = running_mean.clone() if running_mean is not None else None        # torch updates them in place
    rv = running_var.clone() if running_var is not None else None
    return torch.instance_norm(input, weight, bias, rm, rv, use_input_stats, momentum, eps, cudnn_enabled)


@register("fused", samples=S.instance_norm_cases, torch=_torch_instance_norm,
          grad=("input", "weight", "bias"))
def instance_norm(input: Tensor, weight: Tensor = None, bias: Tensor = None, running_mean: Tensor = None,
                  running_var: Tensor = None, use_input_stats: bool = True, momentum: float = 0.1,
                  eps: float = 1e-5, cudnn_enabled: bool = False):
    """Each (sample, channel) plane of input [N, C, *] normalised by its own mean and biased variance
    (use_input_stats=False: by running_mean / running_var [C]), then * weight[c] + bias[c]. PyTorch also
    updates the running statistics in place; that side effect is not reproduced."""
    if input.ndim < 3:
        raise ValueError(f"instance_norm: input must be [N, C, spatial...], got {tuple(input.shape)}")
    x = _wide(input)
    c = x.shape[1]
    bshape = (1, c) + (1,) * (x.ndim - 2)
    if use_input_stats:
        axes = tuple(range(2, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        centered = x - mean
        var = (centered * centered).mean(axis=axes, keepdims=True)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: use_input_stats=False needs running_mean and running_var")
        centered = x - _wide(running_mean).reshape(bshape)
        var = _wide(running_var).reshape(bshape)
    out = centered * xb.rsqrt(var + eps)
    if weight is not None:
        out = out * _wide(weight).reshape(bshape)
    if bias is not None:
        out = out + _wide(bias).reshape(bshape)
    return out.astype(input.dtype)


# ---- matmul epilogue and MoE gating -----------------------------------------------------------------------

_ACTIVATIONS = {
    "relu": lambda x: xb.maximum(x, 0),
    "gelu": lambda x: _gelu(x, "none"),
    "gelu_tanh": lambda x: _gelu(x, "tanh"),
    "silu": _silu,
    "sigmoid": xb.sigmoid,
    "tanh": xb.tanh,
    "none": lambda x: x,
}


def _torch_matmul_bias_activation(torch, input, weight, bias=None, activation="relu"):
    out = input @ weight
    if bias is not None:
        out = out + bias
    f = torch.nn.functional
    return {"relu": f.relu, "gelu": f.gelu, "gelu_tanh": lambda t: f.gelu(t, approximate="tanh"), "silu": f.silu,
            "sigmoid": torch.sigmoid, "tanh": torch.tanh, "none": lambda t: t}[activation](out)


@register("fused", samples=S.matmul_bias_activation_cases, torch=_torch_matmul_bias_activation, grad=True)
def matmul_bias_activation(input: Tensor, weight: Tensor, bias: Tensor = None, activation: str = "relu"):
    """activation(input [M, K] @ weight [K, N] + bias [N]) as one contraction with its epilogue. FlagGems'
    kernel is ReLU only; `activation` also takes gelu, gelu_tanh, silu, sigmoid, tanh and none."""
    if activation not in _ACTIVATIONS:
        raise ValueError(f"matmul_bias_activation: activation must be one of {', '.join(_ACTIVATIONS)}")
    out = input @ weight
    if bias is not None:
        out = out + bias
    return _ACTIVATIONS[activation](out).astype(input.dtype)


def _torch_topk_softmax(torch, gating_output, topk, renormalize=False):
    p = torch.softmax(gating_output.float() if gating_output.dtype != torch.float64 else gating_output, -1)
    w, i = torch.topk(p, topk, -1)
    if renormalize:
        w = w / w.sum(-1, keepdim=True)
    tokens = gating_output.shape[0]
    rows = (torch.arange(topk)[None, :] * tokens + torch.arange(tokens)[:, None]).to(torch.int32)
    return w, i.to(torch.int32), rows


@register("fused", samples=S.topk_softmax_cases, torch=_torch_topk_softmax, grad=("gating_output",))
def topk_softmax(gating_output: Tensor, topk: int, renormalize: bool = False):
    """MoE routing: softmax over the experts of gating_output [tokens, experts], then the top `topk` per token:
    (weights float32 (renormalised to sum 1 if asked), int32 expert ids, int32 source rows k * tokens + t)
    — the three tensors FlagGems/vLLM fill in place."""
    x = gating_output.astype("float32") if gating_output.dtype != "float64" else gating_output
    p = xb.exp(x - x.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)
    w, i = xb.topk(p, topk, -1)
    if renormalize:
        w = w / w.sum(axis=-1, keepdims=True)
    tokens = gating_output.shape[0]
    rows = xb.iota((tokens, topk), 1) * tokens + xb.iota((tokens, topk), 0)
    return w, i.astype("int32"), rows.astype("int32")


def _torch_moe_align(torch, topk_ids, block_size, num_experts, expert_map=None, pad_sorted_ids=False):
    """vLLM's reference algorithm (stable sort by expert, pad each expert's run to a multiple of block_size)."""
    n = topk_ids.numel()
    padded_len = n + num_experts * (block_size - 1)
    if pad_sorted_ids:
        padded_len = -(-padded_len // block_size) * block_size
    blocks = -(-padded_len // block_size)
    flat = topk_ids.flatten()
    experts, order = torch.sort(flat, stable=True)
    sorted_ids = torch.full((padded_len,), n, dtype=torch.int32)
    expert_ids = torch.full((blocks,), -1, dtype=torch.int32)
    pos = block = 0
    for e in range(num_experts):
        tokens = order[experts == e]
        if tokens.numel():
            sorted_ids[pos:pos + tokens.numel()] = tokens.to(torch.int32)
            nb = -(-tokens.numel() // block_size)
            expert_ids[block:block + nb] = e if expert_map is None else int(expert_map[e])
            pos += nb * block_size
            block += nb
    return sorted_ids, expert_ids, torch.tensor([pos], dtype=torch.int32)


@register("fused", samples=S.moe_align_cases, torch=_torch_moe_align, dtypes=("int32", "int64"))
def moe_align_block_size(topk_ids: Tensor, block_size: int, num_experts: int, expert_map: Tensor = None,
                         pad_sorted_ids: bool = False):
    """MoE token alignment (vLLM/FlagGems): the token slots of topk_ids [tokens, k] grouped by expert (stably),
    each expert's group padded to a multiple of block_size with the pad value topk_ids.numel().
    Returns (sorted_token_ids int32 [numel + num_experts * (block_size - 1)] (rounded up to block_size with
    pad_sorted_ids), expert_ids int32 [its number of blocks] (-1 past the used blocks; mapped through
    expert_map when given), num_tokens_post_pad int32 [1])."""
    flat = topk_ids.reshape(-1).astype("int64")
    n = flat.shape[0]
    padded_len = n + num_experts * (block_size - 1)
    if pad_sorted_ids:
        padded_len = -(-padded_len // block_size) * block_size
    blocks = -(-padded_len // block_size)
    counts = xb.scatter_add(xb.zeros((num_experts,), "int64"), flat, xb.ones((n,), "int64"), axis=0)
    padded = (counts + (block_size - 1)) // block_size * block_size
    end = xb.cumsum(padded, 0)
    start = end - padded
    order = xb.argsort(flat, 0)                                          # stable: token order within an expert
    expert = xb.gather(flat, order, axis=0)
    first = xb.cumsum(counts, 0) - counts                                # first sorted position of each expert
    dest = xb.gather(start, expert, axis=0) + xb.arange(n) - xb.gather(first, expert, axis=0)
    sorted_ids = xb.scatter_add(xb.full((padded_len,), n, "int64"), dest, order - n, axis=0)
    block_start = xb.arange(blocks) * block_size
    owner = (end[None, :] <= block_start[:, None]).astype("int64").sum(axis=1)          # first expert ending after
    used = block_start < end[num_experts - 1]
    if expert_map is not None:
        owner = xb.gather(expert_map.astype("int64"), xb.minimum(owner, num_experts - 1), axis=0)
    expert_ids = xb.where(used, owner, -1)
    total = end[num_experts - 1:]
    return sorted_ids.astype("int32"), expert_ids.astype("int32"), total.astype("int32")


def _torch_reshape_and_cache(torch, key, value, key_cache, value_cache, slot_mapping, kv_cache_dtype="auto",
                             k_scale=None, v_scale=None):
    """vLLM's paged-cache write, with torch indexing on copies of the caches."""
    kc, vc = key_cache.clone(), value_cache.clone()
    block_size, x = kc.shape[3], kc.shape[4]
    for t, slot in enumerate(slot_mapping.tolist()):
        if slot < 0:
            continue
        b, off = divmod(slot, block_size)
        kc[b, :, :, off, :] = key[t].reshape(key.shape[1], -1, x)
        vc[b, :, :, off] = value[t]
    return kc, vc


@register("fused", samples=S.reshape_and_cache_cases, torch=_torch_reshape_and_cache,
          grad=("key", "value", "key_cache", "value_cache"))
def reshape_and_cache(key: Tensor, value: Tensor, key_cache: Tensor, value_cache: Tensor, slot_mapping: Tensor,
                      kv_cache_dtype: str = "auto", k_scale: float = None, v_scale: float = None):
    """vLLM's paged KV-cache write: token t's key [heads, D] and value go to slot s = slot_mapping[t]
    (block s // block_size, offset s % block_size) of key_cache [blocks, heads, D / x, block_size, x] and
    value_cache [blocks, heads, D, block_size]; slot -1 skips the token. Returns the updated (key_cache,
    value_cache) (vLLM writes them in place). Slots are assumed distinct; only kv_cache_dtype="auto"
    (no fp8 quantisation) is provided."""
    if kv_cache_dtype != "auto":
        raise ValueError(f"reshape_and_cache: kv_cache_dtype {kv_cache_dtype!r} (fp8 caches) is not provided; "
                         "use 'auto'")
    t, heads, d = key.shape
    blocks, _, dx, block_size, x = key_cache.shape
    slot = slot_mapping.astype("int64")
    valid = slot >= 0
    blk, off = slot // block_size, slot % block_size
    h = xb.iota((t, heads, d), 1)
    i = xb.iota((t, heads, d), 2)
    b3, o3, v3 = blk[:, None, None], off[:, None, None], valid[:, None, None]
    kpos = (((b3 * heads + h) * dx + i // x) * block_size + o3) * x + i % x
    vpos = ((b3 * heads + h) * d + i) * block_size + o3

    def write(cache, pos, vals):
        size = cache.size
        target = xb.where(v3, pos, size).reshape(-1)                      # skipped tokens go to a spare slot
        flat = xb.concat([cache.reshape(-1), xb.zeros((1,), cache.dtype)], 0)
        hit = xb.scatter_add(xb.zeros((size + 1,), "int64"), target, xb.ones(target.shape, "int64"), axis=0)
        put = xb.scatter_add(xb.zeros_like(flat), target, vals.astype(cache.dtype).reshape(-1), axis=0)
        return xb.where(hit > 0, put, flat)[:size].reshape(tuple(cache.shape))
    return write(key_cache, kpos, key), write(value_cache, vpos, value)

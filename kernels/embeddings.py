"""Embedding lookups, their weight gradient, and one-hot encoding."""
from __future__ import annotations

import xbench as xb
from xbench import Tensor
from xbench.ops import FLOATS

from ._samples import embedding as S

register = xb.ops.register


def _torch_embedding(torch, input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
                     scale_grad_by_freq=False, sparse=False):
    # F.embedding with max_norm renormalises `weight` in place: hand it a copy so the sample stays intact
    w = weight.clone() if max_norm is not None else weight
    return torch.nn.functional.embedding(input, w, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


@register("embedding", samples=S.embedding_cases, torch=_torch_embedding, grad=("weight",))
def embedding(input: Tensor, weight: Tensor, padding_idx: int = None, max_norm: float = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False):
    """Rows of `weight` [num_embeddings, dim] picked by the integer tensor `input` (torch.nn.functional's
    argument order; ATen's `embedding` takes weight first). With `max_norm`, looked-up rows whose `norm_type`
    norm exceeds it are scaled down to it (PyTorch also rewrites those rows of `weight` in place; xbench
    operators have no side effects). `padding_idx` and `scale_grad_by_freq` only change PyTorch's gradient;
    xbench's autodiff of the lookup does not special-case them (the language has no stop_gradient), so the
    padding row receives gradient too — embedding_dense_backward applies both rules explicitly."""
    rows = xb.gather(weight, input, axis=0)
    if max_norm is None:
        return rows
    a = xb.abs(rows)
    if norm_type == float("inf"):
        norm = a.max(axis=-1, keepdims=True)
    elif norm_type == 1:
        norm = a.sum(axis=-1, keepdims=True)
    elif norm_type == 2:
        norm = xb.sqrt((rows * rows).sum(axis=-1, keepdims=True))
    else:
        norm = (a ** norm_type).sum(axis=-1, keepdims=True) ** (1.0 / norm_type)
    scale = xb.where(norm > max_norm, max_norm / (norm + 1e-7), 1.0)
    return (rows * scale).astype(weight.dtype)


@register("embedding", samples=S.embedding_backward_cases, torch="torch.ops.aten.embedding_dense_backward",
          grad=("grad_output",))
def embedding_dense_backward(grad_output: Tensor, indices: Tensor, num_weights: int, padding_idx: int,
                             scale_grad_by_freq: bool):
    """The weight gradient of an embedding lookup: grad_output's rows summed into the rows `indices` name
    ([num_weights, dim]); the row padding_idx gets nothing (-1: no padding row); with scale_grad_by_freq each
    row is divided by how often it was looked up."""
    dim = grad_output.shape[-1]
    idx = indices.reshape(-1)
    rows = grad_output.reshape(-1, dim)
    if padding_idx is not None and padding_idx >= 0:
        rows = xb.where((idx == padding_idx)[:, None], 0, rows)
    out = xb.scatter_add(xb.zeros((num_weights, dim), grad_output.dtype), idx, rows, axis=0)
    if scale_grad_by_freq:
        count = xb.scatter_add(xb.zeros((num_weights,), "int64"), idx, xb.ones(idx.shape, "int64"), axis=0)
        out = out / xb.maximum(count, 1).astype(out.dtype)[:, None]
    return out.astype(grad_output.dtype)


@register("embedding", samples=S.one_hot_cases, torch="torch.nn.functional.one_hot", dtypes=("int64",))
def one_hot(self: Tensor, num_classes: int = -1):
    """[..., num_classes] int64 with a 1 at each value of the integer tensor `self`. num_classes must be given:
    PyTorch's default (-1: the largest value + 1) would make the result's shape depend on the data."""
    if num_classes is None or num_classes < 0:
        raise ValueError("one_hot: pass num_classes explicitly; the default -1 (max value + 1) would make the "
                         "output shape depend on the input's values")
    if self.dtype in FLOATS or self.dtype == "bool":
        raise ValueError(f"one_hot: self must be an integer tensor, got {self.dtype}")
    return (xb.expand_dims(self, -1) == xb.arange(num_classes)).astype("int64")


# ---- bags of embeddings ------------------------------------------------------------------------------------

_MODES = {0: "sum", 1: "mean", 2: "max"}
_FAST = ("float32", "float16", "bfloat16")


def _bag_of(indices, offsets, include_last_offset: bool):
    """(the bag of each index position, the number of bags): position i is in bag (offsets <= i).count() - 1, as
    PyTorch's make_offset2bag counts it (repeated offsets are empty bags)."""
    if indices.ndim != 1 or offsets.ndim != 1:
        raise ValueError(f"embedding bags: indices and offsets must be 1-D, got {tuple(indices.shape)} and "
                         f"{tuple(offsets.shape)} (flatten 2-D indices into offsets of equal bags)")
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    pos = xb.arange(indices.shape[0])
    bag = (offsets.astype("int64")[None, :] <= pos[:, None]).astype("int64").sum(axis=1) - 1
    return bag, bags


def _kept(indices, padding_idx):
    return indices != padding_idx if padding_idx is not None and padding_idx >= 0 else \
        xb.full(tuple(indices.shape), True, "bool")


def _torch_embedding_bag(torch, weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                         per_sample_weights=None, include_last_offset=False, padding_idx=-1):
    return torch.ops.aten._embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                                         per_sample_weights, include_last_offset, padding_idx)


@register("embedding", aliases=("_embedding_bag_forward_only", "embedding_bag"), samples=S.embedding_bag_cases,
          torch=_torch_embedding_bag, grad=("weight", "per_sample_weights"),
          notes="the bookkeeping outputs follow PyTorch's CPU kernels (offset2bag empty on its sum fast path)")
def _embedding_bag(weight: Tensor, indices: Tensor, offsets: Tensor, scale_grad_by_freq: bool = False, mode: int = 0,
                   sparse: bool = False, per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                   padding_idx: int = -1):
    """ATen's _embedding_bag: rows of `weight` picked by the 1-D `indices`, reduced per bag (mode 0 sum, 1 mean,
    2 max; bag b runs from offsets[b] to the next offset, or to the end; include_last_offset: offsets also
    holds the end of the last bag); rows at padding_idx count for nothing; per_sample_weights scale each row
    (sum only). Returns (output [bags, D], offset2bag, bag_size, max_indices) as PyTorch's CPU kernels do:
    offset2bag holds each index's bag (empty for sum bags without a padding row on float32/16-bit weights,
    where PyTorch's fast path leaves it so), bag_size the rows counted in each bag (0 for sum), max_indices
    the weight row of each maximum (mode 2; bag_size for mean, 0 for sum); an empty bag gives zeros."""
    if mode not in _MODES:
        raise ValueError(f"_embedding_bag: mode must be 0 (sum), 1 (mean) or 2 (max), got {mode}")
    if per_sample_weights is not None and mode != 0:
        raise ValueError("_embedding_bag: per_sample_weights are only supported for mode 0 (sum)")
    padding_idx = -1 if padding_idx is None else padding_idx
    bag, bags = _bag_of(indices, offsets, include_last_offset)
    itype = indices.dtype
    keep = _kept(indices, padding_idx)
    dim = weight.shape[1]
    rows = xb.gather(weight, indices, axis=0)
    count = xb.scatter_add(xb.zeros((bags,), "int64"), bag, keep.astype("int64"), axis=0)
    if mode == 2:
        member = (bag[None, :] == xb.arange(bags)[:, None]) & keep[None, :]                 # [bags, n]
        lowest = float("-inf") if weight.dtype in FLOATS else 0
        values = xb.where(member[:, :, None], rows[None, :, :], lowest)                     # [bags, n, D]
        out = xb.where((count > 0)[:, None], values.max(axis=1), 0).astype(weight.dtype)
        best = xb.gather(indices, values.argmax(axis=1).reshape(-1), axis=0).reshape((bags, dim))
        max_indices = xb.where((count > 0)[:, None], best, 0).astype(itype)
    else:
        w = rows if per_sample_weights is None else rows * per_sample_weights[:, None].astype(weight.dtype)
        w = xb.where(keep[:, None], w, 0)
        total = xb.scatter_add(xb.zeros((bags, dim), weight.dtype), bag, w, axis=0)
        if mode == 1:
            out = (total / xb.maximum(count, 1).astype(weight.dtype)[:, None]).astype(weight.dtype)
            max_indices = count.astype(itype)
        else:
            out = total
            max_indices = xb.zeros((bags,), itype)
    fast = mode == 0 and padding_idx < 0 and weight.dtype in _FAST
    offset2bag = xb.zeros((0,), itype) if fast else bag.astype(itype)
    bag_size = xb.zeros((bags,), itype) if mode == 0 else count.astype(itype)
    return out, offset2bag, bag_size, max_indices


def _bag_weight_grad(grad, indices, bag, bag_size, maximum_indices, num_weights: int, scale_grad_by_freq: bool,
                     mode: int, per_sample_weights, padding_idx):
    """The weight gradient [num_weights, D] of bags of embeddings (PyTorch's dense CPU backward)."""
    dim = grad.shape[1]
    if mode == 2:
        bags = grad.shape[0]
        nonempty = (bag_size > 0)[:, None]
        target = (maximum_indices.astype("int64") * dim + xb.iota((bags, dim), 1)).reshape(-1)
        flat = xb.zeros((num_weights * dim,), grad.dtype)
        return xb.scatter_add(flat, target, xb.where(nonempty, grad, 0).reshape(-1), axis=0).reshape(
            (num_weights, dim))
    g = xb.gather(grad, bag, axis=0)                                                          # [n, D]
    if mode == 1:
        g = g / xb.maximum(xb.gather(bag_size, bag, axis=0), 1).astype(grad.dtype)[:, None]
    if per_sample_weights is not None:
        g = g * per_sample_weights[:, None].astype(grad.dtype)
    idx = indices.astype("int64")
    if scale_grad_by_freq:
        counts = xb.scatter_add(xb.zeros((num_weights,), "int64"), idx, xb.ones(idx.shape, "int64"), axis=0)
        g = g / xb.gather(counts, idx, axis=0).astype(grad.dtype)[:, None]
    g = xb.where(_kept(indices, padding_idx)[:, None], g, 0).astype(grad.dtype)
    return xb.scatter_add(xb.zeros((num_weights, dim), grad.dtype), idx, g, axis=0)


def _torch_aten(name: str):
    def fn(torch, *args, **kwargs):
        return getattr(torch.ops.aten, name)(*args, **kwargs)
    fn.__name__ = fn.__qualname__ = f"torch.ops.aten.{name}"
    return fn


_FREQ = ("scale_grad_by_freq divides each row's gradient by how often its index occurs, as documented; PyTorch's "
         "CPU kernel gives the rows that follow a repeated index (in sorted order) that index's scale instead "
         "(F.embedding_bag(..., scale_grad_by_freq=True) on [4, 5, 4] gives row 5 half its gradient), so its "
         "column divides PyTorch's unscaled gradient by the counts")


def _torch_bag_backward(name: str, sgf_at: int, indices_at: int, num_weights_at: int):
    """ATen's bag backward `name`; with scale_grad_by_freq, its unscaled gradient divided by the index counts
    (see _FREQ)."""
    def fn(torch, *args):
        if not args[sgf_at]:
            return getattr(torch.ops.aten, name)(*args)
        args = list(args)
        args[sgf_at] = False
        unscaled = getattr(torch.ops.aten, name)(*args)
        counts = torch.bincount(args[indices_at].long(), minlength=args[num_weights_at]).clamp(min=1)
        return unscaled / counts.to(unscaled.dtype)[:, None]
    fn.__name__ = fn.__qualname__ = f"torch.ops.aten.{name} (documented scale_grad_by_freq)"
    return fn


@register("embedding", samples=S.embedding_bag_dense_backward_cases,
          torch=_torch_bag_backward("_embedding_bag_dense_backward", 6, 1, 5), notes=_FREQ)
def _embedding_bag_dense_backward(grad: Tensor, indices: Tensor, offset2bag: Tensor, bag_size: Tensor,
                                  maximum_indices: Tensor, num_weights: int, scale_grad_by_freq: bool, mode: int,
                                  per_sample_weights: Tensor | None, padding_idx: int = -1):
    """The weight gradient of _embedding_bag [num_weights, D], from its offset2bag, bag_size and max_indices:
    each index's bag gradient (divided by the bag's size for mean, times its per-sample weight, divided by how
    often the index occurs with scale_grad_by_freq) added to its row; for max, each maximum's gradient to the
    row that held it (non-empty bags only). The padding row gets nothing."""
    return _bag_weight_grad(grad, indices, offset2bag.astype("int64"), bag_size, maximum_indices, num_weights,
                            scale_grad_by_freq, mode, per_sample_weights, padding_idx)


@register("embedding", samples=S.embedding_bag_backward_cases,
          torch=_torch_bag_backward("_embedding_bag_backward", 7, 1, 6), notes=_FREQ)
def _embedding_bag_backward(grad: Tensor, indices: Tensor, offsets: Tensor, offset2bag: Tensor, bag_size: Tensor,
                            maximum_indices: Tensor, num_weights: int, scale_grad_by_freq: bool, mode: int,
                            sparse: bool, per_sample_weights: Tensor | None, padding_idx: int = -1):
    """_embedding_bag_dense_backward with offset2bag rebuilt from offsets where the forward returned it empty;
    sparse=True (a sparse gradient) is not available."""
    if sparse:
        raise ValueError("_embedding_bag_backward: sparse gradients are not available; pass sparse=False")
    bag = _bag_of(indices, offsets, False)[0] if offset2bag.size == 0 else offset2bag.astype("int64")
    return _bag_weight_grad(grad, indices, bag, bag_size, maximum_indices, num_weights, scale_grad_by_freq, mode,
                            per_sample_weights, padding_idx)


@register("embedding", samples=S.embedding_bag_psw_backward_cases,
          torch=_torch_aten("_embedding_bag_per_sample_weights_backward"))
def _embedding_bag_per_sample_weights_backward(grad: Tensor, weight: Tensor, indices: Tensor, offsets: Tensor,
                                               offset2bag: Tensor, mode: int, padding_idx: int = -1):
    """The gradient of sum bags' per_sample_weights: each index's bag gradient dotted with its weight row (0 at
    the padding row); offset2bag rebuilt from offsets where it is empty."""
    if mode != 0:
        raise ValueError("_embedding_bag_per_sample_weights_backward: only mode 0 (sum) has per-sample weights")
    bag = _bag_of(indices, offsets, False)[0] if offset2bag.size == 0 else offset2bag.astype("int64")
    dots = (xb.gather(grad, bag, axis=0) * xb.gather(weight, indices, axis=0).astype(grad.dtype)).sum(axis=1)
    return xb.where(_kept(indices, padding_idx), dots, 0).astype(grad.dtype)

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

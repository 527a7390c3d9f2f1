"""Sorting, top-k, searching and unique values.

Sorts use the stable `sort` primitive; descending float sorts put NaN first, as PyTorch does (an ascending sort
of the reversed input, reversed back, keeps equal elements in their original order). searchsorted and bucketize
count comparisons; mode compares every pair along the dim.

Results whose size depends on the data (_unique2, unique_consecutive) follow the library's padding rule
(see indexing.py and docs/library.md): the unique values are padded to a static `size` (default: the number of
input elements) with `fill_value`, the counts with 0, and a last output holds the number of unique values."""
from __future__ import annotations

import math

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import FLOATS, INTS

from ._samples import sorting as S
from ._util import scalar, vector
from ._util import wrap_dim as _dim

register = xb.ops.register
NUM = FLOATS + INTS


def _torch_sort(torch, self, dim=-1, descending=False, stable=False):
    return torch.sort(self, dim=dim, descending=descending, stable=stable)


def _torch_argsort(torch, self, dim=-1, descending=False, stable=False):
    return torch.argsort(self, dim=dim, descending=descending, stable=stable)


def _torch_bucketize(torch, input, boundaries, out_int32=False, right=False):
    return torch.bucketize(input, boundaries, out_int32=out_int32, right=right)


def _sort(x, dim: int, descending: bool):
    """(values, int64 indices) along dim, stable; descending puts NaN first (PyTorch)."""
    if x.ndim == 0:
        return x, xb.zeros((), "int64")
    if not descending or x.dtype not in FLOATS:
        return xb.sort(x, dim, descending), xb.argsort(x, dim, descending)
    n = x.shape[dim]
    r = xb.flip(x, dim)
    values, idx = xb.sort(r, dim), xb.argsort(r, dim)
    return xb.flip(values, dim), xb.flip((n - 1) - idx, dim)


def _take_along(x, dim: int, start: int, size: int):
    return x[(slice(None),) * dim + (slice(start, start + size),)]


@register("sort", samples=S.sort_cases, torch=_torch_sort, grad=("self",), dtypes=NUM)
def sort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """(sorted values, int64 positions in self) along dim; always stable (equal elements keep their order)."""
    return _sort(self, _dim(dim, self.ndim, "sort"), descending)


@register("sort", samples=S.sort_cases, torch=_torch_argsort, dtypes=NUM)
def argsort(self: Tensor, dim: int = -1, descending: bool = False, stable: bool = False):
    """The int64 positions that sort self along dim (stable)."""
    return _sort(self, _dim(dim, self.ndim, "argsort"), descending)[1]


@register("sort", samples=S.topk_cases, torch="torch.topk", grad=("self",), dtypes=NUM)
def topk(self: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """(the k largest (or smallest) values along dim, their int64 positions), in sorted order (NaN counts as
    the largest)."""
    d = _dim(dim, self.ndim, "topk")
    if self.ndim == 0:
        if k != 1:
            raise ValueError(f"topk: a 0-d tensor has one value, so k must be 1 (got {k})")
        return self, xb.zeros((), "int64")
    n = self.shape[d]
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={k} is out of range for a dim of size {n}")
    values, idx = _sort(self, d, largest)
    return _take_along(values, d, 0, k), _take_along(idx, d, 0, k)


@register("sort", samples=S.kthvalue_cases, torch="torch.kthvalue", grad=("self",), dtypes=NUM)
def kthvalue(self: Tensor, k: int, dim: int = -1, keepdim: bool = False):
    """(the k-th smallest value along dim (k from 1), its int64 position)."""
    d = _dim(dim, self.ndim, "kthvalue")
    if self.ndim == 0:
        return scalar(kthvalue(vector(self), k, 0, False))
    if not 1 <= k <= self.shape[d]:
        raise ValueError(f"kthvalue: k={k} is out of range for a dim of size {self.shape[d]}")
    values, idx = _sort(self, d, False)
    v, i = _take_along(values, d, k - 1, 1), _take_along(idx, d, k - 1, 1)
    return (v, i) if keepdim else (v.squeeze(d), i.squeeze(d))


@register("sort", samples=S.median_cases, torch="torch.median", grad=("self",), dtypes=NUM)
def median(self: Tensor, dim: int = None, keepdim: bool = False):
    """The lower median ((n - 1) // 2-th smallest; NaN if any is NaN, as PyTorch): of every element when dim is
    None, else (values, int64 positions) along dim."""
    if dim is None:
        flat = self.reshape(-1)
        v = _sort(flat, 0, False)[0][(flat.shape[0] - 1) // 2]
        return v
    d = _dim(dim, self.ndim, "median")
    return kthvalue(self, (self.shape[d] - 1) // 2 + 1 if self.ndim else 1, d, keepdim)


def _extreme(dtype, sign: int):
    if dtype in FLOATS:
        return sign * math.inf
    info = np.iinfo(np.dtype(str(dtype)))
    return int(info.max) if sign > 0 else int(info.min)


@register("sort", samples=S.mode_cases, torch="torch.mode", dtypes=NUM,
          notes="compares every pair of elements along dim")
def mode(self: Tensor, dim: int = -1, keepdim: bool = False):
    """(the most frequent value along dim — the smallest of equally frequent ones —, the int64 position of its
    last occurrence), as PyTorch."""
    d = _dim(dim, self.ndim, "mode")
    if self.ndim == 0:
        return self, xb.zeros((), "int64")
    x = xb.moveaxis(self, d, -1)
    count = (xb.expand_dims(x, -1) == xb.expand_dims(x, -2)).astype("int64").sum(axis=-1)     # ... n
    best = count == count.max(axis=-1, keepdims=True)
    value = xb.where(best, x, _extreme(x.dtype, 1)).min(axis=-1, keepdims=True)
    pos = xb.where(x == value, xb.iota(tuple(x.shape), x.ndim - 1), -1).max(axis=-1, keepdims=True)
    value, pos = xb.moveaxis(value, -1, d), xb.moveaxis(pos, -1, d)
    return (value, pos) if keepdim else (value.squeeze(d), pos.squeeze(d))


@register("sort", samples=S.quantile_cases, torch="torch.quantile", grad=("input",), dtypes=FLOATS)
def quantile(input: Tensor, q, dim: int = None, keepdim: bool = False, interpolation: str = "linear"):
    """The q-th quantiles (q a number or a 1-D tensor in [0, 1]) of input along dim (all elements when None):
    interpolation linear, lower, higher, nearest (ties to even) or midpoint between the sorted neighbours of
    position q * (n - 1). A slice holding NaN gives NaN. A tensor q adds a leading dim of its length."""
    if interpolation not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"quantile: unknown interpolation {interpolation!r}")
    x = input.reshape(-1) if dim is None else vector(input)
    d = 0 if dim is None else _dim(dim, input.ndim, "quantile")
    n = x.shape[d]
    values = xb.moveaxis(_sort(x, d, False)[0], d, -1)                      # ... n
    scalar_q = not isinstance(q, Tensor)
    qt = xb.asarray(float(q) if scalar_q else q).astype(values.dtype).reshape(-1)
    pos = qt * (n - 1)
    lo = xb.floor(pos)
    hi = xb.ceil(pos)
    ilo, ihi = lo.astype("int64"), hi.astype("int64")
    vlo = xb.gather(values, ilo, axis=-1)                                    # ... nq
    vhi = xb.gather(values, ihi, axis=-1)
    if interpolation == "linear":
        out = vlo + (vhi - vlo) * (pos - lo)
    elif interpolation == "lower":
        out = vlo
    elif interpolation == "higher":
        out = vhi
    elif interpolation == "midpoint":
        out = (vlo + vhi) * 0.5
    else:
        out = xb.gather(values, xb.round(pos).astype("int64"), axis=-1)
    nan = xb.isnan(values).any(axis=-1, keepdims=True)
    out = xb.where(nan, math.nan, out)
    out = xb.moveaxis(out, -1, 0)                                            # nq ...
    if keepdim and (input.ndim or dim is None):
        out = xb.expand_dims(out, d + 1) if dim is not None else out.reshape((out.shape[0],) + (1,) * input.ndim)
    return out[0] if scalar_q else out


def _count_before(sorted_sequence, values, right: bool):
    """For each value: how many entries of its (last-dim) sorted row are < value (<= with right)."""
    seq = xb.expand_dims(sorted_sequence, -2)                                # ... 1 n
    v = xb.expand_dims(values, -1)                                           # ... m 1
    before = (seq <= v) if right else (seq < v)
    return before.astype("int64").sum(axis=-1)


@register("sort", samples=S.searchsorted_cases, torch="torch.searchsorted", dtypes=NUM,
          notes="compares each value with every boundary of its row")
def searchsorted(sorted_sequence: Tensor, self: Tensor, out_int32: bool = False, right: bool = False,
                 side: str = None, sorter: Tensor = None):
    """Insertion positions of `self`'s values in the rows of sorted_sequence (1-D: one row for all values;
    N-D: rows matching self's leading dims); `right` / side="right" places after equal entries; `sorter`
    holds the positions that sort an unsorted sequence."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: right=True contradicts side='left'")
        right = side == "right"
    seq = sorted_sequence
    if sorter is not None:
        seq = xb.take_along_axis(seq, sorter, axis=-1)
    if seq.ndim > 1 and tuple(seq.shape[:-1]) != tuple(self.shape[:-1]):
        raise ValueError(f"searchsorted: sorted_sequence {tuple(seq.shape)} and values {tuple(self.shape)} must "
                         "share their leading dims (or the sequence be 1-D)")
    if self.ndim == 0:
        out = _count_before(seq, self.reshape(1), right)[0]
    elif seq.ndim == 1:
        out = _count_before(seq, self.reshape(-1), right).reshape(self.shape)
    else:
        out = _count_before(seq, self, right)
    return out.astype("int32" if out_int32 else "int64")


@register("sort", samples=S.bucketize_cases, torch=_torch_bucketize, dtypes=NUM)
def bucketize(input: Tensor, boundaries: Tensor, out_int32: bool = False, right: bool = False):
    """The bucket of each input value among the 1-D sorted `boundaries`: i with boundaries[i-1] < x <=
    boundaries[i] (right=True: boundaries[i-1] <= x < boundaries[i])."""
    if boundaries.ndim != 1:
        raise ValueError(f"bucketize: boundaries must be 1-D, got {tuple(boundaries.shape)}")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _compact(keep, values, size: int, fill):
    """Rows of `values` where `keep`, in order, in `size` slots padded with `fill`; and how many were kept."""
    stored = values.dtype
    if stored == "bool":
        values = values.astype("int8")
    pos = xb.cumsum(keep.astype("int64"), 0) - 1
    slot = xb.where(keep & (pos < size), pos, size)
    placed = xb.scatter_add(xb.zeros((size + 1,), values.dtype), slot, values, axis=0)[:size]
    count = keep.astype("int64").sum()
    return xb.where(xb.arange(size) < count, placed, fill).astype(stored), count


def _runs(values, order_back, n: int, return_inverse: bool, return_counts: bool, size: int, fill, shape):
    """Unique values of a flat sequence whose equal values are adjacent: (padded values, inverse, padded
    counts, number). `order_back[i]`: the original position of sorted element i (None: already in order)."""
    prev = xb.concat([values[:1], values[:-1]], 0)
    new = (xb.arange(n) == 0) | (values != prev)
    group = xb.cumsum(new.astype("int64"), 0) - 1
    uniq, num = _compact(new, values, size, fill)
    if return_inverse:
        inverse = group if order_back is None else \
            xb.scatter_add(xb.zeros((n,), "int64"), order_back, group, axis=0)
        inverse = inverse.reshape(shape)
    else:
        inverse = xb.zeros((0,), "int64")
    if return_counts:
        slot = xb.where(group < size, group, size)
        counts = xb.scatter_add(xb.zeros((size + 1,), "int64"), slot, xb.ones((n,), "int64"), axis=0)[:size]
    else:
        counts = xb.zeros((0,), "int64")
    return uniq, inverse, counts, num


def _torch_padded_unique(kind: str):
    def fn(torch, self, *args, size=None, fill_value=0, **kw):
        res = getattr(torch.ops.aten, kind)(self, *args, **kw)
        values, inverse, counts = res
        size = self.numel() if size is None else size
        out = torch.full((size,), fill_value, dtype=self.dtype)
        k = min(size, values.shape[0])
        out[:k] = values[:k]
        if counts.numel():
            c = torch.zeros(size, dtype=torch.int64)
            c[:k] = counts[:k]
            counts = c
        return out, inverse, counts, torch.tensor(values.shape[0], dtype=torch.int64)
    fn.__name__ = fn.__qualname__ = f"{kind} (padded)"
    return fn


@register("sort", samples=S.unique_cases, torch=_torch_padded_unique("_unique2"), dtypes=NUM,
          notes="padded to a static size with fill_value, plus the count")
def _unique2(self: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
             size: int = None, fill_value: float = 0):
    """(sorted unique values padded to `size` with fill_value, inverse indices (self's shape; empty unless
    return_inverse), counts padded with 0 (empty unless return_counts), the number of unique values).
    The values are always sorted (PyTorch allows that for sorted=False too)."""
    n = self.size
    size = n if size is None else int(size)
    flat = self.reshape(-1)
    values, order = _sort(flat, 0, False)
    return _runs(values, order, n, return_inverse, return_counts, size, fill_value, tuple(self.shape))


@register("sort", samples=S.unique_consecutive_cases, torch=_torch_padded_unique("unique_consecutive"),
          dtypes=NUM, notes="padded to a static size with fill_value, plus the count; dim=None only")
def unique_consecutive(self: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int = None,
                       size: int = None, fill_value: float = 0):
    """Collapses runs of equal consecutive elements of the flattened self: (values padded to `size`,
    inverse indices, counts padded with 0, the number of runs), as _unique2."""
    if dim is not None:
        raise ValueError("unique_consecutive: only dim=None (the flattened tensor) is provided")
    n = self.size
    size = n if size is None else int(size)
    return _runs(self.reshape(-1), None, n, return_inverse, return_counts, size, fill_value, tuple(self.shape))


def _unique_slices(self, d: int, size: int, fill):
    """The distinct slices of `self` along dim d in lexicographic order (PyTorch's unique_dim): (values with
    `size` slices along d, padded with `fill`; the inverse [n]; counts [size]; how many there are). Every pair
    of slices is compared (n x n x slice size)."""
    n = self.shape[d]
    x = xb.moveaxis(self, d, 0)
    rest = tuple(x.shape[1:])
    rows = x.reshape((n, x.size // n if n else 0))
    key = rows.astype("int8") if rows.dtype == "bool" else rows
    a, b = key[:, None, :], key[None, :, :]                                   # row i against row j
    diff = (a != b).astype("int64")
    before = (xb.cumsum(diff, 2) - diff) == 0                                 # no difference before column c
    less = (before & (a < b)).any(axis=2)                                     # [i, j]: row i < row j
    same = diff.sum(axis=2) == 0
    first = xb.logical_not((same & (xb.iota((n, n), 1) < xb.iota((n, n), 0))).any(axis=1))   # no equal row before
    slot = (less & first[:, None]).astype("int64").sum(axis=0)                # distinct rows below row j
    count = first.astype("int64").sum()
    target = xb.where(first & (slot < size), slot, size)
    stored = rows.astype("int8") if rows.dtype == "bool" else rows
    placed = xb.scatter_add(xb.zeros((size + 1, rows.shape[1]), stored.dtype), target, stored, axis=0)[:size]
    filled = (xb.arange(size) < count)[:, None]
    values = xb.where(filled, placed, fill).astype(self.dtype).reshape((size,) + rest)
    counts = xb.scatter_add(xb.zeros((size + 1,), "int64"), xb.where(slot < size, slot, size),
                            xb.ones((n,), "int64"), axis=0)[:size]
    return xb.moveaxis(values, 0, d), slot, counts, count


def _torch_unique_dim(torch, self, dim, sorted=True, return_inverse=False, return_counts=False, size=None,
                      fill_value=0):
    """ATen's unique_dim, its values padded along dim to `size` slices with fill_value and its counts with 0,
    plus the number of distinct slices."""
    values, inverse, counts = torch.ops.aten.unique_dim(self, dim, sorted, return_inverse, return_counts)
    d = dim % self.dim()
    size = self.shape[d] if size is None else size
    k = min(size, values.shape[d])
    shape = list(values.shape)
    shape[d] = size
    out = torch.full(shape, fill_value, dtype=self.dtype)
    out.narrow(d, 0, k).copy_(values.narrow(d, 0, k))
    c = torch.zeros(size, dtype=torch.int64)
    c[:k] = counts[:k]
    return out, inverse, c, torch.tensor(values.shape[d], dtype=torch.int64)


@register("sort", samples=S.unique_dim_cases, torch=_torch_unique_dim, dtypes=NUM,
          notes="padded to a static size with fill_value, plus the count; compares every pair of slices")
def unique_dim(self: Tensor, dim: int, sorted: bool = True, return_inverse: bool = False,
               return_counts: bool = False, size: int = None, fill_value: float = 0):
    """ATen's unique_dim: (the distinct slices of self along dim in lexicographic order, padded to `size` slices
    (default: all of them) with fill_value; the inverse (which distinct slice each slice is); the counts padded
    with 0; the number of distinct slices). As on PyTorch's CPU, the inverse and counts are computed whatever
    return_inverse and return_counts say, and sorted=False sorts too."""
    d = _dim(dim, self.ndim, "unique_dim")
    if self.ndim == 0:
        raise ValueError("unique_dim: a 0-d tensor has no dim to take slices along (use _unique2)")
    return _unique_slices(self, d, self.shape[d] if size is None else int(size), fill_value)


def _torch_unique(torch, self, sorted=True, return_inverse=False, return_counts=False, dim=None, size=None,
                  fill_value=0):
    """torch.unique padded by the library's rule: values (and counts) padded to `size`, then the count."""
    res = torch.unique(self, sorted, return_inverse, return_counts, dim)
    res = res if isinstance(res, tuple) else (res,)
    axis = 0 if dim is None else dim % self.dim()
    n = self.numel() if dim is None else self.shape[axis]
    size = n if size is None else size
    values, k = res[0], min(size, res[0].shape[axis])
    shape = list(values.shape)
    shape[axis] = size
    out = torch.full(shape, fill_value, dtype=self.dtype)
    out.narrow(axis, 0, k).copy_(values.narrow(axis, 0, k))
    extra = list(res[1:])
    if return_counts:
        c = torch.zeros(size, dtype=torch.int64)
        c[:k] = extra[-1][:k]
        extra[-1] = c
    return (out, *extra, torch.tensor(values.shape[axis], dtype=torch.int64))


@register("sort", samples=S.unique_front_cases, torch=_torch_unique, dtypes=NUM,
          notes="padded to a static size with fill_value, plus the count")
def unique(self: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: int = None, size: int = None, fill_value: float = 0):
    """torch.unique: the sorted distinct elements (dim=None) or slices along dim, padded to `size` (default: as
    many as there could be) with fill_value, then the inverse if return_inverse, the counts (padded with 0) if
    return_counts, and last the number of distinct values or slices."""
    if dim is None:
        values, inverse, counts, num = _unique2(self, sorted, return_inverse, return_counts, size, fill_value)
    else:
        values, inverse, counts, num = unique_dim(self, dim, sorted, return_inverse, return_counts, size,
                                                  fill_value)
    return (values,) + ((inverse,) if return_inverse else ()) + ((counts,) if return_counts else ()) + (num,)

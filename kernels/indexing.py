"""Indexing, gathering, scattering and masking with PyTorch's semantics.

Index values follow xbench's gather/scatter rule: negative indices count from the end and indices out of range
are clamped (PyTorch raises an error instead). Scatters that overwrite (scatter, index_copy) assume each target
is written once, as PyTorch documents; where indices repeat, PyTorch's result is unspecified and xbench's is the
mean of the colliding values.

Data-dependent sizes (nonzero, masked_select) follow one rule, that of `jnp.nonzero(size=...)`: the result is
padded to a static `size` (default: the number of input elements, the largest possible) with `fill_value`, and
a second output holds the number of valid entries (an int64 scalar). Entries past `size` are dropped; the count
is still the true count."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import BOOL, FLOATS, INTS

from ._samples import indexing as S
from ._util import scalar, vector
from ._util import wrap_dim as _dim

register = xb.ops.register
ALL = FLOATS + INTS + BOOL
NUM = FLOATS + INTS


def _torch_nonzero(torch, self, size=None, fill_value=-1, as_tuple=False):
    """torch.nonzero padded by xbench's rule: (indices [size, ndim] padded with fill_value, count); with as_tuple,
    torch.nonzero(as_tuple=True)'s index tensors, each padded to [size], then the count."""
    size = self.numel() if size is None else size
    if as_tuple:
        found = torch.nonzero(self, as_tuple=True)
        count = found[0].shape[0]
        outs = []
        for f in found:
            out = torch.full((size,), fill_value, dtype=torch.int64)
            out[:min(size, count)] = f[:size]
            outs.append(out)
        return (*outs, torch.tensor(count, dtype=torch.int64))
    found = torch.nonzero(self)
    out = torch.full((size, self.dim()), fill_value, dtype=torch.int64)
    k = min(size, found.shape[0])
    out[:k] = found[:k]
    return out, torch.tensor(found.shape[0], dtype=torch.int64)


def _torch_masked_select(torch, self, mask, size=None, fill_value=0):
    """torch.masked_select padded by xbench's rule: (values [size] padded with fill_value, count)."""
    found = torch.masked_select(self, mask)
    size = torch.broadcast_shapes(self.shape, mask.shape).numel() if size is None else size
    out = torch.full((size,), fill_value, dtype=self.dtype)
    k = min(size, found.shape[0])
    out[:k] = found[:k]
    return out, torch.tensor(found.shape[0], dtype=torch.int64)


def _wrap(index, n: int):
    """Negative indices count from the end; the rest are clamped into [0, n - 1]."""
    index = index.astype("int64")
    return xb.clamp(xb.where(index < 0, index + n, index), 0, max(n - 1, 0))


def _flat_targets(shape: tuple[int, ...], dim: int, index):
    """Flat positions in a tensor of `shape` of out[i_0..index[i]..i_n] for every element i of `index`
    (PyTorch's scatter addressing along `dim`)."""
    strides = np.cumprod((1,) + tuple(reversed(shape[1:])))[::-1]
    flat = _wrap(index, shape[dim]) * int(strides[dim])
    for d in range(len(shape)):
        if d != dim:
            flat = flat + xb.iota(index.shape, d) * int(strides[d])
    return flat.reshape(-1)


def _trim(src, shape):
    return src[tuple(slice(0, n) for n in shape)] if tuple(src.shape) != tuple(shape) else src


def _scatter_sum(shape, dtype, dim, index, src):
    """zeros(shape) with src[i] added at the scatter target of index[i] along dim."""
    flat = _flat_targets(shape, dim, index)
    out = xb.scatter_add(xb.zeros((int(np.prod(shape)),), dtype), flat, _trim(src, index.shape).reshape(-1), axis=0)
    return out.reshape(shape)


def _check_scatter(name, self, dim, index, src=None):
    if index.ndim != self.ndim and not (index.ndim == 0 and self.ndim == 0):
        raise ValueError(f"{name}: index must have as many dims as self ({self.ndim}), got {tuple(index.shape)}")
    for d, (i, n) in enumerate(zip(index.shape, self.shape)):
        if d != dim and i > n:
            raise ValueError(f"{name}: index {tuple(index.shape)} is larger than self {tuple(self.shape)} in dim {d}")
    if src is not None and any(i > s for i, s in zip(index.shape, src.shape)):
        raise ValueError(f"{name}: index {tuple(index.shape)} is larger than src {tuple(src.shape)}")


def _as_src(self, index, src, value):
    if src is None and value is None:
        raise ValueError("scatter: give src (a tensor) or value (a number)")
    if src is None or not isinstance(src, Tensor):
        return xb.full(index.shape, value if src is None else src, self.dtype)
    return src.astype(self.dtype)


# ---- gathers ----------------------------------------------------------------------------------------------

@register("indexing", samples=S.index_select_cases, torch="torch.index_select", grad=("self",), dtypes=ALL)
def index_select(self: Tensor, dim: int, index: Tensor):
    """Slices of `self` along `dim` picked by the 1-D integer `index`."""
    if index.ndim > 1:
        raise ValueError(f"index_select: index must be 0-D or 1-D, got {tuple(index.shape)}")
    d = _dim(dim, self.ndim, "index_select")
    if self.ndim == 0:
        if index.size != 1:
            raise ValueError(f"index_select: a 0-d self takes one index, got {index.size}")
        return scalar(xb.gather(vector(self), index.reshape(-1), axis=0))
    return xb.gather(self, index.reshape(-1), axis=d)


@register("indexing", samples=S.gather_cases, torch="torch.gather", grad=("self",), dtypes=ALL)
def gather(self: Tensor, dim: int, index: Tensor, sparse_grad: bool = False):
    """out[i][j][k] = self[i][index[i][j][k]][k] for dim = 1 (index has self's rank; it may be smaller)."""
    d = _dim(dim, self.ndim, "gather")
    _check_scatter("gather", self, d, index)
    zero, self, index = self.ndim == 0, vector(self), vector(index)
    view = self[tuple(slice(0, n) if i != d else slice(None) for i, n in enumerate(index.shape))]
    out = xb.take_along_axis(view, _wrap(index, self.shape[d]), axis=d)
    return scalar(out) if zero else out


@register("indexing", samples=S.take_cases, torch="torch.take", grad=("self",), dtypes=ALL)
def take(self: Tensor, index: Tensor):
    """Elements of the flattened `self` at `index` (the result has index's shape)."""
    return xb.gather(self.reshape(-1), _wrap(index, self.size), axis=0)


# ---- scatters ---------------------------------------------------------------------------------------------

@register("indexing", samples=S.scatter_add_cases, torch="torch.scatter_add", grad=("self", "src"), dtypes=NUM)
def scatter_add(self: Tensor, dim: int, index: Tensor, src: Tensor):
    """self with src[i][j][k] added at [i][index[i][j][k]][k] (dim = 1); repeated indices accumulate."""
    d = _dim(dim, self.ndim, "scatter_add")
    _check_scatter("scatter_add", self, d, index, src)
    zero, self, index, src = self.ndim == 0, vector(self), vector(index), vector(src)
    out = self + _scatter_sum(self.shape, self.dtype, d, index, src.astype(self.dtype))
    return scalar(out) if zero else out


def _scatter_overwrite(self, d, index, src):
    hits = _scatter_sum(self.shape, "int64", d, index, xb.ones(index.shape, "int64"))
    total = _scatter_sum(self.shape, self.dtype, d, index, src)
    written = total / xb.maximum(hits, 1) if self.dtype in FLOATS else total // xb.maximum(hits, 1)
    return xb.where(hits > 0, written.astype(self.dtype), self)


@register("indexing", samples=S.scatter_cases, torch="torch.scatter", grad=("self", "src"), dtypes=NUM)
def scatter(self: Tensor, dim: int, index: Tensor, src: Tensor = None, value: float = None, reduce: str = None):
    """self with src[i][j][k] (or the number `value`) written at [i][index[i][j][k]][k] (dim = 1);
    `reduce="add"` / `"multiply"` combine with self instead of overwriting."""
    d = _dim(dim, self.ndim, "scatter")
    src = _as_src(self, index, src, value)
    _check_scatter("scatter", self, d, index, src)
    if self.ndim == 0:
        return scalar(scatter(vector(self), 0, vector(index), vector(src), None, reduce))
    if reduce is None:
        return _scatter_overwrite(self, d, index, src)
    if reduce == "add":
        return self + _scatter_sum(self.shape, self.dtype, d, index, src)
    if reduce == "multiply":
        return _dense_reduce(self, d, index, src, "prod", True)
    raise ValueError(f"scatter: reduce must be None, 'add' or 'multiply', got {reduce!r}")


def _dense_reduce(self, d, index, src, kind: str, include_self: bool):
    """out[.., t, ..] = reduce over j with index[.., j, ..] == t of src[.., j, ..] (and self[.., t, ..]):
    a comparison against every target along `d` (cost: targets x sources per line)."""
    src = _trim(src, index.shape)
    idx = _wrap(index, self.shape[d])
    n = self.shape[d]
    # [.., t, j, ..]: the source axis right after the target axis
    hit = xb.expand_dims(idx, d) == xb.arange(n).reshape((n,) + (1,) * (index.ndim - d))
    vals = xb.expand_dims(src, d)
    ident = {"prod": 1, "max": _extreme(self.dtype, -1), "min": _extreme(self.dtype, 1)}[kind]
    picked = xb.where(hit, vals, ident)
    red = {"prod": xb.prod, "max": xb.max, "min": xb.min}[kind](picked, axis=d + 1)
    # lines of self beyond index's extent in the other dims receive nothing
    pad = [(0, 0) if i == d else (0, s - k) for i, (s, k) in enumerate(zip(self.shape, index.shape))]
    any_hit = hit.any(axis=d + 1)
    if any(hi for _, hi in pad):
        red = xb.pad(red, pad, value=ident)
        any_hit = xb.pad(any_hit, pad, value=False)
    if include_self:
        red = {"prod": lambda a, b: a * b, "max": xb.maximum, "min": xb.minimum}[kind](red.astype(self.dtype), self)
        return red
    return xb.where(any_hit, red.astype(self.dtype), self)


def _extreme(dtype, sign: int):
    if dtype in FLOATS:
        return sign * float("inf")
    info = np.iinfo(np.dtype(str(dtype)))
    return int(info.max) if sign > 0 else int(info.min)


@register("indexing", samples=S.scatter_reduce_cases, torch="torch.scatter_reduce", grad=("self", "src"),
          dtypes=NUM, notes="prod/amax/amin compare every target with every source along dim (quadratic)")
def scatter_reduce(self: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, include_self: bool = True):
    """Reduces src[i][j][k] into [i][index[i][j][k]][k] (dim = 1) with reduce = "sum", "prod", "mean", "amax" or
    "amin"; include_self folds self's values in; positions no index names keep self."""
    d = _dim(dim, self.ndim, "scatter_reduce")
    _check_scatter("scatter_reduce", self, d, index, src)
    if self.ndim == 0:
        return scalar(scatter_reduce(vector(self), 0, vector(index), vector(src), reduce, include_self))
    src = src.astype(self.dtype)
    if reduce in ("sum", "mean"):
        total = _scatter_sum(self.shape, self.dtype, d, index, src)
        if reduce == "sum":
            return total + self if include_self else xb.where(
                _scatter_sum(self.shape, "int64", d, index, xb.ones(index.shape, "int64")) > 0, total, self)
        hits = _scatter_sum(self.shape, "int64", d, index, xb.ones(index.shape, "int64"))
        if include_self:
            total, count = total + self, hits + 1
        else:
            count = hits
        mean = total / xb.maximum(count, 1) if self.dtype in FLOATS else xb.floor_divide(total, xb.maximum(count, 1))
        return xb.where(count > 0, mean.astype(self.dtype), self)
    kinds = {"prod": "prod", "amax": "max", "amin": "min"}
    if reduce not in kinds:
        raise ValueError(f"scatter_reduce: reduce must be sum, prod, mean, amax or amin, got {reduce!r}")
    return _dense_reduce(self, d, index, src, kinds[reduce], include_self)


@register("indexing", samples=S.index_add_cases, torch="torch.index_add", grad=("self", "source"), dtypes=NUM)
def index_add(self: Tensor, dim: int, index: Tensor, source: Tensor, alpha: float = 1):
    """self with alpha * source's slices added at the positions `index` (1-D) along dim; repeats accumulate."""
    d = _dim(dim, self.ndim, "index_add")
    if self.ndim == 0:
        return scalar(index_add(vector(self), 0, index, vector(source), alpha))
    source = source.astype(self.dtype)
    upd = source if alpha == 1 else (source * alpha).astype(self.dtype)
    return xb.scatter_add(self, _wrap(index.reshape(-1), self.shape[d]), upd, axis=d)


def _hits_along(self, d, index):
    """How often each position along `d` is named by the 1-D `index`, shaped to broadcast against self."""
    n = self.shape[d]
    count = xb.scatter_add(xb.zeros((n,), "int64"), _wrap(index.reshape(-1), n), xb.ones((index.size,), "int64"),
                           axis=0)
    return count.reshape((n,) + (1,) * (self.ndim - 1 - d))


@register("indexing", samples=S.index_add_cases, torch="torch.index_copy", grad=("self", "source"), dtypes=NUM)
def index_copy(self: Tensor, dim: int, index: Tensor, source: Tensor):
    """self with its slices at `index` (1-D) along dim replaced by source's."""
    d = _dim(dim, self.ndim, "index_copy")
    if self.ndim == 0:
        return scalar(index_copy(vector(self), 0, index, vector(source)))
    idx = _wrap(index.reshape(-1), self.shape[d])
    if index.size == 1:     # one slice (a decoded token's row of a KV cache): a select its readers fuse
        n = self.shape[d]
        at = (xb.arange(n) == idx).reshape((n,) + (1,) * (self.ndim - 1 - d))
        return xb.where(at, source.astype(self.dtype), self)
    hits = _hits_along(self, d, index)
    total = xb.scatter_add(xb.zeros_like(self), idx, source.astype(self.dtype), axis=d)
    written = total / xb.maximum(hits, 1) if self.dtype in FLOATS else total // xb.maximum(hits, 1)
    return xb.where(hits > 0, written.astype(self.dtype), self)


@register("indexing", samples=S.index_fill_cases, torch="torch.index_fill", grad=("self",), dtypes=ALL)
def index_fill(self: Tensor, dim: int, index: Tensor, value: float):
    """self with the slices at `index` along dim set to `value`."""
    d = _dim(dim, self.ndim, "index_fill")
    if self.ndim == 0:
        return scalar(index_fill(vector(self), 0, index, value))
    return xb.where(_hits_along(self, d, index) > 0, value, self).astype(self.dtype)


@register("indexing", samples=S.select_scatter_cases, torch="torch.select_scatter", grad=("self", "src"),
          dtypes=ALL)
def select_scatter(self: Tensor, src: Tensor, dim: int, index: int):
    """self with the slice self.select(dim, index) replaced by src."""
    d = _dim(dim, self.ndim, "select_scatter")
    n = self.shape[d]
    if not -n <= index < n:
        raise ValueError(f"select_scatter: index {index} is out of range for dim {d} of size {n}")
    at = (xb.arange(n) == index % n).reshape((n,) + (1,) * (self.ndim - 1 - d))
    return xb.where(at, xb.expand_dims(src.astype(self.dtype), d), self)


@register("indexing", samples=S.slice_scatter_cases, torch="torch.slice_scatter", grad=("self", "src"),
          dtypes=ALL)
def slice_scatter(self: Tensor, src: Tensor, dim: int = 0, start: int = None, end: int = None, step: int = 1):
    """self with the slice self[start:end:step] along dim replaced by src."""
    d = _dim(dim, self.ndim, "slice_scatter")
    n = self.shape[d]
    positions = np.arange(n)[slice(start, end, step)]
    if src.shape[d] != len(positions):
        raise ValueError(f"slice_scatter: src has {src.shape[d]} entries along dim {d}, the slice {len(positions)}")
    inside = np.zeros(n, bool)
    inside[positions] = True
    source = np.zeros(n, np.int64)
    source[positions] = np.arange(len(positions))
    picked = xb.gather(src.astype(self.dtype), source, axis=d) if len(positions) else xb.zeros_like(self)
    return xb.where(xb.asarray(inside).reshape((n,) + (1,) * (self.ndim - 1 - d)), picked, self)


@register("indexing", samples=S.diagonal_scatter_cases, torch="torch.diagonal_scatter", grad=("self", "src"),
          dtypes=ALL)
def diagonal_scatter(self: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """self with its diagonal (torch.diagonal(self, offset, dim1, dim2)) replaced by src, whose last dim runs
    along the diagonal."""
    d1, d2 = _dim(dim1, self.ndim, "diagonal_scatter"), _dim(dim2, self.ndim, "diagonal_scatter")
    n1, n2 = self.shape[d1], self.shape[d2]
    i, j = np.meshgrid(np.arange(n1), np.arange(n2), indexing="ij")
    on = (j - i) == offset
    k = np.where(on, i if offset >= 0 else j, 0)
    x = xb.moveaxis(xb.moveaxis(self, d1, -1), d2 if d2 < d1 else d2 - 1, -1)       # ... n1 n2
    if src.shape[-1] != int(on.sum()):
        raise ValueError(f"diagonal_scatter: src's last dim is {src.shape[-1]}, the diagonal has {int(on.sum())}")
    picked = xb.gather(src.astype(self.dtype), k, axis=-1) if on.any() else xb.zeros_like(x)   # ... n1 n2
    out = xb.where(xb.asarray(on), picked, x)
    # put dim1, dim2 back
    order = [a for a in range(self.ndim) if a not in (d1, d2)] + [d1, d2]
    return out.permute(tuple(int(np.argsort(order)[a]) for a in range(self.ndim)))


# ---- masks ------------------------------------------------------------------------------------------------

@register("indexing", samples=S.masked_fill_cases, torch="torch.masked_fill", grad=("self",), dtypes=ALL)
def masked_fill(self: Tensor, mask: Tensor, value: float):
    """self with `value` where the boolean mask (broadcast to self) is true."""
    if mask.dtype != "bool":
        raise ValueError(f"masked_fill: mask must be bool, got {mask.dtype}")
    if isinstance(value, Tensor):
        value = value.astype(self.dtype)
    return xb.where(mask, value, self).astype(self.dtype)


@register("indexing", samples=S.masked_scatter_cases, torch="torch.masked_scatter", grad=("self", "source"),
          dtypes=ALL)
def masked_scatter(self: Tensor, mask: Tensor, source: Tensor):
    """self with the positions where mask is true filled, in row-major order, by consecutive elements of
    source (which must hold at least as many)."""
    shape = np.broadcast_shapes(tuple(self.shape), tuple(mask.shape))
    m = xb.broadcast_to(mask, shape).reshape(-1)
    k = xb.cumsum(m.astype("int64"), 0) - 1
    picked = xb.gather(source.reshape(-1).astype(self.dtype), xb.maximum(k, 0), axis=0)
    return xb.where(m, picked, xb.broadcast_to(self, shape).reshape(-1)).reshape(shape)


def _compact(keep, values, size: int, fill):
    """The `values` rows whose `keep` flag is set, in order, packed into `size` rows padded with `fill`,
    and how many were kept (keep: [n] bool, values: [n, ...])."""
    stored = values.dtype
    if stored == "bool":
        values = values.astype("int8")
    pos = xb.cumsum(keep.astype("int64"), 0) - 1
    slot = xb.where(keep & (pos < size), pos, size)                       # dropped entries go to a spare row
    placed = xb.scatter_add(xb.zeros((size + 1,) + tuple(values.shape[1:]), values.dtype), slot, values, axis=0)
    count = keep.astype("int64").sum()
    filled = (xb.arange(size) < count).reshape((size,) + (1,) * (values.ndim - 1))
    out = xb.where(filled, placed[:size], fill) if size else placed[:0]
    return out.astype(stored), count


@register("indexing", samples=S.nonzero_cases, torch=_torch_nonzero, dtypes=ALL,
          notes="padded to a static size with fill_value, plus the count (jnp.nonzero(size=...) rule)")
def nonzero(self: Tensor, size: int = None, fill_value: int = -1, as_tuple: bool = False):
    """(indices [size, ndim] int64 of the non-zero elements in row-major order, padded with fill_value; the
    number of non-zero elements, an int64 scalar). `size` defaults to self's element count (never too small).
    as_tuple=True: one [size] index tensor per dim (a 0-d self counts as 1-d, as PyTorch), then the count."""
    size = self.size if size is None else int(size)
    keep = (self != 0).reshape(-1)
    coords = [xb.iota(tuple(self.shape), d).reshape(-1) for d in range(self.ndim)]
    if as_tuple:
        coords = coords or [xb.zeros((1,), "int64")]
        table, count = _compact(keep, xb.stack(coords, 1), size, fill_value)
        return (*(table[:, d] for d in range(len(coords))), count)
    table = xb.stack(coords, 1) if coords else xb.zeros((self.size, 0), "int64")
    return _compact(keep, table, size, fill_value)


@register("indexing", samples=S.masked_select_cases, torch=_torch_masked_select, grad=("self",),
          dtypes=ALL, notes="padded to a static size with fill_value, plus the count (jnp.nonzero(size=...) rule)")
def masked_select(self: Tensor, mask: Tensor, size: int = None, fill_value: float = 0):
    """(the elements of self (broadcast with mask) where mask is true, in row-major order, padded to `size`
    with fill_value; their number, an int64 scalar). `size` defaults to the broadcast element count."""
    shape = np.broadcast_shapes(tuple(self.shape), tuple(mask.shape))
    flat = xb.broadcast_to(self, shape).reshape(-1)
    keep = xb.broadcast_to(mask, shape).reshape(-1)
    size = flat.shape[0] if size is None else int(size)
    return _compact(keep, flat, size, fill_value)


@register("indexing", samples=S.isin_cases, torch="torch.isin", dtypes=NUM,
          notes="compares every element with every test element")
def isin(elements: Tensor, test_elements: Tensor, assume_unique: bool = False, invert: bool = False):
    """True where an element of `elements` occurs in `test_elements`."""
    hit = (xb.expand_dims(elements, -1) == test_elements.reshape(-1)).any(axis=-1) if test_elements.size else \
        xb.zeros(elements.shape, "bool")
    return xb.logical_not(hit) if invert else hit


# ---- advanced indexing: self[i0, :, i2] ---------------------------------------------------------------------

def _advanced(self, indices, name: str):
    """PyTorch's rule for `self[indices]` with a list of index tensors and Nones (whole dims): returns
    (self moved so the indexed dims lead and are flattened into one, the flat positions [*b], where the
    broadcast index dims go in the result)."""
    indices = list(indices)
    if len(indices) > self.ndim:
        raise ValueError(f"{name}: {len(indices)} indices for a tensor with {self.ndim} dims")
    dims = [d for d, i in enumerate(indices) if i is not None]
    if not dims:
        raise ValueError(f"{name}: give at least one index tensor (None selects a whole dim)")
    idx = [xb.asarray(indices[d]) for d in dims]
    if any(i.dtype == "bool" for i in idx):
        raise ValueError(f"{name}: boolean masks select a data-dependent number of elements; "
                         "use masked_select or nonzero (padded to a static size), or where()")
    shape = tuple(np.broadcast_shapes(*[tuple(i.shape) for i in idx]))
    flat = None
    for d, i in zip(dims, idx):
        term = xb.broadcast_to(_wrap(i, self.shape[d]), shape) * int(np.prod([self.shape[e] for e in dims
                                                                               if e > d], dtype=np.int64))
        flat = term if flat is None else flat + term
    rest = [d for d in range(self.ndim) if d not in dims]
    moved = self.permute(tuple(dims + rest)) if dims + rest != list(range(self.ndim)) else self
    lead = int(np.prod([self.shape[d] for d in dims], dtype=np.int64))
    moved = moved.reshape((lead,) + tuple(self.shape[d] for d in rest))
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    return moved, flat, shape, (dims[0] if adjacent else 0), rest


@register("indexing", samples=S.index_cases, torch="torch.ops.aten.index.Tensor", grad=("self",), dtypes=ALL)
def index(self: Tensor, indices):
    """self[indices] for a list of integer index tensors and Nones, PyTorch's advanced indexing: the index
    tensors broadcast together; their dims replace the indexed dims where those are adjacent, else lead."""
    moved, flat, shape, at, _ = _advanced(self, indices, "index")
    out = xb.gather(moved, flat.reshape(-1), axis=0).reshape(shape + tuple(moved.shape[1:]))
    if at == 0:
        return out
    k, r = len(shape), out.ndim - len(shape)
    return out.permute(tuple(range(k, k + at)) + tuple(range(k)) + tuple(range(k + at, k + r)))


@register("indexing", samples=S.index_put_cases, torch="torch.ops.aten.index_put", grad=("self", "values"),
          dtypes=NUM)
def index_put(self: Tensor, indices, values: Tensor, accumulate: bool = False):
    """self with `values` written at self[indices] (added there with `accumulate`); values broadcast to the
    indexed shape. Without accumulate, repeated positions take the mean of their values (PyTorch leaves them
    unspecified)."""
    moved, flat, shape, at, rest = _advanced(self, indices, "index_put")
    k = len(shape)
    tail = tuple(moved.shape[1:])
    vals = xb.asarray(values).astype(self.dtype)
    if at:                                                # values are laid out with the index dims at `at`
        vals = xb.broadcast_to(vals, tail[:at] + shape + tail[at:])
        vals = vals.permute(tuple(range(at, at + k)) + tuple(range(at)) + tuple(range(at + k, vals.ndim)))
    vals = xb.broadcast_to(vals, shape + tail).reshape((int(np.prod(shape)),) + tail)
    pos = flat.reshape(-1)
    total = xb.scatter_add(xb.zeros(moved.shape, self.dtype), pos, vals, axis=0)
    if accumulate:
        new = moved + total
    else:
        hits = xb.scatter_add(xb.zeros((moved.shape[0],), "int64"), pos, xb.ones(pos.shape, "int64"), axis=0)
        hits = hits.reshape((moved.shape[0],) + (1,) * len(tail))
        written = total / xb.maximum(hits, 1) if self.dtype in FLOATS else total // xb.maximum(hits, 1)
        new = xb.where(hits > 0, written.astype(self.dtype), moved)
    dims = [d for d in range(self.ndim) if d not in rest]
    new = new.reshape(tuple(self.shape[d] for d in dims) + tuple(self.shape[d] for d in rest))
    order = dims + rest
    return new.permute(tuple(order.index(d) for d in range(self.ndim))) if order != list(range(self.ndim)) else new

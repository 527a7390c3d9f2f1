"""Reductions (category 5), with PyTorch's dtype rules: sums and products of integers and bools give int64,
arg-reductions int64, predicates bool; `dim` is an int, a tuple of ints or None (every dim)."""
from __future__ import annotations

import math

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import BOOL, FLOATS, INTS, Sample

from ._samples import chain, noncontig, reduction, special, tensor
from ._util import wrap_dims

register = xb.ops.register
NUM = FLOATS + INTS


def _axes(x, dim, name: str = "reduction"):
    """PyTorch's dim argument as xbench axes (None and () mean every dim; a 0-d tensor takes dims 0 and -1,
    which reduce nothing)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return None
    if x.ndim == 0:
        wrap_dims(dim, 0, name)
        return None
    return tuple(dim) if isinstance(dim, (tuple, list)) else dim


def _widen(x, dtype):
    """The accumulation type PyTorch gives sums and products: `dtype` if given, int64 for ints and bools."""
    if dtype is not None:
        return x.astype(dtype)
    return x if x.dtype in FLOATS else x.astype("int64")


@register("reduction", samples=reduction(ints=(-20, 20)), torch="torch.sum", grad=True, dtypes=NUM + BOOL)
def sum(input: Tensor, dim=None, keepdim: bool = False, dtype=None):
    """Sum over `dim` (integers and bools give int64)."""
    return _widen(input, dtype).sum(axis=_axes(input, dim), keepdims=keepdim)


@register("reduction", samples=reduction(), torch="torch.nansum", grad=True, dtypes=NUM)
def nansum(input: Tensor, dim=None, keepdim: bool = False, dtype=None):
    """Sum over `dim`, NaN counted as zero."""
    x = _widen(input, dtype)
    if x.dtype in FLOATS:
        x = xb.where(xb.isnan(x), 0.0, x)
    return x.sum(axis=_axes(input, dim), keepdims=keepdim)


@register("reduction", samples=reduction(), torch="torch.mean", grad=True, dtypes=FLOATS)
def mean(input: Tensor, dim=None, keepdim: bool = False, dtype=None):
    """Mean over `dim` (float inputs only, as PyTorch)."""
    x = input if dtype is None else input.astype(dtype)
    return x.mean(axis=_axes(input, dim), keepdims=keepdim)


@register("reduction", samples=reduction(0.5, 1.5, ints=(-1, 2), multi_dim=False), torch="torch.prod",
          grad=True, dtypes=NUM + BOOL)
def prod(input: Tensor, dim: int | None = None, keepdim: bool = False, dtype=None):
    """Product over `dim` (one dim, or all; integers and bools give int64)."""
    if isinstance(dim, (tuple, list)):
        raise ValueError("prod takes one dim (an int) or None, as in PyTorch; reduce twice for more")
    return _widen(input, dtype).prod(axis=_axes(input, dim, "prod"), keepdims=keepdim)


def _values_indices(kind: str):
    def gen(dtype, shapes):
        yield from reduction(ints=(-1000, 1000), multi_dim=False)(dtype, shapes)
    return gen


def _max_min(x, dim, keepdim: bool, kind: str):
    if dim is None:
        return x.max() if kind == "max" else x.min()
    if x.ndim == 0:
        wrap_dims(dim, 0, kind)
        return x, xb.zeros((), "int64")
    values = x.max(axis=dim, keepdims=keepdim) if kind == "max" else x.min(axis=dim, keepdims=keepdim)
    indices = x.argmax(axis=dim, keepdims=keepdim) if kind == "max" else x.argmin(axis=dim, keepdims=keepdim)
    return values, indices


@register("reduction", samples=_values_indices("max"), torch="torch.max", grad=True, dtypes=NUM)
def max(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """The maximum of every element, or (values, indices) along `dim` (NaN propagates)."""
    return _max_min(input, dim, keepdim, "max")


@register("reduction", samples=_values_indices("min"), torch="torch.min", grad=True, dtypes=NUM)
def min(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """The minimum of every element, or (values, indices) along `dim` (NaN propagates)."""
    return _max_min(input, dim, keepdim, "min")


@register("reduction", samples=reduction(ints=(-1000, 1000), empty=False), torch="torch.amax", grad=True,
          dtypes=NUM)
def amax(input: Tensor, dim=(), keepdim: bool = False):
    """Maximum over `dim` (a tuple; () means every dim)."""
    return input.max(axis=_axes(input, dim), keepdims=keepdim)


@register("reduction", samples=reduction(ints=(-1000, 1000), empty=False), torch="torch.amin", grad=True,
          dtypes=NUM)
def amin(input: Tensor, dim=(), keepdim: bool = False):
    """Minimum over `dim` (a tuple; () means every dim)."""
    return input.min(axis=_axes(input, dim), keepdims=keepdim)


_ARG = reduction(ints=(-1000, 1000), multi_dim=False, empty=False)


@register("reduction", samples=_ARG, torch="torch.argmax", dtypes=NUM)
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """Index of the first maximum along `dim` (of the flattened input when dim is None); int64."""
    return input.argmax(axis=_axes(input, dim, "argmax"), keepdims=keepdim)


@register("reduction", samples=_ARG, torch="torch.argmin", dtypes=NUM)
def argmin(input: Tensor, dim: int | None = None, keepdim: bool = False):
    """Index of the first minimum along `dim`; int64."""
    return input.argmin(axis=_axes(input, dim, "argmin"), keepdims=keepdim)


_PRED = reduction(ints=(-1, 2))


def _bool_samples(dtype, shapes):
    yield from _PRED(dtype, shapes)
    if dtype in FLOATS or dtype in INTS:
        z = np.zeros((4, 9), dtype=tensor(shapes, dtype, (1,), "z").dtype)
        z[1, 3] = 1
        yield Sample((z,), {"dim": -1}, note="mostly zeros")


@register("reduction", samples=_bool_samples, torch="torch.all", dtypes=NUM + BOOL)
def all(input: Tensor, dim=None, keepdim: bool = False):
    """True where every element along `dim` is nonzero (bool)."""
    return input.all(axis=_axes(input, dim), keepdims=keepdim)


@register("reduction", samples=_bool_samples, torch="torch.any", dtypes=NUM + BOOL)
def any(input: Tensor, dim=None, keepdim: bool = False):
    """True where some element along `dim` is nonzero (bool)."""
    return input.any(axis=_axes(input, dim), keepdims=keepdim)


def _count_samples(dtype, shapes):
    yield from reduction(ints=(-1, 2), keepdim=False)(dtype, shapes)


@register("reduction", samples=_count_samples, torch="torch.count_nonzero", dtypes=NUM + BOOL)
def count_nonzero(input: Tensor, dim=None):
    """The number of nonzero elements along `dim` (int64)."""
    return (input != 0).astype("int64").sum(axis=_axes(input, dim))


def _correction(dim, correction, unbiased, name: str):
    """PyTorch's three spellings of Bessel's correction as (dim, correction): `var(x, unbiased)` (a bool in dim's
    place), `var(x, dim, unbiased, keepdim)` (a bool in correction's place counts as 1 or 0) and
    `var(x, dim, correction=c)`; correction None is 1."""
    if isinstance(dim, bool):
        if unbiased is not None:
            raise ValueError(f"{name}: unbiased given twice (positionally, where dim goes, and by name)")
        dim, unbiased = None, dim
    if unbiased is not None:
        if correction is not None:
            raise ValueError(f"{name}: give correction or unbiased, not both")
        correction = 1 if unbiased else 0
    return dim, 1 if correction is None else int(correction) if isinstance(correction, bool) else correction


def _wide(x):
    """A 16-bit float input as float32, where PyTorch sums its moments and norms (each square rounded to
    float16 overflows from 256: std and norm came out infinite where theirs fit)."""
    return x.astype("float32") if x.dtype in ("float16", "bfloat16") else x


def _moments(x, dim, correction, keepdim: bool, unbiased=None, name: str = "var"):
    dim, correction = _correction(dim, correction, unbiased, name)
    axes = _axes(x, dim, name)
    ax = tuple(range(x.ndim)) if axes is None else (axes,) if isinstance(axes, int) else axes
    n = 1
    for a in ax:
        n *= x.shape[a]
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    ss = (centered * centered).sum(axis=axes, keepdims=keepdim)
    denom = n - correction
    var = ss / float(denom) if denom > 0 else ss / 0.0
    return var, (mean if keepdim else x.mean(axis=axes, keepdims=False))


def _moment_samples(dtype, shapes):
    """Reductions with and without Bessel's correction, spelled every way PyTorch takes it (correction=, unbiased
    by name, positionally in dim's place and in correction's place); where it leaves no degree of freedom (one
    element, correction=1) the values and gradients are NaN, so those samples are not differentiated."""
    def dof(x, dim, correction):
        axes = () if x.ndim == 0 else range(x.ndim) if dim is None else (dim,) if isinstance(dim, int) else dim
        return math.prod(x.shape[a] for a in axes) > correction

    for s in reduction(kwargs=({}, {"correction": 0}))(dtype, shapes):
        if not dof(s.args[0], s.kwargs.get("dim"), s.kwargs.get("correction", 1)):
            s = Sample(s.args, s.kwargs, f"{s.note}, no degree of freedom", grad=False)
        yield s
    x = tensor(shapes, dtype, (4, 9), "unbiased")
    yield Sample((x, False), note="var(x, unbiased=False) positionally")
    yield Sample((x, True), note="var(x, unbiased=True) positionally")
    yield Sample((x, 1, False), note="var(x, dim, unbiased=False) positionally")
    yield Sample((x, 0, True, True), note="var(x, dim, unbiased, keepdim) positionally")
    yield Sample((x,), {"dim": 1, "unbiased": False}, note="unbiased=False by name")


_CORRECTION = "correction=None is 1; unbiased (by name, or positionally as PyTorch's overloads take it) is correction 1 or 0"


@register("reduction", samples=_moment_samples, torch="torch.var", grad=True, notes=_CORRECTION)
def var(input: Tensor, dim=None, correction: int | None = None, keepdim: bool = False, unbiased: bool | None = None):
    """Variance over `dim`, dividing by N - correction (Bessel's correction by default)."""
    return _moments(_wide(input), dim, correction, keepdim, unbiased, "var")[0].astype(input.dtype)


@register("reduction", samples=_moment_samples, torch="torch.std", grad=True, notes=_CORRECTION)
def std(input: Tensor, dim=None, correction: int | None = None, keepdim: bool = False, unbiased: bool | None = None):
    """Standard deviation over `dim`: sqrt(var)."""
    return xb.sqrt(_moments(_wide(input), dim, correction, keepdim, unbiased, "std")[0]).astype(input.dtype)


def _torch_with_mean(name: str):
    """torch.var_mean / std_mean (called with the sample's own arguments) with the mean taken from torch.mean:
    their Welford update turns the running mean NaN at an infinity (unless it comes last), where the mean is that
    infinity."""
    def fn(torch, input, *args, **kwargs):
        stat, _ = getattr(torch, name)(input, *args, **kwargs)
        names = ("dim", "correction", "keepdim", "unbiased")
        bound = dict(zip(names, args)) | kwargs
        dim = bound.get("dim")
        dim = None if isinstance(dim, bool) else dim
        return stat, torch.mean(input, dim, keepdim=bool(bound.get("keepdim", False)))
    fn.__name__ = fn.__qualname__ = f"{name}(mean from torch.mean)"
    return fn


_INF_MEAN = ("a row holding an infinity has that infinity as its mean (PyTorch's Welford update gives NaN); "
             + _CORRECTION)


@register("reduction", samples=_moment_samples, torch=_torch_with_mean("var_mean"), grad=True, notes=_INF_MEAN)
def var_mean(input: Tensor, dim=None, correction: int | None = None, keepdim: bool = False,
             unbiased: bool | None = None):
    """(var, mean) over `dim`."""
    return tuple(r.astype(input.dtype) for r in _moments(_wide(input), dim, correction, keepdim, unbiased, "var_mean"))


@register("reduction", samples=_moment_samples, torch=_torch_with_mean("std_mean"), grad=True, notes=_INF_MEAN)
def std_mean(input: Tensor, dim=None, correction: int | None = None, keepdim: bool = False,
             unbiased: bool | None = None):
    """(std, mean) over `dim`."""
    v, m = _moments(_wide(input), dim, correction, keepdim, unbiased, "std_mean")
    return xb.sqrt(v).astype(input.dtype), m.astype(input.dtype)


def _vector_norm(x, ord, dim, keepdim: bool):
    return _norm_of(_wide(x), ord, dim, keepdim).astype(x.dtype)


def _norm_of(x, ord, dim, keepdim: bool):
    axes = _axes(x, dim)
    a = xb.abs(x)
    if ord == math.inf:
        return a.max(axis=axes, keepdims=keepdim)
    if ord == -math.inf:
        return a.min(axis=axes, keepdims=keepdim)
    if ord == 0:
        return (x != 0).astype(x.dtype).sum(axis=axes, keepdims=keepdim)
    if ord == 1:
        return a.sum(axis=axes, keepdims=keepdim)
    if ord == 2:
        return xb.sqrt((x * x).sum(axis=axes, keepdims=keepdim))
    return xb.power((a ** float(ord)).sum(axis=axes, keepdims=keepdim), 1.0 / ord)


_NORM_ORDS = ({}, {"ord": 1}, {"ord": math.inf}, {"ord": -math.inf}, {"ord": 0}, {"ord": 3.0}, {"ord": 0.5})


def _infinite_orders(name: str):
    """p = +-inf (the largest / smallest magnitude) over several dims, with keepdim, and over rows holding NaN,
    infinities and ties (samples for norm and linalg_vector_norm; `name` is the order's parameter)."""
    def gen(dtype, shapes):
        x = tensor(shapes, dtype, (4, 5, 3), "infnorm", low=-3.0, high=3.0)
        for p in (math.inf, -math.inf):
            yield Sample((x,), {name: p, "dim": (0, 2)}, note=f"{name}={p} dims (0, 2)")
            yield Sample((x,), {name: p, "dim": 1, "keepdim": True}, note=f"{name}={p} dim 1 keepdim")
            if shapes.special:
                rows = special(dtype, (4, 3), (1.0, float("nan"), -3.0, float("inf"), 1.0, 2.0,
                                               -float("inf"), 0.0, 1.0, -2.0, 2.0, 1.0))
                yield Sample((rows,), {name: p, "dim": 1}, note=f"{name}={p}, NaN, infinities, ties", grad=False)
    return gen


@register("reduction", aliases=("vector_norm",), samples=chain(reduction(0.1, 3.0, kwargs=_NORM_ORDS),
                                                               _infinite_orders("ord")),
          torch="torch.linalg.vector_norm", grad=True)
def linalg_vector_norm(x: Tensor, ord: float = 2, dim=None, keepdim: bool = False, dtype=None):
    """(sum |x|**ord) ** (1/ord) over `dim`; ord inf / -inf: max / min of |x|; ord 0: the nonzero count."""
    if dtype is not None:
        x = x.astype(dtype)
    return _vector_norm(x, ord, dim, keepdim)


def _norm_samples(dtype, shapes):
    yield from reduction(0.1, 3.0, kwargs=({}, {"p": 1}, {"p": math.inf}, {"p": 3.0}, {"p": "fro"}))(dtype, shapes)
    yield from _infinite_orders("p")(dtype, shapes)


@register("reduction", samples=_norm_samples, torch="torch.norm", grad=True,
          notes="p='nuc' (the nuclear norm) needs singular values and is not available")
def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None):
    """Vector p-norm over `dim` (p='fro': the 2-norm of all elements in `dim`)."""
    if p == "nuc":
        raise ValueError("norm: p='nuc' needs singular values, which xbench does not compute; use p='fro' or a "
                         "number")
    if dtype is not None:
        input = input.astype(dtype)
    return _vector_norm(input, 2 if p == "fro" else p, dim, keepdim)


def _lse_samples(dtype, shapes):
    yield from reduction(-5.0, 5.0, full=False, ints=(-5, 5))(dtype, shapes)
    x = tensor(shapes, dtype, (4, 9), "lse", low=50.0, high=80.0) if dtype != "float16" else \
        tensor(shapes, dtype, (4, 9), "lse", low=5.0, high=10.0)
    yield Sample((x,), {"dim": -1}, note="large values")
    yield Sample((special(dtype, (3, 4), (float("inf"), 1.0, 2.0, 3.0, float("-inf"),) * 2 + (1.0, 2.0))
                  if dtype in FLOATS else tensor(shapes, dtype, (3, 4), "lsei"),),
                 {"dim": -1}, note="rows with +-inf", grad=False)


@register("reduction", samples=_lse_samples, torch="torch.logsumexp", grad=True, dtypes=NUM)
def logsumexp(input: Tensor, dim, keepdim: bool = False):
    """log(sum(exp(input))) over `dim`, shifted by the maximum (0 where that is infinite, as PyTorch)."""
    x = input if input.dtype in FLOATS else input.astype("float32")
    axes = _axes(x, dim, "logsumexp")
    m = x.max(axis=axes, keepdims=True)
    m = xb.where(xb.abs(m) == float("inf"), 0.0, m)
    out = xb.log(xb.exp(x - m).sum(axis=axes, keepdims=True)) + m
    if keepdim:
        return out
    ax = tuple(range(x.ndim)) if axes is None else (axes,) if isinstance(axes, int) else axes
    return out.squeeze(tuple(a % x.ndim for a in ax)) if ax else out


def _histc_samples(dtype, shapes):
    for shape in shapes.reduction:
        x = tensor(shapes, dtype, shape, "histc", low=-3.0, high=3.0)
        yield Sample((x,), {"bins": 10, "min": -2.0, "max": 2.0}, note=f"{shape} [-2, 2]", grad=False)
    x = tensor(shapes, dtype, (200,), "histc2", low=-3.0, high=3.0)
    yield Sample((x,), {"bins": 7}, note="data range", grad=False)
    if shapes.noncontig:
        yield Sample((noncontig(tensor(shapes, dtype, (9, 7), "histcnc")),), {"bins": 5, "min": -1.0, "max": 1.0},
                     note="non-contiguous", grad=False)


@register("reduction", samples=_histc_samples, torch="torch.histc", dtypes=("float32", "float64"))
def histc(input: Tensor, bins: int = 100, min: float = 0.0, max: float = 0.0):
    """Counts of `bins` equal-width bins over [min, max] (the data's range when min == max), in input's dtype;
    values outside are ignored; max itself falls in the last bin."""
    x = input.reshape(-1)
    if min == max:
        lo, hi = x.min(), x.max()
        same = hi == lo
        lo = xb.where(same, lo - 1.0, lo)
        hi = xb.where(same, hi + 1.0, hi)
    else:
        lo, hi = min, max
    inside = (x >= lo) & (x <= hi)
    pos = ((x - lo) * float(bins) / (hi - lo)).astype("int64")
    pos = xb.minimum(xb.maximum(xb.where(inside, pos, 0), 0), bins - 1)
    counts = xb.scatter_add(xb.zeros((bins,), input.dtype), pos, xb.where(inside, 1.0, 0.0).astype(input.dtype))
    return counts


def _trace_samples(dtype, shapes):
    for m, k, _ in shapes.matrix:
        yield Sample((tensor(shapes, dtype, (m, k), "trace"),), note=f"({m}, {k})")
    if shapes.noncontig:
        yield Sample((noncontig(tensor(shapes, dtype, (6, 5), "tracenc")),), note="non-contiguous")


@register("reduction", samples=_trace_samples, torch="torch.trace", grad=True, dtypes=NUM)
def trace(input: Tensor):
    """Sum of the main diagonal of a matrix (integers give int64)."""
    if input.ndim != 2:
        raise ValueError(f"trace needs a matrix, got shape {input.shape}")
    n = input.shape[0] if input.shape[0] < input.shape[1] else input.shape[1]
    i = xb.arange(n)
    return _widen(input[i, i], None).sum()

"""Scans (category 5): cumulative sums, products, maxima and minima along one dim."""
from __future__ import annotations

import xbench as xb
from xbench import Tensor
from xbench.ops import BOOL, FLOATS, INTS, Sample

from ._samples import reduction, special, tensor
from ._util import wrap_dim

register = xb.ops.register
NUM = FLOATS + INTS

_SCAN = reduction(keepdim=False, full=False, multi_dim=False)


def _widen(x, dtype):
    if dtype is not None:
        return x.astype(dtype)
    return x if x.dtype in FLOATS else x.astype("int64")


@register("reduction", samples=_SCAN, torch="torch.cumsum", grad=True, dtypes=NUM + BOOL)
def cumsum(input: Tensor, dim: int, dtype=None):
    """Running sum along `dim` (integers and bools give int64; a 0-d input is its own running sum)."""
    d = wrap_dim(dim, input.ndim, "cumsum")
    return _widen(input, dtype) if input.ndim == 0 else xb.cumsum(_widen(input, dtype), d)


@register("reduction", samples=reduction(0.7, 1.3, ints=(-1, 2), keepdim=False, full=False, multi_dim=False),
          torch="torch.cumprod", dtypes=NUM + BOOL,
          notes="no gradient yet: the language has no reverse rule for product scans")
def cumprod(input: Tensor, dim: int, dtype=None):
    """Running product along `dim` (integers and bools give int64)."""
    d = wrap_dim(dim, input.ndim, "cumprod")
    return _widen(input, dtype) if input.ndim == 0 else xb.cumprod(_widen(input, dtype), d)


def _arg_scan(x, values, dim: int, kind: str):
    """PyTorch's indices for cummax/cummin: the last position so far holding the running extreme (NaN: the
    last NaN so far)."""
    d = dim % x.ndim
    pos = xb.iota(x.shape, d)
    hit = x == values
    if x.dtype in FLOATS:
        hit = hit | xb.isnan(x)
    return xb.cummax(xb.where(hit, pos, -1), d)


def _cum_extreme_samples(dtype, shapes):
    yield from reduction(ints=(-5, 5), keepdim=False, full=False, multi_dim=False, special_values=False)(dtype,
                                                                                                       shapes)
    if dtype in FLOATS and shapes.special:
        yield Sample((special(dtype, (2, 7), (1.0, 3.0, float("nan"), 5.0, 2.0, float("nan"), 7.0,
                                              -1.0, float("inf"), 2.0, float("-inf"), 3.0, -0.0, 0.0)),),
                     {"dim": -1}, note="NaN and infinities", grad=False)


@register("reduction", samples=_cum_extreme_samples, torch="torch.cummax", dtypes=NUM,
          notes="values and int64 indices (ties: the latest position, as PyTorch)")
def cummax(input: Tensor, dim: int):
    """(values, indices) of the running maximum along `dim`."""
    d = wrap_dim(dim, input.ndim, "cummax")
    if input.ndim == 0:
        return input, xb.zeros((), "int64")
    values = xb.cummax(input, d)
    return values, _arg_scan(input, values, dim, "max")


@register("reduction", samples=_cum_extreme_samples, torch="torch.cummin", dtypes=NUM,
          notes="values and int64 indices (ties: the latest position, as PyTorch)")
def cummin(input: Tensor, dim: int):
    """(values, indices) of the running minimum along `dim`."""
    d = wrap_dim(dim, input.ndim, "cummin")
    if input.ndim == 0:
        return input, xb.zeros((), "int64")
    values = xb.cummin(input, d)
    return values, _arg_scan(input, values, dim, "min")


def _lcse_samples(dtype, shapes):
    yield from _SCAN(dtype, shapes)
    yield Sample((tensor(shapes, dtype, (3, 16), "lcse", low=-20.0, high=20.0),), {"dim": -1},
                 note="spread of 40")


def _logaddexp(a, b):
    hi, lo = xb.maximum(a, b), xb.minimum(a, b)
    return hi + xb.log1p(xb.exp(xb.where(hi == lo, 0.0, lo - hi)))     # equal infinities: no inf - inf


@register("reduction", samples=_lcse_samples, torch="torch.logcumsumexp", grad=True)
def logcumsumexp(input: Tensor, dim: int):
    """log(cumsum(exp(input))) along `dim` as a log-add-exp scan (ceil(log2 n) doubling steps, 16-bit inputs in
    float32): no term underflows against a larger later one, and a NaN spoils only what follows it."""
    d = wrap_dim(dim, input.ndim, "logcumsumexp")
    if input.ndim == 0:
        return input
    out = input.astype("float32") if input.dtype in ("float16", "bfloat16") else input
    k = 1
    while k < input.shape[d]:
        shift = [(0, 0)] * input.ndim
        shift[d] = (k, -k)
        out = _logaddexp(out, xb.pad(out, shift, value=float("-inf")))
        k *= 2
    return out.astype(input.dtype)

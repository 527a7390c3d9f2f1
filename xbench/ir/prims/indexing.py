"""Data-dependent indexing: `gather` and `scatter_add`.

gather(x, i_1, ..., i_k; axes): the index tensors share one shape S; the result has shape S + the axes of x not
indexed, and reads x with axis axes[j] taken from i_j. (take, index_select, embedding and take_along_axis are all
this.) Negative indices count from the end; indices out of range are clamped — the rule every backend follows.

scatter_add(x, updates, i_1, ..., i_k; axes): a copy of x with `updates` added at those positions (the
transpose of gather, and its gradient). Duplicates accumulate.
"""
from __future__ import annotations

import numpy as np

from .. import expr as E
from ..expr import Cast, Select
from ..kernel import Kernel, ScatterAdd, Store
from . import Primitive

gather = Primitive("gather")
scatter_add = Primitive("scatter_add", root=True)


def _rest(shape, axes):
    return tuple(n for i, n in enumerate(shape) if i not in axes)


def _check_indices(x, idxs, axes):
    if len(idxs) != len(axes) or not idxs:
        raise ValueError("one index tensor per indexed axis")
    for i in idxs:
        if i.shape != idxs[0].shape or i.dtype not in ("int32", "int64", "int16", "int8", "uint8"):
            raise ValueError("index tensors must be integers of one shape")


def normalize(i: np.ndarray, n: int) -> np.ndarray:
    i = np.asarray(i, dtype=np.int64)
    return np.clip(np.where(i < 0, i + n, i), 0, max(n - 1, 0))


@gather.def_abstract
def _g_abstract(x, *idxs, axes):
    _check_indices(x, idxs, axes)
    return [(idxs[0].shape + _rest(x.shape, axes), x.dtype)]


def _full_index(x_shape, idx_arrays, axes, s_ndim):
    """numpy advanced index reading x at the gathered positions, result shaped S + rest."""
    rest = [i for i in range(len(x_shape)) if i not in axes]
    r = len(rest)
    index = [None] * len(x_shape)
    for a, i in zip(axes, idx_arrays):
        index[a] = normalize(i, x_shape[a]).reshape(i.shape + (1,) * r)
    for k, a in enumerate(rest):
        shape = [1] * (s_ndim + r)
        shape[s_ndim + k] = x_shape[a]
        index[a] = np.arange(x_shape[a]).reshape(shape)
    return tuple(index)


@gather.def_reference
def _g_ref(x, *idxs, axes):
    return x[_full_index(x.shape, idxs, axes, idxs[0].ndim)]


def gathered_index(x_shape, axes, idx_values, rest_index, known=None) -> tuple[E.Expr, ...]:
    """Index into x from loaded index values (wrapped and clamped) and the remaining output coordinates. A value
    whose range `known(value)` ((least, greatest) or None) puts inside the axis is used as it is: a loop variable
    (the iota along another axis of `take_along_axis`'s transpose), a read of a captured table (a resampling's
    source rows)."""
    sub: list[E.Expr | None] = [None] * len(x_shape)
    for a, v in zip(axes, idx_values):
        n = x_shape[a]
        r = known(v) if known is not None else None
        v = v if v.dtype == E.INDEX else Cast(v, E.INDEX)
        if r is not None and r[0] >= 0 and r[1] < n:
            sub[a] = v
            continue
        wrapped = Select(E.lt(v, E.ZERO), E.add(v, E.const(n)), v, E.INDEX)
        sub[a] = E.clamp(wrapped, 0, max(n - 1, 0))
    it = iter(rest_index)
    return tuple(s if s is not None else next(it) for s in sub)


@gather.def_lower
def _g_lower(eqn, index, ctx):
    x, *idxs = eqn.inputs
    axes = eqn.params["axes"]
    s = idxs[0].ndim
    values = [ctx.expr(i, tuple(index[:s])) for i in idxs]
    return ctx.expr(x, gathered_index(x.shape, axes, values, index[s:], ctx.value_range))


@gather.def_flops
def _g_flops(eqn):
    return 0


@scatter_add.def_abstract
def _s_abstract(x, updates, *idxs, axes):
    _check_indices(x, idxs, axes)
    want = idxs[0].shape + _rest(x.shape, axes)
    if updates.shape != want or updates.dtype != x.dtype:
        raise ValueError(f"updates must be {want} of {x.dtype}")
    return [(x.shape, x.dtype)]


@scatter_add.def_reference
def _s_ref(x, updates, *idxs, axes):
    out = np.array(x, copy=True)
    np.add.at(out, _full_index(x.shape, idxs, axes, idxs[0].ndim), updates)
    return out


@scatter_add.def_flops
def _s_flops(eqn):
    return eqn.inputs[1].size


@scatter_add.def_build
def _s_build(eqn, ctx):
    x, updates, *idxs = eqn.inputs
    axes = eqn.params["axes"]
    out = ctx.buffer(eqn.out)
    copy_axes = tuple(ctx.axis(n, "i") for n in x.shape)
    copy = Store(out, copy_axes, tuple(a.var for a in copy_axes), ctx.expr(x, tuple(a.var for a in copy_axes)))
    upd_axes = tuple(ctx.axis(n, "u") for n in updates.shape)
    uvars = tuple(a.var for a in upd_axes)
    s = idxs[0].ndim
    values = [ctx.expr(i, uvars[:s]) for i in idxs]
    extents = {a.name: a.extent for a in upd_axes}
    target = gathered_index(x.shape, axes, values, uvars[s:], lambda v: (0, extents[v.name] - 1)
                            if isinstance(v, E.Idx) and v.name in extents else ctx.value_range(v))
    scatter = ScatterAdd(out, upd_axes, target, ctx.expr(updates, uvars))
    return Kernel(ctx.kernel_name("scatter_add"), "scatter", (), [copy, scatter])

"""The two primitives with their own kernel templates: `scan` (cumsum, cumprod, cummax, cummin along one
axis) and `sort` (stable; values and the source positions along the axis)."""
from __future__ import annotations

import numpy as np

from ...dtypes import accumulator
from ..expr import Cast
from ..kernel import Kernel, Scan, Sort
from . import Primitive

scan = Primitive("scan", root=True)
sort = Primitive("sort", root=True, multiple_results=True)

SCAN_KINDS = ("sum", "prod", "max", "min")


def along_axis(ctx, shape: tuple[int, ...], axis: int):
    """Axes for a kernel that walks `axis` at every point of the others: (outer axes, the axis, full index)."""
    outer, index, along = [], [], None
    for i, n in enumerate(shape):
        ax = ctx.axis(n, "s" if i == axis else "i")
        if i == axis:
            along = ax
        else:
            outer.append(ax)
        index.append(ax.var)
    return outer, along, index


def scan_dtype(kind: str, dtype: str) -> str:
    if kind in ("sum", "prod") and dtype in ("bool", "int8", "uint8", "int16", "int32"):
        return "int64"
    return dtype


@scan.def_abstract
def _scan_abstract(x, *, kind, axis, reverse=False):
    if kind not in SCAN_KINDS:
        raise ValueError(f"unknown scan {kind!r}")
    return [(x.shape, scan_dtype(kind, x.dtype))]


@scan.def_reference
def _scan_ref(x, *, kind, axis, reverse=False):
    if reverse:
        x = np.flip(x, axis)
    fn = {"sum": np.cumsum, "prod": np.cumprod}.get(kind)
    out = fn(x, axis=axis) if fn else {"max": np.maximum, "min": np.minimum}[kind].accumulate(x, axis=axis)
    return np.flip(out, axis) if reverse else out


@scan.def_flops
def _scan_flops(eqn):
    return eqn.out.size


@scan.def_build
def _scan_build(eqn, ctx):
    x = eqn.inputs[0]
    p = eqn.params
    outer, along, index = along_axis(ctx, x.shape, p["axis"])
    acc = accumulator(x.dtype) if p["kind"] in ("sum", "prod") else x.dtype
    body = ctx.expr(x, tuple(index))
    if body.dtype != acc:
        body = Cast(body, acc)
    stage = Scan(ctx.buffer(eqn.out), along, tuple(index), body, p["kind"], acc, p.get("reverse", False))
    return Kernel(ctx.kernel_name("scan"), "scan", tuple(outer), [stage])


@sort.def_abstract
def _sort_abstract(x, *, axis, descending=False):
    return [(x.shape, x.dtype), (x.shape, "int64")]


@sort.def_reference
def _sort_ref(x, *, axis, descending=False):
    """Stable; NaN last ascending and first descending, as PyTorch. Descending is the stable ascending order of
    the reversed row, reversed (negating the keys would wrap INT64_MIN and leave NaN last)."""
    if descending:
        n = x.shape[axis]
        order = n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    return np.take_along_axis(x, order, axis=axis), order


@sort.def_flops
def _sort_flops(eqn):
    n = eqn.inputs[0].shape[eqn.params["axis"]]
    return int(eqn.inputs[0].size * max(1.0, np.log2(max(n, 1))))


@sort.def_build
def _sort_build(eqn, ctx):
    x = eqn.inputs[0]
    p = eqn.params
    outer, along, index = along_axis(ctx, x.shape, p["axis"])
    values, indices = eqn.outputs
    stage = Sort(ctx.buffer(values, optional=True), ctx.buffer(indices, optional=True), along, tuple(index),
                 ctx.expr(x, tuple(index)), p.get("descending", False))
    return Kernel(ctx.kernel_name("sort"), "sort", tuple(outer), [stage])

"""`reduce`: sum, prod, max, min, argmax, argmin, any, all over a set of axes (which are dropped)."""
from __future__ import annotations

import numpy as np

from ...dtypes import accumulator
from ..expr import Cast, Local
from ..kernel import Kernel, Reduce, Store
from . import Primitive

reduce = Primitive("reduce", root=True)

KINDS = ("sum", "prod", "max", "min", "argmax", "argmin", "any", "all")


def result_dtype(kind: str, dtype: str) -> str:
    if kind in ("argmax", "argmin"):
        return "int64"
    if kind in ("any", "all"):
        return "bool"
    if kind in ("sum", "prod") and dtype in ("bool", "int8", "uint8", "int16", "int32"):
        return "int64"
    return dtype


def acc_dtype(kind: str, dtype: str) -> str:
    return accumulator(dtype) if kind in ("sum", "prod") else dtype


@reduce.def_abstract
def _abstract(x, *, kind, axes):
    if kind not in KINDS:
        raise ValueError(f"unknown reduction {kind!r}")
    if kind in ("argmax", "argmin") and len(axes) != 1:
        raise ValueError(f"{kind} reduces exactly one axis")
    shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    return [(shape, result_dtype(kind, x.dtype))]


@reduce.def_reference
def _ref(x, *, kind, axes):
    if kind in ("argmax", "argmin"):
        return getattr(np, kind)(x, axis=axes[0])
    fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "any": np.any, "all": np.all}[kind]
    if kind in ("max", "min") and any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"{kind} of an empty axis has no value")
    return fn(x, axis=tuple(axes))


@reduce.def_flops
def _flops(eqn):
    return eqn.inputs[0].size


@reduce.def_build
def _build(eqn, ctx):
    x = eqn.inputs[0]
    kind, axes = eqn.params["kind"], eqn.params["axes"]
    outer, red, index = [], [], []
    for i, n in enumerate(x.shape):
        ax = ctx.axis(n, "r" if i in axes else "i")
        (red if i in axes else outer).append(ax)
        index.append(ax.var)
    body = ctx.expr(x, tuple(index))
    acc = acc_dtype(kind, x.dtype)
    if body.dtype != acc and kind in ("sum", "prod"):
        body = Cast(body, acc)
    local = ctx.local(kind, acc)
    idx_local = ctx.local(kind + "_i", "int64") if kind in ("argmax", "argmin") else None
    value = Local(idx_local, "int64") if idx_local else Local(local, acc)
    if value.dtype != eqn.out.dtype:
        value = Cast(value, eqn.out.dtype)
    stages = [Reduce(local, kind, tuple(red), body, acc, idx_local),
              Store(ctx.buffer(eqn.out), (), tuple(a.var for a in outer), value)]
    return Kernel(ctx.kernel_name(kind), "reduce", tuple(outer), stages)

"""Values with no operands: `iota` (the index along one axis) and `const` (a scalar filled over a shape,
or a captured array, which becomes a constant buffer of the program)."""
from __future__ import annotations

import numpy as np

from ...dtypes import is_float
from ..expr import Cast, Const
from . import Primitive

iota = Primitive("iota")
const = Primitive("const")


@iota.def_abstract
def _iota_abstract(*, shape, axis, dtype):
    return [(tuple(shape), dtype)]


@iota.def_reference
def _iota_ref(*, shape, axis, dtype):
    r = np.arange(shape[axis], dtype=np.float64 if is_float(dtype) else np.int64)
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return np.broadcast_to(r.reshape(view), shape)


@iota.def_lower
def _iota_lower(eqn, index, ctx):
    i = index[eqn.params["axis"]]
    return i if eqn.out.dtype == i.dtype else Cast(i, eqn.out.dtype)


@const.def_abstract
def _const_abstract(*, value, shape, dtype):
    return [(tuple(shape), dtype)]


@const.def_reference
def _const_ref(*, value, shape, dtype):
    arr = np.asarray(value)
    arr = arr.astype(np.float64 if is_float(dtype) else np.bool_ if dtype == "bool" else np.int64)
    return np.broadcast_to(arr, shape)


@const.def_lower
def _const_lower(eqn, index, ctx):
    value = eqn.params["value"]
    if np.ndim(value) == 0:
        v = value.item() if isinstance(value, np.generic | np.ndarray) else value
        return Const(bool(v) if eqn.out.dtype == "bool" else float(v) if is_float(eqn.out.dtype) else int(v),
                     eqn.out.dtype)
    return ctx.const_load(eqn, index)

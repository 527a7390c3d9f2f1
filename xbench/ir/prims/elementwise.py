"""Elementwise primitives: unary and binary scalar functions, `where`, `cast`. Operands have equal shapes
(the language inserts explicit broadcasts) and, for binary ops, equal dtypes (it inserts casts)."""
from __future__ import annotations

import numpy as np

from ...dtypes import is_float, is_int
from ..expr import Call, Cast, Select
from ..scalar import BINARY, UNARY
from . import Primitive

unary = Primitive("unary")
binary = Primitive("binary")
where = Primitive("where")
cast = Primitive("cast")


@unary.def_abstract
def _unary_abstract(x, *, fn):
    f = UNARY[fn]
    if not f.accepts_dtype(x.dtype):
        raise TypeError(f"{fn} does not accept {x.dtype}")
    return [(x.shape, f.result_dtype(x.dtype))]


@unary.def_reference
def _unary_ref(x, *, fn):
    with np.errstate(all="ignore"):             # IEEE special values are answers, not warnings
        return UNARY[fn].ref(x)


@unary.def_flops
def _unary_flops(eqn):
    return eqn.out.size * UNARY[eqn.params["fn"]].flops


@unary.def_lower
def _unary_lower(eqn, index, ctx):
    return Call(eqn.params["fn"], (ctx.expr(eqn.inputs[0], index),), eqn.out.dtype)


@binary.def_abstract
def _binary_abstract(a, b, *, fn):
    f = BINARY[fn]
    if a.shape != b.shape or a.dtype != b.dtype:
        raise TypeError(f"{fn} needs equal shapes and dtypes, got {a.type_str} and {b.type_str}")
    if not f.accepts_dtype(a.dtype):
        raise TypeError(f"{fn} does not accept {a.dtype}")
    return [(a.shape, f.result_dtype(a.dtype))]


@binary.def_reference
def _binary_ref(a, b, *, fn):
    with np.errstate(all="ignore"):
        return BINARY[fn].ref(a, b)


@binary.def_flops
def _binary_flops(eqn):
    return eqn.out.size * BINARY[eqn.params["fn"]].flops


@binary.def_lower
def _binary_lower(eqn, index, ctx):
    a, b = (ctx.expr(v, index) for v in eqn.inputs)
    return Call(eqn.params["fn"], (a, b), eqn.out.dtype)


@where.def_abstract
def _where_abstract(c, a, b):
    if not (c.shape == a.shape == b.shape) or c.dtype != "bool" or a.dtype != b.dtype:
        raise TypeError("where needs a bool condition and two operands of one shape and dtype")
    return [(a.shape, a.dtype)]


@where.def_reference
def _where_ref(c, a, b):
    return np.where(c, a, b)


@where.def_lower
def _where_lower(eqn, index, ctx):
    c, a, b = (ctx.expr(v, index) for v in eqn.inputs)
    return Select(c, a, b, eqn.out.dtype)


@cast.def_abstract
def _cast_abstract(x, *, dtype):
    return [(x.shape, dtype)]


def float_to_int(x: np.ndarray, dtype: str) -> np.ndarray:
    """A float -> int conversion as PyTorch gives it on x86: truncation toward zero; to int64 a value int64 cannot
    hold (NaN, +-inf, out of range) is INT64_MIN; narrower types convert through int32, where such a value is
    INT32_MIN, and then wrap (so it is 0 in int8, uint8 and int16, and 300.0 is 44 in int8)."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore"):
        t = np.trunc(x)
        if dtype == "int64":
            ok = (t >= -2.0**63) & (t < 2.0**63)
            return np.where(ok, np.where(ok, t, 0).astype(np.int64), np.int64(-2**63))
        ok = (t >= -2.0**31) & (t < 2.0**31)
        i32 = np.where(ok, np.where(ok, t, 0).astype(np.int64), -2**31)
    return i32.astype(dtype).astype(np.int64)


@cast.def_reference
def _cast_ref(x, *, dtype):
    """Exact where the target can hold the value (floats stay float64 in the reference); float -> int as
    `float_to_int`; narrowing ints wrap as numpy does; anything -> bool is `!= 0` (NaN is True)."""
    if dtype == "bool":
        return x != 0
    if is_float(dtype):
        return np.asarray(x, dtype=np.float64)
    if is_int(dtype):
        if np.issubdtype(np.asarray(x).dtype, np.floating):
            return float_to_int(x, dtype)
        return np.asarray(x).astype(dtype).astype(np.int64)
    raise TypeError(dtype)


@cast.def_lower
def _cast_lower(eqn, index, ctx):
    return Cast(ctx.expr(eqn.inputs[0], index), eqn.params["dtype"])

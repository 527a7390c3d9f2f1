"""Elementwise unary math (category 1), with PyTorch's dtype rules: integer inputs of floating functions give
float32; rounding functions return integers unchanged; predicates give bool."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import BOOL, FLOATS, INTS, Sample

from ._samples import cast, chain, only_float, pointwise_backward, tensor, unary

register = xb.ops.register
NUM = FLOATS + INTS


def _is_float(x) -> bool:
    return x.dtype in FLOATS


def _float_fn(name: str, fn, samples, aliases=(), grad=True, dtypes=NUM, doc=""):
    def op(input: Tensor):
        return fn(input)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc or (fn.__doc__ or "").strip()
    register("unary", aliases=aliases, samples=samples, torch=f"torch.{name}", grad=grad, dtypes=dtypes)(op)
    return op


WIDE = unary(-3.0, 3.0)
POSITIVE = unary(0.1, 10.0, ints=(1, 20))
UNIT = unary(-0.95, 0.95, ints=(-1, 2))

_float_fn("exp", xb.exp, unary(-5.0, 5.0, ints=(-10, 10)))
_float_fn("exp2", xb.exp2, unary(-5.0, 5.0, ints=(-10, 10)))
_float_fn("expm1", xb.expm1, unary(-5.0, 5.0, ints=(-10, 10)))
_float_fn("log", xb.log, POSITIVE)
_float_fn("log2", xb.log2, POSITIVE)
_float_fn("log10", xb.log10, POSITIVE)
_float_fn("log1p", xb.log1p, unary(-0.9, 10.0, ints=(0, 20)))
_float_fn("sqrt", xb.sqrt, POSITIVE)
_float_fn("rsqrt", xb.rsqrt, POSITIVE)
_float_fn("sin", xb.sin, WIDE)
_float_fn("cos", xb.cos, WIDE)
_float_fn("tan", xb.tan, unary(-1.3, 1.3, ints=(-1, 2)))
_float_fn("asin", xb.asin, UNIT, aliases=("arcsin",))
_float_fn("acos", xb.acos, UNIT, aliases=("arccos",))
_float_fn("atan", xb.atan, WIDE, aliases=("arctan",))
_float_fn("sinh", xb.sinh, WIDE)
_float_fn("cosh", xb.cosh, WIDE)
_float_fn("asinh", xb.asinh, WIDE, aliases=("arcsinh",))
_float_fn("acosh", xb.acosh, unary(1.05, 10.0, ints=(1, 20)), aliases=("arccosh",))
_float_fn("atanh", xb.atanh, UNIT, aliases=("arctanh",))
_float_fn("erf", xb.erf, WIDE)
_float_fn("erfc", xb.erfc, WIDE)


def _near_one(dtype, shapes):
    """erfinv close to +-1, where the cpu backend's guess once left it 0.019 off (0.982 <= |x| <= 0.9966)."""
    v = np.concatenate([np.linspace(0.97, 0.9999, 24), -np.linspace(0.982, 0.9966, 8)])
    yield Sample((cast(v, dtype),), note="near +-1", grad=False)


_float_fn("erfinv", xb.erfinv, chain(UNIT, only_float(_near_one)))


@register("unary", samples=WIDE, torch="torch.tanh", grad=True, dtypes=NUM)
def tanh(input: Tensor):
    """Hyperbolic tangent."""
    return xb.tanh(input)


@register("unary", samples=pointwise_backward(-3.0, 3.0, of=np.tanh), torch="torch.ops.aten.tanh_backward")
def tanh_backward(grad_output: Tensor, output: Tensor):
    """grad_output * (1 - output**2), from tanh's output (in float32 for 16-bit inputs)."""
    y = output.astype("float32") if output.dtype in ("float16", "bfloat16") else output
    g = grad_output.astype(y.dtype)
    return (g * (1.0 - y * y)).astype(output.dtype)


@register("unary", aliases=("absolute",), samples=unary(avoid=(0.0,)), torch="torch.abs", grad=True,
          dtypes=NUM)
def abs(input: Tensor):
    """|input|."""
    return xb.abs(input)


@register("unary", aliases=("negative",), samples=WIDE, torch="torch.neg", grad=True, dtypes=NUM)
def neg(input: Tensor):
    """-input."""
    return -input


@register("unary", samples=unary(avoid=(0.0,), ints=(1, 20)), torch="torch.reciprocal", grad=True, dtypes=NUM)
def reciprocal(input: Tensor):
    """1 / input (integers give float32)."""
    return xb.reciprocal(input)


@register("unary", samples=WIDE, torch="torch.square", grad=True, dtypes=NUM)
def square(input: Tensor):
    """input * input."""
    return input * input


def _sign(x):
    if x.dtype == "bool":
        return x
    return xb.where(x > 0, 1, xb.where(x < 0, -1, 0)).astype(x.dtype)


@register("unary", samples=unary(avoid=(0.0,)), torch="torch.sign", grad=True, dtypes=NUM)
def sign(input: Tensor):
    """-1, 0 or 1 (0 for NaN, as PyTorch)."""
    return _sign(input)


@register("unary", samples=unary(-5.0, 5.0, avoid=(0.0,)), torch="torch.sgn", grad=True, dtypes=NUM)
def sgn(input: Tensor):
    """sign, for real inputs."""
    return _sign(input)


def _rounding(name: str, fn, doc: str):
    def op(input: Tensor):
        return fn(input) if _is_float(input) else input
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    register("unary", samples=unary(-10.0, 10.0), torch=f"torch.{name}", grad=True, dtypes=NUM)(op)


_rounding("floor", xb.floor, "Round toward -inf (integers unchanged).")
_rounding("ceil", xb.ceil, "Round toward +inf (integers unchanged).")
_rounding("trunc", xb.trunc, "Round toward zero (integers unchanged).")


@register("unary", aliases=("fix",), samples=unary(-10.0, 10.0), torch="torch.fix", grad=True, dtypes=NUM)
def fix(input: Tensor):
    """trunc."""
    return xb.trunc(input) if _is_float(input) else input


def _round_samples(dtype, shapes):
    yield from unary(-10.0, 10.0)(dtype, shapes)
    if dtype in FLOATS:
        x = tensor(shapes, dtype, (16, 17), "round", low=-100.0, high=100.0)
        yield Sample((x,), {"decimals": 2}, note="decimals=2")
        yield Sample((x,), {"decimals": -1}, note="decimals=-1")


@register("unary", samples=_round_samples, torch="torch.round", grad=True, dtypes=NUM)
def round(input: Tensor, decimals: int = 0):
    """Round half to even; with `decimals`, round(input * 10**decimals) / 10**decimals as PyTorch does."""
    if not _is_float(input):
        if decimals == 0:
            return input
        raise ValueError("round with decimals on an integer tensor is not defined (as in PyTorch); cast to a "
                         "float dtype first")
    if decimals == 0:
        return xb.round(input)
    if decimals > 0:
        p = 10.0 ** decimals
        return xb.round(input * p) / p
    p = 10.0 ** -decimals
    return xb.round(input / p) * p


@register("unary", samples=unary(-10.0, 10.0), torch="torch.frac", grad=True, dtypes=FLOATS)
def frac(input: Tensor):
    """input - trunc(input)."""
    return input - xb.trunc(input)


def _predicate(name: str, fn, doc: str, dtypes=NUM):
    def op(input: Tensor):
        return fn(input) if _is_float(input) else xb.full(input.shape, name == "isfinite", "bool")
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    register("unary", samples=unary(), torch=f"torch.{name}", dtypes=dtypes)(op)


_predicate("isnan", xb.isnan, "True where NaN.")
_predicate("isinf", xb.isinf, "True where +-inf.")
_predicate("isfinite", xb.isfinite, "True where neither NaN nor +-inf.")


@register("unary", samples=unary(), torch="torch.isposinf", dtypes=NUM)
def isposinf(input: Tensor):
    """True where +inf."""
    return input == float("inf") if _is_float(input) else xb.full(input.shape, False, "bool")


@register("unary", samples=unary(), torch="torch.isneginf", dtypes=NUM)
def isneginf(input: Tensor):
    """True where -inf."""
    return input == float("-inf") if _is_float(input) else xb.full(input.shape, False, "bool")


@register("unary", samples=unary(), torch="torch.signbit", dtypes=NUM)
def signbit(input: Tensor):
    """True where the sign bit is set (-0.0 included)."""
    return xb.signbit(input) if _is_float(input) else input < 0


_FINFO_MAX = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
              "float64": 1.7976931348623157e308}


@register("unary", samples=unary(kwargs=({}, {"nan": 1.5, "posinf": 100.0, "neginf": -7.0})),
          torch="torch.nan_to_num", grad=True, dtypes=NUM)
def nan_to_num(input: Tensor, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None):
    """NaN -> `nan`, +inf -> `posinf` (default: the dtype's largest finite value), -inf -> `neginf`."""
    if not _is_float(input):
        return input
    big = _FINFO_MAX[input.dtype]
    hi = big if posinf is None else posinf
    lo = -big if neginf is None else neginf
    out = xb.where(xb.isnan(input), nan, input)
    out = xb.where(input == float("inf"), hi, out)
    return xb.where(input == float("-inf"), lo, out)


@register("unary", samples=unary(ints=(-1000, 1000)), torch="torch.bitwise_not", dtypes=INTS + BOOL)
def bitwise_not(input: Tensor):
    """~input (logical not for bool)."""
    return ~input


@register("unary", samples=unary(), torch="torch.logical_not", dtypes=NUM + BOOL)
def logical_not(input: Tensor):
    """True where input == 0."""
    return xb.logical_not(input)

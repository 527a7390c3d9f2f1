"""The scalar functions elementwise primitives apply: one table, read by every backend and pass.

Each entry says how many operands it takes, which element types it accepts, the type it returns, its numpy
meaning (the reference backend's rule, applied in float64 for floats) and its cost. Backends map the names to
their own code (numba expressions, CUDA intrinsics, Ascend C vector instructions).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..dtypes import is_bool, is_float, is_int


@dataclass(frozen=True)
class ScalarFn:
    name: str
    arity: int
    ref: Callable
    accepts: str = "number"    # number | float | int | bool | integral (int or bool) | any
    result: str = "same"       # same | bool | float
    flops: int = 1             # arithmetic operations per element (for rooflines)
    transcendental: bool = False
    symbol: str = ""           # infix Python operator where one exists ("+", "<", ...)

    def accepts_dtype(self, dtype: str) -> bool:
        return {
            "number": is_float(dtype) or is_int(dtype),
            "float": is_float(dtype),
            "int": is_int(dtype),
            "bool": is_bool(dtype),
            "integral": is_int(dtype) or is_bool(dtype),
            "any": True,
        }[self.accepts]

    def result_dtype(self, dtype: str) -> str:
        return {"same": dtype, "bool": "bool", "float": dtype if is_float(dtype) else "float32"}[self.result]


def _erf(x):
    from scipy.special import erf
    return erf(x)


def _erfc(x):
    from scipy.special import erfc
    return erfc(x)


def _erfinv(x):
    from scipy.special import erfinv
    return erfinv(x)


def _sigmoid(x):
    from scipy.special import expit
    return expit(x)


def _rsqrt(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1.0 / np.sqrt(x)


def _recip(x):
    with np.errstate(divide="ignore"):
        return 1.0 / x


def _div(a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(a, b)


# Integer division by zero: PyTorch raises ZeroDivisionError, which a kernel cannot; xbench gives numpy's 0 for
# //, % and fmod alike. INT_MIN // -1 wraps to INT_MIN and INT_MIN % -1 is 0, as in PyTorch and numpy.
def _int_div(f, a, b):
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        safe = np.where(b == 0, 1, b)
        return np.where(b == 0, 0, f(a, safe))


def _floordiv(a, b):
    if np.issubdtype(np.result_type(a, b), np.integer):
        return _int_div(np.floor_divide, a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor_divide(a, b)


def _mod(a, b):
    if np.issubdtype(np.result_type(a, b), np.integer):
        return _int_div(np.remainder, a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.remainder(a, b)


def _fmod(a, b):
    if np.issubdtype(np.result_type(a, b), np.integer):
        return _int_div(np.fmod, a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def _pow(a, b):
    """Integers to negative powers as PyTorch: 1 for a base of 1, +-1 by parity for -1, else 0."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if np.issubdtype(np.result_type(a, b), np.integer):
            a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
            neg = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
            return np.where(b < 0, neg, np.power(a, np.maximum(b, 0))).astype(np.result_type(a, b))
        return np.power(a, b)


def _safe(f):
    def g(*args):
        with np.errstate(all="ignore"):
            return f(*args)
    g.__name__ = getattr(f, "__name__", "fn")
    return g


def _sign(x):
    """-1, 0 or 1; 0 (+0.0) for NaN and for -0.0, as PyTorch."""
    s = np.sign(x)
    return np.where(np.isnan(s) | (s == 0), 0, s).astype(s.dtype) if s.dtype.kind == "f" else s


def _shl(a, b):
    return np.left_shift(a, b)


def _shr(a, b):
    return np.right_shift(a, b)


UNARY: dict[str, ScalarFn] = {f.name: f for f in [
    ScalarFn("neg", 1, np.negative, "number", symbol="-"),
    ScalarFn("abs", 1, np.abs, "number"),
    ScalarFn("sign", 1, _sign, "number"),
    ScalarFn("exp", 1, _safe(np.exp), "float", "float", transcendental=True),
    ScalarFn("exp2", 1, _safe(np.exp2), "float", "float", transcendental=True),
    ScalarFn("expm1", 1, _safe(np.expm1), "float", "float", transcendental=True),
    ScalarFn("log", 1, _safe(np.log), "float", "float", transcendental=True),
    ScalarFn("log2", 1, _safe(np.log2), "float", "float", transcendental=True),
    ScalarFn("log10", 1, _safe(np.log10), "float", "float", transcendental=True),
    ScalarFn("log1p", 1, _safe(np.log1p), "float", "float", transcendental=True),
    ScalarFn("sqrt", 1, _safe(np.sqrt), "float", "float", transcendental=True),
    ScalarFn("rsqrt", 1, _rsqrt, "float", "float", transcendental=True),
    ScalarFn("reciprocal", 1, _recip, "float", "float"),
    ScalarFn("sin", 1, _safe(np.sin), "float", "float", transcendental=True),
    ScalarFn("cos", 1, _safe(np.cos), "float", "float", transcendental=True),
    ScalarFn("tan", 1, _safe(np.tan), "float", "float", transcendental=True),
    ScalarFn("asin", 1, _safe(np.arcsin), "float", "float", transcendental=True),
    ScalarFn("acos", 1, _safe(np.arccos), "float", "float", transcendental=True),
    ScalarFn("atan", 1, _safe(np.arctan), "float", "float", transcendental=True),
    ScalarFn("sinh", 1, _safe(np.sinh), "float", "float", transcendental=True),
    ScalarFn("cosh", 1, _safe(np.cosh), "float", "float", transcendental=True),
    ScalarFn("tanh", 1, _safe(np.tanh), "float", "float", transcendental=True),
    ScalarFn("asinh", 1, _safe(np.arcsinh), "float", "float", transcendental=True),
    ScalarFn("acosh", 1, _safe(np.arccosh), "float", "float", transcendental=True),
    ScalarFn("atanh", 1, _safe(np.arctanh), "float", "float", transcendental=True),
    ScalarFn("erf", 1, _erf, "float", "float", transcendental=True),
    ScalarFn("erfc", 1, _erfc, "float", "float", transcendental=True),
    ScalarFn("erfinv", 1, _erfinv, "float", "float", transcendental=True),
    ScalarFn("sigmoid", 1, _sigmoid, "float", "float", flops=3, transcendental=True),
    ScalarFn("floor", 1, np.floor, "float"),
    ScalarFn("ceil", 1, np.ceil, "float"),
    ScalarFn("round", 1, np.round, "float"),
    ScalarFn("trunc", 1, np.trunc, "float"),
    ScalarFn("isnan", 1, np.isnan, "float", "bool"),
    ScalarFn("isinf", 1, np.isinf, "float", "bool"),
    ScalarFn("isfinite", 1, np.isfinite, "float", "bool"),
    ScalarFn("signbit", 1, np.signbit, "float", "bool"),
    ScalarFn("logical_not", 1, np.logical_not, "bool", "bool", symbol="not"),
    ScalarFn("bitwise_not", 1, np.invert, "integral", symbol="~"),
]}

BINARY: dict[str, ScalarFn] = {f.name: f for f in [
    ScalarFn("add", 2, np.add, "number", symbol="+"),
    ScalarFn("sub", 2, np.subtract, "number", symbol="-"),
    ScalarFn("mul", 2, np.multiply, "number", symbol="*"),
    ScalarFn("div", 2, _div, "float", "float", symbol="/"),
    ScalarFn("floordiv", 2, _floordiv, "number", symbol="//"),
    ScalarFn("mod", 2, _mod, "number", symbol="%"),
    ScalarFn("fmod", 2, _fmod, "number"),
    ScalarFn("pow", 2, _pow, "number", flops=1, transcendental=True, symbol="**"),
    ScalarFn("maximum", 2, np.maximum, "number"),
    ScalarFn("minimum", 2, np.minimum, "number"),
    ScalarFn("fmax", 2, np.fmax, "number"),
    ScalarFn("fmin", 2, np.fmin, "number"),
    ScalarFn("atan2", 2, _safe(np.arctan2), "float", "float", transcendental=True),
    ScalarFn("hypot", 2, _safe(np.hypot), "float", "float", flops=3, transcendental=True),
    ScalarFn("copysign", 2, np.copysign, "float"),
    ScalarFn("eq", 2, np.equal, "any", "bool", symbol="=="),
    ScalarFn("ne", 2, np.not_equal, "any", "bool", symbol="!="),
    ScalarFn("lt", 2, np.less, "any", "bool", symbol="<"),
    ScalarFn("le", 2, np.less_equal, "any", "bool", symbol="<="),
    ScalarFn("gt", 2, np.greater, "any", "bool", symbol=">"),
    ScalarFn("ge", 2, np.greater_equal, "any", "bool", symbol=">="),
    ScalarFn("logical_and", 2, np.logical_and, "bool", "bool", symbol="and"),
    ScalarFn("logical_or", 2, np.logical_or, "bool", "bool", symbol="or"),
    ScalarFn("logical_xor", 2, np.logical_xor, "bool", "bool"),
    ScalarFn("bitwise_and", 2, np.bitwise_and, "integral", symbol="&"),
    ScalarFn("bitwise_or", 2, np.bitwise_or, "integral", symbol="|"),
    ScalarFn("bitwise_xor", 2, np.bitwise_xor, "integral", symbol="^"),
    ScalarFn("shl", 2, _shl, "int", symbol="<<"),
    ScalarFn("shr", 2, _shr, "int", symbol=">>"),
]}


def lookup(name: str, arity: int) -> ScalarFn:
    table = UNARY if arity == 1 else BINARY
    if name not in table:
        raise KeyError(f"no {'unary' if arity == 1 else 'binary'} scalar function {name!r}")
    return table[name]

"""The `xb.*` functions of the operator language. Each checks its arguments, applies numpy/PyTorch
broadcasting and type promotion, and records primitives of the graph IR."""
from __future__ import annotations

import builtins
import math
from collections.abc import Sequence

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError, ShapeError, TraceError, user_location
from ..ir.scalar import BINARY, UNARY
from . import amp
from .tensor import Tensor
from .trace import bind, constant

_Scalar = (bool, int, float, np.bool_, np.integer, np.floating)


def _err(cls, msg, hint=None):
    return cls(msg, hint=hint, loc=user_location())


def asarray(x, dtype=None) -> Tensor:
    """A Tensor from a Tensor, a Python scalar or a numpy array (captured as a constant)."""
    if isinstance(x, Tensor):
        return x if dtype is None else cast(x, dtype)
    if isinstance(x, (list, tuple)) and builtins.any(isinstance(e, Tensor) for e in x):
        return stack([asarray(e) for e in x])
    if isinstance(x, (np.ndarray, list, tuple) + _Scalar):
        return constant(x, D.canonical(dtype) if dtype else None)
    raise _err(TraceError, f"cannot use a {type(x).__name__} as a tensor",
               "pass numpy arrays as operator arguments; inside, use Tensors, Python numbers or numpy constants")


def _norm_axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise _err(ShapeError, f"axis {axis} is out of range for a tensor with {ndim} dims",
                   f"use an axis in [{-ndim}, {ndim - 1}]")
    return axis % builtins.max(ndim, 1)


def _norm_axes(axis, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        return (_norm_axis(int(axis), ndim),)
    out = tuple(sorted({_norm_axis(int(a), ndim) for a in axis}))
    return out


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    ndim = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim):
        sizes = {s[i - ndim + len(s)] for s in shapes if i - ndim + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise _err(ShapeError, "shapes " + " and ".join(str(tuple(s)) for s in shapes) +
                       " do not broadcast", "make the sizes equal, or 1 where you mean to broadcast "
                                            "(x[:, None] adds an axis of size 1)")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x, shape) -> Tensor:
    x = asarray(x)
    shape = tuple(int(s) for s in shape)
    if x.shape == shape:
        return x
    if len(shape) < x.ndim:
        raise _err(ShapeError, f"cannot broadcast {x.shape} to the smaller rank {shape}")
    broadcast_shapes(x.shape, shape)
    lead = len(shape) - x.ndim
    for i, n in enumerate(x.shape):
        if n not in (1, shape[lead + i]):
            raise _err(ShapeError, f"cannot broadcast {x.shape} to {shape}")
    return bind("broadcast", x, shape=shape, dims=tuple(range(lead, len(shape))))


def cast(x, dtype) -> Tensor:
    x = asarray(x)
    try:
        dtype = D.canonical(dtype)
    except ValueError as exc:
        raise _err(DTypeError, str(exc)) from None
    if x.dtype == dtype:
        return x
    return bind("cast", x, dtype=dtype)


def _promote_pair(a, b) -> str:
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb:
        if (a.ndim == 0) != (b.ndim == 0):
            # PyTorch: a 0-d tensor widens a dimensioned one only when its category is higher
            dim, zero = (b, a) if a.ndim == 0 else (a, b)
            return D.DType(dim.dtype) if D.category(zero.dtype) <= D.category(dim.dtype) else D.DType(zero.dtype)
        return D.promote(a.dtype, b.dtype)
    if ta:
        return D.promote_weak(a.dtype, b) if isinstance(b, _Scalar) else D.promote(a.dtype, asarray(b).dtype)
    if tb:
        return D.promote_weak(b.dtype, a) if isinstance(a, _Scalar) else D.promote(asarray(a).dtype, b.dtype)
    return D.scalar_dtype(a)


def _operand(x, dtype: str, shape: tuple[int, ...]) -> Tensor:
    if isinstance(x, _Scalar):
        return constant(x, dtype, shape)
    return broadcast_to(cast(asarray(x), dtype), shape)


_LOGICAL = {"and": ("logical_and", "bitwise_and"), "or": ("logical_or", "bitwise_or"),
            "xor": ("logical_xor", "bitwise_xor")}


def binary(fn: str, a, b) -> Tensor:
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = asarray(a)
    dtype = _promote_pair(a, b)
    if fn in _LOGICAL:
        if D.is_float(dtype):
            raise _err(DTypeError, f"'{ {'and': '&', 'or': '|', 'xor': '^'}[fn] }' needs bool or integer tensors, "
                                   f"got {dtype}", "compare first (x > 0) or use xb.logical_and / xb.where")
        fn = _LOGICAL[fn][0 if dtype == "bool" else 1]
    f = BINARY[fn]
    if f.accepts == "float" and not D.is_float(dtype):
        dtype = D.float32
    if not f.accepts_dtype(dtype):
        raise _err(DTypeError, f"{fn} does not accept {dtype} operands",
                   "cast first with .astype(...)" if dtype != "bool" else "cast bools with .astype(xb.int32)")
    sa = a.shape if isinstance(a, Tensor) else np.shape(a)
    sb = b.shape if isinstance(b, Tensor) else np.shape(b)
    shape = broadcast_shapes(tuple(sa), tuple(sb))
    return bind("binary", _operand(a, dtype, shape), _operand(b, dtype, shape), fn=fn)


def unary(fn: str, x) -> Tensor:
    x = asarray(x)
    f = UNARY[fn]
    if f.accepts == "float" and not D.is_float(x.dtype):
        x = cast(x, D.float32)
    if f.transcendental:
        x = cast(x, amp.full_precision(x.dtype))
    if not f.accepts_dtype(x.dtype):
        raise _err(DTypeError, f"{fn} does not accept {x.dtype}",
                   "use xb.logical_not for bools and ~ for integers" if fn in ("logical_not", "bitwise_not")
                   else "cast first with .astype(...)")
    return bind("unary", x, fn=fn)


def _unary_fn(name: str, doc: str):
    def f(x):
        return unary(name, x)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


exp = _unary_fn("exp", "e**x, elementwise.")
exp2 = _unary_fn("exp2", "2**x, elementwise.")
expm1 = _unary_fn("expm1", "e**x - 1, accurate near 0.")
log = _unary_fn("log", "Natural logarithm.")
log2 = _unary_fn("log2", "Base-2 logarithm.")
log10 = _unary_fn("log10", "Base-10 logarithm.")
log1p = _unary_fn("log1p", "log(1 + x), accurate near 0.")
sqrt = _unary_fn("sqrt", "Square root.")
rsqrt = _unary_fn("rsqrt", "1 / sqrt(x).")
reciprocal = _unary_fn("reciprocal", "1 / x.")
sin = _unary_fn("sin", "Sine.")
cos = _unary_fn("cos", "Cosine.")
tan = _unary_fn("tan", "Tangent.")
asin = _unary_fn("asin", "Inverse sine.")
acos = _unary_fn("acos", "Inverse cosine.")
atan = _unary_fn("atan", "Inverse tangent.")
sinh = _unary_fn("sinh", "Hyperbolic sine.")
cosh = _unary_fn("cosh", "Hyperbolic cosine.")
tanh = _unary_fn("tanh", "Hyperbolic tangent.")
asinh = _unary_fn("asinh", "Inverse hyperbolic sine.")
acosh = _unary_fn("acosh", "Inverse hyperbolic cosine.")
atanh = _unary_fn("atanh", "Inverse hyperbolic tangent.")
erf = _unary_fn("erf", "The error function.")
erfc = _unary_fn("erfc", "1 - erf(x).")
erfinv = _unary_fn("erfinv", "Inverse of erf.")
sigmoid = _unary_fn("sigmoid", "1 / (1 + exp(-x)).")
floor = _unary_fn("floor", "Round toward -inf.")
ceil = _unary_fn("ceil", "Round toward +inf.")
round = _unary_fn("round", "Round half to even.")
trunc = _unary_fn("trunc", "Round toward zero.")
isnan = _unary_fn("isnan", "True where NaN.")
isinf = _unary_fn("isinf", "True where ±inf.")
isfinite = _unary_fn("isfinite", "True where neither NaN nor ±inf.")
signbit = _unary_fn("signbit", "True where the sign bit is set (-0.0 included).")


def abs(x) -> Tensor:
    x = asarray(x)
    return x if x.dtype == "bool" else unary("abs", x)


def sign(x) -> Tensor:
    return unary("sign", x)


def negative(x) -> Tensor:
    x = asarray(x)
    if x.dtype == "bool":
        raise _err(DTypeError, "negating a bool tensor", "use ~x or xb.logical_not(x)")
    return unary("neg", x)


def invert(x) -> Tensor:
    x = asarray(x)
    if x.dtype == "bool":
        return unary("logical_not", x)
    if D.is_float(x.dtype):
        raise _err(DTypeError, "~ needs a bool or integer tensor", "use -x to negate, or xb.logical_not(x > 0)")
    return unary("bitwise_not", x)


def logical_not(x) -> Tensor:
    return unary("logical_not", cast(x, "bool"))


def logical_and(a, b) -> Tensor:
    return binary("logical_and", cast(asarray(a), "bool"), cast(asarray(b), "bool"))


def logical_or(a, b) -> Tensor:
    return binary("logical_or", cast(asarray(a), "bool"), cast(asarray(b), "bool"))


def logical_xor(a, b) -> Tensor:
    return binary("logical_xor", cast(asarray(a), "bool"), cast(asarray(b), "bool"))


def square(x) -> Tensor:
    x = asarray(x)
    return x * x


def power(a, b) -> Tensor:
    if isinstance(b, _Scalar) and not isinstance(b, (bool, np.bool_)) and isinstance(a, Tensor):
        if b == 2:
            return a * a
        if b == 1:
            return a
        if b == 0.5 and D.is_float(a.dtype):
            return sqrt(a)
        if b == -0.5 and D.is_float(a.dtype):
            return rsqrt(a)
        if b == -1 and D.is_float(a.dtype):
            return reciprocal(a)
        if b == 3:
            return a * a * a
    return binary("pow", a, b)


def _binary_fn(name: str, doc: str):
    def f(a, b):
        return binary(name, a, b)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


add = _binary_fn("add", "a + b.")
subtract = _binary_fn("sub", "a - b.")
multiply = _binary_fn("mul", "a * b.")
divide = _binary_fn("div", "a / b (true division; integers give float32).")
floor_divide = _binary_fn("floordiv", "a // b (rounds toward -inf).")
remainder = _binary_fn("mod", "a % b (sign of b, as Python and PyTorch's remainder).")
fmod = _binary_fn("fmod", "C fmod (sign of a).")
maximum = _binary_fn("maximum", "Elementwise maximum; NaN propagates.")
minimum = _binary_fn("minimum", "Elementwise minimum; NaN propagates.")
fmax = _binary_fn("fmax", "Elementwise maximum ignoring NaN.")
fmin = _binary_fn("fmin", "Elementwise minimum ignoring NaN.")
atan2 = _binary_fn("atan2", "Angle of (b, a).")
hypot = _binary_fn("hypot", "sqrt(a*a + b*b).")
copysign = _binary_fn("copysign", "|a| with the sign of b.")
equal = _binary_fn("eq", "a == b.")
not_equal = _binary_fn("ne", "a != b.")
less = _binary_fn("lt", "a < b.")
less_equal = _binary_fn("le", "a <= b.")
greater = _binary_fn("gt", "a > b.")
greater_equal = _binary_fn("ge", "a >= b.")


def where(cond, a, b) -> Tensor:
    """`a` where `cond` is true, else `b` (all three broadcast together)."""
    c = asarray(cond)
    if c.dtype != "bool":
        c = c != 0
    dtype = _promote_pair(a, b) if isinstance(a, Tensor) or isinstance(b, Tensor) else \
        D.promote(D.scalar_dtype(a), D.scalar_dtype(b)) if isinstance(a, _Scalar) and isinstance(b, _Scalar) \
        else D.promote(asarray(a).dtype, asarray(b).dtype)
    sa = a.shape if isinstance(a, Tensor) else np.shape(a)
    sb = b.shape if isinstance(b, Tensor) else np.shape(b)
    shape = broadcast_shapes(c.shape, tuple(sa), tuple(sb))
    return bind("where", broadcast_to(c, shape), _operand(a, dtype, shape), _operand(b, dtype, shape))


def clip(x, lo=None, hi=None) -> Tensor:
    x = asarray(x)
    if lo is not None:
        x = maximum(x, lo)
    if hi is not None:
        x = minimum(x, hi)
    return x


clamp = clip


# ---- shape ----------------------------------------------------------------------------------------------

def reshape(x, shape) -> Tensor:
    x = asarray(x)
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = [int(s) for s in shape]
    if shape.count(-1) > 1:
        raise _err(ShapeError, "reshape takes at most one -1")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
        if known == 0 or x.size % known:
            raise _err(ShapeError, f"cannot reshape {x.shape} ({x.size} elements) to {tuple(shape)}")
        shape[shape.index(-1)] = x.size // known
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise _err(ShapeError, f"cannot reshape {x.shape} ({x.size} elements) to {tuple(shape)} "
                               f"({int(np.prod(shape))} elements)", "the product of the sizes must stay the same")
    if tuple(shape) == x.shape:
        return x
    return bind("reshape", x, shape=tuple(shape))


def transpose(x, axes=None) -> Tensor:
    x = asarray(x)
    perm = tuple(reversed(range(x.ndim))) if axes is None else tuple(_norm_axis(a, x.ndim) for a in axes)
    if sorted(perm) != list(range(x.ndim)):
        raise _err(ShapeError, f"{tuple(axes)} is not a permutation of the {x.ndim} axes",
                   f"name every axis once, e.g. {tuple(reversed(range(x.ndim)))}")
    if perm == tuple(range(x.ndim)):
        return x
    return bind("permute", x, perm=perm)


def swapaxes(x, a: int, b: int) -> Tensor:
    x = asarray(x)
    perm = list(range(x.ndim))
    a, b = _norm_axis(a, x.ndim), _norm_axis(b, x.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def moveaxis(x, source: int, destination: int) -> Tensor:
    x = asarray(x)
    s, d = _norm_axis(source, x.ndim), _norm_axis(destination, x.ndim)
    perm = [i for i in range(x.ndim) if i != s]
    perm.insert(d, s)
    return transpose(x, perm)


def expand_dims(x, axis: int) -> Tensor:
    x = asarray(x)
    axis = _norm_axis(axis, x.ndim + 1)
    return reshape(x, x.shape[:axis] + (1,) + x.shape[axis:])


def squeeze(x, axis=None) -> Tensor:
    x = asarray(x)
    if axis is None:
        axes = [i for i, n in enumerate(x.shape) if n == 1]
    else:
        axes = list(_norm_axes(axis, x.ndim))
        for a in axes:
            if x.shape[a] != 1:
                raise _err(ShapeError, f"cannot squeeze axis {a} of size {x.shape[a]}")
    return reshape(x, tuple(n for i, n in enumerate(x.shape) if i not in axes))


def flip(x, axis=None) -> Tensor:
    x = asarray(x)
    axes = _norm_axes(axis, x.ndim)
    start = tuple(n - 1 if i in axes and n else 0 for i, n in enumerate(x.shape))
    step = tuple(-1 if i in axes else 1 for i in range(x.ndim))
    return bind("slice", x, start=start, step=step, size=x.shape)


def concat(xs: Sequence, axis: int = 0) -> Tensor:
    xs = [asarray(x) for x in xs]
    if not xs:
        raise _err(ShapeError, "concat needs at least one tensor")
    dtype = xs[0].dtype
    for x in xs[1:]:
        dtype = D.promote(dtype, x.dtype)
    nd = xs[0].ndim
    if builtins.any(x.ndim != nd for x in xs):
        raise _err(ShapeError, "concat needs tensors of one rank, got " + ", ".join(str(x.shape) for x in xs))
    axis = _norm_axis(axis, nd)
    for x in xs[1:]:
        if builtins.any(a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape)) if i != axis):
            raise _err(ShapeError, f"concat along axis {axis}: shapes {xs[0].shape} and {x.shape} differ "
                                   "in another axis")
    xs = [cast(x, dtype) for x in xs]
    if len(xs) == 1:
        return xs[0]
    return bind("concat", *xs, axis=axis)


concatenate = concat


def stack(xs: Sequence, axis: int = 0) -> Tensor:
    xs = [asarray(x) for x in xs]
    axis = _norm_axis(axis, xs[0].ndim + 1)
    return concat([expand_dims(x, axis) for x in xs], axis)


def pad(x, pad_width, mode: str = "constant", value=0) -> Tensor:
    """numpy-style padding: `pad_width` is an int, a (before, after) pair, or one pair per axis. Modes:
    constant, reflect, edge (replicate), circular (wrap). Negative widths crop."""
    x = asarray(x)
    mode = {"replicate": "edge", "wrap": "circular"}.get(mode, mode)
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64).reshape(-1, 2) if np.ndim(pad_width) else
                         np.asarray([[pad_width, pad_width]]), (x.ndim, 2)) if np.size(pad_width) != 2 * x.ndim \
        else np.asarray(pad_width, dtype=np.int64).reshape(x.ndim, 2)
    lo, hi = [int(v) for v in pw[:, 0]], [int(v) for v in pw[:, 1]]
    if builtins.min(lo + hi, default=0) < 0:   # crop first
        start = tuple(builtins.max(-l, 0) for l in lo)
        size = tuple(n - builtins.max(-l, 0) - builtins.max(-h, 0) for n, l, h in zip(x.shape, lo, hi))
        x = bind("slice", x, start=start, step=(1,) * x.ndim, size=size)
        lo, hi = [builtins.max(v, 0) for v in lo], [builtins.max(v, 0) for v in hi]
    if not builtins.any(lo + hi):
        return x
    if mode not in ("constant", "reflect", "edge", "circular"):
        raise _err(ShapeError, f"unknown pad mode {mode!r}", "use constant, reflect, edge (replicate) or circular")
    if not D.is_float(x.dtype):
        if isinstance(value, (float, np.floating)) and not math.isfinite(value):
            raise _err(DTypeError, f"cannot pad a {x.dtype} tensor with {value}",
                       "pad with an integer value, or cast to a float type first")
        from .trace import wrap_int
        value = bool(value) if x.dtype == "bool" else wrap_int(int(value), x.dtype)
    return bind("pad", x, lo=tuple(lo), hi=tuple(hi), value=float(value) if D.is_float(x.dtype) else value,
                mode=mode)


def sliding_window(x, window: Sequence[int], axes: Sequence[int] | None = None, stride=1, dilation=1) -> Tensor:
    """Windows of `window` sizes over `axes` (default: the last len(window) axes); the result has the window
    counts in place of those axes and the window taps appended at the end (numpy's sliding_window_view,
    with strides and dilation). Convolution is a contraction over these taps; pooling a reduction."""
    x = asarray(x)
    window = tuple(int(w) for w in window)
    axes = tuple(range(x.ndim - len(window), x.ndim)) if axes is None else tuple(_norm_axis(a, x.ndim) for a in axes)
    stride = (stride,) * len(window) if isinstance(stride, int) else tuple(stride)
    dilation = (dilation,) * len(window) if isinstance(dilation, int) else tuple(dilation)
    for a, w, d in zip(axes, window, dilation):
        if d * (w - 1) + 1 > x.shape[a]:
            raise _err(ShapeError, f"a window of {w} (dilation {d}) does not fit axis {a} of size {x.shape[a]}",
                       "pad the input first (xb.pad) or use a smaller window")
    return bind("window", x, axes=axes, size=window, stride=stride, dilation=dilation)


# ---- reductions ---------------------------------------------------------------------------------------

def _reduce(x, kind: str, axis, keepdims: bool) -> Tensor:
    x = asarray(x)
    if kind in ("sum", "prod"):
        x = cast(x, amp.full_precision(x.dtype))
    axes = _norm_axes(axis, x.ndim)
    if kind in ("sum", "prod") and x.dtype == "bool":
        x = cast(x, "int64")
    if kind in ("any", "all") and x.dtype != "bool":
        x = x != 0
    if kind in ("max", "min"):
        for a in axes:
            if x.shape[a] == 0:
                raise _err(ShapeError, f"{kind} over an empty axis ({a}) has no value",
                           "reduce a non-empty axis, or use sum")
    if not axes:
        return x
    if kind in ("sum", "prod", "any", "all") and builtins.any(x.shape[a] == 0 for a in axes):
        # over an empty axis: the identity (backends need not handle a loop with no trip)
        from ..ir.prims.reduce import result_dtype
        shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
        out = full(shape, {"sum": 0, "prod": 1, "any": False, "all": True}[kind], result_dtype(kind, x.dtype))
    else:
        out = bind("reduce", x, kind=kind, axes=axes)
    if keepdims:
        out = reshape(out, tuple(1 if i in axes else n for i, n in enumerate(x.shape)))
    return out


def sum(x, axis=None, keepdims=False, dtype=None) -> Tensor:
    out = _reduce(x, "sum", axis, keepdims)
    return cast(out, dtype) if dtype else out


def prod(x, axis=None, keepdims=False) -> Tensor:
    return _reduce(x, "prod", axis, keepdims)


def max(x, axis=None, keepdims=False) -> Tensor:
    return _reduce(x, "max", axis, keepdims)


def min(x, axis=None, keepdims=False) -> Tensor:
    return _reduce(x, "min", axis, keepdims)


amax, amin = max, min


def any(x, axis=None, keepdims=False) -> Tensor:
    return _reduce(x, "any", axis, keepdims)


def all(x, axis=None, keepdims=False) -> Tensor:
    return _reduce(x, "all", axis, keepdims)


def mean(x, axis=None, keepdims=False) -> Tensor:
    x = asarray(x)
    if not D.is_float(x.dtype):
        x = cast(x, D.float32)
    axes = _norm_axes(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    return _reduce(x, "sum", axes, keepdims) * (1.0 / count if count else math.nan)


def var(x, axis=None, keepdims=False, ddof=0) -> Tensor:
    x = asarray(x)
    if not D.is_float(x.dtype):
        x = cast(x, D.float32)
    axes = _norm_axes(axis, x.ndim)
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    centered = x - mean(x, axes, keepdims=True)
    denom = builtins.max(count - ddof, 0)
    return _reduce(centered * centered, "sum", axes, keepdims) * (1.0 / denom if denom else math.nan)


def std(x, axis=None, keepdims=False, ddof=0) -> Tensor:
    return sqrt(var(x, axis, keepdims, ddof))


def _arg(x, kind: str, axis, keepdims: bool) -> Tensor:
    x = asarray(x)
    if axis is None:
        if x.size == 0:
            raise _err(ShapeError, f"{kind} of an empty tensor {x.shape} has no value")
        out = bind("reduce", reshape(x, (-1,)), kind=kind, axes=(0,))
        return reshape(out, (1,) * x.ndim) if keepdims else out
    a = _norm_axis(axis, x.ndim)
    if x.shape[a] == 0:
        raise _err(ShapeError, f"{kind} over an empty axis has no value")
    out = bind("reduce", x, kind=kind, axes=(a,))
    return expand_dims(out, a) if keepdims else out


def argmax(x, axis=None, keepdims=False) -> Tensor:
    return _arg(x, "argmax", axis, keepdims)


def argmin(x, axis=None, keepdims=False) -> Tensor:
    return _arg(x, "argmin", axis, keepdims)


def logsumexp(x, axis=None, keepdims=False) -> Tensor:
    x = asarray(x)
    m = max(x, axis, keepdims=True)
    s = log(sum(exp(x - m), axis, keepdims=True)) + m
    return s if keepdims else squeeze(s, _norm_axes(axis, x.ndim))


def _scan(x, kind: str, axis: int | None, reverse: bool = False) -> Tensor:
    x = asarray(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if kind in ("sum", "prod") and x.dtype == "bool":
        x = cast(x, "int64")
    return bind("scan", x, kind=kind, axis=_norm_axis(axis, x.ndim), reverse=reverse)


def cumsum(x, axis: int | None = -1) -> Tensor:
    return _scan(x, "sum", axis)


def cumprod(x, axis: int | None = -1) -> Tensor:
    return _scan(x, "prod", axis)


def cummax(x, axis: int = -1) -> Tensor:
    return _scan(x, "max", axis)


def cummin(x, axis: int = -1) -> Tensor:
    return _scan(x, "min", axis)


# ---- contraction --------------------------------------------------------------------------------------

def _contract(a: Tensor, b: Tensor, lc, rc, lb=(), rb=()) -> Tensor:
    dtype = amp.contraction_dtype(D.promote(a.dtype, b.dtype))
    a, b = cast(a, dtype), cast(b, dtype)
    if builtins.any(a.shape[i] == 0 for i in lc):   # a sum of no products: zeros (no backend loops zero times)
        shape = tuple(a.shape[i] for i in lb) + tuple(n for i, n in enumerate(a.shape) if i not in lc and i not in lb) \
            + tuple(n for i, n in enumerate(b.shape) if i not in rc and i not in rb)
        return zeros(shape, dtype)
    return bind("contract", a, b, lhs_contract=tuple(lc), rhs_contract=tuple(rc), lhs_batch=tuple(lb),
                rhs_batch=tuple(rb))


def matmul(a, b) -> Tensor:
    """numpy's matmul: 1-D operands are promoted and the added axis removed; batch dims broadcast."""
    a, b = asarray(a), asarray(b)
    if a.ndim == 0 or b.ndim == 0:
        raise _err(ShapeError, "matmul needs tensors with at least one dim", "use * for scalars")
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = reshape(a, (1, a.shape[0]))
    if vb:
        b = reshape(b, (b.shape[0], 1))
    if a.shape[-1] != b.shape[-2]:
        raise _err(ShapeError, f"matmul: the inner sizes differ: {a.shape} @ {b.shape} "
                               f"({a.shape[-1]} vs {b.shape[-2]})",
                   "the last axis of the left operand must equal the second-to-last of the right; transpose "
                   "one of them (.T / .mT) if that is what you meant")
    if b.ndim == 2:
        out = _contract(a, b, (a.ndim - 1,), (0,))
    elif a.ndim == 2:
        out = _contract(a, b, (1,), (b.ndim - 2,))                       # (M, B..., N)
        out = moveaxis(out, 0, -2)
    else:
        batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a = broadcast_to(a, batch + a.shape[-2:])
        b = broadcast_to(b, batch + b.shape[-2:])
        nb = len(batch)
        out = _contract(a, b, (nb + 1,), (nb,), tuple(range(nb)), tuple(range(nb)))
    if va:
        out = squeeze(out, -2)
    if vb:
        out = squeeze(out, -1)
    return out


def dot(a, b) -> Tensor:
    a, b = asarray(a), asarray(b)
    if a.ndim == 1 and b.ndim == 1:
        if a.shape != b.shape:
            raise _err(ShapeError, f"dot of vectors of different lengths {a.shape[0]} and {b.shape[0]}")
        return _contract(a, b, (0,), (0,))
    return matmul(a, b)


def tensordot(a, b, axes=2) -> Tensor:
    a, b = asarray(a), asarray(b)
    if isinstance(axes, int):
        la, lb = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        la, lb = [list(np.atleast_1d(x)) for x in axes]
    return _contract(a, b, [_norm_axis(i, a.ndim) for i in la], [_norm_axis(i, b.ndim) for i in lb])


def einsum(subscripts: str, *operands) -> Tensor:
    """Einstein summation over one or more operands (`...` allowed); pairs are contracted left to right."""
    ops = [asarray(x) for x in operands]
    spec = subscripts.replace(" ", "")
    if "->" in spec:
        lhs, out = spec.split("->")
    else:
        lhs, out = spec, None
    terms = lhs.split(",")
    if len(terms) != len(ops):
        raise _err(ShapeError, f"einsum {subscripts!r} names {len(terms)} operands but got {len(ops)}")
    free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in spec]
    ell_n = builtins.max([x.ndim - len(t.replace("...", "")) for t, x in zip(terms, ops) if "..." in t],
                         default=0)
    ell = "".join(free[:ell_n])
    expanded = []
    for t, x in zip(terms, ops):
        if "..." in t:
            k = x.ndim - len(t.replace("...", ""))
            t = t.replace("...", ell[ell_n - k:])
        if len(t) != x.ndim:
            raise _err(ShapeError, f"einsum term {t!r} has {len(t)} letters for a tensor with {x.ndim} dims")
        expanded.append(t)
    if out is None:
        letters = "".join(expanded)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    else:
        out = out.replace("...", ell)
    sizes: dict[str, int] = {}
    for t, x in zip(expanded, ops):
        for c, n in zip(t, x.shape):
            if c in sizes and sizes[c] != n and 1 not in (n, sizes[c]):
                raise _err(ShapeError, f"einsum: index {c!r} is {sizes[c]} in one operand and {n} in another")
            if sizes.get(c, 1) == 1:            # a size-1 index broadcasts to the other's size, 0 included
                sizes[c] = n

    def reduce_private(t: str, x: Tensor, keep: str) -> tuple[str, Tensor]:
        if len(set(t)) != len(t):
            raise _err(ShapeError, f"einsum: repeated index within one operand ({t!r}) is not supported",
                       "take the diagonal explicitly first")
        axes = [i for i, c in enumerate(t) if c not in keep]
        if axes:
            x = sum(x, tuple(axes))
            t = "".join(c for c in t if c in keep)
        return t, x

    cur_t, cur = expanded[0], ops[0]
    for i in range(1, len(ops)):
        rest = "".join(expanded[i + 1:]) + out
        nt, nx = expanded[i], ops[i]
        cur_t, cur = reduce_private(cur_t, cur, nt + rest)
        nt, nx = reduce_private(nt, nx, cur_t + rest)
        batch = [c for c in cur_t if c in nt and c in rest]
        contr = [c for c in cur_t if c in nt and c not in rest]
        # broadcast size-1 batch axes
        for c in batch:
            n = sizes[c]
            if cur.shape[cur_t.index(c)] != n:
                cur = broadcast_to(cur, tuple(n if ch == c else s for ch, s in zip(cur_t, cur.shape)))
            if nx.shape[nt.index(c)] != n:
                nx = broadcast_to(nx, tuple(n if ch == c else s for ch, s in zip(nt, nx.shape)))
        res = _contract(cur, nx, [cur_t.index(c) for c in contr], [nt.index(c) for c in contr],
                        [cur_t.index(c) for c in batch], [nt.index(c) for c in batch])
        cur_t = "".join(batch) + "".join(c for c in cur_t if c not in batch and c not in contr) + \
            "".join(c for c in nt if c not in batch and c not in contr)
        cur = res
    cur_t, cur = reduce_private(cur_t, cur, out)
    missing = [c for c in out if c not in cur_t]
    if missing:
        raise _err(ShapeError, f"einsum: output index {missing[0]!r} appears in no operand")
    return transpose(cur, [cur_t.index(c) for c in out])


# ---- indexing -----------------------------------------------------------------------------------------

def _index_tensor(idx, n: int | None = None) -> Tensor:
    idx = asarray(idx)
    if idx.dtype == "bool" or D.is_float(idx.dtype):
        raise _err(DTypeError, f"indices must be integers, got {idx.dtype}",
                   "cast with .astype(xb.int64); a boolean mask selects a data-dependent number of elements — "
                   "use xb.where(mask, x, 0) instead")
    return idx


def gather(x, indices, axis: int = 0) -> Tensor:
    """Rows (or slices along `axis`) of x picked by an integer index tensor: numpy's `take`, TensorFlow's
    `gather`. The index shape replaces that axis. Negative indices count from the end; out-of-range ones
    are clamped."""
    x = asarray(x)
    axis = _norm_axis(axis, x.ndim)
    idx = _index_tensor(indices)
    out = bind("gather", x, idx, axes=(axis,))            # idx.shape + rest
    if axis == 0 or idx.ndim == 0:
        return out
    # move the index dims to where `axis` was
    k = idx.ndim
    perm = list(range(k, k + axis)) + list(range(k)) + list(range(k + axis, out.ndim))
    return transpose(out, perm)


take = gather


def take_along_axis(x, indices, axis: int) -> Tensor:
    """PyTorch's `gather(input, dim, index)`: out[i][j] = x[i][indices[i][j]] along `axis`."""
    x, idx = asarray(x), _index_tensor(indices)
    axis = _norm_axis(axis, x.ndim)
    if idx.ndim != x.ndim:
        raise _err(ShapeError, f"take_along_axis needs indices with {x.ndim} dims, got {idx.ndim}")
    shape = broadcast_shapes(tuple(n if i != axis else idx.shape[i] for i, n in enumerate(x.shape)), idx.shape)
    idx = broadcast_to(idx, shape)
    coords = [iota(shape, i) if i != axis else idx for i in range(x.ndim)]
    return bind("gather", x, *coords, axes=tuple(range(x.ndim)))


def scatter_add_along_axis(x, indices, updates, axis: int) -> Tensor:
    """A copy of x with updates[i][j] added at [i][indices[i][j]] along `axis`, repeated indices accumulating:
    the transpose of `take_along_axis`, PyTorch's `scatter_add(input, dim, index, src)`. Each point adds only
    into its own row along the other axes, so a backend may split those across threads."""
    x, idx, upd = asarray(x), _index_tensor(indices), asarray(updates)
    axis = _norm_axis(axis, x.ndim)
    if idx.ndim != x.ndim:
        raise _err(ShapeError, f"scatter_add_along_axis needs indices with {x.ndim} dims, got {idx.ndim}")
    if builtins.any(i > n for d, (i, n) in enumerate(zip(idx.shape, x.shape)) if d != axis):
        raise _err(ShapeError, f"scatter_add_along_axis: indices {idx.shape} are larger than x {x.shape} "
                               f"off axis {axis}")
    upd = broadcast_to(cast(upd, x.dtype), idx.shape)
    coords = [iota(idx.shape, i) if i != axis else idx for i in range(x.ndim)]
    return bind("scatter_add", x, upd, *coords, axes=tuple(range(x.ndim)))


def scatter_add(x, indices, updates, axis: int = 0) -> Tensor:
    """A copy of x with `updates` added at `indices` along `axis` (the transpose of `gather`)."""
    x, idx, upd = asarray(x), _index_tensor(indices), asarray(updates)
    axis = _norm_axis(axis, x.ndim)
    k = idx.ndim
    rest = tuple(n for i, n in enumerate(x.shape) if i != axis)
    if axis and k and upd.ndim == x.ndim - 1 + k:   # index dims sit at `axis` (numpy's take layout)
        upd = transpose(upd, list(range(axis, axis + k)) + list(range(axis)) + list(range(axis + k, upd.ndim)))
    want = idx.shape + rest
    upd = broadcast_to(cast(upd, x.dtype), want)
    return bind("scatter_add", x, upd, idx, axes=(axis,))


def bind_gather(x, indices: list, axes: tuple[int, ...]) -> Tensor:
    """The `gather` primitive with one index tensor per axis in `axes` (all of one shape S): result S + rest."""
    return bind("gather", asarray(x), *[_index_tensor(i) for i in indices], axes=tuple(axes))


def bind_scatter_add(x, updates, indices: list, axes: tuple[int, ...]) -> Tensor:
    """The `scatter_add` primitive: the transpose of `bind_gather`."""
    x = asarray(x)
    return bind("scatter_add", x, cast(asarray(updates), x.dtype), *[_index_tensor(i) for i in indices],
                axes=tuple(axes))


def iota(shape, axis: int, dtype="int64") -> Tensor:
    return bind("iota", shape=tuple(shape), axis=axis, dtype=D.canonical(dtype))


def arange(n: int, dtype="int64") -> Tensor:
    return iota((int(n),), 0, dtype)


def full(shape, value, dtype=None) -> Tensor:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return constant(value, D.canonical(dtype) if dtype else None, shape)


def zeros(shape, dtype="float32") -> Tensor:
    return full(shape, 0, dtype)


def ones(shape, dtype="float32") -> Tensor:
    return full(shape, 1, dtype)


def zeros_like(x, dtype=None) -> Tensor:
    x = asarray(x)
    return full(x.shape, 0, dtype or x.dtype)


def ones_like(x, dtype=None) -> Tensor:
    x = asarray(x)
    return full(x.shape, 1, dtype or x.dtype)


def full_like(x, value, dtype=None) -> Tensor:
    x = asarray(x)
    return full(x.shape, value, dtype or x.dtype)


# ---- sorting ------------------------------------------------------------------------------------------

def sort(x, axis: int = -1, descending: bool = False) -> Tensor:
    x = asarray(x)
    return bind("sort", x, axis=_norm_axis(axis, x.ndim), descending=descending)[0]


def argsort(x, axis: int = -1, descending: bool = False) -> Tensor:
    x = asarray(x)
    return bind("sort", x, axis=_norm_axis(axis, x.ndim), descending=descending)[1]


def topk(x, k: int, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    x = asarray(x)
    axis = _norm_axis(axis, x.ndim)
    if not 0 <= k <= x.shape[axis]:
        raise _err(ShapeError, f"topk: k={k} is outside [0, {x.shape[axis]}]")
    values, idx = bind("sort", x, axis=axis, descending=largest)
    start, step = (0,) * x.ndim, (1,) * x.ndim
    size = tuple(k if i == axis else n for i, n in enumerate(x.shape))
    return (bind("slice", values, start=start, step=step, size=size),
            bind("slice", idx, start=start, step=step, size=size))


# numpy ufuncs applied to traced tensors map here
UFUNCS = {
    "add": add, "subtract": subtract, "multiply": multiply, "true_divide": divide, "divide": divide,
    "floor_divide": floor_divide, "remainder": remainder, "power": power, "maximum": maximum, "minimum": minimum,
    "exp": exp, "log": log, "sqrt": sqrt, "tanh": tanh, "sin": sin, "cos": cos, "abs": abs, "absolute": abs,
    "negative": negative, "less": less, "greater": greater, "equal": equal, "not_equal": not_equal,
    "less_equal": less_equal, "greater_equal": greater_equal, "log1p": log1p, "expm1": expm1,
    "floor": floor, "ceil": ceil, "isnan": isnan, "isinf": isinf, "isfinite": isfinite, "sign": sign,
    "square": square, "reciprocal": reciprocal, "arctan2": atan2, "logical_and": logical_and,
    "logical_or": logical_or, "logical_not": logical_not, "exp2": exp2, "log2": log2, "log10": log10,
}

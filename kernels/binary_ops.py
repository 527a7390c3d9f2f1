"""Elementwise binary and ternary operators (category 2): arithmetic, comparison, logic, bit operations,
clamping and selection, with PyTorch's broadcasting and type promotion (Python scalars are weak: `x_f16 + 2.5`
stays float16; an integer tensor with a float scalar gives float32)."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import BOOL, FLOATS, INTS, Sample

from ._samples import binary, nary, noncontig, special, tensor

register = xb.ops.register
NUM = FLOATS + INTS


def _is_float(x) -> bool:
    return isinstance(x, Tensor) and x.dtype in FLOATS


def _is_int(x) -> bool:
    return isinstance(x, Tensor) and x.dtype in INTS


# ---- arithmetic ----------------------------------------------------------------------------------------

@register("binary", samples=binary(scalar=2.5, kwargs=({}, {"alpha": 2})), torch="torch.add", grad=True, dtypes=NUM)
def add(input, other, alpha=1):
    """input + alpha * other."""
    return input + (other if alpha == 1 else alpha * other)


@register("binary", aliases=("subtract",), samples=binary(scalar=2.5, kwargs=({}, {"alpha": 2})),
          torch="torch.sub", grad=True, dtypes=NUM)
def sub(input, other, alpha=1):
    """input - alpha * other."""
    return input - (other if alpha == 1 else alpha * other)


@register("binary", aliases=("multiply",), samples=binary(scalar=2.5), torch="torch.mul", grad=True, dtypes=NUM)
def mul(input, other):
    """input * other."""
    return input * other


def _trunc_div_int(a, b):
    q = a // b
    inexact = (a - q * b) != 0
    return xb.where(inexact & ((a < 0) != (b < 0)), q + 1, q)


@register("binary", aliases=("divide", "true_divide"),
          samples=binary(avoid=(0.0,), scalar=2.5, kwargs=({}, {"rounding_mode": "trunc"},
                                                           {"rounding_mode": "floor"})),
          torch="torch.div", grad=True, dtypes=NUM)
def div(input, other, rounding_mode: str | None = None):
    """True division (integers give float32); `rounding_mode="trunc"` or `"floor"` rounds the quotient
    (and keeps integer types)."""
    if rounding_mode is None:
        return input / other
    ints = not (_is_float(input) or _is_float(other) or isinstance(input, float) or isinstance(other, float))
    if rounding_mode == "floor":
        return input // other if ints else xb.floor_divide(input, other)
    if rounding_mode == "trunc":
        return _trunc_div_int(input, other) if ints else xb.trunc(input / other)
    raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")


@register("binary", samples=binary(avoid=(0.0,), scalar=3), torch="torch.floor_divide", dtypes=NUM)
def floor_divide(input, other):
    """floor(input / other) (Python's //)."""
    return xb.floor_divide(input, other)


@register("binary", samples=binary(-10.0, 10.0, avoid=(0.0,), scalar=3), torch="torch.remainder",
          dtypes=NUM, grad=("input",))
def remainder(input, other):
    """input - other * floor(input / other): the sign of `other`, as Python's %."""
    return xb.remainder(input, other)


@register("binary", samples=binary(-10.0, 10.0, avoid=(0.0,), scalar=3), torch="torch.fmod", dtypes=NUM,
          grad=("input",))
def fmod(input, other):
    """C fmod: the sign of `input`."""
    return xb.fmod(input, other)


def _pow_samples(dtype, shapes):
    yield from binary(0.1, 3.0, other=(-2.0, 2.0), ints=(-5, 6), other_ints=(0, 4))(dtype, shapes)
    base = tensor(shapes, dtype, (16, 17), "pow", low=0.1, high=3.0, ints=(-5, 6))
    yield Sample((base, 3), note="tensor ** 3")
    if dtype in FLOATS:
        yield Sample((base, 0.5), note="tensor ** 0.5")
        yield Sample((base, -1.5), note="tensor ** -1.5")
    yield Sample((2, tensor(shapes, dtype, (17,), "powe", low=-2.0, high=2.0, ints=(0, 8))), note="2 ** tensor")


@register("binary", samples=_pow_samples, torch="torch.pow", grad=True, dtypes=NUM)
def pow(input, exponent):
    """input ** exponent (either may be a Python number)."""
    return xb.power(input, exponent)


def _tensor_other(name: str):
    """torch.maximum and its kin take no Python number: `other` goes in as a 0-d tensor (which promotes the
    same way, the default float dtype for a float)."""
    return lambda torch, input, other: getattr(torch, name)(input, torch.as_tensor(other))


@register("binary", samples=binary(scalar=0.5), torch=_tensor_other("maximum"), grad=True, dtypes=NUM)
def maximum(input, other):
    """Elementwise maximum; NaN propagates."""
    return xb.maximum(input, other)


@register("binary", samples=binary(scalar=0.5), torch=_tensor_other("minimum"), grad=True, dtypes=NUM)
def minimum(input, other):
    """Elementwise minimum; NaN propagates."""
    return xb.minimum(input, other)


@register("binary", samples=binary(scalar=0.5), torch=_tensor_other("fmax"), grad=True, dtypes=NUM)
def fmax(input, other):
    """Elementwise maximum ignoring NaN."""
    return xb.fmax(input, other)


@register("binary", samples=binary(scalar=0.5), torch=_tensor_other("fmin"), grad=True, dtypes=NUM)
def fmin(input, other):
    """Elementwise minimum ignoring NaN."""
    return xb.fmin(input, other)


@register("binary", aliases=("arctan2",), samples=binary(avoid=(0.0,)), torch="torch.atan2", grad=True, dtypes=NUM)
def atan2(input, other):
    """The angle of (other, input), in (-pi, pi]."""
    return xb.atan2(input, other)


@register("binary", samples=binary(), torch="torch.hypot", grad=True, dtypes=FLOATS)
def hypot(input, other):
    """sqrt(input**2 + other**2) without overflow."""
    return xb.hypot(input, other)


@register("binary", samples=binary(avoid=(0.0,)), torch="torch.copysign", grad=("input",), dtypes=NUM)
def copysign(input, other):
    """|input| with the sign of other (integers give float32)."""
    return xb.copysign(input, other)


@register("binary", samples=binary(-3.0, 3.0, other=(0.1, 10.0), ints=(-5, 5), other_ints=(1, 20)),
          torch="torch.xlogy", grad=True, dtypes=NUM)
def xlogy(input, other):
    """input * log(other), 0 where input == 0 (NaN where other is NaN)."""
    x = input if _is_float(input) else xb.cast(input, "float32")
    y = other if _is_float(other) else xb.cast(other, "float32") if isinstance(other, Tensor) else float(other)
    safe_y = xb.where(x == 0, 1.0, y)
    out = xb.where(x == 0, 0.0, x * xb.log(safe_y))
    return xb.where(y != y, float("nan"), out) if isinstance(y, Tensor) else out


# ---- comparison ----------------------------------------------------------------------------------------

def _compare(name: str, fn, aliases: tuple[str, ...], doc: str):
    def op(input, other):
        return fn(input, other)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    register("binary", aliases=aliases, samples=binary(-2.0, 2.0, ints=(-3, 3), scalar=0.5),
             torch=f"torch.{name}", dtypes=NUM + BOOL)(op)


_compare("eq", lambda a, b: a == b, (), "input == other, elementwise (bool).")
_compare("ne", lambda a, b: a != b, ("not_equal",), "input != other, elementwise (bool).")
_compare("lt", lambda a, b: a < b, ("less",), "input < other, elementwise (bool).")
_compare("le", lambda a, b: a <= b, ("less_equal",), "input <= other, elementwise (bool).")
_compare("gt", lambda a, b: a > b, ("greater",), "input > other, elementwise (bool).")
_compare("ge", lambda a, b: a >= b, ("greater_equal",), "input >= other, elementwise (bool).")


def _isclose_samples(dtype, shapes):
    for shape in shapes.pointwise:
        a = tensor(shapes, dtype, shape, "iscl", ints=(-50, 50))
        pick = shapes.rng("iscl-pick", shape).integers(0, 3, size=np.shape(a))
        a64 = a.astype(np.float64)
        if dtype in FLOATS:
            b64 = np.where(pick == 0, a64, np.where(pick == 1, a64 * (1 + 1e-9), a64 + 0.5))
        else:
            b64 = np.where(pick == 0, a64, a64 + 1)
        b = b64.astype(a.dtype)
        yield Sample((a, b), note=f"{shape}")
        yield Sample((a, b), {"rtol": 0.0, "atol": 0.6}, note=f"{shape} atol=0.6")
    if shapes.noncontig:
        a = tensor(shapes, dtype, (5, 7), "isclnc")
        yield Sample((noncontig(a), noncontig(a)), note="non-contiguous")
    if shapes.special and dtype in FLOATS:
        sv = special(dtype)
        yield Sample((sv, sv), note="special values vs themselves", grad=False)
        yield Sample((sv, sv), {"equal_nan": True}, note="special values, equal_nan", grad=False)
        yield Sample((sv, sv[::-1].copy()), note="special values reversed", grad=False)


@register("binary", samples=_isclose_samples, torch="torch.isclose", dtypes=NUM)
def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """|input - other| <= atol + rtol * |other| (equal infinities are close; NaNs only with equal_nan)."""
    close = input == other
    if equal_nan and _is_float(input):
        close = close | (xb.isnan(input) & xb.isnan(other))
    if rtol == 0 and atol == 0:
        return close
    a = input if (_is_float(input) or _is_float(other)) else xb.cast(input, "float32")
    b = other if (_is_float(input) or _is_float(other)) else xb.cast(other, "float32")
    err = xb.abs(a - b)
    allowed = atol + xb.abs(rtol * b)
    return close | (xb.isfinite(err) & (err <= allowed))


# ---- logic and bits ------------------------------------------------------------------------------------

@register("binary", samples=binary(ints=(-2, 2)), torch="torch.logical_and", dtypes=NUM + BOOL)
def logical_and(input, other):
    """input != 0 and other != 0 (bool)."""
    return xb.logical_and(input, other)


@register("binary", samples=binary(ints=(-2, 2)), torch="torch.logical_or", dtypes=NUM + BOOL)
def logical_or(input, other):
    """input != 0 or other != 0 (bool)."""
    return xb.logical_or(input, other)


@register("binary", samples=binary(ints=(-2, 2)), torch="torch.logical_xor", dtypes=NUM + BOOL)
def logical_xor(input, other):
    """(input != 0) != (other != 0) (bool)."""
    return xb.logical_xor(input, other)


_BITS = binary(ints=(-1000, 1000), scalar=5)


@register("binary", samples=_BITS, torch="torch.bitwise_and", dtypes=INTS + BOOL)
def bitwise_and(input, other):
    """input & other (logical and for bool)."""
    return input & other


@register("binary", samples=_BITS, torch="torch.bitwise_or", dtypes=INTS + BOOL)
def bitwise_or(input, other):
    """input | other."""
    return input | other


@register("binary", samples=_BITS, torch="torch.bitwise_xor", dtypes=INTS + BOOL)
def bitwise_xor(input, other):
    """input ^ other."""
    return input ^ other


_SHIFTS = binary(ints=(-1000, 1000), other_ints=(0, 8), scalar=3)


@register("binary", aliases=("__lshift__",), samples=_SHIFTS, torch="torch.bitwise_left_shift", dtypes=INTS)
def bitwise_left_shift(input, other):
    """input << other."""
    return input << other


@register("binary", aliases=("__rshift__",), samples=_SHIFTS, torch="torch.bitwise_right_shift", dtypes=INTS)
def bitwise_right_shift(input, other):
    """input >> other (arithmetic for signed types)."""
    return input >> other


# ---- clamping, interpolation, fused multiply-add, selection -------------------------------------------

def _clamp_samples(dtype, shapes):
    lo, hi = (-1.0, 1.0) if dtype in FLOATS else (-5, 5)
    for shape in shapes.pointwise:
        x = tensor(shapes, dtype, shape, "clamp", avoid=(-1.0, 1.0))
        yield Sample((x,), {"min": lo, "max": hi}, note=f"{shape} scalar bounds")
    x = tensor(shapes, dtype, (16, 17), "clamp2", avoid=(-1.0, 1.0))
    yield Sample((x,), {"min": lo}, note="min only")
    yield Sample((x,), {"max": hi}, note="max only")
    yield Sample((x,), {"min": hi, "max": lo}, note="min > max (all max)")
    tlo = tensor(shapes, dtype, (17,), "clamplo", low=-2.0, high=-0.5)
    thi = tensor(shapes, dtype, (16, 1), "clamphi", low=0.5, high=2.0)
    yield Sample((x,), {"min": tlo, "max": thi}, note="tensor bounds, broadcast")
    if shapes.noncontig:
        yield Sample((noncontig(x),), {"min": lo, "max": hi}, note="non-contiguous")
    if shapes.empty:
        yield Sample((tensor(shapes, dtype, (0, 3), "clampe"),), {"min": lo, "max": hi}, note="empty")
    if shapes.special and dtype in FLOATS:
        yield Sample((special(dtype),), {"min": -1.0, "max": 1.0}, note="special values", grad=False)


@register("binary", aliases=("clip",), samples=_clamp_samples, torch="torch.clamp", grad=("input",), dtypes=NUM)
def clamp(input: Tensor, min=None, max=None):
    """min(max(input, min), max) (either bound may be None, a number or a tensor; NaN propagates)."""
    if min is None and max is None:
        raise ValueError("clamp: give at least one of min and max")
    out = input
    if min is not None:
        out = xb.maximum(out, min)
    if max is not None:
        out = xb.minimum(out, max)
    return out


def _one_bound(name: str):
    def gen(dtype, shapes):
        v = -1.0 if name == "min" else 1.0
        v = v if dtype in FLOATS else int(v * 5)
        for s in _clamp_samples(dtype, shapes):
            if set(s.kwargs) == {"min", "max"} and not isinstance(s.kwargs["min"], np.ndarray):
                yield Sample(s.args, {name: v}, s.note, s.grad)
    return gen


@register("binary", samples=_one_bound("min"), torch="torch.clamp_min", grad=("input",), dtypes=NUM)
def clamp_min(input: Tensor, min):
    """max(input, min)."""
    return xb.maximum(input, min)


@register("binary", samples=_one_bound("max"), torch="torch.clamp_max", grad=("input",), dtypes=NUM)
def clamp_max(input: Tensor, max):
    """min(input, max)."""
    return xb.minimum(input, max)


def _lerp_samples(dtype, shapes):
    yield from nary((-3.0, 3.0), (-3.0, 3.0), (0.0, 1.0))(dtype, shapes)
    a = tensor(shapes, dtype, (16, 17), "lerpa")
    b = tensor(shapes, dtype, (16, 17), "lerpb")
    yield Sample((a, b, 0.3), note="scalar weight 0.3")
    yield Sample((a, b, 0.7), note="scalar weight 0.7")


@register("binary", samples=_lerp_samples, torch="torch.lerp", grad=True, dtypes=FLOATS)
def lerp(input: Tensor, end: Tensor, weight):
    """input + weight * (end - input), in PyTorch's two-sided form (exact at weight 0 and 1)."""
    diff = end - input
    if isinstance(weight, (int, float)):
        return input + weight * diff if abs(weight) < 0.5 else end - diff * (1.0 - weight)
    return xb.where(xb.abs(weight) < 0.5, input + weight * diff, end - diff * (1.0 - weight))


@register("binary", samples=nary((-3.0, 3.0), (-3.0, 3.0), (-3.0, 3.0), kwargs=({}, {"value": 2})),
          torch="torch.addcmul", grad=True, dtypes=NUM)
def addcmul(input: Tensor, tensor1: Tensor, tensor2: Tensor, value=1):
    """input + value * tensor1 * tensor2."""
    prod = tensor1 * tensor2
    return input + (prod if value == 1 else value * prod)


@register("binary", samples=nary((-3.0, 3.0), (-3.0, 3.0), (0.5, 3.0), kwargs=({}, {"value": -0.5})),
          torch="torch.addcdiv", grad=True, dtypes=FLOATS)
def addcdiv(input: Tensor, tensor1: Tensor, tensor2: Tensor, value=1):
    """input + value * tensor1 / tensor2."""
    q = tensor1 / tensor2
    return input + (q if value == 1 else value * q)


def _where_samples(dtype, shapes):
    for shape in shapes.pointwise:
        c = tensor(shapes, "bool", shape, "wc")
        yield Sample((c, tensor(shapes, dtype, shape, "wa"), tensor(shapes, dtype, shape, "wb")), note=f"{shape}")
    c = tensor(shapes, "bool", (4, 1, 9), "wcb")
    yield Sample((c, tensor(shapes, dtype, (3, 1), "wab"), tensor(shapes, dtype, (9,), "wbb")),
                 note="broadcast (4, 1, 9) (3, 1) (9,)")
    x = tensor(shapes, dtype, (16, 17), "ws")
    c = tensor(shapes, "bool", (16, 17), "wcs")
    yield Sample((c, x, 0), note="tensor, scalar 0")
    if shapes.noncontig:
        yield Sample((noncontig(c), noncontig(x), noncontig(tensor(shapes, dtype, (16, 17), "wnc"))),
                     note="non-contiguous")
    if shapes.empty:
        yield Sample((tensor(shapes, "bool", (0, 3), "we"), tensor(shapes, dtype, (0, 3), "wea"),
                      tensor(shapes, dtype, (0, 3), "web")), note="empty")


@register("binary", samples=_where_samples, torch="torch.where", grad=True, dtypes=NUM + BOOL)
def where(condition: Tensor, input, other):
    """input where condition, else other (broadcast together)."""
    return xb.where(condition, input, other)

"""Tensor creation and filling (category 18). Sizes, values and dtypes are static arguments; the default
float dtype is float32 and integer fill values give int64, as in PyTorch."""
from __future__ import annotations

import math

import xbench as xb
from xbench import Tensor
from xbench.ops import BOOL, FLOATS, INTS, NoTorch, Sample

from ._samples import noncontig, tensor

register = xb.ops.register
ALL = FLOATS + INTS + BOOL


def _td(torch, dtype):
    return None if dtype is None else getattr(torch, str(dtype))


def _default(value, dtype):
    if dtype is not None:
        return dtype
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    return "float32"


def _sizes(dtype, shapes, extra=None):
    for shape in shapes.pointwise:
        yield Sample((shape,), {"dtype": dtype, **(extra or {})}, note=f"{shape}")
    if shapes.empty:
        yield Sample(((0, 3),), {"dtype": dtype, **(extra or {})}, note="empty")


def _value(dtype):
    return True if dtype == "bool" else 7 if dtype in INTS else -2.5


@register("creation", samples=_sizes, dtypes=ALL,
          torch=lambda torch, size, dtype=None: torch.zeros(size, dtype=_td(torch, dtype)))
def zeros(size, dtype=None):
    """A tensor of `size` filled with 0 (float32 unless `dtype`)."""
    return xb.zeros(size, dtype or "float32")


@register("creation", samples=_sizes, dtypes=ALL,
          torch=lambda torch, size, dtype=None: torch.ones(size, dtype=_td(torch, dtype)))
def ones(size, dtype=None):
    """A tensor of `size` filled with 1."""
    return xb.ones(size, dtype or "float32")


@register("creation", samples=_sizes, dtypes=ALL,
          torch=NoTorch("torch.empty leaves its values unspecified; xbench's empty is zeros"))
def empty(size, dtype=None):
    """A tensor of `size` (xbench fills it with zeros: every value a backend computes is defined)."""
    return xb.zeros(size, dtype or "float32")


def _full_samples(dtype, shapes):
    for shape in shapes.pointwise:
        yield Sample((shape, _value(dtype)), {"dtype": dtype}, note=f"{shape}")
    yield Sample(((3, 4), _value(dtype)), note="dtype from the value")
    if dtype in FLOATS:
        yield Sample(((5,), float("inf")), {"dtype": dtype}, note="inf")
        yield Sample(((5,), float("nan")), {"dtype": dtype}, note="nan")


@register("creation", samples=_full_samples, dtypes=ALL,
          torch=lambda torch, size, fill_value, dtype=None: torch.full(size, fill_value, dtype=_td(torch, dtype)))
def full(size, fill_value, dtype=None):
    """A tensor of `size` filled with `fill_value` (dtype from the value when not given)."""
    return xb.full(size, fill_value, _default(fill_value, dtype))


@register("creation", name="scalar_tensor", dtypes=ALL,
          samples=lambda dtype, shapes: [Sample((_value(dtype),), {"dtype": dtype}), Sample((3.5,))],
          torch=lambda torch, s, dtype=None: torch.scalar_tensor(s, dtype=_td(torch, dtype)))
def scalar_tensor(s, dtype=None):
    """A 0-d tensor holding `s` (float32 unless `dtype`)."""
    return xb.full((), s, dtype or "float32")


def _like_samples(value: bool):
    def gen(dtype, shapes):
        for shape in shapes.pointwise:
            x = tensor(shapes, dtype, shape, "like")
            yield Sample((x, _value(dtype)) if value else (x,), note=f"{shape}")
        x = tensor(shapes, dtype, (4, 5), "like2")
        other = "float64" if dtype != "float64" else "int32"
        yield Sample((x, 3) if value else (x,), {"dtype": other}, note=f"dtype={other}")
        if shapes.noncontig:
            yield Sample((noncontig(x), _value(dtype)) if value else (noncontig(x),), note="non-contiguous")
        if shapes.empty:
            e = tensor(shapes, dtype, (0, 3), "likee")
            yield Sample((e, _value(dtype)) if value else (e,), note="empty")
    return gen


@register("creation", samples=_like_samples(False), dtypes=ALL,
          torch=lambda torch, input, dtype=None: torch.zeros_like(input, dtype=_td(torch, dtype)))
def zeros_like(input: Tensor, dtype=None):
    """Zeros of input's shape (and dtype, unless given)."""
    return xb.zeros(input.shape, dtype or input.dtype)


@register("creation", samples=_like_samples(False), dtypes=ALL,
          torch=lambda torch, input, dtype=None: torch.ones_like(input, dtype=_td(torch, dtype)))
def ones_like(input: Tensor, dtype=None):
    """Ones of input's shape (and dtype, unless given)."""
    return xb.ones(input.shape, dtype or input.dtype)


@register("creation", samples=_like_samples(True), dtypes=ALL,
          torch=lambda torch, input, fill_value, dtype=None: torch.full_like(input, fill_value,
                                                                             dtype=_td(torch, dtype)))
def full_like(input: Tensor, fill_value, dtype=None):
    """`fill_value` in input's shape (and dtype, unless given)."""
    return xb.full(input.shape, fill_value, dtype or input.dtype)


def _fill_samples(dtype, shapes):
    for s in _like_samples(True)(dtype, shapes):
        if "dtype" not in s.kwargs:
            yield s


@register("creation", aliases=("fill_",), samples=_fill_samples, dtypes=ALL,
          torch=lambda torch, input, value: torch.fill(input, value), grad=("input",))
def fill(input: Tensor, value):
    """A tensor of input's shape and dtype holding `value` (ATen's fill; functional, not in place)."""
    return xb.full(input.shape, value, input.dtype)


def _compute_dtype(dtype: str) -> str:
    return "float64" if dtype in ("float64",) + INTS else "float32"


def _arange_samples(dtype, shapes):
    if dtype in INTS:
        yield Sample((10,), {"dtype": dtype}, note="end")
        yield Sample((-3, 17), {"dtype": dtype}, note="start, end")
        yield Sample((20, -7, -3), {"dtype": dtype}, note="negative step")
        yield Sample((5, 5), {"dtype": dtype}, note="empty")
        yield Sample((17,), note="int64 by default")
    else:
        yield Sample((0.0, 1.0, 0.1), {"dtype": dtype}, note="0 to 1 by 0.1")
        yield Sample((-2.5, 3.0, 0.25), {"dtype": dtype}, note="-2.5 to 3")
        yield Sample((1000.0, 0.0, -7.5), {"dtype": dtype}, note="negative step")
        yield Sample((17,), {"dtype": dtype}, note="end only")
        yield Sample((0.0, 2.0, 0.3), note="float32 by default")


def _arange_len(start, end, step) -> int:
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    return max(0, math.ceil((end - start) / step))


@register("creation", samples=_arange_samples, dtypes=FLOATS + INTS,
          torch=lambda torch, start, end=None, step=1, dtype=None:
          torch.arange(start, end, step, dtype=_td(torch, dtype)) if end is not None
          else torch.arange(start, dtype=_td(torch, dtype)))
def arange(start, end=None, step=1, dtype=None):
    """start, start + step, ... below `end` (`arange(n)`: 0 .. n-1); int64 when every argument is an int."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = "int64" if all(isinstance(v, int) for v in (start, end, step)) else "float32"
    n = _arange_len(start, end, step)
    if dtype in INTS and all(isinstance(v, int) for v in (start, end, step)):
        return (xb.iota((n,), 0, "int64") * step + start).astype(dtype)
    c = _compute_dtype(dtype)
    return (xb.iota((n,), 0, c) * float(step) + float(start)).astype(dtype)


def _endpoint(v, c: str):
    """start or end: a number, or a 0-d tensor (PyTorch's linspace.Tensor_* overloads read its value)."""
    if isinstance(v, Tensor):
        if v.ndim != 0:
            raise ValueError(f"linspace: start and end must be numbers or 0-d tensors, got a tensor of shape "
                             f"{tuple(v.shape)}")
        return v.astype(c)
    return float(v)


def _linspace_values(start, end, steps: int, dtype: str):
    c = _compute_dtype(dtype)
    start, end = _endpoint(start, c), _endpoint(end, c)
    if steps == 1:
        return xb.broadcast_to(xb.asarray(start).astype(c), (1,))
    step = (end - start) / (steps - 1)
    i = xb.iota((steps,), 0, c)
    lo = start + i * step
    hi = end - (float(steps - 1) - i) * step
    return xb.where(i < steps // 2, lo, hi)


def _linspace_samples(dtype, shapes):
    if dtype in INTS:
        yield Sample((0, 10, 4), {"dtype": dtype}, note="0..10, 4 steps")
        yield Sample((-5, 20, 11), {"dtype": dtype})
    else:
        yield Sample((0.0, 1.0, 11), {"dtype": dtype}, note="0..1, 11 steps")
        yield Sample((-3.0, 7.5, 64), {"dtype": dtype})
        yield Sample((2.0, -2.0, 17), {"dtype": dtype}, note="decreasing")
        yield Sample((1.0, 5.0, 1), {"dtype": dtype}, note="one step")
        yield Sample((1.0, 5.0, 0), {"dtype": dtype}, note="no steps")
        yield Sample((0.0, 1.0, 5), note="float32 by default")
    # 0-d tensors for start and end (PyTorch's Tensor_Tensor / Tensor_Scalar / Scalar_Tensor overloads)
    t0, t1 = tensor(shapes, dtype, (), "ls0", low=-2.0, high=0.0), tensor(shapes, dtype, (), "ls1", low=1.0, high=3.0)
    yield Sample((t0, t1, 7), {"dtype": dtype}, note="0-d tensor start and end")
    yield Sample((t0, 3, 4), {"dtype": dtype}, note="0-d tensor start")
    yield Sample((-1, t1, 5), note="0-d tensor end, float32 by default")


@register("creation", samples=_linspace_samples, dtypes=FLOATS + INTS,
          torch=lambda torch, start, end, steps, dtype=None: torch.linspace(start, end, steps,
                                                                            dtype=_td(torch, dtype)))
def linspace(start, end, steps: int, dtype=None):
    """`steps` evenly spaced values from start to end inclusive (PyTorch's symmetric formula); start and end
    may be 0-d tensors (read at run time)."""
    dtype = dtype or "float32"
    if steps == 0:
        return xb.zeros((0,), dtype)
    return _linspace_values(start, end, steps, dtype).astype(dtype)


def _logspace_samples(dtype, shapes):
    yield Sample((0.0, 3.0, 7), {"dtype": dtype})
    yield Sample((-2.0, 2.0, 9), {"base": 2.0, "dtype": dtype}, note="base 2")
    if dtype != "float16":
        yield Sample((1.0, 30.0, 5), {"dtype": dtype}, note="large")


@register("creation", samples=_logspace_samples, dtypes=FLOATS,
          torch=lambda torch, start, end, steps, base=10.0, dtype=None: torch.logspace(start, end, steps, base,
                                                                                       dtype=_td(torch, dtype)))
def logspace(start, end, steps: int, base: float = 10.0, dtype=None):
    """base ** linspace(start, end, steps)."""
    dtype = dtype or "float32"
    if steps == 0:
        return xb.zeros((0,), dtype)
    c = _compute_dtype(dtype)
    return xb.power(xb.full((steps,), float(base), c), _linspace_values(start, end, steps, dtype)).astype(dtype)


def _eye_samples(dtype, shapes):
    yield Sample((5,), {"dtype": dtype})
    yield Sample((3, 7), {"dtype": dtype}, note="3 x 7")
    yield Sample((17, 4), {"dtype": dtype}, note="17 x 4")
    yield Sample((4,), note="float32 by default")


@register("creation", samples=_eye_samples, dtypes=ALL,
          torch=lambda torch, n, m=None, dtype=None: torch.eye(n, m if m is not None else n,
                                                               dtype=_td(torch, dtype)))
def eye(n: int, m: int | None = None, dtype=None):
    """The n x m identity matrix (ones on the main diagonal)."""
    m = n if m is None else m
    return xb.iota((n, m), 0) == xb.iota((n, m), 1) if dtype == "bool" else \
        (xb.iota((n, m), 0) == xb.iota((n, m), 1)).astype(dtype or "float32")

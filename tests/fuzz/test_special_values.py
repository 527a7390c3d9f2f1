"""Every backend gives the reference's answers (PyTorch's, see test_semantics.py) at special values: each scalar
function of the language on a grid of signed zeros, infinities, NaN, extremes and ties, integer division and
shifts at their edges, and every float -> int conversion. One operator per group, so each backend compiles a
handful of kernels."""
import itertools

import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench.dtypes import to_numpy
from xbench.fuzz.check import outcomes
from xbench.fuzz.values import SPECIAL_FLOATS

BACKENDS = ["cpu", "cuda", "ascend"]


def agree(op, arrays, backend):
    kind, msg = outcomes(op, arrays, (backend,))[backend]
    assert kind == "ok", msg


def float_grid(dtype="float32"):
    vals = SPECIAL_FLOATS["float32"] + (-3.5, 7.0, 1e-8, 0.75, -0.999, 88.0, -104.0, 1e10, 4.0, -8.0)
    with np.errstate(over="ignore"):
        return np.array(vals, np.float32).astype(dtype)


@xb.tensor_op
def unary_floats(x: Tensor):
    return (xb.abs(x), -x, xb.sign(x), xb.exp(x), xb.exp2(x), xb.expm1(x), xb.log(x), xb.log2(x), xb.log10(x),
            xb.log1p(x), xb.sqrt(x), xb.rsqrt(x), xb.reciprocal(x), xb.sin(x), xb.cos(x), xb.tan(x), xb.asin(x),
            xb.acos(x), xb.atan(x), xb.sinh(x), xb.cosh(x), xb.tanh(x), xb.asinh(x), xb.acosh(x), xb.atanh(x),
            xb.erf(x), xb.erfc(x), xb.erfinv(x), xb.sigmoid(x), xb.floor(x), xb.ceil(x), xb.round(x), xb.trunc(x),
            xb.isnan(x), xb.isinf(x), xb.isfinite(x), xb.signbit(x), x ** 0.5, x ** -0.5, x ** 2, x ** -1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unary_float_functions_at_special_values(backend):
    agree(unary_floats, [float_grid()], backend)


@xb.tensor_op
def binary_floats(a: Tensor, b: Tensor):
    return (a + b, a - b, a * b, a / b, a // b, a % b, xb.fmod(a, b), a ** b, xb.maximum(a, b), xb.minimum(a, b),
            xb.fmax(a, b), xb.fmin(a, b), xb.atan2(a, b), xb.hypot(a, b), xb.copysign(a, b), a == b, a != b,
            a < b, a <= b, a > b, a >= b, xb.clip(a, -1.0, 1.0), xb.clip(a, b, 2.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_binary_float_functions_at_special_values(backend):
    g = float_grid()
    a, b = (np.array(p, np.float32) for p in zip(*itertools.product(g, g)))
    agree(binary_floats, [a, b], backend)


@xb.tensor_op
def integer_edges(a: Tensor, b: Tensor, c: Tensor):
    return a // b, a % b, xb.fmod(a, b), a ** c, a << c, a >> c, xb.maximum(a, b), abs(a), -a, xb.sign(a)


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8", "uint8"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_division_powers_and_shifts_at_their_edges(backend, dtype):
    info = np.iinfo(dtype)
    vals = sorted({int(info.min), int(info.max), 0, 1, 2, 7, int(info.min) + 1} | ({-1, -2, -7} if info.min else set()))
    a, b = (np.array(p, dtype) for p in zip(*itertools.product(vals, vals)))
    counts = [-1, 0, 1, 2, 3, 7, 9, 31, 63, 64, 70] if info.min else [0, 1, 2, 3, 7, 9, 63, 64, 70]
    counts = [v for v in counts if info.min <= v <= info.max]
    c = np.resize(np.array(counts, dtype), a.shape)
    agree(integer_edges, [a, b, c], backend)


@xb.tensor_op
def to_integers(x: Tensor):
    return (x.astype(xb.int8), x.astype(xb.uint8), x.astype(xb.int16), x.astype(xb.int32), x.astype(xb.int64),
            x.astype(xb.bool_))


# the ascend backend has no float64 (the Ascend units have none), the cuda backend no bfloat16 buffers
@pytest.mark.parametrize("backend,src", [(b, s) for b in BACKENDS for s in ("float32", "float64", "float16",
                                                                            "bfloat16")
                                         if (b, s) not in (("ascend", "float64"), ("cuda", "bfloat16"))])
def test_float_to_int_conversions(backend, src):
    vals = [np.nan, np.inf, -np.inf, 300.0, -200.0, -1.0, 255.9, 70000.0, -70000.5, 3e9, -3e9, 1e20, 2.5, -2.5,
            2.0**31, -2.0**31, 2.0**63, -2.0**63, 0.0, -0.0, 127.99, -128.5, 65535.0, 1e-30]
    with np.errstate(over="ignore"):
        x = np.array(vals, np.float64).astype(to_numpy(src))
    agree(to_integers, [x], backend)


@xb.tensor_op
def sorts(x: Tensor):
    return (xb.sort(x, axis=-1), xb.argsort(x, axis=-1), xb.sort(x, axis=-1, descending=True),
            xb.argsort(x, axis=-1, descending=True), xb.topk(x, 3, axis=-1)[1])


@pytest.mark.parametrize("dtype", ["float32", "int64", "int32", "uint8"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_sorting_is_stable_with_nan_last_ascending_and_first_descending(backend, dtype):
    if dtype == "float32":
        row = [1.0, np.nan, 2.0, -np.inf, np.inf, 2.0, np.nan, -0.0, 0.0, 1.0]
    else:
        info = np.iinfo(dtype)
        row = [int(info.min), 5, 0, int(info.max), 5, 1, int(info.min), 2, int(info.max), 0]
    x = np.array([row, row[::-1]], dtype)
    agree(sorts, [x], backend)


@xb.tensor_op
def extremes(x: Tensor):
    return (x.max(axis=-1), x.min(axis=-1), x.max(axis=0), x.min(axis=0), x.argmax(axis=-1), x.argmin(axis=-1),
            x - x.max(axis=-1, keepdims=True), xb.cummax(x, axis=-1), xb.clip(x, -1.0, 1.0))


# the CUDA simulator runs every thread in Python: 300 covers its reduction templates
@pytest.mark.parametrize("backend,width", [(b, w) for b in BACKENDS for w in (8, 300, 70000)
                                           if b != "cuda" or w <= 300])
def test_max_min_reductions_keep_nan(backend, width):
    """Each form of a reduction (a row in one piece, rows streamed in tiles, vectorised over the outputs)
    propagates NaN as PyTorch does, and argmax/argmin give the first NaN's index."""
    rng = np.random.default_rng(width)
    x = rng.standard_normal((3, width)).astype(np.float32)
    x[0, width // 2] = np.nan
    x[1, -1] = np.nan
    x[2, :2] = [np.inf, -np.inf]
    agree(extremes, [x], backend)


@pytest.mark.parametrize("backend,dtype", [(b, d) for b in ("cpu", "ascend") for d in ("float16", "bfloat16")])
def test_16_bit_floats_at_special_values(backend, dtype):
    """The same grids in float16 and bfloat16 (the cuda backend takes no bfloat16 buffers; its float16 path is
    the float32 one): ascend's Cast saturated float16 overflow to 65504 instead of inf."""
    g = float_grid(dtype)
    a, b = (np.array(p).astype(g.dtype) for p in zip(*itertools.product(g, g)))
    agree(unary_floats, [g], backend)
    agree(binary_floats, [a, b], backend)

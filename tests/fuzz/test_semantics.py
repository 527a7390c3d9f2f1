"""The reference's answers at special values are PyTorch's: every scalar function of the language and every
float -> int conversion, on grids of signed zeros, infinities, NaN, extremes and rounding ties, against torch.

Where PyTorch has no answer xbench documents its own: integer division by zero raises ZeroDivisionError in
PyTorch (a kernel cannot), so `//`, `%` and fmod by 0 give numpy's 0. Where PyTorch's vectorised float64 fmod
loses the exact answer (NaN when a / b overflows) the reference keeps C's exact fmod.
"""
import itertools

import numpy as np
import pytest
import torch

from xbench.fuzz.values import SPECIAL_FLOATS, special_ints
from xbench.ir.prims.elementwise import float_to_int
from xbench.ir.scalar import BINARY, UNARY

TORCH_UNARY = {"neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "exp": torch.exp, "exp2": torch.exp2,
               "expm1": torch.expm1, "log": torch.log, "log2": torch.log2, "log10": torch.log10, "log1p": torch.log1p,
               "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal, "sin": torch.sin,
               "cos": torch.cos, "tan": torch.tan, "asin": torch.asin, "acos": torch.acos, "atan": torch.atan,
               "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh, "asinh": torch.asinh,
               "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc,
               "erfinv": torch.erfinv, "sigmoid": torch.sigmoid, "floor": torch.floor, "ceil": torch.ceil,
               "round": torch.round, "trunc": torch.trunc, "isnan": torch.isnan, "isinf": torch.isinf,
               "isfinite": torch.isfinite, "signbit": torch.signbit, "logical_not": torch.logical_not,
               "bitwise_not": torch.bitwise_not}
TORCH_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "floordiv": torch.floor_divide,
                "mod": torch.remainder, "fmod": torch.fmod, "pow": torch.pow, "maximum": torch.maximum,
                "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin, "atan2": torch.atan2,
                "hypot": torch.hypot, "copysign": torch.copysign, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
                "le": torch.le, "gt": torch.gt, "ge": torch.ge, "logical_and": torch.logical_and,
                "logical_or": torch.logical_or, "logical_xor": torch.logical_xor, "bitwise_and": torch.bitwise_and,
                "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor, "shl": torch.bitwise_left_shift,
                "shr": torch.bitwise_right_shift}
GRID_DTYPES = ("float64", "int64", "int32", "int16", "int8", "uint8", "bool")


def grid(dtype: str) -> np.ndarray:
    if dtype == "bool":
        return np.array([False, True])
    if dtype.startswith("float"):
        return np.array(SPECIAL_FLOATS[dtype] + (-3.5, 7.0, 1e-8), dtype)
    vals = [v for v in special_ints(dtype) + (7, -7, 3, 9, 63, 64, 65) if np.iinfo(dtype).min <= v <= np.iinfo(dtype).max]
    return np.array(vals, dtype)


def exact(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == np.bool_ else x.astype(np.float64 if x.dtype.kind == "f" else np.int64)


def same(a, b, rtol=1e-12) -> np.ndarray:
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    with np.errstate(invalid="ignore"):
        return (a == b) | (np.isnan(a) & np.isnan(b)) | (np.abs(a - b) <= rtol * np.abs(b))


@pytest.mark.parametrize("dtype", GRID_DTYPES)
def test_unary_functions_give_pytorchs_answers(dtype):
    x = grid(dtype)
    bad = []
    for name, f in UNARY.items():
        if not f.accepts_dtype(dtype):
            continue
        with np.errstate(all="ignore"):
            r = np.asarray(f.ref(exact(x)))
        if r.dtype.kind in "iu":
            r = r.astype(dtype)
        t = TORCH_UNARY[name](torch.from_numpy(x)).numpy()
        miss = ~same(r, t, 1e-6 if name == "erfinv" else 1e-12)
        if name == "log1p" and dtype == "float64":    # torch's log1p flushes the subnormal 5e-324 to 0
            miss &= ~(np.abs(x) < 1e-300)
        bad += [(name, x[i], r[i], t[i]) for i in np.flatnonzero(miss)]
    assert not bad, bad[:10]


def _torch_pairs(fn, a, b) -> np.ndarray:
    try:
        return fn(torch.from_numpy(a), torch.from_numpy(b)).numpy().astype(np.float64)
    except RuntimeError:           # integer division by zero somewhere: element by element
        out = []
        for u, w in zip(a, b):
            try:
                out.append(float(fn(torch.from_numpy(np.array(u)), torch.from_numpy(np.array(w))).item()))
            except RuntimeError:
                out.append(np.nan)
        return np.array(out)


@pytest.mark.parametrize("dtype", GRID_DTYPES)
def test_binary_functions_give_pytorchs_answers(dtype):
    vals = grid(dtype)
    a, b = (np.array(p, dtype) for p in zip(*itertools.product(vals, vals)))
    bad = []
    for name, f in BINARY.items():
        if not f.accepts_dtype(dtype):
            continue
        with np.errstate(all="ignore"):
            r = np.asarray(f.ref(exact(a), exact(b)))
        if r.dtype.kind in "iu":
            r = r.astype(dtype)
        t = _torch_pairs(TORCH_BINARY[name], a, b)
        miss = ~same(r, t)
        if name in ("floordiv", "mod", "fmod") and dtype not in ("float64", "bool"):
            assert np.all(r[b == 0] == 0), name             # PyTorch raises; xbench gives 0
            miss &= b != 0
        if name in ("mod", "fmod") and dtype == "float64":   # torch loses these when a / b overflows
            with np.errstate(all="ignore"):
                miss &= ~(np.isnan(t) & np.isfinite(a) & np.isfinite(b) & (b != 0) & np.isinf(a / b))
        bad += [(name, a[i], b[i], r[i], t[i]) for i in np.flatnonzero(miss)]
    assert not bad, bad[:10]


def test_integers_to_negative_powers_are_pytorchs():
    a = np.array([2, 1, -1, -1, 0, -3, 5], np.int64)
    b = np.array([-1, -5, -1, -2, -1, -3, 0], np.int64)
    assert BINARY["pow"].ref(a, b).tolist() == [0, 1, -1, 1, 0, 0, 1] == torch.pow(torch.from_numpy(a),
                                                                               torch.from_numpy(b)).tolist()


@pytest.mark.parametrize("src", ["float64", "float32", "float16"])
@pytest.mark.parametrize("dst", ["int8", "uint8", "int16", "int32", "int64"])
def test_float_to_int_conversions_are_pytorchs(src, dst):
    vals = [np.nan, np.inf, -np.inf, 300.0, -200.0, -1.0, 255.9, 70000.0, -70000.5, 3e9, -3e9, 1e20, 2.5, -2.5,
            2.0**31, -2.0**31, 2.0**31 - 1, 2.0**63, -2.0**63, 0.0, -0.0, 127.99, -128.5, 65535.0, 1e-30]
    if src == "float64" and dst == "uint8":      # torch converts float64 -> uint8 through int64 instead
        vals = [v for v in vals if not (np.isfinite(v) and abs(v) >= 2**31)]
    with np.errstate(over="ignore"):
        x = np.array(vals, np.float64).astype(src)
    ours = float_to_int(x.astype(np.float64), dst).astype(dst)
    theirs = torch.from_numpy(x).to(getattr(torch, dst)).numpy()
    assert ours.tolist() == theirs.tolist()


@pytest.mark.parametrize("descending", [False, True])
def test_sorting_is_pytorchs_stable_sort(descending):
    from xbench.ir.prims.scan_sort import _sort_ref
    rows = [np.array([[1, np.nan, 2, -np.inf, np.inf, 2, np.nan, -0.0, 0.0]]),
            np.array([[-2**63, 5, -1, 2**63 - 1, 5, -2**63]])]
    for x in rows:
        values, order = _sort_ref(x, axis=1, descending=descending)
        tv, to = torch.sort(torch.from_numpy(x), dim=1, descending=descending, stable=True)
        assert order.tolist() == to.tolist()
        assert same(values, tv.numpy()).all()

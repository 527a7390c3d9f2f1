"""The vectorisable math helpers of the CPU backend: error bounds in ulps over dense sweeps, special
values bit for bit, that loops using them really vectorise, and that the coefficients are reproducible.

Every function is exercised through `compiled_loop`, i.e. the exact source text the code generator
emits, inlined into a loop compiled with the backend's fast-math flags."""
from __future__ import annotations

import ctypes
import ctypes.util
import math
import re
import zlib

import numba
import numpy as np
import pytest
import scipy.special

from xbench.backends.cpu import mathlib
from xbench.backends.cpu.mathlib import FLAGS, FUNCTIONS, compiled, compiled_loop, helper_source

LD = np.longdouble
UNARY = sorted(k for k, f in FUNCTIONS.items() if f.arity == 1)

# References: float32 functions against float64 numpy/scipy (exact to ~1e-16, far below a float32 ulp);
# float64 functions against long double (glibc expl/logl/tanhl, ~1e-19).
REF32 = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "erf": scipy.special.erf, "sigmoid": scipy.special.expit,
    "expm1": np.expm1, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "exp2": np.exp2, "log2": np.log2,
}
REF64 = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "exp2": np.exp2, "log2": np.log2,
}


def run(name: str, dtype: str, *args: np.ndarray) -> np.ndarray:
    out = np.empty_like(args[0])
    compiled_loop(name, dtype, parallel=False)(*args, out)
    return out


def reference(name: str, dtype: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if dtype == "float32":
            return REF32[name](x.astype(np.float64))
        return REF64[name](x.astype(LD))


def ulp_errors(got: np.ndarray, exact: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """|got - exact| in ulps of `dtype` at the exact value (subnormal spacing below the normal range),
    and a mask of the points whose correctly rounded result is not finite and must match exactly."""
    fi = np.finfo(dtype)
    with np.errstate(all="ignore"):
        rounded = exact.astype(dtype)
        finite = np.isfinite(rounded)
        e = np.frexp(np.where(finite, exact, 1))[1].astype(np.int64)
        ulp = np.ldexp(np.ones_like(exact), np.maximum(e - 1, fi.minexp) - fi.nmant)
        err = np.abs(got.astype(exact.dtype) - exact) / ulp
    err = np.where(finite & (got.astype(exact.dtype) != exact), err, 0)
    return err, ~finite


def all_floats32(lo: float, hi: float, stride: int | None = None, count: int = 0) -> np.ndarray:
    """Every `stride`-th float32 in [lo, hi] (0 <= lo < hi), walking the bit patterns; with `count`
    instead, the odd stride that gives about that many points."""
    a, b = (int(np.float32(v).view(np.int32)) for v in (lo, hi))
    if stride is None:
        stride = max(1, (b - a) // count) | 1
    return np.arange(a, b + 1, stride, dtype=np.int64).astype(np.int32).view(np.float32)


def around(points, dtype: str, k: int = 3) -> np.ndarray:
    """Each point and its k neighbours on either side."""
    out = []
    for p in points:
        p = np.array(p, dtype=dtype)
        lo = hi = p
        for _ in range(k):
            lo, hi = np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)
            out += [lo, hi]
        out.append(p)
    return np.array(out, dtype=dtype)


# Where each function changes formula, saturates or overflows: the sweeps must hit these.
EDGES = {
    "exp": [88.72283, -87.33655, -103.97208, -104.0, 89.0, 0.34657, -0.34657, 709.7827, -708.3964, -745.1332],
    "expm1": [20.0, -18.0, 17.33, 0.34657, -0.34657, 88.72283, 1e-7],
    "exp2": [128.0, 127.99999, -126.0, -149.0, -150.0, 0.5, -0.5, 1024.0, -1022.0, -1074.0, -1075.0],
    "log2": [0.70710677, 1.4142135, 1.1754944e-38, 1.0, 2.0, 0.5, 2.2250738585072014e-308],
    "log": [0.70710677, 1.4142135, 1.1754944e-38, 1.0, 2.2250738585072014e-308],
    "log1p": [-1.0, -0.29289323, 0.41421357, 1e-7, -1e-7, 99.0],
    "tanh": [0.75, 9.1, 19.5, 1e-4],
    "erf": [1.0, mathlib._ERF_ONE_F32, 2.5, 1e-4],
    "sigmoid": [0.0, -87.0, -88.72283, -103.97208, 16.6, 36.8],
    "sin": [math.pi / 4, math.pi / 2, math.pi, 1e5, 2.0 ** 20, 2.0 ** 48, 2.0 ** 127],
    "cos": [math.pi / 4, math.pi / 2, math.pi, 1e5, 2.0 ** 20, 2.0 ** 48, 2.0 ** 127],
}

# Windows where the error peaks, swept densely (about 400 000 floats each, both signs).
DENSE = {
    "exp": (0.0, 90.0), "expm1": (0.0, 21.0), "exp2": (0.0, 130.0), "log": (0.25, 4.0),
    "log2": (0.25, 4.0), "log1p": (0.0, 4.0), "tanh": (0.0, 10.0), "erf": (0.0, 4.0),
    "sigmoid": (0.0, 105.0), "sin": (0.0, 2.0 ** 20), "cos": (0.0, 2.0 ** 20),
}

# Where the documented bound holds (outside: see MathFn.domain).
LIMIT: dict[str, float] = {}


def inputs(name: str, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dtype}".encode()))
    limit = LIMIT.get(name, np.inf)
    if dtype == "float32":
        pos = all_floats32(1e-45, min(limit, 3.4028235e38), 2039)    # every 2039th float32 > 0
        dense = all_floats32(*DENSE[name], count=400_000)
        parts = [pos, -pos, dense, -dense, rng.uniform(-30, 30, 200_000).astype(np.float32)]
    else:
        bits = rng.integers(1, 0x7FF0000000000000, 600_000, dtype=np.int64).view(np.float64)
        parts = [bits, -bits, rng.uniform(-750, 750, 300_000), rng.uniform(-25, 25, 300_000),
                 rng.uniform(-1, 1, 300_000), rng.uniform(0, 3, 300_000)]
    x = np.concatenate(parts + [around(EDGES.get(name, []), dtype),
                                -around(EDGES.get(name, []), dtype)]).astype(dtype)
    return x[np.abs(x) < limit]


@pytest.mark.parametrize("name,dtype", UNARY, ids=[f"{n}-{d}" for n, d in UNARY])
def test_error_bound(name: str, dtype: str) -> None:
    fn = FUNCTIONS[name, dtype]
    x = inputs(name, dtype)
    got = run(name, dtype, x)
    err, nonfinite = ulp_errors(got, reference(name, dtype, x), dtype)
    worst = int(np.argmax(err))
    assert err[worst] <= fn.max_ulp, (
        f"{name}({x[worst]!r}) = {got[worst]!r}: {err[worst]:.3f} ulp > documented {fn.max_ulp}")
    # Results that round to inf (or NaN) must be exactly that.
    with np.errstate(over="ignore"):
        expect = reference(name, dtype, x[nonfinite]).astype(dtype)
    np.testing.assert_array_equal(got[nonfinite], expect)
    # The bound is not vacuous: the typical error is well below it.
    assert np.median(err) < 0.5


def test_pow_error_bound() -> None:
    rng = np.random.default_rng(11)
    n = 400_000
    x = np.concatenate([rng.uniform(0, 10, n), np.exp(rng.uniform(-80, 80, n)), rng.uniform(0.9, 1.1, n),
                        -rng.uniform(0, 5, n)]).astype(np.float32)
    y = np.concatenate([rng.uniform(-30, 30, n), rng.uniform(-1, 1, n), rng.uniform(-500, 500, n),
                        rng.integers(-40, 40, n)]).astype(np.float32)
    got = run("pow", "float32", x, y)
    with np.errstate(all="ignore"):
        exact = np.power(x.astype(LD), y.astype(LD))
    err, nonfinite = ulp_errors(got, exact, "float32")
    assert err.max() <= FUNCTIONS["pow", "float32"].max_ulp
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got[nonfinite], exact[nonfinite].astype(np.float32))


def test_subnormal_inputs_and_results() -> None:
    """log of subnormals is exact to the bound (not flushed); exp's subnormal results are rounded once."""
    x = all_floats32(1e-45, 1.1754942e-38, 997)
    err, _ = ulp_errors(run("log", "float32", x), np.log(x.astype(np.float64)), "float32")
    assert err.max() <= FUNCTIONS["log", "float32"].max_ulp
    x = np.linspace(-103.97, -87.34, 100_001, dtype=np.float32)
    got = run("exp", "float32", x)
    assert np.all(got < np.finfo(np.float32).tiny) and np.count_nonzero(got) > 99_000
    err, _ = ulp_errors(got, np.exp(x.astype(np.float64)), "float32")
    assert err.max() <= 1.0      # in units of the subnormal spacing 2**-149


def strict_loop(name: str, dtype: str, arity: int = 1):
    """The same helper text compiled without any fast-math flag."""
    symbol = FUNCTIONS[name, dtype].symbol
    src = helper_source([symbol])
    flags = "_XB_MATH_FLAGS = {" + ", ".join(repr(f) for f in sorted(FLAGS)) + "}"
    assert flags in src
    args = ", ".join("xy"[:arity])
    src = src.replace(flags, "_XB_MATH_FLAGS = set()") + f"""

@numba.njit(error_model="numpy", cache=True)
def strict_loop({args}, out):
    for i in range(x.shape[0]):
        out[i] = {symbol}({", ".join(f"{a}[i]" for a in "xy"[:arity])})
"""
    return mathlib._load(src).strict_loop


@pytest.mark.parametrize("name,dtype", UNARY, ids=[f"{n}-{d}" for n, d in UNARY])
def test_fast_math_flags_change_nothing(name: str, dtype: str) -> None:
    """With the backend's fast-math flags (mathlib.FLAGS) the results are bit for bit those of strict IEEE
    evaluation of the same text: no ordering the error analysis relies on was rewritten."""
    x = inputs(name, dtype)[::7]
    fast = run(name, dtype, x)
    strict = np.empty_like(x)
    strict_loop(name, dtype)(x, strict)
    differ = ~same_bits(fast, strict)
    assert not differ.any(), f"{name}: {differ.sum()} results differ, e.g. at {x[differ][:3]}"


def test_fast_math_flags_change_nothing_pow() -> None:
    rng = np.random.default_rng(12)
    x = np.concatenate([rng.uniform(0, 10, 100_000), -rng.uniform(0, 5, 100_000)]).astype(np.float32)
    y = np.concatenate([rng.uniform(-30, 30, 100_000), rng.integers(-40, 40, 100_000)]).astype(np.float32)
    strict = np.empty_like(x)
    strict_loop("pow", "float32", arity=2)(x, y, strict)
    assert same_bits(run("pow", "float32", x, y), strict).all()


NAN, INF = float("nan"), float("inf")
# (input, expected output); compared bit for bit, the sign of zero included.
SPECIAL = {
    "exp": [(INF, INF), (-INF, 0.0), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0), (1000.0, INF), (-1000.0, 0.0)],
    "expm1": [(INF, INF), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (1000.0, INF),
              (-1000.0, -1.0)],
    "log": [(0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN), (1.0, 0.0)],
    "exp2": [(INF, INF), (-INF, 0.0), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0), (10.0, 1024.0), (-1.0, 0.5),
             (1100.0, INF), (-1100.0, 0.0), (-149.0, 2.0 ** -149), (-1074.0, 2.0 ** -1074)],
    "log2": [(0.0, -INF), (-0.0, -INF), (-1.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN), (1.0, 0.0),
             (1024.0, 10.0), (0.125, -3.0), (2.0 ** -149, -149.0), (2.0 ** -1074, -1074.0)],
    "log1p": [(-1.0, -INF), (-2.0, NAN), (-INF, NAN), (INF, INF), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0)],
    "tanh": [(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (50.0, 1.0), (-50.0, -1.0)],
    "erf": [(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (10.0, 1.0), (-10.0, -1.0)],
    "sigmoid": [(INF, 1.0), (-INF, 0.0), (NAN, NAN), (0.0, 0.5), (-0.0, 0.5), (200.0, 1.0),
                (-800.0, 0.0)],
    "sin": [(INF, NAN), (-INF, NAN), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0)],
    "cos": [(INF, NAN), (-INF, NAN), (NAN, NAN), (0.0, 1.0), (-0.0, 1.0)],
}


def same_bits(got: np.ndarray, expect: np.ndarray) -> np.ndarray:
    return (np.isnan(got) & np.isnan(expect)) | ((got == expect) & (np.signbit(got) == np.signbit(expect)))


@pytest.mark.parametrize("name,dtype", UNARY, ids=[f"{n}-{d}" for n, d in UNARY])
def test_special_values(name: str, dtype: str) -> None:
    # the float64-only cases (2**-1074) do not apply to float32
    pairs = [(a, b) for a, b in SPECIAL[name] if math.isnan(a) or float(np.array(a, dtype)) == a]
    x, expect = (np.array(v, dtype=dtype) for v in zip(*pairs, strict=True))
    got = run(name, dtype, x)
    bad = ~same_bits(got, expect)
    assert not bad.any(), f"{name}: inputs {x[bad]} gave {got[bad]}, expected {expect[bad]}"


def test_overflow_and_underflow_thresholds() -> None:
    """At the edges of the finite range the results are the correctly rounded ones."""
    for dtype, points in (("float32", [88.72283, 88.72284, -103.97207, -103.9721, -87.33655]),
                          ("float64", [709.782712893384, 709.7827128933841, -745.1332191019411,
                                       -745.1332191019412, -708.3964185322641])):
        x = np.array(points, dtype=dtype)
        with np.errstate(over="ignore"):
            expect = reference("exp", dtype, x).astype(dtype)
        assert np.isinf(expect[1]) and np.isfinite(expect[0]) and expect[2] > 0 and expect[3] == 0
        np.testing.assert_array_equal(run("exp", dtype, x), expect)


def test_pow_special_values() -> None:
    """IEEE 754 pow: pow(x, +-0) = 1 even for NaN, pow(1, y) = 1 even for NaN, negative bases with integer
    exponents, signed zeros and infinities; checked against C's powf (numpy float32 power)."""
    xs = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, INF, -INF, NAN, 3.4e38, 1e-45], np.float32)
    ys = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 0.5, -0.5, INF, -INF, NAN, 1e10, 2.5],
                  np.float32)
    x, y = np.repeat(xs, ys.size), np.tile(ys, xs.size)
    got = run("pow", "float32", x, y)
    # C's powf element by element: numpy's vectorised power is 1 ulp off at (3.4e38, 0.5), and its scalar power
    # answers y = 0.5 with sqrt (-0.0 at -0.0, NaN at -inf)
    libm = ctypes.CDLL(ctypes.util.find_library("m"))
    libm.powf.restype, libm.powf.argtypes = ctypes.c_float, [ctypes.c_float, ctypes.c_float]
    expect = np.array([libm.powf(a, b) for a, b in zip(x, y, strict=True)], np.float32)
    bad = ~same_bits(got, expect)
    assert not bad.any(), f"pow{list(zip(x[bad], y[bad], strict=True))[:5]} -> {got[bad][:5]}, " \
                          f"expected {expect[bad][:5]}"
    hand = [((-2.0, 3.0), -8.0), ((-0.0, -1.0), -INF), ((-0.0, -2.0), INF), ((-INF, 3.0), -INF),
            ((-INF, -3.0), -0.0), ((-8.0, 1 / 3), NAN), ((NAN, 0.0), 1.0), ((1.0, NAN), 1.0),
            ((-1.0, INF), 1.0), ((0.5, INF), 0.0), ((0.5, -INF), INF)]
    x, y = (np.array(v, np.float32) for v in zip(*[a for a, _ in hand], strict=True))
    expect = np.array([b for _, b in hand], np.float32)
    assert same_bits(run("pow", "float32", x, y), expect).all()


def test_sin_cos_of_huge_arguments() -> None:
    """From 2**48 up the reduction goes through 2**e mod 2pi: every float32 of every 61st bit pattern up to the
    largest, against glibc's float64 sin and cos (which reduce exactly)."""
    x = all_floats32(2.0 ** 47, 3.4028235e38, 61)
    x = np.concatenate([x, -x, np.array([2.0 ** 60, -3.4e38, 1e20, 7e15, 5215548416.0], np.float32)])
    for name in ("sin", "cos"):
        err, _ = ulp_errors(run(name, "float32", x), reference(name, "float32", x), "float32")
        assert err.max() <= FUNCTIONS[name, "float32"].max_ulp, (name, x[np.argmax(err)])


# ---- vectorisation: the loop must compile to packed SIMD code without libm calls --------------------

RUNTIME_SYMBOL = re.compile(r"^(NRT_|Py|_Py|_ZN)")


def loop_asm(fn) -> str:
    sig = fn.signatures[0]
    return fn.inspect_asm(sig)


def external_symbols(asm: str) -> set[str]:
    """Symbols other than numba's and CPython's runtime that the machine code references (libm calls
    appear as `movabsq $expf, %reg; callq *%reg`)."""
    return {s for s in re.findall(r"\$([A-Za-z_][\w.@]*)", asm) if not RUNTIME_SYMBOL.match(s)}


def packed_ops(asm: str, dtype: str) -> int:
    sfx = "ps" if dtype == "float32" else "pd"
    return len(re.findall(rf"\bv\w+{sfx}\s[^\n]*%[yz]mm", asm))


@pytest.mark.parametrize("name,dtype", sorted(FUNCTIONS), ids=[f"{n}-{d}" for n, d in sorted(FUNCTIONS)])
def test_loop_vectorises(name: str, dtype: str) -> None:
    fn = compiled_loop(name, dtype, parallel=False, cache=False)
    a = np.linspace(0.5, 1.5, 64).astype(dtype)
    fn(*([a] * FUNCTIONS[name, dtype].arity), np.empty_like(a))
    asm = loop_asm(fn)
    assert external_symbols(asm) == set(), f"{name}/{dtype} loop calls {external_symbols(asm)}"
    assert packed_ops(asm, dtype) >= 8, f"{name}/{dtype}: the loop was not vectorised"


def test_vectorisation_check_detects_libm() -> None:
    """The check above fails on the thing it guards against: a loop over math.exp."""
    @numba.njit(fastmath=set(FLAGS), error_model="numpy")
    def libm_loop(x, out):
        for i in range(x.shape[0]):
            out[i] = math.exp(x[i])

    a = np.ones(64, np.float32)
    libm_loop(a, np.empty_like(a))
    assert external_symbols(loop_asm(libm_loop)) == {"expf"}


# ---- the interface the code generator uses ----------------------------------------------------------

def test_helper_source_orders_dependencies_once() -> None:
    def defined(src: str) -> list[str]:
        """Helpers in the order the text defines them (exp by importing its intrinsic under its symbol)."""
        found = re.findall(r"^(?:def (\w+)\(|from xbench\.backends\.cpu\.mathlib import \w+ as (\w+)$)", src,
                           flags=re.MULTILINE)
        return [a or b for a, b in found]

    src = helper_source(["_xb_tanh_f32", "_xb_sigmoid_f32", "_xb_exp_f32"])
    assert defined(src) == ["_xb_exp_f32", "_xb_tanh_f32", "_xb_sigmoid_f32"]
    assert src.count("import exp as _xb_exp_f32") == 1
    assert defined(helper_source(["_xb_pow_f32"])) == ["_xb_exp_f64", "_xb_log_f64", "_xb_pow_f32"]
    assert helper_source([]) == ""


def test_helper_source_is_a_self_contained_module() -> None:
    """All helpers in one text, loaded as a module of its own (as the generated file is)."""
    module = mathlib._load(helper_source([f.symbol for f in FUNCTIONS.values()]))
    assert numba.njit(lambda x: module._xb_exp_f32(x))(np.float32(1.0)) == np.float32(np.e)  # an intrinsic
    assert module._xb_log_f64(1.0) == 0.0
    assert module._xb_pow_f32(np.float32(2.0), np.float32(10.0)) == 1024.0


def test_unknown_helper_names_the_alternatives() -> None:
    with pytest.raises(KeyError, match="_xb_exp_f32"):
        helper_source(["_xb_exp_f16"])
    with pytest.raises(KeyError, match="available: .*exp:float32"):
        compiled("erf", "float64")


def test_bit_casts_round_trip_and_explain_type_errors() -> None:
    @numba.njit
    def casts(x, d):
        return (mathlib.f32_as_i32(x), mathlib.f64_as_i64(d),
                mathlib.i32_as_f32(mathlib.f32_as_i32(x)), mathlib.i64_as_f64(mathlib.f64_as_i64(d)))

    assert casts(np.float32(1.0), -2.0) == (0x3F800000, -0x4000000000000000, 1.0, -2.0)

    @numba.njit
    def widened(k):
        return mathlib.i32_as_f32((k + np.int32(127)) << np.int32(23))

    with pytest.raises(numba.core.errors.TypingError, match=r"wrap the expression in np\.int32"):
        widened(np.int32(3))


def test_functions_table() -> None:
    assert FUNCTIONS["exp", "float32"].symbol == "_xb_exp_f32"
    for (name, dtype), fn in FUNCTIONS.items():
        assert fn.name == name and fn.dtype == dtype and fn.max_ulp >= 0.5 and fn.domain
        text = helper_source([fn.symbol])
        assert f"def {fn.symbol}(" in text or f" as {fn.symbol}\n" in text


def test_scalar_and_parallel_entry_points_agree() -> None:
    x = np.linspace(-5, 5, 100_003).astype(np.float32)
    par = np.empty_like(x)
    compiled_loop("tanh", "float32", parallel=True)(x, par)
    np.testing.assert_array_equal(par, run("tanh", "float32", x))
    scalar = compiled("tanh", "float32")
    np.testing.assert_array_equal([scalar(v) for v in x[::1000]], par[::1000])


# ---- coefficients -----------------------------------------------------------------------------------

def test_float32_tables_refit_in_float64_on_every_platform() -> None:
    """float64 arithmetic resolves the float32 tables but one wherever the tests run (to 4 float32 ulps). The
    exception is the degree-12 erf fit: its exchange for the top coefficients, of residuals near its 4e-8
    error, goes astray in float64 with some BLAS kernels (OpenBLAS's SkylakeX dot products: a polynomial 1.7
    ulps from the table's and 2.1x its error), so that table needs long double, as the float64 ones do."""
    specs = [s for s in mathlib._FITS if s.dtype == "float32" and s.key != "erf_large_f32"]
    assert specs and {s.key for s in specs} <= mathlib._COEFFS.keys()
    for spec in specs:
        np.testing.assert_allclose(mathlib._fit_one(spec, t=np.float64), mathlib._COEFFS[spec.key],
                                   rtol=2.0 ** -21, atol=0, err_msg=spec.key)


def test_fit_reproduces_the_coefficient_table() -> None:
    """Every table refitted in long double (x86-64 and aarch64 Linux: 80 and 128 bits). Where long double is
    float64 (Windows, macOS on Apple silicon) the float64 tables cannot be resolved: `_fit` says so, and the
    test above still refits the float32 tables there."""
    if np.finfo(LD).nmant < 63:
        with pytest.raises(RuntimeError, match="extended long double"):
            mathlib._fit()
        return
    fitted = mathlib._fit()
    assert fitted.keys() == mathlib._COEFFS.keys()
    for spec in mathlib._FITS:
        # the same polynomial to 1/8 of an ulp of its dtype over its interval. The float64 tables' high
        # coefficients are not determined that well: on another machine the refit moved exp_f64's 11th by
        # 0.5 % and exp2_f64's 12th by 1.2e-12 of itself, for a polynomial within 0.06 ulp of the table's
        ulp = 2.0 ** -24 if spec.dtype == "float32" else 2.0 ** -53
        v = np.linspace(LD(spec.lo), LD(spec.hi), 4001)
        got, want = _horner(fitted[spec.key], v), _horner(mathlib._COEFFS[spec.key], v)
        assert np.max(np.abs(got - want)) <= ulp / 8 * np.max(np.abs(want)), spec.key
        if spec.dtype == "float32":
            np.testing.assert_allclose(fitted[spec.key], mathlib._COEFFS[spec.key], rtol=2.0 ** -21, atol=0,
                                       err_msg=spec.key)


def _horner(coeffs, v: np.ndarray) -> np.ndarray:
    acc = np.zeros_like(v)
    for c in reversed(coeffs):
        acc = acc * v + LD(c)
    return acc


def test_coefficient_literals_round_trip() -> None:
    """The emitted decimals, parsed as float64 and rounded, give back the fitted coefficients."""
    for key, coeffs in mathlib._COEFFS.items():
        spec = next(s for s in mathlib._FITS if s.key == key)
        if spec.dtype == "float32":
            assert all(np.float32(float(mathlib._num32(c))) == np.float32(c) for c in coeffs)
        else:
            assert all(float(mathlib._num64(c)) == c for c in coeffs)


def test_erf_saturation_constant() -> None:
    """_ERF_ONE_F32 is the smallest float32 whose erf rounds to 1.0f."""
    one = np.float32(mathlib._ERF_ONE_F32)
    below = np.nextafter(one, np.float32(0))
    assert np.float32(scipy.special.erf(np.float64(one))) == 1.0
    assert np.float32(scipy.special.erf(np.float64(below))) < 1.0

"""Vectorisable elementary functions for the CPU backend.

numba here has no SVML, so ``math.exp`` and friends inside a loop stay scalar libm calls and stop LLVM
from vectorising the loop. The functions below are written only with arithmetic, comparisons, selects,
``llvm.fmuladd``, ``llvm.rint`` and bit casts, so once inlined into a loop they become packed AVX2 /
AVX-512 code.

How the generated code uses them: ``helper_source(symbols)`` returns Python source (imports, then each
helper once, dependencies first) that the code generator pastes into the generated module; the kernel
calls e.g. ``_xb_tanh_f32(x)``. exp is the exception: it is an intrinsic (``exp``) that emits its LLVM IR
in place, and the helper text imports it under its symbol (numba inlines a jitted helper by typing and
lowering it again in each kernel, which for exp alone cost softmax and attention 0.3 s of compile).
``FUNCTIONS[name, dtype]`` says which symbol implements a function and its error bound. ``compiled`` /
``compiled_loop`` build the same text into a real module in the cache directory (numba's ``cache=True``
needs a file), for tests and benchmarks.

Numerics, for every function:

* Range reduction: exp-like functions use ``x = n*ln2 + r`` with ``n = rint(x/ln2)`` and ln2 split in
  two (Cody-Waite), ``|r| <= ln2/2``; the result is ``p(r) * 2**n`` with ``2**n`` built from its bit
  pattern in two steps, so results near the overflow threshold and subnormal results are rounded once.
  log splits ``x = 2**k * m`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` from the bit pattern (subnormal
  inputs are scaled by ``2**23`` / ``2**52`` first, so they are handled exactly).
* Polynomials: minimax fits made by ``_fit()`` below (a Remez exchange in long double with the
  coefficients rounded one at a time to the target precision, each rounding followed by a refit of the
  remaining ones). ``_COEFFS`` is its output pasted in; ``tests/cpu/test_mathlib.py`` checks that
  ``_fit()`` reproduces it.
* Fast-math: the generated kernels use ``FLAGS`` (reassoc only; never nnan/ninf, nsz, arcp, contract or afn),
  and the helpers are inlined with those flags. Orderings that matter are pinned with ``fmuladd``
  (LLVM's IR passes do not reassociate through an intrinsic call; its x86 backend does move a term
  added to an fma chain into the chain's innermost product, so no sum that matters is written that
  way), the sign of zero is set with integer bit operations (``nsz`` may otherwise flip it), and
  NaN/inf are handled with explicit selects. The tests compare every function with and without the
  flags.
* Special values follow C99 Annex F: exp(-inf) = 0, exp(inf) = inf, log(0) = -inf, log(x<0) = NaN,
  tanh(+-inf) = +-1, tanh(-0) = -0, erf(+-inf) = +-1, sigmoid(-inf) = 0, sigmoid(inf) = 1, pow per
  IEEE 754 ``pow``; NaN propagates everywhere. Subnormal inputs and results are computed, not flushed.

Accuracy, in ulps of the result against the exact value (bound enforced by the tests / largest seen; see
the note above ``FUNCTIONS`` for how it was measured):

    float32  exp 1.1/1.008  exp2 1.0/0.910  log 1.0/0.921  log2 1.2/1.172  tanh 1.2/1.066
             erf 1.5/1.484  sigmoid 2.5/2.402  expm1 1.5/1.439  log1p 1.5/1.452
             sin 0.6/0.5006  cos 0.6/0.5001  pow 0.6/0.500
    float64  exp 1.1/0.981  exp2 1.0/0.846  log 1.0/0.763  log2 1.0/0.827  tanh 1.2/1.063
             sigmoid 2.5/2.251

sin, cos and pow take float32 in and out but compute in float64. float64 erf, expm1, log1p, sin, cos,
pow are not provided: the backend calls libm for those (scalar, correct, slower).

The bounds were measured on a CPU with FMA (Intel since Haswell, AMD since Piledriver), where
``fmuladd`` is one fused instruction. Without FMA it is a multiply and an add: results stay close and
special values exact, but the bounds are not guaranteed, and sin/cos reduce exactly only below 2**20.
"""
from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

__all__ = [
    "FLAGS",
    "FUNCTIONS",
    "MathFn",
    "compiled",
    "compiled_loop",
    "f32_as_i32",
    "f64_as_i64",
    "fmuladd",
    "from_order_key",
    "helper_source",
    "i32_as_f32",
    "i64_as_f64",
    "int_max",
    "int_min",
    "magnitude_bits",
    "order_key",
    "rint",
    "wrapping_add",
    "wrapping_mul",
    "wrapping_sub",
]

FLAGS: frozenset[str] = frozenset({"reassoc"})                # as the kernels' (codegen.FASTMATH)


# --------------------------------------------------------------------------------------------------
# Intrinsics: bit casts, a fused multiply-add that LLVM's IR passes never reassociate, and
# round-to-nearest-even.

def _bitcast(src: types.Type, dst: types.Type, lltype: ir.Type):
    def typer(typingctx, x):
        if x != src:
            from numba.core.errors import TypingError

            hint = (f"; numba widens {src} arithmetic to int64, so wrap the expression in np.{src}(...)"
                    if isinstance(src, types.Integer) and isinstance(x, types.Integer) else "")
            raise TypingError(f"xbench: bit cast to {dst} needs an argument of type {src}, got {x}{hint}")

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], lltype)

        return dst(x), codegen

    return typer


@intrinsic
def f32_as_i32(typingctx, x):
    """The bits of a float32 as an int32 (LLVM ``bitcast``)."""
    return _bitcast(types.float32, types.int32, ir.IntType(32))(typingctx, x)


@intrinsic
def i32_as_f32(typingctx, n):
    """The float32 whose bits are the int32 ``n``."""
    return _bitcast(types.int32, types.float32, ir.FloatType())(typingctx, n)


@intrinsic
def f64_as_i64(typingctx, x):
    """The bits of a float64 as an int64."""
    return _bitcast(types.float64, types.int64, ir.IntType(64))(typingctx, x)


@intrinsic
def i64_as_f64(typingctx, n):
    """The float64 whose bits are the int64 ``n``."""
    return _bitcast(types.int64, types.float64, ir.DoubleType())(typingctx, n)


@intrinsic
def bf16_bits(typingctx, x):
    """float32 -> bfloat16 bits (uint16): round to nearest even, NaN kept a quiet NaN. In 32-bit integer lanes:
    the same rounding in numba's arithmetic widens to int64, and LLVM 22's AVX-512 code for those lanes, after
    an inlined helper's sign-bit select (tanh), stored wrong bits."""
    if x != types.float32:
        return None
    i32 = ir.IntType(32)

    def codegen(context, builder, signature, args):
        c = lambda v: ir.Constant(i32, v)                                   # noqa: E731
        u = builder.bitcast(args[0], i32)
        high = builder.lshr(u, c(16))
        rounded = builder.lshr(builder.add(u, builder.add(c(0x7FFF), builder.and_(high, c(1)))), c(16))
        nan = builder.icmp_unsigned(">", builder.and_(u, c(0x7FFFFFFF)), c(0x7F800000))
        return builder.trunc(builder.select(nan, builder.or_(high, c(0x40)), rounded), ir.IntType(16))

    return types.uint16(x), codegen


# Order keys: a float's bits as a signed integer whose order is the float order, so a max/min reduction runs as
# an integer one, which LLVM vectorises without fast-math flags (a NaN-propagating float select chain stays
# scalar). key = bits ^ ((bits >> (w-1)) & INT_MAX) flips the magnitude of negatives; it is its own inverse.
# NaNs are told apart by their magnitude bits, which exceed those of inf.

_FLOAT_INT = {types.float32: (types.int32, ir.IntType(32)), types.float64: (types.int64, ir.IntType(64))}


def _key(builder, bits, width):
    sign = builder.ashr(bits, ir.Constant(bits.type, width - 1))
    return builder.xor(bits, builder.and_(sign, ir.Constant(bits.type, (1 << (width - 1)) - 1)))


def _from_bits(x, transform):
    """Typing of an intrinsic float32/float64 -> int32/int64 computed as `transform(builder, bits, width)`."""
    if x not in _FLOAT_INT:
        return None
    ity, llty = _FLOAT_INT[x]

    def codegen(context, builder, signature, args):
        return transform(builder, builder.bitcast(args[0], llty), llty.width)

    return ity(x), codegen


@intrinsic
def order_key(typingctx, x):
    """float32/float64 -> int32/int64 whose signed order is x's order (-0.0 just below +0.0)."""
    return _from_bits(x, _key)


@intrinsic
def from_order_key(typingctx, k):
    """The float whose `order_key` is k (int32 -> float32, int64 -> float64)."""
    back = {ity: (fty, llty) for fty, (ity, llty) in _FLOAT_INT.items()}
    if k not in back:
        return None
    fty, llty = back[k]

    def codegen(context, builder, signature, args):
        return builder.bitcast(_key(builder, args[0], llty.width), context.get_value_type(fty))

    return fty(k), codegen


@intrinsic
def magnitude_bits(typingctx, x):
    """x's bits without the sign, as an integer: above those of inf exactly when x is NaN."""
    return _from_bits(x, lambda builder, bits, width: builder.and_(bits, ir.Constant(bits.type,
                                                                                     (1 << (width - 1)) - 1)))


def _int_select(op: str):
    def typer(typingctx, a, b):
        if not isinstance(a, types.Integer) or a != b:
            return None

        def codegen(context, builder, signature, args):
            cmp = builder.icmp_signed(op, *args) if a.signed else builder.icmp_unsigned(op, *args)
            return builder.select(cmp, *args)

        return a(a, b), codegen

    return typer


@intrinsic
def int_max(typingctx, a, b):
    """max of two integers of one type, as one select (numba's generic `max` costs 0.03 s to type and lower
    at each use)."""
    return _int_select(">")(typingctx, a, b)


@intrinsic
def int_min(typingctx, a, b):
    """min of two integers of one type, as one select."""
    return _int_select("<")(typingctx, a, b)


@intrinsic
def select(typingctx, c, a, b):
    """`a if c else b` of two values already computed: one select instruction instead of a branch, so loops over
    it vectorise and data-dependent conditions (a ReLU's mask) are not mispredicted (a where over 2 MB of random
    float32: 2.5 ms as a branch, 0.23 ms as a select)."""
    if not isinstance(c, (types.Boolean, types.Integer)):
        return None
    t = typingctx.unify_pairs(a, b)
    if not isinstance(t, (types.Number, types.Boolean)):
        return None

    def codegen(context, builder, signature, args):
        cond, x, y = args
        if isinstance(c, types.Integer):
            cond = builder.icmp_unsigned("!=", cond, ir.Constant(cond.type, 0))
        return builder.select(cond, context.cast(builder, x, a, t), context.cast(builder, y, b, t))

    return t(c, a, b), codegen


def _wrapping(op: str):
    def typer(typingctx, a, b):
        if a != types.int64 or b != types.int64:
            return None

        def codegen(context, builder, signature, args):
            return getattr(builder, op)(*args)       # no `nsw`: numba's own int64 + - * let LLVM assume no overflow

        return types.int64(a, b), codegen

    return typer


@intrinsic
def wrapping_add(typingctx, a, b):
    """a + b in int64, wrapping on overflow as PyTorch does (numba's `+` is `add nsw`: LLVM turned
    `x + INT64_MIN` into `x | INT64_MIN`)."""
    return _wrapping("add")(typingctx, a, b)


@intrinsic
def wrapping_sub(typingctx, a, b):
    """a - b in int64, wrapping."""
    return _wrapping("sub")(typingctx, a, b)


@intrinsic
def wrapping_mul(typingctx, a, b):
    """a * b in int64, wrapping."""
    return _wrapping("mul")(typingctx, a, b)


def _llvm_float_call(name: str, nargs: int):
    def typer(typingctx, *args):
        if len(args) != nargs or args[0] not in (types.float32, types.float64):
            return None
        if any(a != args[0] for a in args):
            return None

        def codegen(context, builder, signature, llargs):
            lt = llargs[0].type
            suffix = "f32" if args[0] == types.float32 else "f64"
            fn = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(lt, [lt] * nargs), f"llvm.{name}.{suffix}")
            return builder.call(fn, list(llargs))

        return args[0](*args), codegen

    return typer


@intrinsic
def fmuladd(typingctx, a, b, c):
    """``a*b + c`` (fused on CPUs with FMA) for float32 or float64. LLVM's IR passes do not reassociate
    it; its x86 backend may move a term added to the result into the operands (see the module notes)."""
    return _llvm_float_call("fmuladd", 3)(typingctx, a, b, c)


@intrinsic
def rint(typingctx, x):
    """Round to the nearest integer, ties to even, keeping the float type (``llvm.rint``)."""
    return _llvm_float_call("rint", 1)(typingctx, x)


# --------------------------------------------------------------------------------------------------
# Coefficients. Output of _fit(), monomial coefficients, lowest degree first.

# Pasted from `python -m xbench.backends.cpu.mathlib --fit`.
_COEFFS_FITTED: dict[str, tuple[float, ...]] = {
    'exp_f32': (0.49999994, 0.16666517, 0.041668102, 0.008369197, 0.001383901),
    'expm1_f32': (0.5, 0.16666636, 0.04166651, 0.00834151, 0.0013930544, 0.00015016952),
    'log_f32': (-0.49999988, 0.33333334, -0.25001633, 0.20001413, -0.16607076, 0.14192119, -0.13272667, 0.1284765, -0.07472038),
    'tanh_f32': (-0.33333328, 0.13332964, -0.053911988, 0.021514328, -0.0077509433, 0.0017902048),
    'erf_small_f32': (0.12837917, -0.37612626, 0.11283579, -0.026853347, 0.0051871636, -0.0007997885, 7.807085e-05),
    'erf_large_f32': (0.9995931, 0.0021780275, -0.0054470683, 0.008353839, -0.008612763, 0.00610137, -0.0028238287, 0.0005727078, 0.00029209716, -0.00028015338, 5.936131e-05, 2.1281767e-05, -8.699348e-06),
    'sin_f64': (-0.16666666651380146, 0.008333330168566314, -0.0001983952682899178, 2.7197890512769285e-06),
    'cos_f64': (0.04166666665920332, -0.001388888628400296, 2.4800080109820344e-05, -2.725011462316598e-07),
    'exp2_f32': (0.6931472, 0.24022594, 0.055503663, 0.009625445, 0.0013387927, 0.00013332508),
    'log2_f32': (-0.72134733, 0.48089778, -0.360699, 0.28860092, -0.23957942, 0.20388293, -0.1906665, 0.19084536, -0.116817385),
    'exp2_f64': (0.6931471805599453, 0.24022650695909997, 0.05550410866482377, 0.00961812910767078, 0.0013333558145894348, 0.00015403530315144368, 1.5252734342700533e-05, 1.3215549909561557e-06, 1.0177843530053369e-07, 7.0318088454964135e-09, 4.4886592337721476e-10, 5.7158053095283904e-11),
    'exp_f64': (0.5, 0.1666666666666668, 0.041666666666666435, 0.008333333333319141, 0.0013888888889017424, 0.00019841269892343082, 2.4801587061848192e-05, 2.7557238101016837e-06, 2.7557491352031885e-07, 2.5111108106237278e-08, 2.0850320786249706e-09),
    'log_f64': (0.6666666666666684, 0.39999999999678776, 0.2857142869261321, 0.22222203068856208, 0.18183353725831947, 0.15318988139316145, 0.1475011822306271),
    'tanh_f64': (-0.3333333333333333, 0.1333333333333144, -0.053968253966563094, 0.02186948847876586, -0.00886323450412284, 0.0035921168995919814, -0.0014557551381987187, 0.0005896416073288055, -0.0002378142227198309, 9.375350691019559e-05, -3.39382616097766e-05, 9.686297942569532e-06, -1.5375391751219973e-06),
}



@dataclass(frozen=True)
class _FitSpec:
    key: str
    dtype: str          # precision the coefficients are rounded to
    lo: float           # interval of the polynomial variable
    hi: float
    degree: int
    doc: str


# --------------------------------------------------------------------------------------------------
# Constants that are not fits: splits of ln2 and pi/2 computed from high-precision decimals.

def _pi(digits: int = 60) -> Decimal:
    """pi by Machin's formula in decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = digits + 10

        def arctan_inv(n: int) -> Decimal:
            x = Decimal(1) / n
            x2, term, total, k = x * x, x, x, 1
            while True:
                term *= -x2
                k += 2
                step = term / k
                if abs(step) < Decimal(10) ** -(digits + 5):
                    return total
                total += step

        return +(4 * (4 * arctan_inv(5) - arctan_inv(239)))


def _split(value: Decimal, bits: int, parts: int, dtype: str) -> list[float]:
    """``value`` as a sum of ``parts`` floats; every part but the last has only ``bits`` significant
    bits, so products with small integers are exact."""
    out = []
    rest = value
    for i in range(parts):
        v = float(rest) if dtype == "float64" else float(np.float32(float(rest)))
        if i < parts - 1:
            m, e = np.frexp(v)
            v = float(np.ldexp(np.rint(np.ldexp(m, bits)), int(e) - bits))
        out.append(v)
        rest -= Decimal(v)
    return out


with localcontext() as _ctx:
    _ctx.prec = 70
    _LN2 = Decimal(2).ln()
    _PIO2 = _pi() / 2
    _LOG2E = 1 / _LN2
_LN2_F32 = _split(_LN2, 9, 2, "float32")        # hi has 9 bits: n*hi exact for |n| < 2**15
_LOG2E_F32 = _split(_LOG2E, 24, 2, "float32")   # log2(e) as a float32 and the float32 of the rest
_LOG2E_F64 = _split(_LOG2E, 21, 2, "float64")   # hi has 21 bits: hi * (21-bit number) exact
_LN2_F64 = _split(_LN2, 32, 2, "float64")       # hi has 32 bits: n*hi exact for |n| < 2**21
_PIO2_F64 = _split(_PIO2, 33, 3, "float64")     # n*p1, n*p2 exact for |n| < 2**20
_SINCOS_LIMIT = 1048576.0                       # 2**20: |x| below this is reduced exactly enough
_TRIG_BIG = 2.0 ** 48                            # from here float32 sin/cos reduce through TRIG_HI/TRIG_LO


def _trig_table() -> tuple[np.ndarray, np.ndarray]:
    """2**e mod 2pi as float64 pairs hi + lo, for the exponents e = 25 .. 104 of float32 values m * 2**e
    (integer m < 2**24) from 2**48 up: m * 2**e and m * (hi + lo) differ by a multiple of 2pi, and the
    latter is below 2**27, where the ordinary reduction is exact."""
    with localcontext() as ctx:
        ctx.prec = 130
        two_pi = 2 * _pi(120)
        hi, lo = [], []
        for e in range(25, 105):
            r = Decimal(2) ** e % two_pi
            h = float(r)
            hi.append(h)
            lo.append(float(r - Decimal(h)))
    return np.array(hi), np.array(lo)


TRIG_HI, TRIG_LO = _trig_table()
_ERF_ONE_F32 = 3.919206                         # smallest float32 whose erf rounds to 1.0f


# --------------------------------------------------------------------------------------------------
# Fitting. Only needed to (re)produce _COEFFS; run `python -m xbench.backends.cpu.mathlib --fit`.

_LD = np.longdouble

_FITS: tuple[_FitSpec, ...] = (
    _FitSpec("exp_f32", "float32", -0.3467, 0.3467, 4,
             "exp(r) = 1 + r + r^2 Q(r); relative error of exp"),
    _FitSpec("expm1_f32", "float32", -0.3467, 0.3467, 5,
             "expm1(r) = r + r^2 Q(r); relative error of expm1"),
    _FitSpec("log_f32", "float32", -0.29300, 0.41430, 8,
             "log1p(f) = f + f^2 R(f) for f = m - 1, m in [sqrt(1/2), sqrt(2)]"),
    _FitSpec("tanh_f32", "float32", 0.0, 0.5626, 5,
             "tanh(x) = x + x^3 P(x^2) for |x| < 0.75"),
    _FitSpec("erf_small_f32", "float32", 0.0, 1.0, 6,
             "erf(x) = x + x P(x^2) for |x| < 1"),
    _FitSpec("erf_large_f32", "float32", -1.5, _ERF_ONE_F32 - 2.5, 12,
             "erf(x) = L(x - 2.5) for 1 <= x < 3.919206"),
    _FitSpec("sin_f64", "float64", 0.0, 0.6170, 3,
             "sin(r) = r + r^3 S(r^2), |r| <= pi/4, float32-level accuracy"),
    _FitSpec("cos_f64", "float64", 0.0, 0.6170, 3,
             "cos(r) = 1 - r^2/2 + r^4 C(r^2), |r| <= pi/4, float32-level accuracy"),
    _FitSpec("exp2_f32", "float32", -0.5001, 0.5001, 5,
             "2^r = 1 + r Q(r), |r| <= 1/2; relative error of 2^r"),
    _FitSpec("log2_f32", "float32", -0.29300, 0.41430, 8,
             "log2(1+f) = f log2(e) + f^2 R(f) for f = m - 1, m in [sqrt(1/2), sqrt(2)]"),
    _FitSpec("exp2_f64", "float64", -0.5001, 0.5001, 11,
             "2^r = 1 + r Q(r), |r| <= 1/2; relative error of 2^r"),
    _FitSpec("exp_f64", "float64", -0.3467, 0.3467, 10,
             "exp(r) = 1 + r + r^2 Q(r); relative error of exp"),
    _FitSpec("log_f64", "float64", 0.0, 0.029440, 6,
             "log1p(f) = 2 atanh(s), s = f/(2+f): 2 atanh(s) = 2s + s z R(z), z = s^2"),
    _FitSpec("tanh_f64", "float64", 0.0, 0.5626, 12,
             "tanh(x) = x + x^3 P(x^2) for |x| < 0.75"),
)

_COEFFS: dict[str, tuple[float, ...]] = {
    s.key: tuple(float(np.float32(c)) if s.dtype == "float32" else float(c) for c in _COEFFS_FITTED[s.key])
    for s in _FITS if s.key in _COEFFS_FITTED  # a new fit is missing until --fit is pasted in
}


def _ld(q: Fraction, t: Any = _LD) -> Any:
    return t(float(q)) if np.finfo(t).nmant <= 52 else t(q.numerator) / t(q.denominator)


def _series(v: np.ndarray, coeffs: list[Fraction]) -> np.ndarray:
    out = np.zeros_like(v)
    for c in reversed(coeffs):
        out = out * v + _ld(c, v.dtype.type)
    return out


def _bernoulli(n: int) -> list[Fraction]:
    from math import comb

    b = [Fraction(1)]
    for m in range(1, n + 1):
        b.append(-sum(comb(m + 1, k) * b[k] for k in range(m)) / (m + 1))
    return b


def _targets(key: str, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(target values, weight) of fit ``key`` on the long-double grid ``v``; the weight turns an error
    in the fitted polynomial into a relative error of the final function."""
    from math import factorial

    import scipy.special

    if key in ("exp_f32", "exp_f64", "expm1_f32"):
        t = _series(v, [Fraction(1, factorial(k)) for k in range(2, 40)])
        full = np.exp(v) if key != "expm1_f32" else v + v * v * t
        return t, np.abs(v * v / full, where=v != 0, out=np.zeros_like(v))
    if key in ("log_f32", "log2_f32"):
        t = _series(v, [Fraction((-1) ** (k + 1), k + 2) for k in range(120)])
        w = np.abs(v * v / (v + v * v * t), where=v != 0, out=np.zeros_like(v))
        return (t * _ld(Fraction(_LOG2E), v.dtype.type) if key == "log2_f32" else t), w
    if key in ("exp2_f32", "exp2_f64"):
        ln2 = Fraction(_LN2)
        t = _series(v, [ln2 ** k / factorial(k) for k in range(1, 40)])
        return t, np.abs(v / (1 + v * t))
    if key == "log_f64":
        return _series(v, [Fraction(2, 2 * k + 3) for k in range(40)]), v / 2
    if key in ("tanh_f32", "tanh_f64"):
        b = _bernoulli(90)
        coeffs = [Fraction(2 ** (2 * n) * (2 ** (2 * n) - 1)) * b[2 * n] / factorial(2 * n)
                  for n in range(2, 45)]
        t = _series(v, coeffs)
        return t, v / (1 + v * t)
    if key == "erf_small_f32":
        c = [Fraction((-1) ** n, factorial(n) * (2 * n + 1)) for n in range(40)]
        s = _series(v, c) * (2 / np.sqrt(v.dtype.type(np.pi)))
        return s - 1, 1 / s
    if key == "erf_large_f32":
        e = scipy.special.erf(np.asarray(v + 2.5, dtype=np.float64)).astype(v.dtype)
        return e, 1 / e
    if key == "sin_f64":
        return (_series(v, [Fraction((-1) ** (k + 1), factorial(2 * k + 3)) for k in range(30)]),
                v / (1 - v / 6))
    if key == "cos_f64":
        return (_series(v, [Fraction((-1) ** k, factorial(2 * k + 4)) for k in range(30)]),
                v * v / (1 - v / 2))
    raise KeyError(key)


def _solve_ld(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Gaussian elimination with partial pivoting in long double (numpy's solvers are float64)."""
    a, b = a.copy(), b.copy()
    n = len(b)
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        a[[k, p]], b[[k, p]] = a[[p, k]], b[[p, k]]
        f = a[k + 1:, k] / a[k, k]
        a[k + 1:, k:] -= f[:, None] * a[k, k:]
        b[k + 1:] -= f * b[k]
    x = np.zeros(n, dtype=a.dtype)
    for k in range(n - 1, -1, -1):
        x[k] = (b[k] - a[k, k + 1:] @ x[k + 1:]) / a[k, k]
    return x


def _frac(x: Any) -> Fraction:
    n, d = x.as_integer_ratio()
    return Fraction(int(n), int(d))


def _remez(target: np.ndarray, weight: np.ndarray, v: np.ndarray, p0: int, degree: int
           ) -> list[Fraction]:
    """Coefficients c_p0..c_(p0+degree) minimising max |weight * (target - sum c_k v^k)| on the grid.
    Solved in a Chebyshev basis in long double; returned exactly as monomial coefficients."""
    from numpy.polynomial import chebyshev

    lo, hi = v.min(), v.max()
    basis = chebyshev.chebvander((2 * v - lo - hi) / (hi - lo), degree) * (v ** p0)[:, None]
    n, npts = degree + 1, len(v)
    ref = np.unique(np.round((npts - 1) * (1 - np.cos(np.linspace(0, np.pi, n + 1))) / 2).astype(int))
    best: tuple[np.ndarray, Any] | None = None
    for _ in range(60):
        a = np.empty((len(ref), n + 1), dtype=v.dtype)
        a[:, :n] = basis[ref] * weight[ref, None]
        a[:, n] = (-1.0) ** np.arange(len(ref))
        coef = _solve_ld(a, target[ref] * weight[ref])[:n]
        err = weight * (target - basis @ coef)
        emax = np.abs(err).max()
        if best is None or emax < best[1]:
            best = (coef, emax)
        sign = np.where(err >= 0, 1, -1)
        runs = np.split(np.arange(npts), np.flatnonzero(np.diff(sign)) + 1)
        ext = np.array([r[np.argmax(np.abs(err[r]))] for r in runs])
        while len(ext) > n + 1:     # keep n+1 alternating extrema, dropping the smallest
            vals = np.abs(err[ext])
            j = int(np.argmin(np.minimum(vals[:-1], vals[1:])))
            end = 0 if vals[0] < vals[-1] else len(ext) - 1
            if len(ext) - n - 1 >= 2 and min(vals[j], vals[j + 1]) < vals[end]:
                ext = np.delete(ext, [j, j + 1])
            else:
                ext = np.delete(ext, end)
        if len(ext) < n + 1 or emax - np.abs(err[ext]).min() <= 1e-3 * emax:
            break
        ref = ext
    assert best is not None
    # Chebyshev -> monomials, exactly
    lo_f, hi_f = _frac(lo), _frac(hi)
    al, be = 2 / (hi_f - lo_f), -(lo_f + hi_f) / (hi_f - lo_f)
    cheb = [[Fraction(1)], [be, al]]
    for _ in range(2, n):
        nxt = [Fraction(0)] * (len(cheb[-1]) + 1)
        for i, c in enumerate(cheb[-1]):
            nxt[i] += 2 * be * c
            nxt[i + 1] += 2 * al * c
        for i, c in enumerate(cheb[-2]):
            nxt[i] -= c
        cheb.append(nxt)
    mono = [Fraction(0)] * n
    for j in range(n):
        aj = _frac(best[0][j])
        for i, c in enumerate(cheb[j]):
            mono[i] += aj * c
    return mono


def _fit_one(spec: _FitSpec, npts: int = 3000, t: Any = _LD) -> tuple[float, ...]:
    """One table, fitted in the floating type `t` (long double; float64 resolves the float32 tables but the
    degree-12 erf one, whose top coefficients depend on the BLAS kernel in float64)."""
    lo, hi = t(spec.lo), t(spec.hi)
    v = (lo + hi) / 2 - (hi - lo) / 2 * np.cos(t(np.pi) * np.arange(npts, dtype=t) / (npts - 1))
    target, weight = _targets(spec.key, v)
    # The weight may vanish (at r = 0 for exp); a floor keeps the exchange well posed.
    weight = np.maximum(weight, weight.max() / 16)
    rnd = (lambda q: float(np.float32(float(q)))) if spec.dtype == "float32" else float
    out: list[float] = []
    residual = target.copy()
    for k in range(spec.degree + 1):
        c = rnd(_remez(residual, weight, v, k, spec.degree - k)[0])
        out.append(c)
        residual = residual - t(c) * v ** k
    return tuple(out)


def _fit() -> dict[str, tuple[float, ...]]:
    """Recompute every coefficient table (a few seconds). Needs an 80- or 128-bit long double."""
    if np.finfo(_LD).nmant < 63:
        raise RuntimeError("xbench: mathlib._fit() needs an extended long double (x86-64 or "
                           "aarch64 Linux); this platform's long double is float64")
    return {spec.key: _fit_one(spec) for spec in _FITS}


def _coeffs_text(table: dict[str, tuple[float, ...]]) -> str:
    """``table`` as the Python literal pasted into ``_COEFFS_TEXT`` (shortest round-trip decimals)."""
    lines = []
    for spec in _FITS:
        fmt = _num32 if spec.dtype == "float32" else _num64
        body = ", ".join(fmt(c) for c in table[spec.key])
        lines.append(f"    {spec.key!r}: ({body}),")
    return "{\n" + "\n".join(lines) + "\n}"


# --------------------------------------------------------------------------------------------------
# Source text of the helpers.

def _num32(v: float) -> str:
    f = np.float32(v)
    s = np.format_float_positional(f, unique=True, trim="0")
    if f != 0 and not 1e-4 <= abs(f) < 1e8:
        s = np.format_float_scientific(f, unique=True, trim="-")
    if np.float32(float(s)) != f:       # parsed as float64, then rounded: must give f back
        s = f"{float(f):.17g}"
    return s


def _num64(v: float) -> str:
    return repr(float(v))


def _f32(v: float) -> str:
    return f"np.float32({_num32(v)})"


def _poly(var: str, arg: str, key: str, lit, indent: str = "    ") -> str:
    """Horner's scheme with fmuladd, one line per coefficient."""
    c = _COEFFS[key]
    lines = [f"{indent}{var} = {lit(c[-1])}"]
    lines += [f"{indent}{var} = _xb_fma({var}, {arg}, {lit(ck)})" for ck in reversed(c[:-1])]
    return "\n".join(lines)


_DECO = '@numba.njit(inline="always", fastmath=_XB_MATH_FLAGS, error_model="numpy", cache=True)'


def _set_sign(y: str, x: str, dt: str = "float32", op: str = "|") -> str:
    """A statement giving ``y`` the sign of ``x`` (``op="^"``: flipping ``y``'s sign where ``x``'s is set), through
    ``llvm.copysign``: exact under the kernels' fast-math flags (no ``nsz``). Not integer bit operations: LLVM 22's
    AVX-512 code merged ``(bits(x) & sign) | (bits(y) & ~sign)`` wrongly where it knew x's low half zero (an input
    widened from bfloat16), and tanh of bf16 came out as tiny numbers."""
    one = "np.float32(1.0)" if dt == "float32" else "1.0"
    if op == "^":
        return f"    {y} = {y} * math.copysign({one}, {x})"
    return f"    {y} = math.copysign({y}, {x})"


def _exp_ir(builder: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """e**x for a float32 or float64 LLVM value. x = n*ln2 + r, |r| <= ln2/2; e**x = p(r) * 2**n, 2**n applied in
    two steps (2**k1 added to the exponent bits of p, which stays normal, then * 2**(n - k1)), so results near
    overflow and subnormal results are rounded once. NaN is clamped like any input and put back at the end."""
    single = isinstance(x.type, ir.FloatType)
    ft, wt, i32 = x.type, ir.IntType(32 if single else 64), ir.IntType(32)
    num = (lambda v: ir.Constant(ft, float(np.float32(v)))) if single else (lambda v: ir.Constant(ft, float(v)))
    top, bottom = (89.0, -104.0) if single else (710.0, -746.0)
    hi, lo = _LN2_F32 if single else _LN2_F64
    kmax, kmin, bias, shift = (127, -125, 127, 23) if single else (1023, -1021, 1023, 52)

    def call(name: str, *args: ir.Value) -> ir.Value:
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ft, [ft] * len(args)),
                                            f"llvm.{name}.{'f32' if single else 'f64'}")
        return builder.call(fn, list(args))

    def clamp(v: ir.Value, op: str, bound, cmp) -> ir.Value:
        return builder.select(cmp(op, v, bound), v, bound)

    xc = clamp(clamp(x, "<", num(top), builder.fcmp_ordered), ">", num(bottom), builder.fcmp_ordered)
    n = call("rint", builder.fmul(xc, num(1.4426950408889634)))
    r = call("fmuladd", n, num(-hi), xc)
    r = call("fmuladd", n, num(-lo), r)
    coeffs = _COEFFS["exp_f32" if single else "exp_f64"]
    q = num(coeffs[-1])
    for c in reversed(coeffs[:-1]):
        q = call("fmuladd", q, r, num(c))
    p = builder.fadd(call("fmuladd", builder.fmul(r, r), q, r), num(1.0))
    k = builder.fptosi(n, i32)
    k1 = clamp(clamp(k, "<", ir.Constant(i32, kmax), builder.icmp_signed), ">", ir.Constant(i32, kmin),
               builder.icmp_signed)
    wide = (lambda v: v) if single else (lambda v: builder.sext(v, wt))
    y = builder.bitcast(builder.add(builder.bitcast(p, wt), builder.shl(wide(k1), ir.Constant(wt, shift))), ft)
    scale = builder.shl(wide(builder.add(builder.sub(k, k1), ir.Constant(i32, bias))), ir.Constant(wt, shift))
    y = builder.fmul(y, builder.bitcast(scale, ft))
    return builder.select(builder.fcmp_ordered("==", x, x), y, x)


@intrinsic
def exp(typingctx, x):
    """e**x for float32 / float64 (``_xb_exp_f32`` / ``_xb_exp_f64`` in generated code), emitted as LLVM IR in
    place: numba's own inlining of a jitted helper types and lowers it again in every kernel that calls it,
    0.3 s for exp, the function softmax and attention lean on. The kernel's fast-math flags apply to it as to
    the inlined helpers."""
    if x not in (types.float32, types.float64):
        return None
    return x(x), lambda context, builder, signature, args: _exp_ir(builder, args[0])


def _src_exp(dt: str) -> str:
    return f"\nfrom xbench.backends.cpu.mathlib import exp as _xb_exp_{'f32' if dt == 'float32' else 'f64'}\n"


def _src_exp2(dt: str) -> str:
    if dt == "float32":
        c, top, bot, kmax, kmin, bias, shift, sym = _f32, 129.0, -151.0, 127, -125, 127, 23, "f32"
        it, i2f, f2i = "np.int32", "_xb_i32_as_f32", "_xb_f32_as_i32"
        one = _f32(1.0)
    else:
        c, top, bot, kmax, kmin, bias, shift, sym = _num64, 1025.0, -1076.0, 1023, -1021, 1023, 52, "f64"
        it, i2f, f2i = "np.int64", "_xb_i64_as_f64", "_xb_f64_as_i64"
        one = "1.0"
    return f'''
{_DECO}
def _xb_exp2_{sym}(x):
    """2**x, {dt}. n = rint(x), r = x - n (exact), 2**x = (1 + r Q(r)) * 2**n."""
    xc = x if x < {c(top)} else {c(top)}  # NaN -> {top}, put back at the end
    xc = xc if xc > {c(bot)} else {c(bot)}
    n = _xb_rint(xc)
    r = xc - n
{_poly("q", "r", f"exp2_{sym}", c)}
    p = _xb_fma(r, q, {one})
    k = np.int32(n)
    k1 = k if k < np.int32({kmax}) else np.int32({kmax})
    k1 = k1 if k1 > np.int32({kmin}) else np.int32({kmin})
    y = {i2f}({it}({f2i}(p) + ({it}(k1) << {it}({shift}))))
    y = y * {i2f}({it}({it}(k - k1 + np.int32({bias})) << {it}({shift})))
    return y if x == x else x
'''


def _src_log2_f32() -> str:
    chi, clo = _LOG2E_F32
    return f'''
{_DECO}
def _xb_log2_f32(x):
    """log2, float32. x = 2**k * m, m in [sqrt(1/2), sqrt(2)), f = m - 1;
    log2(x) = k + (f log2(e) + f*f R(f)), the bracket rounded before k is added."""
    sub = x < np.float32(1.1754944e-38)
    xs = x * np.float32(8388608.0) if sub else x  # subnormal: scale by 2**23 first
    ix = _xb_f32_as_i32(xs)
    k = np.int32(np.int32(ix - np.int32(0x3F3504F3)) >> np.int32(23))
    f = _xb_i32_as_f32(np.int32(ix - (k << np.int32(23)))) - np.float32(1.0)
    e = np.float32(k) - (np.float32(23.0) if sub else np.float32(0.0))
{_poly("q", "f", "log2_f32", _f32)}
    v = _xb_fma(f, {_f32(chi)}, _xb_fma(f, {_f32(clo)}, (f * f) * q))
    # The select sits between the fma chain and the add on purpose: under reassoc+contract LLVM's
    # backend would move a term added to an fma chain into its innermost product (e + f*f*R first).
    v = v if x > np.float32(0.0) else (np.float32(-np.inf) if x == np.float32(0.0) else np.float32(np.nan))
    y = e + v
    return y if x < np.float32(np.inf) else x  # +inf and NaN
'''


def _src_log2_f64() -> str:
    chi, clo = _LOG2E_F64
    return f'''
{_DECO}
def _xb_log2_f64(x):
    """log2, float64. As log, with log1p(f) kept as hi + lo (hi: 21 bits) so that the product by
    log2(e) = {chi!r} + {clo!r} loses nothing."""
    sub = x < 2.2250738585072014e-308
    xs = x * 4503599627370496.0 if sub else x  # subnormal: scale by 2**52 first
    ix = _xb_f64_as_i64(xs)
    k = (ix - np.int64(0x3FE6A09E667F3BCD)) >> np.int64(52)
    f = _xb_i64_as_f64(ix - (k << np.int64(52))) - 1.0
    e = np.float64(np.int32(k)) - (52.0 if sub else 0.0)
    s = f / (2.0 + f)
    z = s * s
{_poly("q", "z", "log_f64", _num64)}
    hf = 0.5 * f
    hfsq = hf * f
    hi = _xb_i64_as_f64(_xb_f64_as_i64(f - hfsq) & np.int64(-0x100000000))
    lo = _xb_fma(-hf, f, f - hi)  # (f - hi) - f*f/2; f - hi is exact
    lo = _xb_fma(s, _xb_fma(z, q, hfsq), lo)
    v = _xb_fma(hi, {chi!r}, _xb_fma(lo, {chi + clo!r}, hi * {clo!r}))  # hi * {chi!r} is exact
    v = v if x > 0.0 else (-np.inf if x == 0.0 else np.nan)  # also keeps e out of the chain
    y = e + v
    return y if x < np.inf else x  # +inf and NaN
'''


def _src_expm1_f32() -> str:
    hi, lo = _LN2_F32
    return f'''
{_DECO}
def _xb_expm1_f32(x):
    """e**x - 1, float32. expm1(x) = 2**n * expm1(r) + (2**n - 1), one rounding; exp(x) above 20."""
    xc = x if x < np.float32(20.0) else np.float32(20.0)
    xc = xc if xc > np.float32(-18.0) else np.float32(-18.0)
    n = _xb_rint(xc * {_f32(1.4426950408889634)})
    r = _xb_fma(n, {_f32(-hi)}, xc)
    r = _xb_fma(n, {_f32(-lo)}, r)
{_poly("q", "r", "expm1_f32", _f32)}
    em = _xb_fma(r * r, q, r)
    s = _xb_i32_as_f32(np.int32((np.int32(n) + np.int32(127)) << np.int32(23)))
    y = _xb_fma(em, s, s - np.float32(1.0))
{_set_sign("y", "x")}
    y = y if x < np.float32(20.0) else _xb_exp_f32(x)
    return y if x == x else x
'''


def _src_log_f32() -> str:
    hi, lo = _LN2_F32
    return f'''
{_DECO}
def _xb_log_f32(x):
    """Natural log, float32. x = 2**k * m, m in [sqrt(1/2), sqrt(2)); log(x) = k*ln2 + log1p(m - 1)."""
    sub = x < np.float32(1.1754944e-38)
    xs = x * np.float32(8388608.0) if sub else x  # subnormal: scale by 2**23 first
    ix = _xb_f32_as_i32(xs)
    k = np.int32(np.int32(ix - np.int32(0x3F3504F3)) >> np.int32(23))
    f = _xb_i32_as_f32(np.int32(ix - (k << np.int32(23)))) - np.float32(1.0)
    e = np.float32(k) - (np.float32(23.0) if sub else np.float32(0.0))
{_poly("q", "f", "log_f32", _f32)}
    y = _xb_fma(f * f, q, f)
    y = _xb_fma(e, {_f32(lo)}, y)
    y = _xb_fma(e, {_f32(hi)}, y)
    y = y if x > np.float32(0.0) else (np.float32(-np.inf) if x == np.float32(0.0) else np.float32(np.nan))
    return y if x < np.float32(np.inf) else x  # +inf and NaN
'''


def _src_log1p_f32() -> str:
    hi, lo = _LN2_F32
    return f'''
{_DECO}
def _xb_log1p_f32(x):
    """log(1 + x), float32. 1 + x = 2**k * m; m - 1 = x * 2**-k + (2**-k - 1) with one rounding."""
    u = x + np.float32(1.0)
    iu = _xb_f32_as_i32(u)
    k = np.int32(np.int32(iu - np.int32(0x3F3504F3)) >> np.int32(23))
    kc = k if k < np.int32(100) else np.int32(100)
    s = _xb_i32_as_f32(np.int32((np.int32(127) - kc) << np.int32(23)))
    f = _xb_fma(x, s, s - np.float32(1.0))
    f = f if k < np.int32(100) else _xb_i32_as_f32(np.int32(iu - (k << np.int32(23)))) - np.float32(1.0)
    e = np.float32(k)
{_poly("q", "f", "log_f32", _f32)}
    y = _xb_fma(f * f, q, f)
    y = _xb_fma(e, {_f32(lo)}, y)
    y = _xb_fma(e, {_f32(hi)}, y)
{_set_sign("y", "x")}
    y = y if x > np.float32(-1.0) else (np.float32(-np.inf) if x == np.float32(-1.0) else np.float32(np.nan))
    return y if x < np.float32(np.inf) else x  # +inf and NaN
'''


def _src_log_f64() -> str:
    hi, lo = _LN2_F64
    return f'''
{_DECO}
def _xb_log_f64(x):
    """Natural log, float64. x = 2**k * m, m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f/(2 + f):
    log1p(f) = f - (f*f/2 - s*(f*f/2 + R(s*s)))."""
    sub = x < 2.2250738585072014e-308
    xs = x * 4503599627370496.0 if sub else x  # subnormal: scale by 2**52 first
    ix = _xb_f64_as_i64(xs)
    k = (ix - np.int64(0x3FE6A09E667F3BCD)) >> np.int64(52)
    f = _xb_i64_as_f64(ix - (k << np.int64(52))) - 1.0
    e = np.float64(np.int32(k)) - (52.0 if sub else 0.0)
    s = f / (2.0 + f)
    z = s * s
{_poly("q", "z", "log_f64", _num64)}
    hf = 0.5 * f
    w = _xb_fma(s, _xb_fma(z, q, hf * f), e * {lo!r})
    y = _xb_fma(e, {hi!r}, f - _xb_fma(hf, f, -w))  # fma: the order of f - (f*f/2 - w) must hold
    y = y if x > 0.0 else (-np.inf if x == 0.0 else np.nan)
    return y if x < np.inf else x  # +inf and NaN
'''


def _src_tanh(dt: str) -> str:
    if dt == "float32":
        c, sym, exp, cut, top = _f32, "_xb_tanh_f32", "_xb_exp_f32", _f32(0.75), _f32(9.1)
        one, two, lim = _f32(1.0), _f32(2.0), "9.1"
    else:
        c, sym, exp, cut, top = _num64, "_xb_tanh_f64", "_xb_exp_f64", "0.75", "19.5"
        one, two, lim = "1.0", "2.0", "19.5"
    key = "tanh_f32" if dt == "float32" else "tanh_f64"
    return f'''
{_DECO}
def {sym}(x):
    """tanh, {dt}. |x| < 0.75: x + x**3 P(x*x); above: 1 - 2/(e**2|x| + 1); 1 beyond {lim}."""
    a = abs(x)
    u = a * a
{_poly("q", "u", key, c)}
    ys = _xb_fma(a * u, q, a)
    ac = a if a < {top} else {top}  # NaN -> {lim}, put back at the end
    yl = {one} - {two} / ({exp}(ac + ac) + {one})
    y = ys if a < {cut} else yl
{_set_sign("y", "x", dt)}
    return y if x == x else x
'''


def _src_sigmoid(dt: str) -> str:
    sfx = "f32" if dt == "float32" else "f64"
    one, zero = ("np.float32(1.0)", "np.float32(0.0)") if dt == "float32" else ("1.0", "0.0")
    return f'''
{_DECO}
def _xb_sigmoid_{sfx}(x):
    """1 / (1 + e**-x), {dt}, as (1 or e**x) / (1 + e**-|x|): one division, and tiny results for
    x << 0 stay accurate."""
    e = _xb_exp_{sfx}(-abs(x))
    y = ({one} if x >= {zero} else e) / ({one} + e)
    return y if x == x else x
'''


def _src_erf_f32() -> str:
    return f'''
{_DECO}
def _xb_erf_f32(x):
    """erf, float32. |x| < 1: x + x P(x*x); 1 <= |x| < {_ERF_ONE_F32}: L(|x| - 2.5) (the subtraction is
    exact there); beyond: 1."""
    a = abs(x)
    u = a * a
{_poly("p", "u", "erf_small_f32", _f32)}
    ys = _xb_fma(a, p, a)
    t = (a if a < {_f32(_ERF_ONE_F32)} else {_f32(_ERF_ONE_F32)}) - np.float32(2.5)
{_poly("q", "t", "erf_large_f32", _f32)}
    y = ys if a < np.float32(1.0) else q
    y = y if a < {_f32(_ERF_ONE_F32)} else np.float32(1.0)
{_set_sign("y", "x")}
    return y if x == x else x
'''


def _src_trig_f32(which: str) -> str:
    p1, p2, p3 = _PIO2_F64
    if which == "sin":
        pick = "y = c if (q & np.int32(1)) != np.int32(0) else s\n" \
               "    y = -y if (q & np.int32(2)) != np.int32(0) else y"
        sign = "\n" + _set_sign("y32", "x", op="^")  # sin(-x) = -sin(x)
    else:
        pick = "y = s if (q & np.int32(1)) != np.int32(0) else c\n" \
               "    y = -y if ((q + np.int32(1)) & np.int32(2)) != np.int32(0) else y"
        sign = ""
    return f'''
{_DECO}
def _xb_{which}_f32(x):
    """{which}, float32, computed in float64: n = rint(|x| * 2/pi), r = |x| - n*pi/2 with pi/2 in three
    parts (exact for |x| < 2**20, and up to 2**48 where fmuladd is fused; beyond, |x| = m * 2**e is first
    replaced by m * (2**e mod 2pi)), then the sin or cos polynomial by quadrant."""
    a = np.float64(abs(x))
    n = _xb_rint(a * 0.6366197723675814)
    n = n if n < 4503599627370496.0 else 4503599627370496.0  # 2**52; NaN too
    r = _xb_fma(n, {-p1!r}, a)
    r = _xb_fma(n, {-p2!r}, r)
    r = _xb_fma(n, {-p3!r}, r)
    # from 2**48: |x| = m * 2**e, and m * (2**e mod 2pi), kept as th + te, is reduced instead
    bits = _xb_f32_as_i32(x) & np.int32(0x7FFFFFFF)
    k = (bits >> np.int32(23)) - np.int32(175)
    k = k if k > np.int32(0) else np.int32(0)
    k = k if k < np.int32(79) else np.int32(79)
    m = np.float64((bits & np.int32(0x7FFFFF)) | np.int32(0x800000))
    th = m * _xb_trig_hi[k]
    te = _xb_fma(m, _xb_trig_hi[k], -th) + m * _xb_trig_lo[k]
    nb = _xb_rint(th * 0.6366197723675814)
    rb = _xb_fma(nb, {-p1!r}, th)
    rb = _xb_fma(nb, {-p2!r}, rb)
    rb = _xb_fma(nb, {-p3!r}, rb) + te
    big = a >= {_TRIG_BIG!r}
    n = nb if big else n
    r = rb if big else r
    z = r * r
{_poly("ps", "z", "sin_f64", _num64)}
{_poly("pc", "z", "cos_f64", _num64)}
    s = _xb_fma(r * z, ps, r)
    c = _xb_fma(z * z, pc, 1.0 - 0.5 * z)
    q = np.int32(n - 4.0 * _xb_rint(n * 0.25)) & np.int32(3)  # n mod 4, exact in float64
    {pick}
    y32 = np.float32(y){sign}
    return y32 if a < np.inf else (np.float32(np.nan) if a == np.inf else x)
'''


def _src_pow_f32() -> str:
    return f'''
{_DECO}
def _xb_pow_f32(x, y):
    """x**y, float32, as exp(y * log|x|) in float64 (the product needs the extra bits), with the
    special cases of IEEE 754 pow (negative x with integer y, zeros, infinities, pow(x, 0) = 1, pow(1, y) = 1)."""
    xd = np.float64(x)
    yd = np.float64(y)
    ax = abs(xd)
    r = _xb_exp_f64(yd * _xb_log_f64(ax))
    is_int = _xb_rint(yd) == yd
    odd = is_int & (_xb_rint(yd * 0.5) != yd * 0.5)
    r = -r if odd & (_xb_f32_as_i32(x) < np.int32(0)) else r
    r = np.nan if (xd < 0.0) & (ax < np.inf) & (not is_int) else r
    r = 1.0 if (yd == 0.0) | (xd == 1.0) | ((ax == 1.0) & (abs(yd) == np.inf)) else r
    return np.float32(r)
'''


@dataclass(frozen=True)
class MathFn:
    """One vectorisable function: the symbol generated code calls, its error bound, its domain."""
    name: str
    dtype: str
    symbol: str
    max_ulp: float      # max error in ulps of the result over the domain, as tested
    domain: str         # where the bound holds and what happens elsewhere
    arity: int = 1


_SOURCES: dict[str, Any] = {
    "_xb_exp_f32": lambda: _src_exp("float32"),
    "_xb_exp_f64": lambda: _src_exp("float64"),
    "_xb_exp2_f32": lambda: _src_exp2("float32"),
    "_xb_exp2_f64": lambda: _src_exp2("float64"),
    "_xb_log2_f32": _src_log2_f32,
    "_xb_log2_f64": _src_log2_f64,
    "_xb_expm1_f32": _src_expm1_f32,
    "_xb_log_f32": _src_log_f32,
    "_xb_log_f64": _src_log_f64,
    "_xb_log1p_f32": _src_log1p_f32,
    "_xb_tanh_f32": lambda: _src_tanh("float32"),
    "_xb_tanh_f64": lambda: _src_tanh("float64"),
    "_xb_sigmoid_f32": lambda: _src_sigmoid("float32"),
    "_xb_sigmoid_f64": lambda: _src_sigmoid("float64"),
    "_xb_erf_f32": _src_erf_f32,
    "_xb_sin_f32": lambda: _src_trig_f32("sin"),
    "_xb_cos_f32": lambda: _src_trig_f32("cos"),
    "_xb_pow_f32": _src_pow_f32,
}

_ALL = "all inputs"
_TRIG = ("all inputs with FMA hardware (|x| < 2**20 and from 2**48 up without)")
# max_ulp: the bound the tests enforce. Largest errors measured over every 7th float32 bit pattern
# (6e8 inputs per function) and every float32 in +-[0.25, 4] (every negative float32 for sigmoid);
# float64 over 4.8e7 random inputs: exp32 1.008, exp2_32 0.910, log32 0.921, log2_32 1.172 (at
# 1.4142135), tanh32 1.066, erf32 1.484, sigmoid32 2.402, expm1 1.439, log1p 1.452, sin 0.5006,
# cos 0.5001, pow32 0.500 (8e6 random pairs), exp64 0.981, exp2_64 0.846, log64 0.763, log2_64 0.827,
# tanh64 1.063, sigmoid64 2.251.
FUNCTIONS: dict[tuple[str, str], MathFn] = {
    (f.name, f.dtype): f for f in (
        MathFn("exp", "float32", "_xb_exp_f32", 1.1, _ALL + "; subnormal results rounded once"),
        MathFn("exp", "float64", "_xb_exp_f64", 1.1, _ALL + "; subnormal results rounded once"),
        MathFn("exp2", "float32", "_xb_exp2_f32", 1.0, _ALL + "; subnormal results rounded once"),
        MathFn("exp2", "float64", "_xb_exp2_f64", 1.0, _ALL + "; subnormal results rounded once"),
        MathFn("log2", "float32", "_xb_log2_f32", 1.2, _ALL + ", subnormal inputs included"),
        MathFn("log2", "float64", "_xb_log2_f64", 1.0, _ALL + ", subnormal inputs included"),
        MathFn("expm1", "float32", "_xb_expm1_f32", 1.5, _ALL),
        MathFn("log", "float32", "_xb_log_f32", 1.0, _ALL + ", subnormal inputs included"),
        MathFn("log", "float64", "_xb_log_f64", 1.0, _ALL + ", subnormal inputs included"),
        MathFn("log1p", "float32", "_xb_log1p_f32", 1.5, _ALL),
        MathFn("tanh", "float32", "_xb_tanh_f32", 1.2, _ALL),
        MathFn("tanh", "float64", "_xb_tanh_f64", 1.2, _ALL),
        MathFn("sigmoid", "float32", "_xb_sigmoid_f32", 2.5, _ALL),
        MathFn("sigmoid", "float64", "_xb_sigmoid_f64", 2.5, _ALL),
        MathFn("erf", "float32", "_xb_erf_f32", 1.5, _ALL),
        MathFn("sin", "float32", "_xb_sin_f32", 0.6, _TRIG),
        MathFn("cos", "float32", "_xb_cos_f32", 0.6, _TRIG),
        MathFn("pow", "float32", "_xb_pow_f32", 0.6, _ALL + " (both arguments)", arity=2),
    )
}

_PRELUDE = '''import math

import numba
import numpy as np

from xbench.backends.cpu.mathlib import (
    f32_as_i32 as _xb_f32_as_i32,
    f64_as_i64 as _xb_f64_as_i64,
    fmuladd as _xb_fma,
    i32_as_f32 as _xb_i32_as_f32,
    i64_as_f64 as _xb_i64_as_f64,
    rint as _xb_rint,
)
from xbench.backends.cpu.mathlib import TRIG_HI as _xb_trig_hi, TRIG_LO as _xb_trig_lo

_XB_MATH_FLAGS = {flags}
'''

_SYMBOL_RE = re.compile(r"\b(_xb_[a-z0-9]+_f(?:32|64))\(")


def _deps(symbol: str) -> list[str]:
    return [s for s in dict.fromkeys(_SYMBOL_RE.findall(_SOURCES[symbol]())) if s != symbol]


def helper_source(names: Iterable[str]) -> str:
    """Python source defining the helpers ``names`` (symbols such as ``"_xb_exp_f32"``, see
    ``FUNCTIONS``) and everything they call, each once, callees first, after the imports they need.
    Paste it once into a generated module; ``""`` when ``names`` is empty."""
    order: list[str] = []

    def visit(sym: str, chain: tuple[str, ...]) -> None:
        if sym not in _SOURCES:
            known = ", ".join(sorted(_SOURCES))
            raise KeyError(f"xbench: no vectorisable math helper named {sym!r}; known: {known}")
        if sym in order:
            return
        for dep in _deps(sym):
            visit(dep, chain + (sym,))
        order.append(sym)

    for name in names:
        visit(name, ())
    if not order:
        return ""
    flags = "{" + ", ".join(repr(f) for f in sorted(FLAGS)) + "}"
    return _PRELUDE.format(flags=flags) + "".join("\n" + _SOURCES[s]() for s in order)


def _lookup(name: str, dtype: str) -> MathFn:
    dtype = np.dtype(dtype).name
    try:
        return FUNCTIONS[name, dtype]
    except KeyError:
        have = ", ".join(f"{n}:{d}" for n, d in sorted(FUNCTIONS))
        raise KeyError(f"xbench: no vectorisable {name} for {dtype}; available: {have}") from None


def _load(source: str):
    from xbench.cache import digest, import_source, write_once
    from xbench.config import cache_dir, tool_versions

    key = digest("mathlib", source, tool_versions())
    modname = f"_xb_math_{key}"
    if modname in sys.modules:
        return sys.modules[modname]
    path = cache_dir("mathlib") / f"{modname}.py"
    write_once(path, source)
    return import_source(modname, path)


def compiled(name: str, dtype: str = "float32"):
    """The numba function for ``name`` in ``dtype``, built from exactly the text ``helper_source``
    emits (so tests check what generated kernels run). Scalar in, scalar out."""
    fn = _lookup(name, dtype)
    args = ", ".join("xy"[: fn.arity])
    wrapper = f"_xb_scalar_{fn.symbol[4:]}"
    return getattr(_load(helper_source([fn.symbol]) + f'''

@numba.njit(fastmath=_XB_MATH_FLAGS, error_model="numpy", cache=True)
def {wrapper}({args}):
    return {fn.symbol}({args})
'''), wrapper)


def compiled_loop(name: str, dtype: str = "float32", parallel: bool = True, cache: bool = True):
    """A kernel ``f(x, out)`` (``f(x, y, out)`` for pow) applying ``name`` elementwise over 1-d arrays,
    written the way generated kernels are (``numba.prange`` when ``parallel``, the backend's flags).
    ``cache=False`` compiles afresh, so that ``inspect_asm`` works (numba hides cached machine code)."""
    fn = _lookup(name, dtype)
    args = ", ".join("xy"[: fn.arity])
    elems = ", ".join(f"{a}[i]" for a in "xy"[: fn.arity])
    loop = "numba.prange" if parallel else "range"
    kernel = f"_xb_loop_{fn.symbol[4:]}_{'par' if parallel else 'seq'}"
    source = helper_source([fn.symbol]) + f'''

@numba.njit(parallel={parallel}, fastmath=_XB_MATH_FLAGS, error_model="numpy", cache={cache})
def {kernel}({args}, out):
    for i in {loop}(x.shape[0]):
        out[i] = {fn.symbol}({elems})
'''
    return getattr(_load(source), kernel)


if __name__ == "__main__":
    if sys.argv[1:] == ["--fit"]:
        print("_COEFFS_FITTED: dict[str, tuple[float, ...]] = " + _coeffs_text(_fit()))
    else:
        print("usage: python -m xbench.backends.cpu.mathlib --fit   (prints the coefficient table)")

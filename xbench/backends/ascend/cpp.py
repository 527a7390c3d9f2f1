"""C++ spelling for the Ascend C generator: element types, literals, a line writer, and scalar expressions.

Scalar code runs on the AI core's scalar unit: index arithmetic, per-row statistics, broadcast operands read
with `GetValue`, and the element-by-element loops of the "scalar path". It computes 16-bit floats in float
and never calls a math library: transcendental functions go through the vector unit (`math(...)` callback:
the kernel class owns small helpers that run one 32-byte block through vector instructions).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...dtypes import is_float, is_int
from ...errors import BackendError
from ...ir import expr as E
from ...ir.expr import Call, Cast, Const, Expr, Idx, Load, Local, Select

# storage type of each dtype in GM and UB
CTYPE = {"float32": "float", "float16": "half", "bfloat16": "bfloat16_t", "int8": "int8_t", "uint8": "uint8_t",
         "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "bool": "uint8_t"}
# what scalar code computes a value of each dtype in (float64 only ever appears inside an expression: the
# scalar unit computes it as double; no buffer of the ascend backend holds float64)
SCALAR = {**CTYPE, "float16": "float", "bfloat16": "float", "bool": "bool", "float64": "double"}
SIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8,
        "bool": 1}


class Unsupported(BackendError):
    """The ascend backend has no form for this construct (yet)."""


def ctype(dtype: str) -> str:
    if dtype not in CTYPE:
        raise Unsupported(f"the ascend backend has no {dtype} type (the Ascend vector and cube units have no "
                          "64-bit floats)", hint="compute in float32 (x.astype(np.float32))")
    return CTYPE[dtype]


def float_lit(v: float, dtype: str = "float32") -> str:
    """A float literal in the compute type (float); exact for float32 values."""
    wide = dtype == "float64"
    v = float(v) if wide else float(np.float32(v))
    if np.isnan(v):
        return "XB_NAN"
    if np.isinf(v):
        return "XB_INF" if v > 0 else "(-XB_INF)"
    s = repr(v)
    if "e" not in s and "." not in s:
        s += ".0"
    suffix = "" if wide else "f"
    return f"({s}{suffix})" if s.startswith("-") else s + suffix


def lit(v, dtype: str) -> str:
    """A literal of `dtype`'s scalar compute type."""
    if dtype == "bool":
        return "true" if v else "false"
    if is_float(dtype):
        return float_lit(v, dtype)
    iv = int(v)
    if not -2**31 <= iv < 2**31:
        return f"({iv}LL)" if iv < 0 else f"{iv}LL"
    return f"({iv})" if iv < 0 else str(iv)


def vec_scalar(code: str, dtype: str) -> str:
    """A scalar argument of a vector instruction on `dtype` tensors (the API wants the element type)."""
    if dtype == "float32":
        return code
    return f"static_cast<{ctype(dtype)}>({code})"


class Source:
    """Lines of C++ with indentation."""

    def __init__(self, depth: int = 0):
        self.lines: list[str] = []
        self.depth = depth

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.depth + line) if line else "")

    def extend(self, other: Source) -> None:
        self.lines.extend(other.lines)

    def block(self, head: str, tail: str = "}"):
        """`head {` ... `}` with the body indented."""
        src = self

        class _Ctx:
            def __enter__(self):
                src(head + " {")
                src.depth += 1

            def __exit__(self, *a):
                src.depth -= 1
                src(tail)
        return _Ctx()

    def text(self) -> str:
        return "\n".join(self.lines)


# ---- ranges of integer index expressions (to drop floor-division helpers and prove loads in bounds) --------

def interval(e: Expr, ranges: dict[str, tuple[int, int]]) -> tuple[int, int] | None:
    """Inclusive bounds of an integer expression over variable ranges, or None when unknown."""
    if isinstance(e, Const):
        if isinstance(e.value, bool) or not isinstance(e.value, (int, np.integer)):
            return None
        return int(e.value), int(e.value)
    if isinstance(e, Idx):
        return ranges.get(e.name)
    if isinstance(e, Cast) and is_int(e.dtype) and is_int(e.x.dtype):
        return interval(e.x, ranges)
    if not isinstance(e, Call):
        return None
    args = [interval(a, ranges) for a in e.args]
    if any(a is None for a in args):
        return None
    if e.fn == "add":
        return args[0][0] + args[1][0], args[0][1] + args[1][1]
    if e.fn == "sub":
        return args[0][0] - args[1][1], args[0][1] - args[1][0]
    if e.fn == "neg":
        return -args[0][1], -args[0][0]
    if e.fn == "mul":
        c = [a * b for a in args[0] for b in args[1]]
        return min(c), max(c)
    if e.fn in ("floordiv", "mod") and args[1][0] == args[1][1] and args[1][0] > 0:
        d = args[1][0]
        if e.fn == "floordiv":
            return args[0][0] // d, args[0][1] // d
        if args[0][0] >= 0 and args[0][1] < d:
            return args[0]
        return 0, d - 1
    if e.fn == "maximum":
        return max(args[0][0], args[1][0]), max(args[0][1], args[1][1])
    if e.fn == "minimum":
        return min(args[0][0], args[1][0]), min(args[0][1], args[1][1])
    return None


# ---- scalar expressions ---------------------------------------------------------------------------------

_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_ARITH = {"add": "+", "sub": "-", "mul": "*"}
_BITS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "shl": "<<", "shr": ">>"}


@dataclass
class ScalarScope:
    """Names visible in scalar code: loop variables, per-point locals, hoisted temporaries."""
    idx: dict[str, str] = field(default_factory=dict)
    ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    locals: dict[str, str] = field(default_factory=dict)
    memo: dict[Expr, str] = field(default_factory=dict)

    def child(self) -> ScalarScope:
        return ScalarScope(dict(self.idx), dict(self.ranges), dict(self.locals), dict(self.memo))


class ScalarWriter:
    """Spells loop-IR expressions as C++ scalar expressions.

    `load(buf, offset, dtype)` spells the read of one element (a GM `GetValue`, or a UB row buffer);
    `math(fn, dtype, args)` spells a transcendental function (a vector-unit helper of the kernel class);
    `shapes` gives every buffer's shape for row-major offsets."""

    def __init__(self, shapes: dict[str, tuple[int, ...]], load: Callable[[str, str, str], str],
                 math: Callable[[str, str, list[str]], str]):
        self.shapes = shapes
        self._load = load
        self._math = math
        self.helpers: set[str] = set()
        self._n = 0

    def tmp(self) -> str:
        self._n += 1
        return f"sc{self._n}"

    def offset(self, load: Load | tuple[str, tuple[Expr, ...]], scope: ScalarScope, src: Source | None,
               lazy: bool = False) -> str:
        buf, index = (load.buf, load.index) if isinstance(load, Load) else load
        flat = E.linear(tuple(index), self.shapes[buf])
        return self._expr(flat, scope, src, lazy) if self._counts is not None else self.expr(flat, scope, src, lazy)

    def expr(self, e: Expr, scope: ScalarScope, src: Source | None, lazy: bool = False) -> str:
        """C++ for `e`. Outside Select branches (`lazy` False) loads, math calls and subexpressions used more
        than once are hoisted into `src` as named constants and shared; inside a branch everything stays inline
        so the untaken side never runs."""
        top = self._counts is None
        if top:
            self._counts = {}

            def count(n: Expr) -> None:   # a repeated node's children count once (they are shared with it)
                self._counts[n] = self._counts.get(n, 0) + 1
                if self._counts[n] == 1:
                    for c in n.children():
                        count(c)
            count(e)
        try:
            return self._expr(e, scope, src, lazy)
        finally:
            if top:
                self._counts = None

    _counts: dict | None = None

    def _expr(self, e: Expr, scope: ScalarScope, src: Source | None, lazy: bool = False) -> str:
        if e in scope.memo:
            return scope.memo[e]
        code = self._spell(e, scope, src, lazy)
        shared = isinstance(e, Call) and (self._counts or {}).get(e, 0) > 1 and e.args
        if src is not None and not lazy and (isinstance(e, Load) or (isinstance(e, Call) and code.startswith("Math"))
                                             or shared):
            name = self.tmp()
            src(f"const {SCALAR.get(e.dtype, 'float')} {name} = {code};")
            scope.memo[e] = name
            return name
        return code

    def _spell(self, e: Expr, scope: ScalarScope, src: Source | None, lazy: bool) -> str:
        sub = lambda x, lz=lazy: self._expr(x, scope, src, lz)  # noqa: E731
        if isinstance(e, Const):
            return lit(e.value, e.dtype)
        if isinstance(e, Idx):
            if e.name not in scope.idx:
                raise Unsupported(f"internal: loop variable {e.name} has no scalar value here")
            return scope.idx[e.name]
        if isinstance(e, Local):
            if e.name not in scope.locals:
                raise Unsupported(f"internal: local {e.name} has no scalar value here")
            return scope.locals[e.name]
        if isinstance(e, Load):
            off = self.offset(e, scope, src, lazy)
            return self._load(e.buf, off, e.dtype)
        if isinstance(e, Cast):
            return self.cast(sub(e.x), e.x.dtype, e.dtype)
        if isinstance(e, Select):
            c = sub(e.cond)
            return f"({c} ? {sub(e.a, True)} : {sub(e.b, True)})"
        if isinstance(e, Call):
            return self.call(e, [sub(a) for a in e.args], scope)
        raise Unsupported(f"internal: cannot spell {type(e).__name__} as scalar code")

    def cast(self, code: str, src: str, dst: str) -> str:
        if src == dst:
            return code
        if dst == "bool":
            return f"({code} != 0)"
        if is_float(src) and is_int(dst):   # as PyTorch; C++'s conversion of NaN or out-of-range values is undefined
            self.helpers.add("f2i")
            return f"XbF2I64({code})" if dst == "int64" else f"static_cast<{SCALAR[dst]}>(XbF2I32({code}))"
        if dst in ("float16", "bfloat16"):
            return f"static_cast<float>(static_cast<{CTYPE[dst]}>({code}))"
        return f"static_cast<{SCALAR[dst]}>({code})"

    def call(self, e: Call, a: list[str], scope: ScalarScope) -> str:
        fn, dt = e.fn, e.dtype
        src_dt = e.args[0].dtype if e.args else dt
        t = SCALAR.get(dt, "float")
        if fn in _ARITH:
            return f"static_cast<{t}>({a[0]} {_ARITH[fn]} {a[1]})" if dt in ("int8", "uint8", "int16") \
                else f"({a[0]} {_ARITH[fn]} {a[1]})"
        if fn in _CMP:
            return f"({a[0]} {_CMP[fn]} {a[1]})"
        if fn == "div":
            return f"({a[0]} / {a[1]})"
        if fn in ("floordiv", "mod") and is_int(dt):
            rng = [interval(x, scope.ranges) for x in e.args]
            if all(r is not None and r[0] >= 0 for r in rng) and rng[1][0] > 0:
                return f"({a[0]} {'/' if fn == 'floordiv' else '%'} {a[1]})"
            self.helpers.add("intdiv")
            return f"Xb{'FloorDiv' if fn == 'floordiv' else 'Mod'}<{t}>({a[0]}, {a[1]})"
        if fn == "fmod" and is_int(dt):  # C++ % truncates like fmod; x % 0 is 0 as in the reference
            self.helpers.add("intdiv")
            return f"XbFMod<{t}>({a[0]}, {a[1]})"
        if fn in ("maximum", "minimum", "fmax", "fmin"):
            if is_float(dt):
                self.helpers.add("minmax")
                nan = fn in ("maximum", "minimum")
                name = {"maximum": "XbMax", "minimum": "XbMin", "fmax": "XbFMax", "fmin": "XbFMin"}[fn]
                del nan
                return f"{name}({a[0]}, {a[1]})"
            op = ">" if fn in ("maximum", "fmax") else "<"
            return f"(({a[0]}) {op} ({a[1]}) ? ({a[0]}) : ({a[1]}))"
        if fn in ("neg", "abs") and dt in ("int8", "uint8", "int16", "int32", "int64"):   # wrapping (-INT_MIN is INT_MIN)
            # int64 through uint64: -INT64_MIN is undefined in C++, and g++ took abs(INT64_MIN) < 2 as false
            neg = (f"static_cast<int64_t>(0ULL - static_cast<uint64_t>({a[0]}))" if dt == "int64" else
                   f"static_cast<{t}>(-static_cast<int64_t>({a[0]}))")
            return neg if fn == "neg" else f"(({a[0]}) < 0 ? {neg} : ({a[0]}))"
        if fn == "neg":
            return f"(-{a[0]})"
        if fn == "abs":
            return f"(({a[0]}) < 0 ? -({a[0]}) : ({a[0]}))"
        if fn == "sign":
            return f"static_cast<{t}>((({a[0]}) > 0) - (({a[0]}) < 0))"
        if fn == "logical_not":
            return f"(!{a[0]})"
        if fn == "logical_and":
            return f"({a[0]} && {a[1]})"
        if fn == "logical_or":
            return f"({a[0]} || {a[1]})"
        if fn == "logical_xor":
            return f"({a[0]} != {a[1]})"
        if fn in ("shl", "shr") and dt != "bool":
            self.helpers.add("shift")
            return f"Xb{'Shl' if fn == 'shl' else 'Shr'}<{t}>({a[0]}, {a[1]})"
        if fn in _BITS:
            if dt == "bool":
                return f"(({a[0]}) {_BITS[fn]} ({a[1]}))"
            return f"static_cast<{t}>(({a[0]}) {_BITS[fn]} ({a[1]}))"
        if fn == "bitwise_not":
            return f"(!{a[0]})" if dt == "bool" else f"static_cast<{t}>(~({a[0]}))"
        if fn == "reciprocal":
            return f"(1.0f / {a[0]})"
        if fn == "isnan":
            return f"({a[0]} != {a[0]})"
        if fn == "isinf":
            return f"({a[0]} == XB_INF || {a[0]} == -XB_INF)"
        if fn == "signbit":
            return f"({a[0]} < 0 || ({a[0]} == 0 && 1.0f / {a[0]} < 0))"
        if fn == "isfinite":
            return f"({a[0]} == {a[0]} && {a[0]} != XB_INF && {a[0]} != -XB_INF)"
        if fn == "pow" and is_int(dt):
            self.helpers.add("ipow")
            return f"XbIntPow<{t}>({a[0]}, {a[1]})"
        if fn in ("floordiv", "mod", "fmod") and is_float(dt):
            self.helpers.add("fdiv")
            return f"{ {'floordiv': 'XbFloorDivF', 'mod': 'XbRemainderF', 'fmod': 'XbFModF'}[fn]}({a[0]}, {a[1]})"
        if is_float(src_dt) or is_float(dt):
            return self._math(fn, dt, a)
        raise Unsupported(f"the ascend backend has no scalar form of {fn} on {dt}")


def _two_over_pi_words(n: int = 8) -> list[int]:
    """2/pi in 32-bit words: word 0 holds the bits of weight 2**31 .. 2**0 (zero: 2/pi < 1), word k the bits of
    weight 2**-(32k - 31) .. 2**-(32k). From pi by Machin's formula in integers."""
    guard = 320

    def arctan_inv(x: int) -> int:             # atan(1/x) * 2**guard
        total = term = (1 << guard) // x
        k, sign = 1, -1
        while term:
            term //= x * x
            k += 2
            total += sign * (term // k)
            sign = -sign
        return total

    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))                  # pi * 2**guard
    bits = 32 * (n - 1)
    frac = (1 << (bits + 1 + guard)) // pi                          # 2/pi * 2**bits
    return [0] + [(frac >> (32 * (n - 1 - k))) & 0xFFFFFFFF for k in range(1, n)]


_TRIG_WORDS = ", ".join(f"0x{w:08X}u" for w in _two_over_pi_words())
TRIG_LIMIT = 65536.0       # from here the vector unit's float32 reduction loses the quadrant's accuracy

SCALAR_HELPERS = {
    # x (|x| >= 2**16) as q pi/2 + r, |r| <= pi/4, q in 0..3 returned and r stored: x * 2/pi from the 96 bits of
    # 2/pi that matter at x's exponent (Payne and Hanek's reduction), in integers; NaN for +-inf
    "trig": f"""\
__aicore__ inline float XbTrigReduce(float x, float* rem) {{
    const uint32_t words[8] = {{{_TRIG_WORDS}}};
    union {{ float f; uint32_t u; }} v = {{x}};
    const uint32_t ax = v.u & 0x7fffffffu;
    if (ax >= 0x7f800000u) {{ *rem = XB_NAN; return 0.0f; }}
    const int32_t e = static_cast<int32_t>(ax >> 23) - 150;          // |x| = m * 2**e
    const uint64_t m = (ax & 0x7fffffu) | 0x800000u;
    const int32_t g = e + 30;                                         // the bit of weight 2**-(e - 1)
    const int32_t w = g >> 5, o = g & 31;
    uint64_t c[3];
    for (int32_t k = 0; k < 3; ++k) {{
        const uint64_t a = words[w + k], b = words[w + k + 1];
        c[k] = ((a << o) | (o ? b >> (32 - o) : 0)) & 0xffffffffu;
    }}
    const uint64_t p0 = m * c[0], p1 = m * c[1], p2 = m * c[2];      // m * C mod 2**96 = |x| * 2/pi mod 4, * 2**94
    const uint64_t lo = p2 & 0xffffffffu;
    const uint64_t t = (p2 >> 32) + (p1 & 0xffffffffu);
    const uint64_t hi = ((t >> 32) + (p1 >> 32) + p0 + (1u << 29)) & 0xffffffffu;   // + 1/2: the nearest n
    const uint64_t q = hi >> 30;
    const uint64_t top = ((hi & 0x3fffffffu) << 34) | ((((t & 0xffffffffu) << 32) | lo) >> 30);
    const int64_t f = static_cast<int64_t>(top - 0x8000000000000000ull);   // (|x| 2/pi - n) * 2**64
    const float r = static_cast<float>(f) * 8.5153039502163862e-20f;
    *rem = (v.u >> 31) ? -r : r;                                    // sin(-x) = -sin(x): -r and quadrant -q
    return static_cast<float>((v.u >> 31) ? (4 - q) & 3 : q);
}}""",
    # integer //, % and fmod as PyTorch: INT_MIN // -1 wraps to INT_MIN (it traps in C++), by 0 all give 0
    # (numpy's answer; PyTorch raises)
    "intdiv": """\
template <typename T> __aicore__ inline bool XbMinusOne(T b) { return static_cast<T>(-1) < static_cast<T>(0) && b == static_cast<T>(-1); }
template <typename T> __aicore__ inline T XbFloorDiv(T a, T b) {
    if (b == 0) return 0;
    if (XbMinusOne(b)) return static_cast<T>(0ULL - static_cast<uint64_t>(a));
    T q = a / b;
    return (q * b != a && ((a < 0) != (b < 0))) ? static_cast<T>(q - 1) : q;
}
template <typename T> __aicore__ inline T XbMod(T a, T b) {
    if (b == 0 || XbMinusOne(b)) return 0;
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? static_cast<T>(r + b) : r;
}
template <typename T> __aicore__ inline T XbFMod(T a, T b) {
    return (b == 0 || XbMinusOne(b)) ? static_cast<T>(0) : static_cast<T>(a % b);
}""",
    # shifts computed in 64 bits, by a count outside [0, 64) as PyTorch: 0, or -1 for negative a >> b
    "shift": """\
template <typename T> __aicore__ inline T XbShl(T a, T b) {
    return (b < 0 || b >= 64) ? static_cast<T>(0) : static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(a)) << b);
}
template <typename T> __aicore__ inline T XbShr(T a, T b) {
    if (b < 0 || b >= 64) return a < 0 ? static_cast<T>(-1) : static_cast<T>(0);
    return static_cast<T>(static_cast<int64_t>(a) >> b);
}""",
    # float -> int as PyTorch on x86: truncation; a value the type cannot hold (NaN, +-inf, out of range) is
    # INT64_MIN for int64, and narrower types convert through int32 (INT32_MIN, whose low bits are 0)
    "f2i": """\
__aicore__ inline int64_t XbF2I64(double x) {
    return (x >= -9.223372036854775808e18 && x < 9.223372036854775808e18) ? static_cast<int64_t>(x) : static_cast<int64_t>(0x8000000000000000ULL);
}
__aicore__ inline int32_t XbF2I32(double x) {
    return (x >= -2147483648.0 && x < 2147483648.0) ? static_cast<int32_t>(x) : static_cast<int32_t>(0x80000000U);
}""",
    "minmax": """\
__aicore__ inline float XbMax(float a, float b) { return (a > b || a != a) ? a : b; }
__aicore__ inline float XbMin(float a, float b) { return (a < b || a != a) ? a : b; }
__aicore__ inline float XbFMax(float a, float b) { return (a > b || b != b) ? a : b; }
__aicore__ inline float XbFMin(float a, float b) { return (a < b || b != b) ? a : b; }""",
    # float fmod exactly, in integer arithmetic on the bits (long division of the significands), and PyTorch's
    # floor division and remainder from it (numpy's npy_divmod)
    "fdiv": """\
__aicore__ inline float XbFModF(float x, float y) {
    union { float f; uint32_t u; } a = {x}, b = {y};
    const uint32_t sign = a.u & 0x80000000u;
    const uint32_t ax = a.u & 0x7fffffffu, ay = b.u & 0x7fffffffu;
    if (ay == 0 || ax >= 0x7f800000u || ay > 0x7f800000u) return XB_NAN;
    if (ax < ay) return x;
    int32_t ex = static_cast<int32_t>(ax >> 23), ey = static_cast<int32_t>(ay >> 23);
    uint32_t mx = ax & 0x7fffffu, my = ay & 0x7fffffu;
    if (ex == 0) { ex = 1; while (!(mx & 0x800000u)) { mx <<= 1; --ex; } } else { mx |= 0x800000u; }
    if (ey == 0) { ey = 1; while (!(my & 0x800000u)) { my <<= 1; --ey; } } else { my |= 0x800000u; }
    for (; ex > ey; --ex) {
        if (mx >= my) mx -= my;
        mx <<= 1;
    }
    if (mx >= my) mx -= my;
    if (mx == 0) { a.u = sign; return a.f; }
    while (!(mx & 0x800000u)) { mx <<= 1; --ex; }
    a.u = ex > 0 ? sign | (static_cast<uint32_t>(ex) << 23) | (mx & 0x7fffffu) : sign | (mx >> (1 - ex));
    return a.f;
}
__aicore__ inline float XbFloorF(float x) {
    if (!(x > -8388608.0f && x < 8388608.0f)) return x;   // integral already (or inf, NaN)
    const float t = static_cast<float>(static_cast<int32_t>(x));
    return t > x ? t - 1.0f : t;
}
__aicore__ inline float XbFloorDivF(float a, float b) {
    if (b == 0.0f) return a / b;
    const float mod = XbFModF(a, b);
    float div = (a - mod) / b;
    if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f))) div -= 1.0f;
    if (div == 0.0f) return a / b < 0.0f ? -0.0f : 0.0f;
    float fl = XbFloorF(div);
    if (div - fl > 0.5f) fl += 1.0f;
    return fl;
}
__aicore__ inline float XbRemainderF(float a, float b) {
    float mod = XbFModF(a, b);
    if (mod != 0.0f) return ((b < 0.0f) != (mod < 0.0f)) ? mod + b : mod;
    return (b < 0.0f || (b == 0.0f && 1.0f / b < 0.0f)) ? -0.0f : 0.0f;
}""",
    # integers to powers by squaring, wrapping; negative powers as PyTorch (1 for 1, +-1 by parity for -1, else 0)
    "ipow": """\
template <typename T> __aicore__ inline T XbIntPow(T a, T b) {
    if (b < 0) return a == 1 ? static_cast<T>(1) : a == static_cast<T>(-1) ? static_cast<T>((b & 1) ? -1 : 1) : static_cast<T>(0);
    uint64_t r = 1, x = static_cast<uint64_t>(a), e = static_cast<uint64_t>(b);
    while (e) {
        if (e & 1) r *= x;
        x *= x;
        e >>= 1;
    }
    return static_cast<T>(r);
}""",
}

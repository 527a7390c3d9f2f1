"""Loop-IR scalar expressions as sequences of Ascend C vector instructions over UB tiles.

An expression is evaluated for every point of a *domain* tile at once (`len` elements starting at flat domain
index `v0`). Each node is one of:

- uniform (U): the same for the whole tile -- C++ scalar code, fed to the scalar forms (`Adds`, `Muls`, ...)
  or to `Duplicate`;
- vector (V): a tile in the UB: contiguous loads come from the kernel's input queues, everything else is
  computed by count-form vector instructions into temporaries carved from one `TBuf` (the slot pool);
- gathered (G): computed element by element on the scalar unit into a UB tile (strided or data-dependent
  indexing, index arithmetic, Selects the vector unit cannot express) -- the "scalar path".

Functions the vector API lacks are built from the ones it has (tanh and sigmoid from Exp, erf from a
polynomial with Exp, powers by multiplication, rounding by Cast modes). Selects use Compare/Compares masks
and `Select`; an index condition (a causal mask, a window edge) becomes a comparison of a ramp tile
(0, 1, 2, ...) with a scalar threshold.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ...dtypes import is_float
from ...ir import expr as E
from ...ir.expr import INDEX, Call, Cast, Const, Expr, Idx, Load, Local, Select
from ...ir.kernel import Axis
from ...ir.scalar import UNARY
from .affine import Access, affine_in, clamped_loads, classify
from .cpp import (
    CTYPE,
    SIZE,
    TRIG_LIMIT,
    ScalarScope,
    ScalarWriter,
    Source,
    Unsupported,
    float_lit,
    interval,
    vec_scalar,
)
from .windows import Window, window_of

VEC_TYPES = ("float32", "float16")
SHORTN = {"float32": "f", "float16": "h", "int32": "i", "uint8": "u", "int16": "s", "int8": "c", "int64": "l",
          "bfloat16": "b"}
DIRECT_UNARY = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "reciprocal": "Reciprocal",
                "abs": "Abs"}
COMPOSED_UNARY = {"neg", "sigmoid", "tanh", "erf", "erfc", "exp2", "log2", "log10", "expm1", "log1p", "floor",
                  "ceil", "trunc", "round", "sinh", "cosh", "asinh", "acosh", "atanh", "atan", "asin", "acos", "sin",
                  "cos", "tan", "sign", "erfinv"}
# composed in float32 for 16-bit floats (one rounding at the end)
WIDEN = COMPOSED_UNARY - {"neg", "exp2", "log2", "log10"}
COMPOSED_BINARY = {"copysign", "atan2", "hypot", "fmax", "fmin"}
# float //, % and fmod run element by element on the scalar unit: exact fmod needs integer long division
# (a - trunc(a / b) * b in float32 is off by up to ulp(a))
BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Max", "minimum": "Min"}
SCALAR_FORM = {"add": "Adds", "mul": "Muls", "maximum": "Maxs", "minimum": "Mins"}
INT32_OK = {"add", "sub", "mul", "maximum", "minimum"}
CMP = {"lt": "LT", "gt": "GT", "le": "LE", "ge": "GE", "eq": "EQ", "ne": "NE"}
INVERT = {"LT": "GE", "GE": "LT", "GT": "LE", "LE": "GT", "EQ": "NE", "NE": "EQ"}
SWAP = {"LT": "GT", "GT": "LT", "LE": "GE", "GE": "LE", "EQ": "EQ", "NE": "NE"}
ROUND = {"floor": "CAST_FLOOR", "ceil": "CAST_CEIL", "trunc": "CAST_TRUNC", "round": "CAST_RINT"}
# erf(x) = 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p x), x >= 0 (Abramowitz & Stegun 7.1.26,
# |error| <= 1.5e-7)
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
# erf(x) = 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)), to 2e-11 relative for |x| < 0.5
ERF_SERIES = (1.1283791670955126, -0.37612638903183754, 0.11283791670955126, -0.026866170645131252,
              0.005223977625442188, -0.0008548327023450852, 0.00012055332981789664, -1.492565035840625e-05)
# erfinv(x) = x p(w), w = -ln(1 - x^2): M. Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011)
ERFINV_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                  -0.00417768164, 0.246640727, 1.50140941)          # w < 5, in w - 2.5
ERFINV_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
               0.00943887047, 1.00167406, 2.83297682)               # w >= 5, in sqrt(w) - 3


@dataclass(frozen=True)
class Tile:
    name: str
    dtype: str
    slots: tuple[int, ...] = ()   # pool slots this tile keeps alive (empty: a queue tile or pinned buffer)


@dataclass(frozen=True)
class Scal:
    code: str
    dtype: str


Operand = Tile | Scal


class Pool:
    """Scratch tiles carved from the kernel's calcBuf: `slotBytes` each, reused as values die."""

    def __init__(self, prefix: str = "s"):
        self.prefix = prefix
        self.free: list[int] = []
        self.count = 0
        self.views: dict[tuple[int, str], str] = {}
        self.pinned: set[int] = set()

    def alloc(self, dtype: str, pinned: bool = False, fresh: bool = False) -> Tile:
        """A slot for a value of `dtype`: a free one, or (`fresh`, or none free) one no code has used yet."""
        slot = self.free.pop(0) if self.free and not fresh else self._new()
        if pinned:
            self.pinned.add(slot)
        return Tile(self.view(slot, dtype), dtype, () if pinned else (slot,))

    def _new(self) -> int:
        self.count += 1
        return self.count - 1

    def view(self, slot: int, dtype: str) -> str:
        key = (slot, dtype)
        if key not in self.views:
            self.views[key] = f"{self.prefix}{slot}{SHORTN.get(dtype, 'x')}"
        return self.views[key]

    def release(self, t: Tile) -> None:
        for s in t.slots:
            if s not in self.free and s not in self.pinned:
                self.free.append(s)
        self.free.sort()

    def declarations(self, buf: str, slot_bytes: str) -> list[str]:
        out = []
        for (slot, dt), name in sorted(self.views.items()):
            c = CTYPE[dt]
            out.append(f"LocalTensor<{c}> {name} = {buf}.GetWithOffset<{c}>({slot_bytes} / sizeof({c}), "
                       f"{slot} * {slot_bytes});")
        return out


@dataclass
class Domain:
    """The axes one tile covers (flattened row-major), and the C++ names of its start and length."""
    axes: tuple[Axis, ...]
    v0: str = "v0"
    count: str = "len"

    @property
    def names(self) -> set[str]:
        return {a.name for a in self.axes if a.extent > 1}

    @property
    def extent(self) -> int:
        n = 1
        for a in self.axes:
            n *= a.extent
        return n


@dataclass
class Features:
    """What the emitted code needs from its kernel (the UB plan and the resources report read these)."""
    select: bool = False        # Select in tensor modes: 8 KiB of UB must stay free
    ramp: bool = False          # an index ramp tile (0, 1, 2, ...) initialised once
    gathers: list[str] = field(default_factory=list)   # what runs element by element on the scalar unit
    math: set[str] = field(default_factory=set)        # scalar transcendental helpers used


class VecEmitter:
    """Emits the vector code of one compute block (one tile) into `src`.

    `inputs` maps contiguous loads to the UB tiles the kernel copied in; `vlocals` maps per-point locals
    computed as tiles; `scalar` is the scalar scope (loop variables, uniform locals) and `sw` spells scalar
    code. `is_vector_local(name)` tells vector locals from scalar ones.
    """

    def __init__(self, src: Source, domain: Domain, pool: Pool, sw: ScalarWriter, scope: ScalarScope,
                 shapes: dict[str, tuple[int, ...]], sizes: dict[str, int], *,
                 inputs: Callable[..., Tile | None],
                 vlocals: dict[str, Tile] | None = None,
                 ranges: dict[str, tuple[int, int]] | None = None,
                 features: Features | None = None,
                 ramp: str = "rampTile"):
        self.src = src
        self.dom = domain
        self.pool = pool
        self.sw = sw
        self.scope = scope
        for a in domain.axes:
            if a.extent == 1:
                scope.idx.setdefault(a.name, "0")
        self.shapes = shapes
        self.sizes = sizes
        self.inputs = inputs
        self.vlocals = vlocals or {}
        self.ranges = dict(ranges or {})
        for a in domain.axes:
            self.ranges[a.name] = (0, a.extent - 1)
        self.features = features or Features()
        self.ramp_name = ramp
        self.memo: dict[tuple, Operand] = {}
        self.uses: dict[tuple, int] = {}
        self._modes: dict[tuple, str] = {}
        self._gid = 0
        self._target: tuple[tuple, Tile] | None = None
        self._windows: dict[Expr, Window | None] = {}

    # ---- classification ------------------------------------------------------------------------------
    def depends(self, e: Expr) -> bool:
        for n in e.walk():
            if isinstance(n, Idx) and n.name in self.dom.names:
                return True
            if isinstance(n, Local) and n.name in self.vlocals:
                return True
        return False

    def access(self, e: Load, guarded: bool) -> Access:
        size = 1
        for d in self.shapes[e.buf]:
            size *= d
        return classify(e, self.shapes[e.buf], self.dom.axes, guarded, self.ranges, size)

    def window(self, e: Expr) -> Window | None:
        """The shifted window `e` reads (a stencil tap: a load, or constant padding around one) when the kernel
        copies windows into the UB (`inputs.windows`) and has room for one more input tile."""
        if not getattr(self.inputs, "windows", False) or not isinstance(e, (Load, Select)):
            return None
        if e not in self._windows:
            w = window_of(e, self.dom.axes, self.shapes, self.ranges)
            if w is not None and self.inputs.window(w, register=False) is None:
                w = None
            self._windows[e] = w
        return self._windows[e]

    def gatherable(self, e: Expr) -> bool:
        for n in e.walk():
            if isinstance(n, Call) and n.fn in UNARY and UNARY[n.fn].transcendental:
                return False
            if isinstance(n, Call) and n.fn in ("pow", "atan2", "hypot") and is_float(n.dtype):
                return False
        return True

    def mode(self, e: Expr, guarded: bool = False) -> str:
        key = (e, guarded)
        if key not in self._modes:
            self._modes[key] = self._mode(e, guarded)
        return self._modes[key]

    def _mode(self, e: Expr, guarded: bool) -> str:
        if not self.depends(e):
            return "U"
        if isinstance(e, Local):
            return "V"
        if isinstance(e, Load):
            acc = self.access(e, guarded)
            if acc.kind == "contiguous" and e.dtype in CTYPE and self.inputs(e, (acc.base,), False) is not None:
                return "V"
            return "V" if self.window(e) is not None else "G"
        if isinstance(e, (Idx, Const)):
            return "G"
        if isinstance(e, Cast):
            m = self.mode(e.x, guarded)
            if e.x.dtype == "bool":        # a Select of 1 and 0, which the vector unit has for half and float only
                return "V" if e.dtype in VEC_TYPES and self._cond_form(e.x, guarded) is not None else "G"
            if m == "G" or not _cast_ok(e.x.dtype, e.dtype):
                return "G"
            return "V"
        if isinstance(e, Select):
            if self.window(e) is not None:
                return "V"
            cond_v = self._cond_form(e.cond, guarded) is not None if self.depends(e.cond) else True
            branches = [self.mode(e.a, True), self.mode(e.b, True)]
            if e.dtype not in VEC_TYPES:
                return "G"
            if (not cond_v or "G" in branches) and self.gatherable(e):
                return "G"
            return "V"
        if isinstance(e, Call):
            if e.dtype not in VEC_TYPES and not (e.dtype == "int32" and e.fn in INT32_OK):
                return "G"
            if e.fn in BINARY or e.fn in DIRECT_UNARY or e.fn in COMPOSED_UNARY or e.fn in COMPOSED_BINARY \
                    or e.fn == "pow":
                return "V"
            return "G"
        raise Unsupported(f"internal: unknown expression node {type(e).__name__}")

    def _cond_form(self, c: Expr, guarded: bool):
        """How a vector condition becomes a mask: ("cmp", mode, a, b) for float data, ("ramp", mode, a, rest)
        for an index comparison affine in the domain, or None (gathered as a 0/1 tile)."""
        if not (isinstance(c, Call) and c.fn in CMP):
            return None
        x, y = c.args
        mode = CMP[c.fn]
        if x.dtype in VEC_TYPES and y.dtype == x.dtype:
            mx, my = self.mode(x, guarded), self.mode(y, guarded)
            if "G" not in (mx, my):
                return ("cmp", mode, x, y)
            return None
        if x.dtype in ("int64", "int32") and y.dtype == x.dtype:
            d = E.sub(x, y) if not isinstance(y, Const) else E.add(x, E.const(-int(y.value)))
            form = affine_in(d, self.dom.axes)
            if form is None or form[0] == 0:
                return None
            a, rest = form
            r = interval(rest, self.ranges)
            if r is None or abs(a) * self.dom.extent + max(abs(r[0]), abs(r[1])) >= 2 ** 24:
                return None
            return ("ramp", mode, a, rest)
        return None

    # ---- use counts (temporaries die at their last use) ------------------------------------------------
    def count_uses(self, roots: list[Expr], guard: tuple = ()) -> None:
        for r in roots:
            self._count(r, guard, bool(guard))

    def _count(self, e: Expr, guard: tuple, guarded: bool) -> None:
        m = self.mode(e, guarded)
        if m == "U":
            return
        key = (e, guard)
        self.uses[key] = self.uses.get(key, 0) + 1
        if self.uses[key] > 1 or m == "G":
            return
        if isinstance(e, Select) and self.window(e) is None:
            if self.depends(e.cond):
                form = self._cond_form(e.cond, guarded)
                if form is None:
                    self._count_gather_cond(e.cond, guard)
                elif form[0] == "cmp":
                    self._count(form[2], guard, guarded)
                    self._count(form[3], guard, guarded)
            self._count(e.a, guard + ((e.cond, True),), True)
            self._count(e.b, guard + ((e.cond, False),), True)
        elif isinstance(e, Cast) and e.x.dtype == "bool":
            form = self._cond_form(e.x, guarded)
            if form is not None and form[0] == "cmp":
                self._count(form[2], guard, guarded)
                self._count(form[3], guard, guarded)
        elif isinstance(e, (Call, Cast)):
            for c in e.children():
                self._count(c, guard, guarded)

    def _count_gather_cond(self, c: Expr, guard: tuple) -> None:
        pass

    def _take(self, e: Expr, guard: tuple, op: Operand) -> None:
        """One use of `e`'s value is done; release its temporary after the last one."""
        if not isinstance(op, Tile):
            return
        key = (e, guard)
        if key in self.uses:
            self.uses[key] -= 1
            if self.uses[key] <= 0:
                self.memo.pop(key, None)
                self.pool.release(op)

    # ---- evaluation ----------------------------------------------------------------------------------
    def scalar(self, e: Expr, guard: tuple = ()) -> Scal:
        """`e` on the scalar unit, once per tile. Under a Select branch (`guard`) it runs whether or not the
        branch is taken, so its loads read at clamped indices: the untaken side never leaves a buffer."""
        if guard:
            e = clamped_loads(e, self.shapes, self.ranges)
        return Scal(self.sw.expr(e, self.scope, self.src), e.dtype)

    def value(self, e: Expr, guard: tuple = ()) -> Operand:
        guarded = bool(guard)
        if self.mode(e, guarded) == "U":
            return self.scalar(e, guard)
        key = (e, guard)
        if key in self.memo:
            return self.memo[key]
        out = self._value(e, guard, guarded)
        if key in self.uses:
            self.memo[key] = out
        return out

    def use(self, e: Expr, guard: tuple = ()) -> Operand:
        """The value of `e` for one consumer (call `done` after the instruction that reads it)."""
        return self.value(e, guard)

    def done(self, e: Expr, op: Operand, guard: tuple = ()) -> None:
        self._take(e, guard, op)

    def tile_of(self, e: Expr, op: Operand) -> Tile:
        """A tile holding `op` (a uniform value is broadcast with Duplicate)."""
        if isinstance(op, Tile):
            return op
        t = self.pool.alloc(op.dtype)
        self.src(f"Duplicate({t.name}, {vec_scalar(op.code, op.dtype)}, {self.dom.count});")
        return t

    def root(self, e: Expr, dst: Tile | None = None) -> Tile:
        """Evaluate a root expression into a tile (`dst` when given: an output queue tile)."""
        self._target = ((e, ()), dst) if dst is not None else None
        op = self.value(e)
        self._target = None
        if isinstance(op, Scal):
            t = dst or self.pool.alloc(e.dtype)
            self.src(f"Duplicate({t.name}, {vec_scalar(op.code, op.dtype)}, {self.dom.count});")
            return t
        if dst is None:
            return op
        if op.name != dst.name:
            if op.dtype != dst.dtype:
                self.cast_into(dst, op)
            else:
                self.copy(dst, op)
            self._take(e, (), op)
        return dst

    def copy(self, dst: Tile, src: Tile) -> None:
        """UB -> UB copy of a whole tile (32-byte blocks; tiles are sized in whole blocks)."""
        per = 32 // SIZE[dst.dtype]
        self.src(f"DataCopy({dst.name}, {src.name}, XbAlign({self.dom.count}, {per}));")

    def _dst(self, key: tuple, dtype: str, *ops: tuple[Expr, Operand, tuple]) -> Tile:
        """A destination for the result `key` = (expr, guard): the root's output tile, else the slot of an
        operand at its last use when the type matches, else a new slot."""
        if self._target is not None and self._target[0] == key and self._target[1].dtype == dtype:
            t = self._target[1]
            self._target = None
            return t
        for e, op, g in ops:
            if isinstance(op, Tile) and op.dtype == dtype and op.slots and self.uses.get((e, g), 0) == 1:
                self.uses[(e, g)] = 0
                self.memo.pop((e, g), None)
                return op
        return self.pool.alloc(dtype)

    def _value(self, e: Expr, guard: tuple, guarded: bool) -> Operand:
        m = self.mode(e, guarded)
        if m == "G":
            return self.gather(e, guard)
        if isinstance(e, Local):
            return self.vlocals[e.name]
        if isinstance(e, Load):
            acc = self.access(e, guarded)
            t = self.inputs(e, (acc.base,)) if acc.kind == "contiguous" else self.inputs.window(self.window(e))
            assert t is not None
            return t
        if isinstance(e, Cast):
            return self.cast(e, guard)
        if isinstance(e, Select):
            w = self.window(e)
            return self.inputs.window(w) if w is not None else self.select(e, guard)
        if isinstance(e, Call):
            if len(e.args) == 1:
                return self.unary(e, guard)
            return self.binary(e, guard)
        raise Unsupported(f"internal: cannot vectorise {type(e).__name__}")

    # ---- casts ---------------------------------------------------------------------------------------
    def cast(self, e: Cast, guard: tuple) -> Operand:
        if e.x.dtype == "bool":
            return self.select(Select(e.x, Const(1.0, e.dtype), Const(0.0, e.dtype), e.dtype), guard)
        x = self.use(e.x, guard)
        xt = self.tile_of(e.x, x)
        out = self._dst((e, guard), e.dtype, *([(e.x, x, guard)] if SIZE[e.dtype] == SIZE[e.x.dtype] else []))
        self.cast_into(out, xt)
        if xt is not x:
            self.pool.release(xt)
        if out is not x:
            self.done(e.x, x, guard)
        return out

    def cast_into(self, out: Tile, x: Tile) -> None:
        s, d = x.dtype, out.dtype
        n = self.dom.count
        if d == "int32" and s in VEC_TYPES:
            # the vector Cast saturates (NaN to 0); PyTorch's conversion gives INT32_MIN to every value int32
            # cannot hold, which the cast of -2**31 does
            self.features.select = True
            y, m = self.pool.alloc(s), self.pool.alloc("uint8")
            self.src(f"Compares({m.name}, {x.name}, {vec_scalar('2147483648.0f', s)}, CMPMODE::LT, "
                     f"XbAlign({n}, {256 // SIZE[s]}));")
            self.src(f"Select({y.name}, {m.name}, {x.name}, {vec_scalar('-2147483648.0f', s)}, "
                     f"SELMODE::VSEL_TENSOR_SCALAR_MODE, {n});")
            self.src(f"Cast({out.name}, {y.name}, RoundMode::CAST_TRUNC, {n});")
            self.pool.release(y)
            self.pool.release(m)
            return
        if s == "float32" and d == "float16":
            # the Cast saturates a finite value past the half range (the hardware's default); IEEE and PyTorch
            # round it to the infinity (bfloat16's range is float32's but for the top 0.4 %)
            self.src(f"Cast({out.name}, {x.name}, RoundMode::CAST_RINT, {n});")
            edge = 65520.0                                           # 65504 + half an ulp
            self.features.select = True
            z, m = self.pool.alloc("float32"), self.pool.alloc("uint8")
            self.src(f"Compare({m.name}, {x.name}, {x.name}, CMPMODE::EQ, XbAlign({n}, 64));")
            self.src(f"Select({z.name}, {m.name}, {x.name}, 0.0f, SELMODE::VSEL_TENSOR_SCALAR_MODE, {n});")  # NaN: 0
            for value in (float("inf"), float("-inf")):
                self.src(f"Compares({m.name}, {z.name}, {float_lit(edge if value > 0 else -edge)}, "
                         f"CMPMODE::{'LT' if value > 0 else 'GT'}, XbAlign({n}, 64));")
                self.src(f"Select({out.name}, {m.name}, {out.name}, {vec_scalar(float_lit(value), d)}, "
                         f"SELMODE::VSEL_TENSOR_SCALAR_MODE, {n});")
            self.pool.release(z)
            self.pool.release(m)
            return
        mode = _cast_mode(s, d)
        if mode is None:  # two steps through float (the second with its own rules: int32, float16)
            mid = self.pool.alloc("float32")
            self.src(f"Cast({mid.name}, {x.name}, RoundMode::{_cast_mode(s, 'float32')}, {n});")
            self.cast_into(out, mid)
            self.pool.release(mid)
        else:
            self.src(f"Cast({out.name}, {x.name}, RoundMode::{mode}, {n});")

    # ---- unary functions -----------------------------------------------------------------------------
    def unary(self, e: Call, guard: tuple) -> Operand:
        (a,) = e.args
        x = self.use(a, guard)
        xt = self.tile_of(a, x)
        dt = e.dtype
        if dt == "float16" and e.fn in WIDEN:
            # composed functions run in float32 and round once
            wide = self.pool.alloc("float32")
            self.cast_into(wide, xt)
            res = self.pool.alloc("float32")
            self.compose(e.fn, res, wide)
            self.pool.release(wide)
            out = self._dst((e, guard), dt, (a, x, guard)) if xt is x else xt
            self.cast_into(out, res)
            self.pool.release(res)
        else:
            out = self._dst((e, guard), dt, (a, x, guard)) if xt is x else xt
            if e.fn in DIRECT_UNARY:
                self.src(f"{DIRECT_UNARY[e.fn]}({out.name}, {xt.name}, {self.dom.count});")
            else:
                self.compose(e.fn, out, xt)
        if out is not x:
            self.done(a, x, guard)
        return out

    def compose(self, fn: str, out: Tile, x: Tile) -> None:
        """`out = fn(x)` from vector instructions (`out` may be `x`); NaN in, NaN out (sign(NaN) is 0): clamps and
        selects inside the compositions would otherwise turn NaN into a number."""
        keep = self.not_nan(x) if fn not in ("sign", "neg") else None
        self._compose(fn, out, x)
        if keep is not None:
            self.nan_where_not(out, keep)
            self.pool.release(keep)

    def _compose(self, fn: str, out: Tile, x: Tile) -> None:
        n, src, dt = self.dom.count, self.src, out.dtype
        s = lambda v: vec_scalar(float_lit(v), dt)  # noqa: E731
        if fn == "neg":
            src(f"Muls({out.name}, {x.name}, {s(-1.0)}, {n});")
        elif fn == "exp2":
            src(f"Muls({out.name}, {x.name}, {s(0.6931471805599453)}, {n});")
            src(f"Exp({out.name}, {out.name}, {n});")
        elif fn in ("log2", "log10"):
            src(f"Ln({out.name}, {x.name}, {n});")
            src(f"Muls({out.name}, {out.name}, {s(1.4426950408889634 if fn == 'log2' else 0.4342944819032518)}, {n});")
        elif fn == "log1p":
            self._log1p(out, x)
        elif fn == "expm1":   # (u - 1) * x / ln(u), u = exp(x): x where u = 1, -1 where u = 0, inf where u = inf
            u, d, lu = self.pool.alloc(dt), self.pool.alloc(dt), self.pool.alloc(dt)
            src(f"Exp({u.name}, {x.name}, {n});")
            src(f"Adds({d.name}, {u.name}, {s(-1.0)}, {n});")
            src(f"Ln({lu.name}, {u.name}, {n});")
            src(f"Div({d.name}, {d.name}, {lu.name}, {n});")
            src(f"Mul({d.name}, {d.name}, {x.name}, {n});")
            for value, result in ((1.0, x), (0.0, -1.0), (float("inf"), float("inf"))):
                m = self._mask_t(u, "NE", value)
                self._select(d, m, d, result)
                self.pool.release(m)
            src(f"DataCopy({out.name}, {d.name}, XbAlign({n}, {32 // SIZE[dt]}));")
            for tmp in (u, d, lu):
                self.pool.release(tmp)
        elif fn == "sigmoid":  # 1 / (1 + exp(-x))
            src(f"Muls({out.name}, {x.name}, {s(-1.0)}, {n});")
            src(f"Exp({out.name}, {out.name}, {n});")
            src(f"Adds({out.name}, {out.name}, {s(1.0)}, {n});")
            src(f"Reciprocal({out.name}, {out.name}, {n});")
        elif fn == "tanh":  # (e - 1) / (e + 1), e = exp(2 min(max(x, -9), 9)); tanh(+-9) rounds to +-1
            t = self.pool.alloc(dt)
            src(f"Maxs({out.name}, {x.name}, {s(-9.0)}, {n});")
            src(f"Mins({out.name}, {out.name}, {s(9.0)}, {n});")
            src(f"Muls({out.name}, {out.name}, {s(2.0)}, {n});")
            src(f"Exp({out.name}, {out.name}, {n});")
            src(f"Adds({t.name}, {out.name}, {s(1.0)}, {n});")
            src(f"Adds({out.name}, {out.name}, {s(-1.0)}, {n});")
            src(f"Div({out.name}, {out.name}, {t.name}, {n});")
            self.pool.release(t)
        elif fn in ("erf", "erfc"):
            self.erf(out, x, fn == "erfc")
        elif fn in ("sinh", "cosh", "asinh", "acosh", "atanh", "atan", "asin", "acos", "sin", "cos", "tan",
                    "sign", "erfinv"):
            self.more_math(fn, out, x)
        elif fn in ROUND:
            if dt != "float32":
                raise Unsupported(f"internal: {fn} on {dt} must be widened first")
            src(f"Cast({out.name}, {x.name}, RoundMode::{ROUND[fn]}, {n});")
        else:
            raise Unsupported(f"the ascend backend has no vector form of {fn}",
                              hint="supported: " + " ".join(sorted(set(DIRECT_UNARY) | COMPOSED_UNARY)))

    # ---- composed functions (float32 tiles) -------------------------------------------------------------
    def _i(self, line: str) -> None:
        self.src(line.replace("@n", self.dom.count))

    def _mask(self, x: Tile, mode: str, value: float) -> Tile:
        """A Compares mask of `x mode value` over whole 256-byte repeats."""
        self.features.select = True
        m = self.pool.alloc("uint8")
        self._i(f"Compares({m.name}, {x.name}, {float_lit(value)}, CMPMODE::{mode}, XbAlign(@n, 64));")
        return m

    def _select(self, out: Tile, m: Tile, a: Tile, b: Tile | float) -> None:
        """out = m ? a : b."""
        self.features.select = True
        if isinstance(b, Tile):
            self._i(f"Select({out.name}, {m.name}, {a.name}, {b.name}, SELMODE::VSEL_TENSOR_TENSOR_MODE, @n);")
        else:
            self._i(f"Select({out.name}, {m.name}, {a.name}, {vec_scalar(float_lit(b), out.dtype)}, "
                    f"SELMODE::VSEL_TENSOR_SCALAR_MODE, @n);")

    def _mask_t(self, x: Tile, mode: str, value: float) -> Tile:
        """`_mask` for a float32 or float16 tile."""
        self.features.select = True
        m = self.pool.alloc("uint8")
        self._i(f"Compares({m.name}, {x.name}, {vec_scalar(float_lit(value), x.dtype)}, CMPMODE::{mode}, "
                f"XbAlign(@n, {256 // SIZE[x.dtype]}));")
        return m

    def _signbit(self, x: Tile) -> Tile:
        """A mask, 1 where x's sign bit is set, -0.0 and -inf included: x + 1/x < 0 (NaN: 0)."""
        t = self.pool.alloc(x.dtype)
        self._i(f"Reciprocal({t.name}, {x.name}, @n);")
        self._i(f"Add({t.name}, {t.name}, {x.name}, @n);")
        m = self._mask_t(t, "LT", 0.0)
        self.pool.release(t)
        return m

    def not_nan(self, x: Tile) -> Tile:
        """A Compare mask, 1 where x is not NaN (x == x), over whole 256-byte repeats."""
        self.features.select = True
        m = self.pool.alloc("uint8")
        self._i(f"Compare({m.name}, {x.name}, {x.name}, CMPMODE::EQ, XbAlign(@n, {256 // SIZE[x.dtype]}));")
        return m

    def nan_where_not(self, out: Tile, m: Tile) -> None:
        """out = NaN where the mask bit is 0."""
        self._i(f"Select({out.name}, {m.name}, {out.name}, {vec_scalar('XB_NAN', out.dtype)}, "
                f"SELMODE::VSEL_TENSOR_SCALAR_MODE, @n);")

    def extreme(self, api: str, out: Tile, a: Tile, b: Tile | str) -> None:
        """out = Max/Min(a, b) (b a tile, or a scalar for Maxs/Mins) with NaN propagating: the vector Max and Min
        keep the other operand where one is NaN. `out` may be `a` or `b`."""
        masks = [self.not_nan(x) for x in (a, b) if isinstance(x, Tile) and x.dtype in VEC_TYPES]
        self._i(f"{api}({out.name}, {a.name}, {b.name if isinstance(b, Tile) else b}, @n);")
        for m in masks:
            self.nan_where_not(out, m)
            self.pool.release(m)

    def accumulate(self, kind: str, acc: Tile, t: Tile) -> None:
        """acc = acc (+ * max min) t, lane by lane; max and min keep NaN."""
        if kind in ("max", "min") and acc.dtype in VEC_TYPES:
            self.extreme("Max" if kind == "max" else "Min", acc, acc, t)
        else:
            self._i(f"{ {'sum': 'Add', 'prod': 'Mul', 'max': 'Max', 'min': 'Min'}[kind]}({acc.name}, {acc.name}, "
                    f"{t.name}, @n);")

    def _negate_where_negative(self, out: Tile, r: Tile, x: Tile) -> None:
        """out = r where x >= 0 (or NaN), -r where x < 0."""
        neg = self.pool.alloc("float32")
        self._i(f"Muls({neg.name}, {r.name}, -1.0f, @n);")
        m = self._mask(x, "LT", 0.0)
        self._select(out, m, neg, r)
        self.pool.release(m)
        self.pool.release(neg)

    def _atan(self, out: Tile, x: Tile) -> None:
        """atan: |x| reduced to [0, tan(pi/8)] (Cephes' reduction), an odd polynomial, the sign back."""
        ax, t, u, y0 = (self.pool.alloc("float32") for _ in range(4))
        i = self._i
        i(f"Abs({ax.name}, {x.name}, @n);")
        i(f"Adds({t.name}, {ax.name}, -1.0f, @n);")            # (|x| - 1) / (|x| + 1)
        i(f"Adds({u.name}, {ax.name}, 1.0f, @n);")
        i(f"Div({t.name}, {t.name}, {u.name}, @n);")
        mid = self._mask(ax, "GT", 0.41421356237309503)
        self._select(t, mid, t, ax)
        i(f"Duplicate({y0.name}, {float_lit(0.7853981633974483)}, @n);")
        self._select(y0, mid, y0, 0.0)
        self.pool.release(mid)
        i(f"Reciprocal({u.name}, {ax.name}, @n);")              # -1 / |x|
        i(f"Muls({u.name}, {u.name}, -1.0f, @n);")
        big = self._mask(ax, "GT", 2.414213562373095)
        self._select(t, big, u, t)
        i(f"Duplicate({u.name}, {float_lit(1.5707963267948966)}, @n);")
        self._select(y0, big, u, y0)
        self.pool.release(big)
        z = ax
        i(f"Mul({z.name}, {t.name}, {t.name}, @n);")
        i(f"Muls({u.name}, {z.name}, {float_lit(8.05374449538e-2)}, @n);")
        for c in (-1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1):
            i(f"Adds({u.name}, {u.name}, {float_lit(c)}, @n);")
            if c != -3.33329491539e-1:
                i(f"Mul({u.name}, {u.name}, {z.name}, @n);")
        i(f"Mul({u.name}, {u.name}, {z.name}, @n);")
        i(f"Mul({u.name}, {u.name}, {t.name}, @n);")
        i(f"Add({u.name}, {u.name}, {t.name}, @n);")
        i(f"Add({u.name}, {u.name}, {y0.name}, @n);")
        self._negate_where_negative(out, u, x)
        for tmp in (ax, t, u, y0):
            self.pool.release(tmp)

    def _log1p(self, out: Tile, x: Tile) -> None:
        """out = log1p(x) = ln(u) * x / (u - 1), u = 1 + x: the rounding of u cancels; x where u = 1, inf at inf
        (`out` may be `x`)."""
        i, dt = self._i, x.dtype
        u, d, xc = self.pool.alloc(dt), self.pool.alloc(dt), self.pool.alloc(dt)
        i(f"DataCopy({xc.name}, {x.name}, XbAlign(@n, {32 // SIZE[dt]}));")
        i(f"Adds({u.name}, {xc.name}, {vec_scalar('1.0f', dt)}, @n);")
        i(f"Adds({d.name}, {u.name}, {vec_scalar('-1.0f', dt)}, @n);")
        i(f"Ln({u.name}, {u.name}, @n);")
        i(f"Div({u.name}, {u.name}, {d.name}, @n);")
        i(f"Mul({u.name}, {u.name}, {xc.name}, @n);")
        m = self._mask_t(d, "NE", 0.0)
        self._select(u, m, u, xc)
        self.pool.release(m)
        m = self._mask_t(xc, "NE", float("inf"))         # inf * inf / inf is NaN
        self._select(out, m, u, float("inf"))
        for t in (m, u, d, xc):
            self.pool.release(t)

    def _huge_reduced(self, x: Tile) -> tuple[Tile, Tile]:
        """(r, q): a copy of x whose elements at or past 2**16 (where the float32 reduction below loses the
        quadrant) are replaced by their remainder r modulo pi/2 (|r| <= pi/4, to full float32 precision) and the
        quadrant q in the second tile (0 elsewhere), on the scalar unit (`XbTrigReduce`) and only in tiles that
        have one (a ReduceMax of |x| decides)."""
        i, n = self._i, self.dom.count
        xr, qt, a, red, tmp = (self.pool.alloc("float32") for _ in range(5))
        self.sw.helpers.add("trig")
        i(f"DataCopy({xr.name}, {x.name}, XbAlign(@n, 8));")
        i(f"Duplicate({qt.name}, 0.0f, @n);")
        i(f"Abs({a.name}, {x.name}, @n);")
        i(f"ReduceMax({red.name}, {a.name}, {tmp.name}, @n);")
        i("XbSync<HardEvent::V_S>();")
        # (NaN too: ReduceMax gives NaN when the first lane is NaN)
        with self.src.block(f"if (!({red.name}.GetValue(0) < {float_lit(TRIG_LIMIT)}))"), \
                self.src.block(f"for (uint32_t q = 0; q < static_cast<uint32_t>({n}); ++q)"):
                self.src(f"const float v = {xr.name}.GetValue(q);")
                with self.src.block(f"if (v >= {float_lit(TRIG_LIMIT)} || v <= {float_lit(-TRIG_LIMIT)})"):
                    self.src("float r = 0.0f;")
                    self.src(f"{qt.name}.SetValue(q, XbTrigReduce(v, &r));")
                    self.src(f"{xr.name}.SetValue(q, r);")
        i("XbSync<HardEvent::S_V>();")
        for t in (a, red, tmp):
            self.pool.release(t)
        return xr, qt

    def _sincos(self, out: Tile, x: Tile, fn: str, quadrant: Tile | None = None) -> None:
        """sin / cos: k = rint(2x/pi), r = x - k pi/2 in three parts (Cody-Waite), minimax polynomials on
        [-pi/4, pi/4], the quadrant k mod 4 picking sin or cos and the sign."""
        i = self._i
        k, r, z, s, c, q = (self.pool.alloc("float32") for _ in range(6))
        i(f"Muls({k.name}, {x.name}, {float_lit(0.6366197723675814)}, @n);")
        i(f"Cast({k.name}, {k.name}, RoundMode::CAST_RINT, @n);")
        i(f"Muls({z.name}, {k.name}, {float_lit(-1.5703125)}, @n);")
        i(f"Add({r.name}, {x.name}, {z.name}, @n);")
        i(f"Muls({z.name}, {k.name}, {float_lit(-4.837512969970703125e-4)}, @n);")
        i(f"Add({r.name}, {r.name}, {z.name}, @n);")
        i(f"Muls({z.name}, {k.name}, {float_lit(-7.54978995489188216e-8)}, @n);")
        i(f"Add({r.name}, {r.name}, {z.name}, @n);")
        i(f"Mul({z.name}, {r.name}, {r.name}, @n);")
        # sin(r) = r + r z (s1 + z (s2 + z s3))
        i(f"Muls({s.name}, {z.name}, {float_lit(-1.9515295891e-4)}, @n);")
        i(f"Adds({s.name}, {s.name}, {float_lit(8.3321608736e-3)}, @n);")
        i(f"Mul({s.name}, {s.name}, {z.name}, @n);")
        i(f"Adds({s.name}, {s.name}, {float_lit(-1.6666654611e-1)}, @n);")
        i(f"Mul({s.name}, {s.name}, {z.name}, @n);")
        i(f"Mul({s.name}, {s.name}, {r.name}, @n);")
        i(f"Add({s.name}, {s.name}, {r.name}, @n);")
        # cos(r) = 1 - z / 2 + z^2 (c1 + z (c2 + z c3))
        i(f"Muls({c.name}, {z.name}, {float_lit(2.443315711809948e-5)}, @n);")
        i(f"Adds({c.name}, {c.name}, {float_lit(-1.388731625493765e-3)}, @n);")
        i(f"Mul({c.name}, {c.name}, {z.name}, @n);")
        i(f"Adds({c.name}, {c.name}, {float_lit(4.166664568298827e-2)}, @n);")
        i(f"Mul({c.name}, {c.name}, {z.name}, @n);")
        i(f"Mul({c.name}, {c.name}, {z.name}, @n);")
        i(f"Muls({r.name}, {z.name}, -0.5f, @n);")
        i(f"Add({c.name}, {c.name}, {r.name}, @n);")
        i(f"Adds({c.name}, {c.name}, 1.0f, @n);")
        if quadrant is not None:                           # the quadrants of arguments reduced before
            i(f"Add({k.name}, {k.name}, {quadrant.name}, @n);")
        # q = k mod 4 (k - 4 floor(k / 4))
        i(f"Muls({q.name}, {k.name}, 0.25f, @n);")
        i(f"Cast({q.name}, {q.name}, RoundMode::CAST_FLOOR, @n);")
        i(f"Muls({q.name}, {q.name}, -4.0f, @n);")
        i(f"Add({q.name}, {q.name}, {k.name}, @n);")
        first, second = (s, c) if fn == "sin" else (c, s)
        i(f"Muls({z.name}, {first.name}, -1.0f, @n);")   # -first
        i(f"Muls({r.name}, {second.name}, -1.0f, @n);")  # -second
        # quadrants: sin -> s, c, -s, -c; cos -> c, -s, -c, s
        picks = [first, second, z, r] if fn == "sin" else [first, r, z, second]
        i(f"DataCopy({out.name}, {picks[0].name}, XbAlign(@n, 8));")
        for quad in (1, 2, 3):
            m = self._mask(q, "EQ", float(quad))
            self._select(out, m, picks[quad], out)
            self.pool.release(m)
        for tmp in (k, r, z, s, c, q):
            self.pool.release(tmp)

    def more_math(self, fn: str, out: Tile, x: Tile) -> None:
        i = self._i
        if fn in ("sinh", "cosh"):
            e, f = self.pool.alloc("float32"), self.pool.alloc("float32")
            i(f"Exp({e.name}, {x.name}, @n);")
            i(f"Muls({f.name}, {x.name}, -1.0f, @n);")
            i(f"Exp({f.name}, {f.name}, @n);")
            if fn == "cosh":
                i(f"Add({out.name}, {e.name}, {f.name}, @n);")
                i(f"Muls({out.name}, {out.name}, 0.5f, @n);")
            else:  # (e^x - e^-x) / 2, and x + x^3/6 + x^5/120 + x^7/5040 where |x| < 0.5
                i(f"Sub({e.name}, {e.name}, {f.name}, @n);")
                i(f"Muls({e.name}, {e.name}, 0.5f, @n);")
                z, p = self.pool.alloc("float32"), self.pool.alloc("float32")
                i(f"Mul({z.name}, {x.name}, {x.name}, @n);")
                i(f"Muls({p.name}, {z.name}, {float_lit(1 / 5040)}, @n);")
                i(f"Adds({p.name}, {p.name}, {float_lit(1 / 120)}, @n);")
                i(f"Mul({p.name}, {p.name}, {z.name}, @n);")
                i(f"Adds({p.name}, {p.name}, {float_lit(1 / 6)}, @n);")
                i(f"Mul({p.name}, {p.name}, {z.name}, @n);")
                i(f"Mul({p.name}, {p.name}, {x.name}, @n);")
                i(f"Add({p.name}, {p.name}, {x.name}, @n);")
                i(f"Abs({z.name}, {x.name}, @n);")
                m = self._mask(z, "LT", 0.5)
                self._select(out, m, p, e)
                for tmp in (m, z, p):
                    self.pool.release(tmp)
            self.pool.release(e)
            self.pool.release(f)
        elif fn in ("asinh", "acosh"):
            # asinh |x| = log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), acosh x = log1p(x - 1 + sqrt((x - 1)(x + 1))):
            # no 1 + small rounding away the small; ln|x| + ln 2 from 2**60 (x^2 would overflow); asinh odd,
            # acosh NaN below 1
            t, a, big = self.pool.alloc("float32"), self.pool.alloc("float32"), self.pool.alloc("float32")
            i(f"Abs({a.name}, {x.name}, @n);")
            if fn == "asinh":
                i(f"Mul({t.name}, {a.name}, {a.name}, @n);")
                i(f"Adds({big.name}, {t.name}, 1.0f, @n);")
                i(f"Sqrt({big.name}, {big.name}, @n);")
                i(f"Adds({big.name}, {big.name}, 1.0f, @n);")
                i(f"Div({t.name}, {t.name}, {big.name}, @n);")
                i(f"Add({t.name}, {t.name}, {a.name}, @n);")
            else:
                i(f"Adds({t.name}, {x.name}, -1.0f, @n);")
                i(f"Adds({big.name}, {x.name}, 1.0f, @n);")
                i(f"Mul({big.name}, {big.name}, {t.name}, @n);")
                i(f"Sqrt({big.name}, {big.name}, @n);")
                i(f"Add({t.name}, {t.name}, {big.name}, @n);")
            self._log1p(t, t)
            i(f"Ln({big.name}, {a.name}, @n);")
            i(f"Adds({big.name}, {big.name}, {float_lit(0.6931471805599453)}, @n);")
            m = self._mask(a, "LT", 2.0 ** 60)
            self._select(t, m, t, big)
            self.pool.release(m)
            if fn == "asinh":
                self._negate_where_negative(out, t, x)
            else:
                m = self._mask(x, "GE", 1.0)
                self._select(out, m, t, float("nan"))
                self.pool.release(m)
            for tmp in (t, a, big):
                self.pool.release(tmp)
        elif fn == "atanh":  # log1p(2x / (1 - x)) / 2
            t, u = self.pool.alloc("float32"), self.pool.alloc("float32")
            i(f"Muls({u.name}, {x.name}, -1.0f, @n);")
            i(f"Adds({u.name}, {u.name}, 1.0f, @n);")
            i(f"Muls({t.name}, {x.name}, 2.0f, @n);")
            i(f"Div({t.name}, {t.name}, {u.name}, @n);")
            self._log1p(t, t)
            i(f"Muls({out.name}, {t.name}, 0.5f, @n);")
            self.pool.release(t)
            self.pool.release(u)
        elif fn == "atan":
            self._atan(out, x)
        elif fn in ("asin", "acos"):  # atan(x / sqrt(1 - x^2)); acos = pi/2 - asin
            t = self.pool.alloc("float32")
            i(f"Mul({t.name}, {x.name}, {x.name}, @n);")
            i(f"Muls({t.name}, {t.name}, -1.0f, @n);")
            i(f"Adds({t.name}, {t.name}, 1.0f, @n);")
            i(f"Sqrt({t.name}, {t.name}, @n);")
            i(f"Div({t.name}, {x.name}, {t.name}, @n);")
            self._atan(out, t)
            if fn == "acos":
                i(f"Muls({out.name}, {out.name}, -1.0f, @n);")
                i(f"Adds({out.name}, {out.name}, {float_lit(1.5707963267948966)}, @n);")
            self.pool.release(t)
        elif fn in ("sin", "cos"):
            xr, qt = self._huge_reduced(x)
            self._sincos(out, xr, fn, qt)
            self.pool.release(xr)
            self.pool.release(qt)
        elif fn == "tan":
            c = self.pool.alloc("float32")
            xr, qt = self._huge_reduced(x)
            self._sincos(c, xr, "cos", qt)
            self._sincos(out, xr, "sin", qt)
            i(f"Div({out.name}, {out.name}, {c.name}, @n);")
            self.pool.release(c)
            self.pool.release(xr)
            self.pool.release(qt)
        elif fn == "erfinv":  # M. Giles' single-precision polynomials in w = -ln((1 - x)(1 + x))
            w, t, p, q = (self.pool.alloc("float32") for _ in range(4))
            i(f"Muls({t.name}, {x.name}, -1.0f, @n);")
            i(f"Adds({t.name}, {t.name}, 1.0f, @n);")
            i(f"Adds({w.name}, {x.name}, 1.0f, @n);")
            i(f"Mul({w.name}, {w.name}, {t.name}, @n);")
            i(f"Ln({w.name}, {w.name}, @n);")
            i(f"Muls({w.name}, {w.name}, -1.0f, @n);")
            for dst, shift, coeffs in ((p, None, ERFINV_CENTRAL), (q, "sqrt", ERFINV_TAIL)):
                if shift:
                    i(f"Sqrt({t.name}, {w.name}, @n);")
                    i(f"Adds({t.name}, {t.name}, -3.0f, @n);")
                else:
                    i(f"Adds({t.name}, {w.name}, -2.5f, @n);")
                i(f"Duplicate({dst.name}, {float_lit(coeffs[0])}, @n);")
                for c in coeffs[1:]:
                    i(f"Mul({dst.name}, {dst.name}, {t.name}, @n);")
                    i(f"Adds({dst.name}, {dst.name}, {float_lit(c)}, @n);")
            m = self._mask(w, "LT", 5.0)
            self._select(t, m, p, q)
            self.pool.release(m)
            i(f"Mul({p.name}, {t.name}, {x.name}, @n);")
            i(f"Muls({q.name}, {x.name}, XB_INF, @n);")           # erfinv(+-1) = +-inf
            i(f"Abs({t.name}, {x.name}, @n);")
            m = self._mask(t, "EQ", 1.0)
            self._select(out, m, q, p)
            self.pool.release(m)
            for tmp in (w, t, p, q):
                self.pool.release(tmp)
        elif fn == "sign":  # 1 where x > 0, -1 where x < 0, 0 elsewhere (0, -0, NaN) (masks first: out may be x)
            t = self.pool.alloc("float32")
            pos, neg = self._mask(x, "GT", 0.0), self._mask(x, "LT", 0.0)
            i(f"Duplicate({t.name}, 0.0f, @n);")
            i(f"Duplicate({out.name}, 1.0f, @n);")
            self._select(out, pos, out, t)
            i(f"Duplicate({t.name}, -1.0f, @n);")
            self._select(out, neg, t, out)
            for tmp in (pos, neg, t):
                self.pool.release(tmp)
        else:
            raise Unsupported(f"internal: no composition for {fn}")

    def composed_binary(self, e: Call, guard: tuple) -> Tile:
        """Binary functions built from others, in float32 (16-bit floats widened, rounded once)."""
        a_e, b_e = e.args
        dt, fn = e.dtype, e.fn
        if dt not in VEC_TYPES:
            raise Unsupported(f"{fn} on {dt} has no vector form")
        a, b = self.use(a_e, guard), self.use(b_e, guard)
        at, bt = self.tile_of(a_e, a), self.tile_of(b_e, b)
        wide = []
        if dt != "float32":
            for t in (at, bt):
                w = self.pool.alloc("float32")
                self.cast_into(w, t)
                wide.append(w)
            x, y = wide
        else:
            x, y = at, bt
        res = self.pool.alloc("float32")
        i = self._i
        if fn in ("fmax", "fmin"):     # NaN ignored: the other operand where one is NaN
            mx, my = self.not_nan(x), self.not_nan(y)
            i(f"{'Max' if fn == 'fmax' else 'Min'}({res.name}, {x.name}, {y.name}, @n);")
            self._select(res, mx, res, y)
            self._select(res, my, res, x)
            self.pool.release(mx)
            self.pool.release(my)
        elif fn == "hypot":  # m sqrt(1 + (n/m)^2), m = max(|a|, |b|), n = min: no overflow of the squares
            ax, ay, t = (self.pool.alloc("float32") for _ in range(3))
            i(f"Abs({ax.name}, {x.name}, @n);")
            i(f"Abs({ay.name}, {y.name}, @n);")
            i(f"Max({res.name}, {ax.name}, {ay.name}, @n);")
            i(f"Min({t.name}, {ax.name}, {ay.name}, @n);")
            i(f"Div({t.name}, {t.name}, {res.name}, @n);")
            m = self._mask(res, "NE", 0.0)                        # hypot(0, 0) = 0, not 0 * sqrt(1 + NaN)
            self._select(t, m, t, 0.0)
            self.pool.release(m)
            i(f"Mul({t.name}, {t.name}, {t.name}, @n);")
            i(f"Adds({t.name}, {t.name}, 1.0f, @n);")
            i(f"Sqrt({t.name}, {t.name}, @n);")
            i(f"Mul({res.name}, {res.name}, {t.name}, @n);")
            for v in (x, y):                                      # NaN propagates ...
                m = self.not_nan(v)
                self.nan_where_not(res, m)
                self.pool.release(m)
            for v in (ax, ay):                                    # ... but an infinity wins: hypot(inf, NaN) = inf
                m = self._mask(v, "NE", float("inf"))
                self._select(res, m, res, float("inf"))
                self.pool.release(m)
            for tmp in (ax, ay, t):
                self.pool.release(tmp)
        elif fn == "copysign":  # |a|, negated where b's sign bit is set (-0.0 and -inf included)
            t, neg = self.pool.alloc("float32"), self.pool.alloc("float32")
            i(f"Abs({t.name}, {x.name}, @n);")
            i(f"Muls({neg.name}, {t.name}, -1.0f, @n);")
            m = self._signbit(y)
            self._select(res, m, neg, t)
            for tmp in (m, t, neg):
                self.pool.release(tmp)
        elif fn == "atan2":  # atan(n/m) of |a| and |b| by octant: exact at zeros and infinities, as C's atan2
            self._atan2(res, x, y)
        out = self._dst((e, guard), dt)
        if dt == "float32":
            i(f"DataCopy({out.name}, {res.name}, XbAlign(@n, 8));")
        else:
            self.cast_into(out, res)
        self.pool.release(res)
        for w in wide:
            self.pool.release(w)
        for x_e, xx, tt in ((a_e, a, at), (b_e, b, bt)):
            if tt is not xx:
                self.pool.release(tt)
            self.done(x_e, xx, guard)
        return out

    def _atan2(self, res: Tile, a: Tile, b: Tile) -> None:
        """atan2(a, b): t = min(|a|, |b|) / max(...) (0 for two zeros, 1 for two infinities), atan(t), pi/2 minus
        that where |a| > |b|, pi minus that where b's sign bit is set, a's sign last; NaN for a NaN operand."""
        i = self._i
        aa, ab, t, u = (self.pool.alloc("float32") for _ in range(4))
        i(f"Abs({aa.name}, {a.name}, @n);")
        i(f"Abs({ab.name}, {b.name}, @n);")
        i(f"Max({u.name}, {aa.name}, {ab.name}, @n);")
        i(f"Min({t.name}, {aa.name}, {ab.name}, @n);")
        both_inf = self._mask(t, "NE", float("inf"))      # 0 where the smaller is inf too
        i(f"Div({t.name}, {t.name}, {u.name}, @n);")
        m = self._mask(u, "NE", 0.0)
        self._select(t, m, t, 0.0)                         # two zeros: 0, not 0 / 0
        self._select(t, both_inf, t, 1.0)                  # two infinities: 1, not inf / inf
        self.pool.release(m)
        self.pool.release(both_inf)
        self._atan(res, t)
        i(f"Muls({u.name}, {res.name}, -1.0f, @n);")
        i(f"Adds({u.name}, {u.name}, {float_lit(np.pi / 2)}, @n);")
        m = self._mask_tt(aa, ab, "GT")
        self._select(res, m, u, res)
        self.pool.release(m)
        i(f"Muls({u.name}, {res.name}, -1.0f, @n);")
        i(f"Adds({u.name}, {u.name}, {float_lit(np.pi)}, @n);")
        m = self._signbit(b)
        self._select(res, m, u, res)
        self.pool.release(m)
        i(f"Muls({u.name}, {res.name}, -1.0f, @n);")
        m = self._signbit(a)
        self._select(res, m, u, res)
        self.pool.release(m)
        for v in (a, b):
            m = self.not_nan(v)
            self.nan_where_not(res, m)
            self.pool.release(m)
        for tmp in (aa, ab, t, u):
            self.pool.release(tmp)

    def _pow(self, r: Tile, x: Tile, y: Tile) -> None:
        """r = x ** y as IEEE 754 pow (float32 tiles): |x| ** y = exp(y ln|x|), negated for a negative x (sign bit)
        and an odd integer y, NaN for a finite negative x and a non-integer y; 1 for y = 0, for x = 1, and for
        x = -1 with y = +-inf, whatever the other operand."""
        i = self._i
        t, q = self.pool.alloc("float32"), self.pool.alloc("float32")
        i(f"Abs({t.name}, {x.name}, @n);")
        i(f"Ln({t.name}, {t.name}, @n);")
        i(f"Mul({t.name}, {t.name}, {y.name}, @n);")
        i(f"Exp({r.name}, {t.name}, @n);")
        i(f"Cast({t.name}, {y.name}, RoundMode::CAST_FLOOR, @n);")
        integer = self._mask_tt(t, y, "EQ")                 # y is an integer (or infinite)
        i(f"Muls({q.name}, {t.name}, 0.5f, @n);")
        i(f"Cast({q.name}, {q.name}, RoundMode::CAST_FLOOR, @n);")
        i(f"Muls({q.name}, {q.name}, -2.0f, @n);")
        i(f"Add({q.name}, {q.name}, {t.name}, @n);")        # floor(y) mod 2: 1 for odd y ...
        self._select(q, integer, q, 0.0)                    # ... if y is an integer
        odd = self._mask(q, "EQ", 1.0)
        i(f"Muls({t.name}, {r.name}, -1.0f, @n);")
        self._select(t, odd, t, r)
        neg = self._signbit(x)
        self._select(r, neg, t, r)                          # negative x, odd y: -|x| ** y
        self.pool.release(odd)
        self.pool.release(neg)
        self._select(t, integer, r, float("nan"))           # negative finite x, non-integer y: NaN
        m = self._mask(x, "GT", float("-inf"))
        self._select(t, m, t, r)
        self.pool.release(m)
        m = self._mask(x, "LT", 0.0)
        self._select(r, m, t, r)
        self.pool.release(m)
        self.pool.release(integer)
        i(f"Abs({q.name}, {y.name}, @n);")
        m = self._mask(x, "EQ", -1.0)
        self._select(q, m, q, 0.0)                          # |y| where x = -1, else 0
        self.pool.release(m)
        for v, value in ((q, float("inf")), (y, 0.0), (x, 1.0)):
            m = self._mask(v, "NE", value)
            self._select(r, m, r, 1.0)
            self.pool.release(m)
        self.pool.release(t)
        self.pool.release(q)

    def _mask_tt(self, a: Tile, b: Tile, mode: str) -> Tile:
        self.features.select = True
        m = self.pool.alloc("uint8")
        self._i(f"Compare({m.name}, {a.name}, {b.name}, CMPMODE::{mode}, XbAlign(@n, {256 // SIZE[a.dtype]}));")
        return m

    def erf(self, out: Tile, x: Tile, complement: bool) -> None:
        """A&S 7.1.26 on |x|, then the sign of x through a Compares mask."""
        n, src = self.dom.count, self.src
        f = lambda v: float_lit(v)  # noqa: E731
        ax, t, p, e = (self.pool.alloc("float32") for _ in range(4))
        mask = self.pool.alloc("uint8")
        src(f"Abs({ax.name}, {x.name}, {n});")
        src(f"Muls({t.name}, {ax.name}, {f(ERF_P)}, {n});")
        src(f"Adds({t.name}, {t.name}, {f(1.0)}, {n});")
        src(f"Reciprocal({t.name}, {t.name}, {n});")
        src(f"Muls({p.name}, {t.name}, {f(ERF_A[4])}, {n});")
        for c in reversed(ERF_A[:4]):
            src(f"Adds({p.name}, {p.name}, {f(c)}, {n});")
            src(f"Mul({p.name}, {p.name}, {t.name}, {n});")
        src(f"Mul({e.name}, {ax.name}, {ax.name}, {n});")
        src(f"Muls({e.name}, {e.name}, {f(-1.0)}, {n});")
        src(f"Exp({e.name}, {e.name}, {n});")
        src(f"Mul({p.name}, {p.name}, {e.name}, {n});")          # 1 - erf(|x|)
        src(f"Muls({t.name}, {p.name}, {f(-1.0)}, {n});")
        src(f"Adds({t.name}, {t.name}, {f(1.0)}, {n});")         # erf(|x|)
        src(f"Muls({e.name}, {t.name}, {f(-1.0)}, {n});")        # -erf(|x|)
        self.features.select = True
        src(f"Compares({mask.name}, {x.name}, {f(0.0)}, CMPMODE::GE, XbAlign({n}, 64));")
        if complement:  # erfc(x) = 1 - erf(x)
            src(f"Select({ax.name}, {mask.name}, {t.name}, {e.name}, SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
            src(f"Muls({out.name}, {ax.name}, {f(-1.0)}, {n});")
            src(f"Adds({out.name}, {out.name}, {f(1.0)}, {n});")
        else:
            # below 0.5 the series x (c0 + c1 x^2 + ...): A&S's error bound is absolute, ruinous relative to a
            # small erf(x) (computed before `out`, which may be `x`, is written)
            sr = self.pool.alloc("float32")
            src(f"Mul({p.name}, {x.name}, {x.name}, {n});")
            src(f"Duplicate({sr.name}, {f(ERF_SERIES[-1])}, {n});")
            for c in reversed(ERF_SERIES[:-1]):
                src(f"Mul({sr.name}, {sr.name}, {p.name}, {n});")
                src(f"Adds({sr.name}, {sr.name}, {f(c)}, {n});")
            src(f"Mul({sr.name}, {sr.name}, {x.name}, {n});")
            src(f"Select({out.name}, {mask.name}, {t.name}, {e.name}, SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
            src(f"Compares({mask.name}, {ax.name}, {f(0.5)}, CMPMODE::LT, XbAlign({n}, 64));")
            src(f"Select({out.name}, {mask.name}, {sr.name}, {out.name}, SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
            self.pool.release(sr)
        for tmp in (ax, t, p, e, mask):
            self.pool.release(tmp)

    # ---- binary functions ----------------------------------------------------------------------------
    def binary(self, e: Call, guard: tuple) -> Operand:
        a_e, b_e = e.args
        if e.fn == "pow":
            return self.power(e, guard)
        if e.fn in COMPOSED_BINARY:
            return self.composed_binary(e, guard)
        a, b = self.use(a_e, guard), self.use(b_e, guard)
        dt, n, fn = e.dtype, self.dom.count, e.fn
        out: Tile
        if isinstance(a, Tile) and isinstance(b, Tile):
            out = self._dst((e, guard), dt, (a_e, a, guard), (b_e, b, guard))
            if fn in ("maximum", "minimum"):
                self.extreme(BINARY[fn], out, a, b)
            else:
                self.src(f"{BINARY[fn]}({out.name}, {a.name}, {b.name}, {n});")
        elif isinstance(a, Tile) or fn in SCALAR_FORM:
            t, s = (a, b) if isinstance(a, Tile) else (b, a)
            te = a_e if isinstance(a, Tile) else b_e
            out = self._dst((e, guard), dt, (te, t, guard))
            if fn in ("maximum", "minimum"):
                self.extreme(SCALAR_FORM[fn], out, t, vec_scalar(s.code, dt))
            elif fn in SCALAR_FORM:
                self.src(f"{SCALAR_FORM[fn]}({out.name}, {t.name}, {vec_scalar(s.code, dt)}, {n});")
            elif fn == "sub":
                self.src(f"Adds({out.name}, {t.name}, {vec_scalar(f'-({s.code})', dt)}, {n});")
            elif fn == "div":
                self.src(f"Muls({out.name}, {t.name}, {vec_scalar(f'1.0f / ({s.code})', dt)}, {n});")
            else:
                raise Unsupported(f"internal: no scalar form for {fn}")
        else:  # scalar op tensor, not commutative: s - t, s / t
            t = b
            out = self._dst((e, guard), dt, (b_e, t, guard))
            if fn == "sub":
                self.src(f"Muls({out.name}, {t.name}, {vec_scalar('-1.0f', dt) if dt != 'int32' else '-1'}, {n});")
                self.src(f"Adds({out.name}, {out.name}, {vec_scalar(a.code, dt)}, {n});")
            elif fn == "div":
                st = self.tile_of(a_e, a)
                self.src(f"Div({out.name}, {st.name}, {t.name}, {n});")
                self.pool.release(st)
            else:
                raise Unsupported(f"internal: no scalar form for {fn}")
        for x_e, x in ((a_e, a), (b_e, b)):
            if x is not out:
                self.done(x_e, x, guard)
        return out

    def power(self, e: Call, guard: tuple) -> Operand:
        base_e, exp_e = e.args
        dt, n = e.dtype, self.dom.count
        x = self.use(base_e, guard)
        xt = self.tile_of(base_e, x)
        k = exp_e.value if isinstance(exp_e, Const) else None
        out = self._dst((e, guard), dt)
        if k is not None and float(k) in (1.0, 2.0, 3.0, 4.0):
            self.src(f"Muls({out.name}, {xt.name}, {vec_scalar('1.0f', dt)}, {n});")
            for _ in range(int(k) - 1):
                self.src(f"Mul({out.name}, {out.name}, {xt.name}, {n});")
        elif k == 0.5:
            self.src(f"Sqrt({out.name}, {xt.name}, {n});")
        elif k == -0.5:
            self.src(f"Rsqrt({out.name}, {xt.name}, {n});")
        elif k == -1:
            self.src(f"Reciprocal({out.name}, {xt.name}, {n});")
        elif k == 0:
            self.src(f"Duplicate({out.name}, {vec_scalar('1.0f', dt)}, {n});")
        else:  # IEEE pow through exp(y ln|x|), in float32
            y = self.use(exp_e, guard)
            wide = []
            xw, yw = xt, None
            if dt != "float32":
                xw = self.pool.alloc("float32")
                self.cast_into(xw, xt)
                wide.append(xw)
            yw = self.pool.alloc("float32")
            wide.append(yw)
            if isinstance(y, Tile) and y.dtype != "float32":
                self.cast_into(yw, y)
            elif isinstance(y, Tile):
                self.src(f"DataCopy({yw.name}, {y.name}, XbAlign({n}, 8));")
            else:
                self.src(f"Duplicate({yw.name}, {y.code}, {n});")
            self.done(exp_e, y, guard)
            res = self.pool.alloc("float32")
            self._pow(res, xw, yw)
            if dt == "float32":
                self.src(f"DataCopy({out.name}, {res.name}, XbAlign({n}, 8));")
            else:
                self.cast_into(out, res)
            self.pool.release(res)
            for w in wide:
                self.pool.release(w)
        if xt is not x:
            self.pool.release(xt)
        self.done(base_e, x, guard)
        return out

    # ---- selects -------------------------------------------------------------------------------------
    def mask(self, c: Expr, guard: tuple, dtype: str) -> tuple[Tile, bool]:
        """A Compare mask for condition `c` over the tile; the flag says whether set bits mean True."""
        n = self.dom.count
        per = 256 // SIZE[dtype]
        form = self._cond_form(c, bool(guard))
        m = self.pool.alloc("uint8")
        del per
        if form is not None and form[0] == "cmp":
            _, mode, x_e, y_e = form
            x, y = self.use(x_e, guard), self.use(y_e, guard)
            rep = 256 // SIZE[x_e.dtype]
            if isinstance(x, Tile) and isinstance(y, Tile):
                self.src(f"Compare({m.name}, {x.name}, {y.name}, CMPMODE::{mode}, XbAlign({n}, {rep}));")
            else:
                t, s = (x, y) if isinstance(x, Tile) else (y, x)
                if t is y:
                    mode = SWAP[mode]
                self.src(f"Compares({m.name}, {t.name}, {vec_scalar(s.code, x_e.dtype)}, CMPMODE::{mode}, "
                         f"XbAlign({n}, {rep}));")
            self.done(x_e, x, guard)
            self.done(y_e, y, guard)
            return m, True
        if form is not None and form[0] == "ramp":
            _, mode, a, rest = form
            self.features.ramp = True
            r = self.scalar(rest, guard).code
            thr = f"static_cast<float>(-(int64_t({a}) * {self.dom.v0} + ({r})))"
            ramp = self.ramp_name
            if a != 1:
                t = self.pool.alloc("float32")
                self.src(f"Muls({t.name}, {ramp}, {float_lit(a)}, XbAlign({n}, 64));")
                ramp = t.name
                self.pool.release(t)
            self.src(f"Compares({m.name}, {ramp}, {thr}, CMPMODE::{mode}, XbAlign({n}, 64));")
            return m, True
        # anything else: the condition as a 0/1 float tile from the scalar unit
        g = self.gather(Select(c, Const(1.0, "float32"), Const(0.0, "float32"), "float32"), guard)
        self.src(f"Compares({m.name}, {g.name}, 0.5f, CMPMODE::GT, XbAlign({n}, 64));")
        self.pool.release(g)
        return m, True

    def select(self, e: Select, guard: tuple) -> Operand:
        n, dt = self.dom.count, e.dtype
        if not self.depends(e.cond):
            # a uniform condition picks one of two tiles (both computed: their tile loads were proven in bounds,
            # their scalar loads are clamped)
            c = self.scalar(e.cond, guard).code
            a = self.tile_of(e.a, self.use(e.a, guard + ((e.cond, True),)))
            b = self.tile_of(e.b, self.use(e.b, guard + ((e.cond, False),)))
            out = self._dst((e, guard), dt)
            per = 32 // SIZE[dt]
            self.src(f"DataCopy({out.name}, ({c}) ? {a.name} : {b.name}, XbAlign({n}, {per}));")
            self._release_branch(e.a, a, guard + ((e.cond, True),))
            self._release_branch(e.b, b, guard + ((e.cond, False),))
            return out
        self.features.select = True
        m, _ = self.mask(e.cond, guard, dt)
        ga, gb = guard + ((e.cond, True),), guard + ((e.cond, False),)
        a, b = self.use(e.a, ga), self.use(e.b, gb)
        out = self._dst((e, guard), dt)
        if isinstance(a, Tile) and isinstance(b, Tile):
            self.src(f"Select({out.name}, {m.name}, {a.name}, {b.name}, SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
        elif isinstance(a, Tile):
            self.src(f"Select({out.name}, {m.name}, {a.name}, {vec_scalar(b.code, dt)}, "
                     f"SELMODE::VSEL_TENSOR_SCALAR_MODE, {n});")
        else:
            bt = self.tile_of(e.b, b)
            tmp = self.pool.alloc(dt)
            self.src(f"Duplicate({tmp.name}, {vec_scalar(a.code, dt)}, {n});")
            self.src(f"Select({out.name}, {m.name}, {tmp.name}, {bt.name}, SELMODE::VSEL_TENSOR_TENSOR_MODE, {n});")
            self.pool.release(tmp)
            if bt is not b:
                self.pool.release(bt)
        self.pool.release(m)
        self._release_branch(e.a, a, ga)
        self._release_branch(e.b, b, gb)
        return out

    def _release_branch(self, e: Expr, op: Operand, guard: tuple) -> None:
        if isinstance(op, Tile) and (e, guard) not in self.uses and op.slots:
            self.pool.release(op)
        else:
            self.done(e, op, guard)

    # ---- the scalar path -----------------------------------------------------------------------------
    def gather(self, e: Expr, guard: tuple) -> Tile:
        """Compute `e` element by element on the scalar unit into a tile."""
        if not self.gatherable(e) and not isinstance(e, (Load, Idx)):
            raise Unsupported(f"the ascend backend cannot evaluate {e} element by element (it needs the vector "
                              "unit for its math, but its indexing needs the scalar unit)")
        dt = "float32" if e.dtype == "bool" else e.dtype
        store = "uint8" if e.dtype == "bool" else dt
        t = self.pool.alloc(store)
        self._gid += 1
        self.features.gathers.append(str(e) if len(str(e)) < 120 else str(e)[:117] + "...")
        src = self.src
        k = f"k{self._gid}"
        src("XbSync<HardEvent::V_S>();")
        with src.block(f"for (uint32_t {k} = 0; {k} < {self.dom.count}; ++{k})"):
            scope = self.scope.child()
            flat = f"f{self._gid}"
            src(f"const int64_t {flat} = int64_t({self.dom.v0}) + {k};")
            rem = flat
            axes = [a for a in self.dom.axes]
            for i, a in enumerate(axes):
                inner = 1
                for b in axes[i + 1:]:
                    inner *= b.extent
                name = f"{a.name}_{self._gid}"
                if a.extent == 1:
                    src(f"const int64_t {name} = 0;")
                elif i == 0:
                    src(f"const int64_t {name} = {rem} / {inner};" if inner > 1 else f"const int64_t {name} = {rem};")
                else:
                    src(f"const int64_t {name} = ({rem} / {inner}) % {a.extent};" if inner > 1
                        else f"const int64_t {name} = {rem} % {a.extent};")
                scope.idx[a.name] = name
                scope.ranges[a.name] = (0, a.extent - 1)
            for name, tile in self.vlocals.items():
                conv = "static_cast<float>" if tile.dtype in ("float16", "bfloat16") else ""
                scope.locals[name] = f"{conv}({tile.name}.GetValue({k}))"
            cond = None
            if guard:
                parts = []
                for c, pol in guard:
                    cc = self.sw.expr(c, scope, None, lazy=True)
                    parts.append(cc if pol else f"!({cc})")
                cond = " && ".join(parts)
            val = self.sw.expr(e, scope, None if cond else src, lazy=bool(cond))
            if cond:
                zero = "0" if not is_float(dt) else "0.0f"
                val = f"(({cond}) ? ({val}) : {zero})"
            if e.dtype == "bool":
                val = f"static_cast<uint8_t>({val})"
            elif e.dtype in ("float16", "bfloat16"):
                val = f"static_cast<{CTYPE[e.dtype]}>({val})"
            src(f"{t.name}.SetValue({k}, {val});")
        src("XbSync<HardEvent::S_V>();")
        return t


def _cast_mode(s: str, d: str) -> str | None:
    table = {("float16", "float32"): "CAST_NONE", ("float32", "float16"): "CAST_RINT",
             ("bfloat16", "float32"): "CAST_NONE", ("float32", "bfloat16"): "CAST_RINT",
             ("int32", "float32"): "CAST_RINT", ("float32", "int32"): "CAST_TRUNC",
             ("float16", "int32"): "CAST_TRUNC", ("int16", "float32"): "CAST_NONE",
             ("float16", "int8"): "CAST_TRUNC", ("float16", "uint8"): "CAST_TRUNC",
             ("int8", "float16"): "CAST_NONE", ("uint8", "float16"): "CAST_NONE"}
    return table.get((s, d))


def _cast_ok(s: str, d: str) -> bool:
    if s == d:
        return True
    if _cast_mode(s, d) is not None:
        return True
    return _cast_mode(s, "float32") is not None and _cast_mode("float32", d) is not None


def index_dtype_ok(e: Expr) -> bool:
    return e.dtype != INDEX

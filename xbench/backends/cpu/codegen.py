"""Python source for numba from loop-IR kernels.

Every kernel becomes one `@numba.njit` function. Its outer axes run under `prange` (the leading ones collapsed
into one parallel loop when they are short); each stage is a loop nest at one outer point. A kernel that is one
parallel loop is then compiled serially over a range of it and run on numba's threads (`tasks`). Contractions use
their own template (`contract`): operands are viewed in place when their layout allows, packed into contiguous
panels otherwise, multiplied by BLAS (`blas.dot`: numba's `np.dot`, compiled once) and finished by the fused
epilogue while the block is still in cache; integer contractions use a blocked loop nest.
"""
from __future__ import annotations

import ast
import dataclasses
import io
import re
import textwrap
import tokenize

import numpy as np

from ...dtypes import is_float, is_int
from ...ir import contraction
from ...ir import expr as E
from ...ir.expr import INDEX, Call, Cast, Expr, Idx, Load, Local
from ...ir.kernel import Assign, Axis, Contract, Kernel, Program, Reduce, Scan, ScatterAdd, Sort, Store, locals_used
from ...ir.schedule import Schedule
from ..pyemit import NP_TYPES, Emitter, Source, common, index_range, invariants, replace_top_down, subscript
from . import lowp, memory
from .contract import ContractWriter
from .emit import SCRATCH, Indent, blas_serial, cast, unravel, unrounded
from .flatten import flatten
from .order import BLOCK, block_var, scatter_block, transposed_loops

try:
    from . import mathlib
except ImportError:  # pragma: no cover
    mathlib = None

# Fast math is reassociation only (vectorised sums). With nsz as well, LLVM's Reassociate pass cancels
# `(x + 1) - (x + 1)` to 0 (so isfinite(x + 1) held for NaN and `s - s` was 0 for an infinite sum); arcp turns
# `x / s` into `x * (1 / s)`, infinite for a subnormal s; contract fuses a * b + c differently where a value is
# computed twice (a reduction and its epilogue), so `v - v.max()` could be > 0; afn computes `x ** -1.5` from a
# reciprocal square root estimate, NaN at 0 and inf.
FASTMATH = '{"reassoc"}'
COLUMN_CHUNK = 256                 # outputs per part of a column sum (their accumulators stay in L1)
ROW_SUMS_MAX = 4096                # outputs along the row of a row of sums (`row_sums`: accumulators in L1)


def storage_dtype(dtype: str) -> np.dtype:
    """The numpy type of a buffer as the generated code sees it (16-bit floats as their uint16 bits)."""
    return np.dtype(np.uint16) if dtype in lowp.LOAD else np.dtype(dtype)


def compute_dtype(dtype: str) -> str:
    """16-bit floats are stored as bits and computed in float32."""
    return "float32" if dtype in lowp.LOAD else dtype

_MATH = {"exp": "math.exp", "log": "math.log", "sqrt": "math.sqrt", "sin": "math.sin", "cos": "math.cos",
         "tan": "math.tan", "asin": "math.asin", "acos": "math.acos", "atan": "math.atan", "sinh": "math.sinh",
         "cosh": "math.cosh", "tanh": "math.tanh", "asinh": "math.asinh", "acosh": "math.acosh",
         "atanh": "math.atanh", "erf": "math.erf", "erfc": "math.erfc", "log1p": "math.log1p",
         "expm1": "math.expm1", "log2": "math.log2", "log10": "math.log10", "exp2": "np.exp2",
         "floor": "np.floor", "ceil": "np.ceil", "trunc": "np.trunc", "round": "np.rint", "sign": "np.sign",
         "atan2": "math.atan2", "hypot": "math.hypot", "copysign": "math.copysign", "fmod": "np.fmod",
         "fmax": "np.fmax", "fmin": "np.fmin", "isfinite": "np.isfinite", "erfinv": "_xb_erfinv"}

RUNTIME = '''
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_maximum(a, b):
    return a if a > b or a != a else b


@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_minimum(a, b):
    return a if a < b or a != a else b


# under fast math LLVM computes 1/sqrt as an estimate that is NaN at +-0 and inf: those two are selected. One
# function per type: numba gives a function returning Python floats on one path float64 on every path
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_rsqrt(x):
    s = math.sqrt(x)
    if s == 0.0:
        return math.copysign(math.inf, x)
    return 0.0 if s == math.inf else 1.0 / s


@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_rsqrt_f32(x):
    s = math.sqrt(x)
    if s == 0.0:
        return np.float32(math.copysign(math.inf, x))
    return np.float32(0.0) if s == math.inf else np.float32(1.0) / s


# C's integer remainder (the sign of a), 0 for b == 0 as numpy: numba's np.fmod of integer scalars is wrong for
# negative operands; b == -1 is answered first (INT_MIN % -1 traps)
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_ifmod(a, b):
    if b == 0 or b == -1:
        return a - a
    r = a % b
    return r - b if r != 0 and (r < 0) != (a < 0) else r


# integer // and % as PyTorch: INT_MIN // -1 wraps to INT_MIN (numba's // gave 0), by 0 both are 0 (numpy's answer;
# PyTorch raises)
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_ifloordiv(a, b):
    if b == 0:
        return a - a
    return -a if b == -1 else a // b


@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_imod(a, b):
    return a - a if b == 0 or b == -1 else a % b


# integers to negative powers as PyTorch: 1 for a base of 1, +-1 by parity for -1, else 0; to others by squaring,
# wrapping (numba's `**` goes through math.pow past an exponent of 65536: 3 ** 1120445987 was INT64_MIN)
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_ipow(a, b):
    if b < 0:
        one = a - a + 1
        return one if a == 1 else (one if b % 2 == 0 else -one) if a == -1 else one - one
    r, x, e = np.int64(1), np.int64(a), np.int64(b)
    while e != 0:
        if e & 1:
            r = _xb_wrapping_mul(r, x)
        x = _xb_wrapping_mul(x, x)
        e >>= 1
    return r


# shifts by a count outside [0, 64) (integers compute in 64 bits here) as PyTorch: 0, or -1 for negative a >> b
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_shl(a, b):
    return a << b if 0 <= b < 64 else a - a


@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_shr(a, b):
    return a >> b if 0 <= b < 64 else (a - a - 1 if a < 0 else a - a)


# float -> int as PyTorch on x86: truncation; a value the type cannot hold (NaN, inf, out of range) is INT64_MIN
# for int64; narrower types go through int32 (INT32_MIN, whose low bits are 0 in int16 and int8)
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_f2i64(x):
    return np.int64(x) if -9.223372036854775808e18 <= x < 9.223372036854775808e18 else np.int64(-2**63)


@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_f2i32(x):
    return np.int32(x) if -2147483648.0 <= x < 2147483648.0 else np.int32(-2**31)


# sign as PyTorch: 0 for NaN (numba's np.sign of uint8 255 was 255)
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_sign(x, one):
    return one if x > 0 else (-one if x < 0 else one - one)
'''


class ModuleWriter:
    def __init__(self, program: Program, schedules: dict[str, Schedule], threads: int):
        self.program = program
        self.schedules = schedules
        self.threads = threads
        self._split = False           # the kernel being written splits its scatter-adds across threads
        self.helpers: set[str] = set()
        self.task_calls: list[str] = []         # the parts the module's task runs, by index
        self.row_names = {n for k in program.kernels for n in k.row_buffers}
        self.emitter = Emitter(self._spell, compute=compute_dtype, load=self._load, cast=self._cast,
                               wrapping=self._wrapping, select=self._select, in_bounds=self._in_bounds)
        self._extents: dict[str, int] = {}      # the axes of the kernel being written
        self.fast_math = True
        self._ahead: tuple[str, Expr, int, int] | None = None    # the prefetch the stage being written issues
        self._scalars: dict[str, str] = {}      # 0-d buffers the kernel being written reads into a local first
        self._views: dict[str, tuple[str, tuple[int, ...]]] = {}    # flat views (`flat`): buffer, shape
        self._seen: dict[str, str] = {}         # each kernel function's code, up to names -> its kernel

    # ---- 16-bit floats: uint16 bits in buffers, float32 in registers ---------------------------------
    def _load(self, buf: str, dtype: str, text: str) -> str:
        if buf in self._scalars:
            return self._scalars[buf]
        if dtype in lowp.LOAD and buf not in self.row_names:
            self.helpers.add("lowp")
            return f"{lowp.LOAD[dtype]}({text})"
        return text

    def _wrapping(self, fn: str, args: list[str]) -> str:
        self.helpers.add("wrapping")
        return f"_xb_wrapping_{fn}({args[0]}, {args[1]})"

    def _in_bounds(self, load: Load) -> bool:
        """Whether a read of a program buffer stays inside it at every point of the kernel being written."""
        shape = self._views[load.buf][1] if load.buf in self._views else \
            getattr(self.program.buffers.get(load.buf), "shape", None)
        if shape is None or len(shape) != len(load.index):
            return False
        for i, n in zip(load.index, shape):
            r = index_range(i, self._extents)
            if r is None or r[0] < 0 or r[1] >= n:
                return False
        return True

    def _select(self, cond: str, a: str, b: str) -> str:
        self.helpers.add("select")
        return f"_xb_select({cond}, {a}, {b})"

    def _cast(self, src: str, dst: str, text: str) -> str | None:
        if dst in lowp.STORE and src != dst:
            self.helpers.add("lowp")
            return f"{lowp.LOAD[dst]}({lowp.STORE[dst]}({text}))"
        if is_float(src) and is_int(dst):
            self.helpers.add("runtime")
            if dst == "int64":
                return f"_xb_f2i64({text})"
            return f"_xb_f2i32({text})" if dst == "int32" else f"{NP_TYPES[dst]}(_xb_f2i32({text}))"
        return None

    def np_type(self, dtype: str) -> str:
        return NP_TYPES[compute_dtype(dtype)]

    def assign(self, buf: str, index: list[str], value: str, op: str = "=") -> str:
        """`buf[index] = value` (or `+=`), rounding to 16 bits when the buffer stores them."""
        target = subscript(buf, index)
        b = self.program.buffers.get(self._views[buf][0] if buf in self._views else buf)
        if b is None or b.dtype not in lowp.STORE:
            return f"{target} {op} {value}"
        self.helpers.add("lowp")
        if op == "+=":
            value = f"{lowp.LOAD[b.dtype]}({target}) + {value}"
        return f"{target} = {lowp.STORE[b.dtype]}({unrounded(value, b.dtype)})"

    # ---- scalar functions ----------------------------------------------------------------------------
    def _spell(self, fn: str, dtype: str, args: list[str], arg_types: list[str]) -> str | None:
        src = arg_types[0] if arg_types else dtype
        if fn in ("maximum", "minimum") and dtype != INDEX:
            if is_float(dtype):
                self.helpers.add("runtime")
                return f"_xb_{fn}({args[0]}, {args[1]})"
            return f"{fn[:3]}({args[0]}, {args[1]})"
        if fn == "abs":
            return f"abs({args[0]})"
        if fn == "reciprocal":
            return f"({self.emitter.const(1.0, dtype)} / {args[0]})"
        if fn == "rsqrt":
            self.helpers.add("runtime")
            return f"_xb_rsqrt_f32({args[0]})" if compute_dtype(dtype) == "float32" else f"_xb_rsqrt({args[0]})"
        if fn == "isnan":
            return f"({args[0]} != {args[0]})"
        if fn == "isinf":
            return f"(abs({args[0]}) == {self.emitter.const('inf', src)})"
        if fn == "signbit":
            return f"(math.copysign({self.emitter.const(1.0, src)}, {args[0]}) < 0)"
        if fn == "logical_not":
            return f"(not {args[0]})"
        if fn == "bitwise_not":
            return f"(~{args[0]})"
        if fn in ("floordiv", "mod") and args[1].isdigit() and int(args[1]) > 0:
            # by a positive constant (index arithmetic: reshapes, windows) Python's // and % are PyTorch's, and
            # LLVM turns them into shifts and multiplies that vectorise
            return f"({args[0]} {'//' if fn == 'floordiv' else '%'} {args[1]})"
        if is_int(dtype) and fn in ("fmod", "floordiv", "mod", "pow", "shl", "shr"):
            self.helpers.add("runtime")
            if fn == "pow":
                self.helpers.add("wrapping")
            name = {"fmod": "ifmod", "floordiv": "ifloordiv", "mod": "imod", "pow": "ipow"}.get(fn, fn)
            return f"_xb_{name}({args[0]}, {args[1]})"
        if fn == "sign" and dtype != INDEX:
            self.helpers.add("runtime")
            return f"_xb_sign({args[0]}, {self.emitter.const(1.0 if is_float(dtype) else 1, dtype)})"
        if fn == "sigmoid":
            fast = self._fast("sigmoid", dtype, args)
            if fast:
                return fast
            one = self.emitter.const(1.0, dtype)
            return f"({one} / ({one} + math.exp(-{args[0]})))"
        if fn in ("exp", "log", "tanh", "erf", "expm1", "log1p", "sin", "cos", "exp2", "log2"):
            fast = self._fast(fn, dtype, args)
            if fast:
                return fast
        if fn == "erfinv":      # computed in float64; in the expression's own type for what follows (erf's f32 form)
            self.helpers.add("erfinv")
            return f"{self.np_type(dtype)}(_xb_erfinv({args[0]}))"
        if fn in _MATH:
            return f"{_MATH[fn]}({', '.join(args)})"
        return None

    def _fast(self, fn: str, dtype: str, args: list[str]) -> str | None:
        if not self.fast_math or mathlib is None:
            return None
        # 16-bit floats compute in float32 (one rounding on the store): float32's helpers serve them
        entry = getattr(mathlib, "FUNCTIONS", {}).get((fn, compute_dtype(dtype)))
        if entry is None:
            return None
        self.helpers.add(f"math:{fn}")
        self._math_names = getattr(self, "_math_names", set()) | {entry.symbol}
        return f"{entry.symbol}({', '.join(args)})"

    # ---- module --------------------------------------------------------------------------------------
    def module(self) -> str:
        bodies = [self.kernel(k) for k in self.program.kernels]
        src = Source()
        src(f'"""cpu kernels for {self.program.name} (generated by xbench from the loop IR below)')
        src()
        for line in self.program.text().splitlines():
            src(line.replace('"""', "'''"))
        src('"""')
        src("import math")
        src()
        src("import numba")
        src("import numpy as np")
        src()
        if any(blas_serial(sc) for sc in self.schedules.values()):
            src("from xbench.backends.cpu.runtime import blas_threads as _xb_blas_threads")
        src("from xbench.backends.cpu.runtime import empty as _xb_empty")
        src("from xbench.backends.cpu.tasks import new_array as _xb_new, new_zeros as _xb_new_zeros")
        if "tasks" in self.helpers:
            src("from xbench.backends.cpu.tasks import Task as _XB_TASK, part as _XB_PART, address as _xb_address, "
                "array_at as _xb_array_at, chunk_bounds as _xb_chunk_bounds, object_data as _xb_object_data, "
                "parallel_for as _xb_parallel_for")
        if "orderkey" in self.helpers:
            src("from xbench.backends.cpu.mathlib import (from_order_key as _xb_from_order_key, "
                "int_max as _xb_int_max, int_min as _xb_int_min, magnitude_bits as _xb_magnitude_bits, "
                "order_key as _xb_order_key)")
        if "wrapping" in self.helpers:
            src("from xbench.backends.cpu.mathlib import (wrapping_add as _xb_wrapping_add, "
                "wrapping_mul as _xb_wrapping_mul, wrapping_sub as _xb_wrapping_sub)")
        if "select" in self.helpers:
            src("from xbench.backends.cpu.mathlib import select as _xb_select")
        if "memory" in self.helpers:
            src("from xbench.backends.cpu.memory import prefetch as _xb_prefetch, stream as _xb_stream")
        if "dot" in self.helpers:
            src("from xbench.backends.cpu.blas import dot as _xb_dot")
        for serial in (False, True):
            if ("gemm_bf16_serial" if serial else "gemm_bf16") in self.helpers:
                src(f"from xbench.backends.cpu.bf16gemm import call{'_serial' * serial} as "
                    f"_xb_gemm_bf16{'_serial' * serial}, link as _xb_bf16gemm_link")
                src(f"_xb_bf16gemm_link({serial})")
        if "dot_add" in self.helpers:
            src("from xbench.backends.cpu.blas import dot_add as _xb_dot_add")
        if "tap_gemms" in self.helpers:
            src("from xbench.backends.cpu.blas import tap_gemms as _xb_tap_gemms")
        if "winograd" in self.helpers:
            dtypes = sorted({k.stages[0].dtype for k in self.program.kernels
                             if self.schedules.get(k.name, Schedule()).get("window") == "winograd"})
            src("from xbench.backends.cpu.tasks import data as _xb_data, keep as _xb_keep")
            src("from xbench.backends.cpu.winograd import external as _xb_winograd, weights as _xb_wino_weights")
            for dt in dtypes:
                src(f"_xb_wino_tiles_{dt} = _xb_winograd({dt!r})")
        src()
        src(f"FASTMATH = {FASTMATH}")
        extra = []
        if "lowp" in self.helpers:
            extra.append(lowp.SOURCE.strip("\n"))
        if "runtime" in self.helpers:
            extra.append(RUNTIME.strip("\n"))
        names = sorted(getattr(self, "_math_names", set()))
        if names:
            extra.append(mathlib.helper_source(names).strip("\n"))
        if "erfinv" in self.helpers:
            extra.append(ERFINV.strip("\n"))
        for block in extra:
            src()
            src.lines.extend(block.splitlines())
        consts = self.emitter.constant_lines()
        if consts:
            src()
            src.lines.extend(consts)
        for body in bodies:
            src()
            src()
            src.lines.extend(body.splitlines())
        if self.task_calls:
            src()
            src()
            src.lines.extend(self.task().splitlines())
        src()
        src()
        src.lines.extend(self.host().splitlines())
        return src.text() + "\n"

    def host(self) -> str:
        """`buffers(...)` runs every kernel and returns all buffers by name (for profiles); `run(args)` takes
        the list of inputs and constants, empties it, and returns the outputs, holding each buffer only from the
        kernel that first uses it (an output: writes it) to the one that last does (a temporary, an input), so
        a temporary's block goes back to the host pool for the kernels after, and an input the caller gave up
        is freed; `KERNELS` lists each kernel with its buffer parameters (for timing kernels one by one)."""
        p = self.program
        names = p.inputs + [n for n, b in p.buffers.items() if b.role == "const"]
        args = ", ".join(names)
        src = Source()
        src(f"def buffers({args}):")
        with src.indent():
            for name, b in p.buffers.items():
                if b.role in ("output", "temp"):
                    src(self.alloc(name))
            self.calls(src)
            src("return {" + ", ".join(f"{n!r}: {n}" for n in p.buffers) + "}")
        src()
        src()
        src("def run(args):")
        with src.indent():
            if names:
                src(f"{args}, = args")
            src("args.clear()")
            written = {name for k in p.kernels for name in self.params(k)}
            for name, b in p.buffers.items():
                if b.role == "output" and name not in written:
                    src(self.alloc(name))
            self.calls(src, lifetimes=True)
            src(f"return [{', '.join(p.outputs)}]")
        src()
        src()
        src("# LLVM optimisation level each kernel compiles at")
        src("OPT = {" + ", ".join(f"{k.name!r}: {int(self.schedules.get(k.name, Schedule()).get('opt', 3))}"
                                  for k in p.kernels) + "}")
        src()
        src("KERNELS = {")
        with src.indent():
            for k in p.kernels:
                one = blas_serial(self.schedules.get(k.name, Schedule()))
                src(f"{k.name!r}: ({k.name}, {tuple(self.params(k))!r}, {one}),")
        src("}")
        return src.text()

    def alloc(self, name: str) -> str:
        b = self.program.buffers[name]
        return f"{name} = _xb_empty({tuple(b.shape)!r}, np.{storage_dtype(b.dtype).name})"

    def calls(self, src: Source, lifetimes: bool = False) -> None:
        """The kernel calls in order; with `lifetimes`, each temporary and output allocated just before its
        first user, and each temporary and input let go after its last (an input's memory is freed there when
        the caller kept no other reference). Kernels on one BLAS thread share a `with` block with their
        neighbours that call no BLAS at all."""
        p = self.program
        first, last = {}, {}
        for i, k in enumerate(p.kernels):
            for name in self.params(k):
                role = p.buffers[name].role
                if role in ("temp", "output"):
                    first.setdefault(name, i)
                if role in ("temp", "input") and name not in p.outputs:
                    last[name] = i
        serial = False
        for i, k in enumerate(p.kernels):
            sched = self.schedules.get(k.name, Schedule())
            one, blas = blas_serial(sched), sched.get("impl") == "blas"
            if one and not serial:
                src("with _xb_blas_threads(1):")
            serial = one or serial and not blas
            with Indent(src, 1 if serial else 0):
                if lifetimes:
                    for name in self.params(k):
                        if first.get(name) == i:
                            src(self.alloc(name))
                src(f"{k.name}({', '.join(self.params(k))})")
                done = [name for name in self.params(k) if lifetimes and last.get(name) == i]
                if done:
                    src(f"del {', '.join(done)}")

    def params(self, k: Kernel) -> list[str]:
        bufs = k.reads() + [b for b in k.writes() if b not in k.reads()]
        return bufs

    # ---- kernels -------------------------------------------------------------------------------------
    def kernel(self, k: Kernel) -> str:
        """The kernel's function; a kernel whose code is another's up to names, over buffers of the same shapes
        (the same layer repeated, the query, key and value projections) is that function under its own name,
        compiled once."""
        sched = self.schedules.get(k.name, Schedule())
        self._extents = {a.name: a.extent for s in k.stages
                         for a in ((s.axis,) if hasattr(s, "axis") else getattr(s, "axes", ()))}
        self._extents.update({a.name: a.extent for a in k.outer})
        if k.kind == "contract" and contraction.roles(k) is not None and sched.get("impl", "blas") != "points":
            text = ContractWriter(self, k, sched).text()
        elif column_sum(k):
            text = self.column_sum(k, sched)
        elif row_sums(k):
            text = self.row_sums(k, sched)
        else:
            text = self.pointwise(k, sched)
        # the buffers' shapes too: a kernel run as tasks views its buffers at their shapes (`part`), which its
        # text need not name (a gather through a table reads an axis whose extent appears nowhere)
        shapes = [(tuple(self.program.buffers[p].shape), self.program.buffers[p].dtype) for p in self.params(k)]
        key = f"{canonical(text)} opt={sched.get('opt', 3)} {shapes}"
        first = self._seen.setdefault(key, k.name)
        if first != k.name:
            return f"{k.name} = {first}  # the same code as {first}"
        return self.tasks(k, text)

    def tasks(self, k: Kernel, text: str) -> str:
        """A kernel whose body is serial set-up and then one `prange` loop, as `<name>_part(buffers, _lo, _hi)`
        (the set-up, then the loop over a range), called per chunk by the module's C-callable `_xb_task` that
        numba's threading layer runs, and `<name>`, which launches it (see `tasks`). A set-up that writes a buffer
        (a scatter's target zeroed before the adds) runs once, as `<name>_head(buffers)`, before the launch,
        when the loop reads nothing it assigns. A body of several loops goes to `segments`; kernels of any
        other shape keep numba's parallel loops."""
        lines = text.rstrip("\n").split("\n")
        params = self.params(k)
        bufs = [self.program.buffers[p] for p in params]
        at = next((i for i, line in enumerate(lines) if line.startswith("    for ") and "numba.prange(" in line), None)
        head = re.fullmatch(r"    for (\w+) in numba\.prange\((\d+)\):", lines[at]) if at is not None else None
        setup = lines[2:at] if at is not None else []
        if "parallel=True" not in lines[0]:
            return text
        if (head is None or len(lines) <= at + 1
                or any(line and not line.startswith("        ") for line in lines[at + 1:])
                or any("numba.prange(" in line for line in setup)):
            return self.segments(k, lines) or text
        once = []
        written = [*params, *(v for v, (base, _) in self._views.items() if base in params)]    # through views too
        if any(_writes_param(line, written) for line in setup):
            if _assigned(setup) & _names(lines[at + 1:]):
                return text
            once, setup = setup, []
        self.helpers.add("tasks")
        var, n = head.groups()
        shapes = [(tuple(b.shape), storage_dtype(b.dtype).name) for b in bufs]
        text, used = self.part(f"{k.name}_part", params, shapes, var, lines[at + 1:], setup)
        return "\n".join([
            text,
            *([self.decorator(False), f"def {k.name}_head({', '.join(params)}):", *once, "", ""] if once else []),
            f"def {k.name}({', '.join(params)}):",
            *([f"    {k.name}_head({', '.join(params)})"] if once else []),
            f"    _xb_parallel_for(_xb_task, {len(self.task_calls) - 1}, {n}, {', '.join(used)})",
        ])

    def part(self, name: str, params: list[str], shapes: list[tuple], var: str, body: list[str],
             setup: list[str] = ()) -> tuple[str, list[str]]:
        """`name(buffers' data pointers, _lo, _hi)`, a C function (`tasks.Part`): its buffers viewed at `shapes`
        ((shape, numpy dtype name) per parameter), `setup`, then a parallel loop's `body` over [_lo, _hi) of
        `var`, its per-thread scratch (allocated per iteration under prange) allocated once, nested parallel
        loops serial. Its buffers are the parameters the part uses, which the launch passes (a packing loop
        needs 2 of a contraction's 15), each as its object's address: the module's task reads each data pointer
        from its object (`tasks.object_data`) and calls the part. Returns the text and those buffers."""
        used = set(re.findall(r"\b\w+\b", "\n".join([*setup, *body])))
        keep = [(p, sh) for p, sh in zip(params, shapes) if p in used]
        params, shapes = [p for p, _ in keep], [sh for _, sh in keep]
        pointers = ", ".join(f"_xb_object_data(_args[{i + 1}])" for i in range(len(params)))
        self.task_calls.append(f"{name}({pointers}, _lo, _hi)")
        scalars = [p for p, (shape, _) in zip(params, shapes) if not shape]
        if scalars:             # a 0-d buffer is viewed as one element
            at = re.compile(rf"\b({'|'.join(scalars)})\[\(\)\]")
            setup, body = ([at.sub(r"\1[0]", line) for line in lines] for lines in (setup, body))
        return "\n".join([
            '@_XB_PART(fastmath=FASTMATH, error_model="numpy")',
            f"def {name}({', '.join(f'_p_{p}' for p in params)}, _lo, _hi):",
            *(f"    {p} = _xb_array_at(_p_{p}, {shape or (1,)!r}, np.{dtype})" for p, (shape, dtype) in zip(params, shapes)),
            *setup,
            *["    " + line.lstrip() for line in body if line.endswith(SCRATCH)],
            f"    for {var} in range(_lo, _hi):",
            *[line.replace("numba.prange(", "range(") for line in body if not line.endswith(SCRATCH)],
            "",
            "",
        ]), params

    def segments(self, k: Kernel, lines: list[str]) -> str | None:
        """A kernel whose body is scratch allocations, parallel loops and GEMM calls in sequence (a contraction's
        packing, product and epilogue) as one part per loop (`part`) and `<name>`, which allocates the scratch,
        launches the parts and calls the GEMMs in order. None for any other shape of body."""
        body = lines[2:]
        batch = next((i for i, line in enumerate(body) if line == "    for _b in range(1):"), None)
        if batch is not None:       # a single batch point: its body at the top, `_b` is 0
            inner = body[batch + 1:]
            if any(line and not line.startswith("        ") for line in inner):
                return None
            body = body[:batch] + [re.sub(r"\b_b\b", "0", line[4:]) for line in inner]
        params = self.params(k)
        shapes = [(tuple(self.program.buffers[p].shape), storage_dtype(self.program.buffers[p].dtype).name)
                  for p in params]
        scratch, scalars, steps, loops, i = [], [], [], [], 0
        while i < len(body):
            line = body[i]
            new = re.fullmatch(r"    (_\w+) = _xb_new\((\([\d, ]*\)), np\.(\w+)\)", line)
            loop = re.fullmatch(r"    for (\w+) in numba\.prange\((\d+)\):", line)
            if re.fullmatch(r"    \w+ = \d+", line):
                scalars.append(line)        # the batch point's coordinate, in every part and here
                steps.append(line)
            elif re.fullmatch(r"    _z_\w+ = .*", line) and not loops:
                scalars.append(line)        # a 0-d buffer's value, read in every part
            elif new and not loops:
                scratch.append(new.group(1))
                shapes.append((ast.literal_eval(new.group(2)), new.group(3)))
                steps.append(f"    {new.group(1)} = _xb_empty({new.group(2)}, np.{new.group(3)})")
            elif loop:
                end = next((j for j in range(i + 1, len(body)) if not body[j].startswith("        ")), len(body))
                text, used = self.part(f"{k.name}_part{len(loops)}", params + scratch, shapes,
                                       loop.group(1), body[i + 1:end], scalars)
                loops.append(text)
                steps.append(f"    _xb_parallel_for(_xb_task, {len(self.task_calls) - 1}, {loop.group(2)}, "
                             f"{', '.join(used)})")
                i = end
                continue
            elif re.fullmatch(r"    _xb_(gemm_bf16|gemm_bf16_serial|dot|dot_add)\(.*\)", line):
                steps.append(line)
            else:
                del self.task_calls[len(self.task_calls) - len(loops):]
                return None
            i += 1
        if not loops:
            return None
        self.helpers.add("tasks")
        return "\n".join([*loops, f"def {k.name}({', '.join(params)}):", *steps])

    def task(self) -> str:
        """The module's C-callable task: `_data` says which part runs on the chunk (`tasks.Task`)."""
        src = Source()
        src("@_XB_TASK")
        src("def _xb_task(_args, _dims, _steps, _data):")
        with src.indent():
            src("_lo, _hi = _xb_chunk_bounds(_args[0], _dims[0])")
            src("_k = _xb_address(_data)")
            for i, call in enumerate(self.task_calls):
                src(f"{'if' if i == 0 else 'elif'} _k == {i}:")
                src(f"    {call}")
        return src.text()

    def decorator(self, parallel: bool) -> str:
        return (f'@numba.njit(parallel={parallel}, fastmath=FASTMATH, error_model="numpy", cache=True, '
                f"nogil=True, no_cfunc_wrapper=True)")

    def pointwise(self, k: Kernel, sched: Schedule) -> str:
        src = Source()
        # a kernel with no outer loop runs in parallel only by splitting its scatter-adds (`scatter_loops`)
        self._split = bool(sched.get("parallel", False)) and not k.outer and self.threads > 1
        parallel = bool(sched.get("parallel", True)) and bool(k.outer) or self._split
        src(self.decorator(parallel))
        src(f"def {k.name}({', '.join(self.params(k))}):")
        with src.indent():
            self.read_scalars(src, k)
            transposed = transposed_loops(k, self.program)
            if transposed is not None:
                loops, x = transposed
                collapse = max(1, min(needs_collapse(loops, self.threads), len(loops) - 1))
                bound = self.open_outer(src, loops, collapse, parallel) | {x.name}
                with Indent(src, len(loops) - collapse + 1):
                    blk = block_var(x)
                    src(f"for {x.name} in range({blk} * {BLOCK}, min({blk} * {BLOCK} + {BLOCK}, {x.extent})):")
                    with src.indent():
                        self.point(src, k, bound)
            else:
                k = self.flat_outer(src, k, sched)
                collapse = int(sched.get("collapse", 1)) if k.outer else 0
                collapse = max(1, min(collapse, len(k.outer))) if k.outer else 0
                bound = self.open_outer(src, k.outer, collapse, parallel)
                with Indent(src, len(k.outer) - collapse + (1 if collapse else 0)):
                    self.point(src, k, bound)
        self._scalars = {}
        self._split = False
        return src.text()

    def column_sum(self, k: Kernel, sched: Schedule) -> str:
        """A sum over rows into contiguous outputs (`column_sum`), rows outside: each part of COLUMN_CHUNK
        outputs adds one row at a time into its accumulators, so every row is read once, in order, and each
        output gets its terms in the order of the one-output-at-a-time loop (the same bits)."""
        r = k.stages[0]
        P = k.points()
        chunk = min(P, COLUMN_CHUNK)
        parts = -(-P // chunk)
        parallel = bool(sched.get("parallel", True)) and parts > 1
        body = r.body if r.body.dtype == r.dtype else Cast(r.body, r.dtype)
        src = Source()
        src(self.decorator(parallel))
        src(f"def {k.name}({', '.join(self.params(k))}):")
        with src.indent():
            self.read_scalars(src, k)
            bound = {a.name for a in k.outer}
            src(f"for _part in {'numba.prange' if parallel else 'range'}({parts}):")
            with src.indent():
                src(f"_c_lo = _part * {chunk}")
                src(f"_c_hi = min({P}, _c_lo + {chunk})")
                src(f"_c_acc = _xb_new(({chunk},), {self.np_type(r.dtype)})" + SCRATCH)
                src("_c_acc[:] = 0")
                with Indent(src, self.loops(src, r.axes)):
                    src("for _p in range(_c_lo, _c_hi):")
                    with src.indent():
                        unravel(src, "_p", k.outer, "_pr")
                        (v,) = self.values(src, [body], bound, set())
                        src(f"_c_acc[_p - _c_lo] += {v}")
                src("for _p in range(_c_lo, _c_hi):")
                with src.indent():
                    unravel(src, "_p", k.outer, "_pr")
                    src(f"{r.local} = _c_acc[_p - _c_lo]")
                    for st in k.stages[1:]:
                        self.stage(src, st, bound)
        self._scalars = {}
        return src.text()

    def row_sums(self, k: Kernel, sched: Schedule) -> str:
        """Sums whose terms run along the last outer axis in memory (`row_sums`) over a row of accumulators:
        per point of the other outer axes, each term of the sum added into every output of the row, contiguous
        reads vectorised along it, then each output's epilogue. Each output adds its terms in the same order as
        one at a time (the same bits)."""
        r, last = k.stages[0], k.outer[-1]
        body = r.body if r.body.dtype == r.dtype else Cast(r.body, r.dtype)
        parallel = bool(sched.get("parallel", True))
        collapse = max(1, min(int(sched.get("collapse", 1)), len(k.outer) - 1))
        src = Source()
        src(self.decorator(parallel))
        src(f"def {k.name}({', '.join(self.params(k))}):")
        with src.indent():
            self.read_scalars(src, k)
            bound = self.open_outer(src, k.outer[:-1], collapse, parallel)
            with Indent(src, len(k.outer) - collapse):
                src(f"_r_acc = _xb_new(({last.extent},), {self.np_type(r.dtype)})" + SCRATCH)
                src("_r_acc[:] = 0")
                with Indent(src, self.loops(src, r.axes)):
                    src(f"for {last.name} in range({last.extent}):")
                    with src.indent():
                        (v,) = self.values(src, [body], bound | {last.name}, set())
                        src(f"_r_acc[{last.name}] += {v}")
                src(f"for {last.name} in range({last.extent}):")
                with src.indent():
                    src(f"{r.local} = _r_acc[{last.name}]")
                    for st in k.stages[1:]:
                        self.stage(src, st, bound | {last.name})
        self._scalars = {}
        return src.text()

    def read_scalars(self, src: Source, k: Kernel) -> None:
        """Read each 0-d buffer the kernel only reads once, before its loops (numba's parallel loops cannot
        index a 0-d array)."""
        self._scalars = {}
        for name in k.reads():
            b = self.program.buffers[name]
            if not b.shape and name not in k.writes():
                text = self._load(name, b.dtype, subscript(name, []))
                local = f"_z_{name}"
                src(f"{local} = {text}")
                self._scalars[name] = local

    def flat_outer(self, src: Source, k: Kernel, sched: Schedule) -> Kernel:
        """`k` with its innermost outer axes as one (`flat`), where its stages are plain stores and values at
        each point; `k` itself otherwise."""
        if len(k.outer) < 2 or k.row_buffers or sched.get("stores") == "streaming" or sched.get("prefetch") \
                or not all(isinstance(s, Assign) or isinstance(s, Store) and not s.axes and s.scope == "global"
                           for s in k.stages):
            return k
        exprs = [e for s in k.stages for e in ((s.value,) if isinstance(s, Assign)
                                               else (self.target(s.buf, s.index), s.value))]
        flat, outer = self.flat(src, exprs, k.outer)
        if outer == k.outer:
            return k
        it, stages = iter(flat), []
        for s in k.stages:
            if isinstance(s, Assign):
                stages.append(Assign(s.local, next(it)))
            else:
                target, value = next(it), next(it)
                stages.append(Store(target.buf, (), target.index, value, s.scope))
        return dataclasses.replace(k, outer=outer, stages=stages)

    def open_outer(self, src: Source, outer: tuple[Axis, ...], collapse: int, parallel: bool) -> set[str]:
        """Open the outer loops (leading `collapse` axes flattened into one prange). Returns bound names."""
        loop = "numba.prange" if parallel else "range"
        if collapse == 1:
            src(f"for {outer[0].name} in {loop}({outer[0].extent}):")
        elif collapse > 1:
            total = int(np.prod([a.extent for a in outer[:collapse]], dtype=np.int64))
            src(f"for _flat in {loop}({total}):")
            with src.indent():
                unravel(src, "_flat", outer[:collapse], "_r")
        for j, a in enumerate(outer[collapse:]):
            with Indent(src, 1 + j if collapse else j):
                src(f"for {a.name} in range({a.extent}):")
        return {a.name for a in outer}

    def point(self, src: Source, k: Kernel, bound: set[str]) -> None:
        """The stages of a kernel at one outer point."""
        sched = self.schedules.get(k.name, Schedule())
        stages, rows = k.stages, k.row_buffers
        if not sched.get("row_buffer", True):
            stages, rows = recompute_rows(k), {}
        streamed = streamed_store(k, self.program, stages) if sched.get("stores") == "streaming" else None
        lines = int(sched.get("prefetch", 0))
        ahead = prefetch_plan(k, self.program, stages) if lines else None
        if streamed is not None or ahead is not None:
            self.helpers.add("memory")
        for name, (shape, dtype) in rows.items():
            src(f"{name} = _xb_new({tuple(shape)!r}, {self.np_type(dtype)})" + SCRATCH)
        i = 0
        while i < len(stages):
            self._ahead = (*ahead[1:], lines) if ahead is not None and ahead[0] == i else None
            together = self._sums_together(stages, i)
            if i + 1 < len(stages) and self._sums_row(stages[i], stages[i + 1], rows):
                self.store_and_sum(src, stages[i], stages[i + 1], bound)
                i += 2
            elif together > 1:
                self.sums(src, stages[i:i + together], bound)
                i += together
            elif i == streamed:
                self.stream_store(src, stages[i], bound)
                i += 1
            else:
                self.stage(src, stages[i], bound)
                i += 1
        self._ahead = None
        if not stages:
            src("pass")

    def row_loop(self, src: Source, axis: Axis) -> int:
        """Open the loop over one row axis; with a prefetch planned for this stage, in steps of `lines` cache lines
        of the row, each first asking for the same lines of the next row (`memory.prefetch`). Returns the depth
        opened."""
        if self._ahead is None:
            return self.loops(src, (axis,))
        buf, offset, lanes, lines = self._ahead
        step = lanes * lines
        src(f"for _ln in range({axis.extent // step}):")
        src(f"    for _pf in range({lines}):")
        src(f"        _xb_prefetch({buf}, {self.emitter.expr(offset)} + _ln * {step} + _pf * {lanes})")
        src(f"    for _lane in range({step}):")
        src(f"        {axis.name} = _ln * {step} + _lane")
        return 2

    def stream_store(self, src: Source, s: Store, bound: set[str]) -> None:
        """A store of whole contiguous rows, computed into a per-thread row and written with streaming stores
        (`memory.stream`)."""
        a = s.axes[0]
        exprs = self.hoist(src, [*s.index, s.value], {a.name})
        b = self.program.buffers[s.buf]
        row = self.emitter.tmp("_out")
        src(f"{row} = _xb_new(({a.extent},), np.{storage_dtype(b.dtype).name})" + SCRATCH)
        with Indent(src, self.row_loop(src, a)):
            vals = self.values(src, exprs, bound, set())
            src(f"{row}[{a.name}] = {vals[-1]}")
        start = E.linear((*exprs[:-2], E.const(0)), tuple(b.shape))
        src(f"_xb_stream({s.buf}, {self.emitter.expr(start)}, {row}, {a.extent})")

    def _sums_row(self, st, red, rows) -> bool:
        """Whether `red` is the float sum of the whole row buffer the store `st` just wrote, element by element."""
        if not (isinstance(st, Store) and isinstance(red, Reduce) and st.scope == "row" and st.buf in rows
                and red.kind == "sum" and red.index_local is None and len(st.axes) == len(red.axes) == 1):
            return False
        a, r = st.axes[0], red.axes[0]
        b = self.program.buffers.get(st.buf)
        return (a.extent == r.extent and st.index == (Idx(a.name),) and st.value.dtype == red.dtype
                and is_float(red.dtype) and (b is None or b.dtype not in lowp.STORE)
                and red.body == Load(st.buf, (Idx(r.name),), red.dtype))

    @staticmethod
    def _sums_together(stages, i: int) -> int:
        """How many sums from stage i on run over the same axes, none reading another's result (sibling sums,
        `lower._sibling_sums`): one loop takes them all."""
        n, names = 0, set()
        for s in stages[i:]:
            if not (isinstance(s, Reduce) and s.kind == "sum" and not s.index_local and s.axes == stages[i].axes
                    and not names & locals_used(s.body)):
                break
            names.add(s.local)
            n += 1
        return n

    def sums(self, src: Source, group: list[Reduce], bound: set[str]) -> None:
        """Sibling sums in one loop over their axes, their common subexpressions computed once a step."""
        bodies = [s.body if s.body.dtype == s.dtype else Cast(s.body, s.dtype) for s in group]
        bodies = self.hoist(src, bodies, {a.name for a in group[0].axes})
        bodies, axes = self.flat(src, bodies, group[0].axes)
        for s in group:
            src(f"{s.local} = {self.emitter.const(0, s.dtype)}")
        with Indent(src, self.loops(src, axes)):
            for s, v in zip(group, self.values(src, bodies, bound, set())):
                src(f"{s.local} += {v}")

    def store_and_sum(self, src: Source, st: Store, red: Reduce, bound: set[str]) -> None:
        """A row buffer's store loop that also accumulates the sum the next stage takes of the row: one pass
        over it instead of two (softmax's exponentials and their sum)."""
        exprs = self.hoist(src, [*st.index, st.value], {st.axes[0].name})
        src(f"{red.local} = {self.emitter.const(0, red.dtype)}")
        with Indent(src, self.row_loop(src, st.axes[0])):
            vals = self.values(src, exprs, bound, set())
            v = self.emitter.tmp("_e")
            src(f"{v} = {vals[-1]}")
            src(self.assign(st.buf, vals[:-1], v))
            src(f"{red.local} += {v}")

    # ---- stages --------------------------------------------------------------------------------------
    def values(self, src: Source, exprs: list[Expr], bound: set[str], varying: set[str]) -> list[str]:
        """Emit temporaries for hoisted and shared subexpressions; return the expressions' spellings."""
        names: dict[Expr, str] = {}
        for sub in common(exprs):
            t = self.emitter.tmp()
            src(f"{t} = {self.emitter.expr(sub, names)}")
            names[sub] = t
        return [self.emitter.expr(e, names) for e in exprs]

    def hoist(self, src: Source, exprs: list[Expr], loop_vars: set[str]) -> list[Expr]:
        """Compute subexpressions that don't depend on `loop_vars` once, before the loop."""
        inv = invariants(exprs, loop_vars)
        if not inv:
            return exprs
        table: dict[Expr, Expr] = {}
        for sub in inv:
            t = self.emitter.tmp("h")
            src(f"{t} = {self.emitter.expr(replace_top_down(sub, table))}")
            table[sub] = Local(t, sub.dtype)
        return [replace_top_down(e, table) for e in exprs]

    def loops(self, src: Source, axes: tuple[Axis, ...]) -> int:
        for j, a in enumerate(axes):
            with Indent(src, j):
                src(f"for {a.name} in range({a.extent}):")
        return len(axes)

    def stage(self, src: Source, s, bound: set[str]) -> None:
        if isinstance(s, Assign):
            (v,) = self.values(src, [s.value], bound, set())
            src(f"{s.local} = {v}")
        elif isinstance(s, Store):
            exprs = self.hoist(src, [*s.index, s.value], {a.name for a in s.axes}) if s.axes else [*s.index, s.value]
            buf, axes = s.buf, s.axes
            if self._ahead is None and len(axes) > 1:
                (target, value), axes = self.flat(src, [self.target(s.buf, exprs[:-1]), exprs[-1]], axes)
                buf, exprs = target.buf, [*target.index, value]
            opened = self.row_loop(src, axes[0]) if self._ahead is not None else self.loops(src, axes)
            with Indent(src, opened):
                vals = self.values(src, exprs, bound, set())
                src(self.assign(buf, vals[:-1], vals[-1]))
        elif isinstance(s, Reduce):
            self.reduce(src, s, bound)
        elif isinstance(s, Contract):
            (body,) = self.hoist(src, [Call("mul", (cast(s.lhs, s.dtype), cast(s.rhs, s.dtype)), s.dtype)],
                                 {a.name for a in s.axes})
            src(f"{s.local} = {self.emitter.const(0, s.dtype)}")
            with Indent(src, self.loops(src, s.axes)):
                (v,) = self.values(src, [body], bound, set())
                src(f"{s.local} += {v}")
        elif isinstance(s, Scan):
            self.scan(src, s)
        elif isinstance(s, Sort):
            self.sort(src, s)
        elif isinstance(s, ScatterAdd):
            split = s.disjoint_axis() if self._split else None
            block = scatter_block(s, self.program)
            depth = self.scatter_loops(src, s, split, block if block is not split else None)
            with Indent(src, depth):
                vals = self.values(src, [*s.index, s.value], bound, set())
                src(self.assign(s.buf, vals[:-1], vals[-1], "+="))
        else:
            raise TypeError(type(s).__name__)

    def scatter_loops(self, src: Source, s: ScatterAdd, split: Axis | None, block: Axis | None) -> int:
        """Open the scatter's loops: `split` (`ScatterAdd.disjoint_axis`) cut into one contiguous range per thread,
        the parts adding into disjoint elements, each in the serial order (the same bits as one thread); `block`
        (`order.scatter_block`) in blocks of BLOCK, innermost. Returns the depth opened."""
        depth = 0
        if split is not None:
            parts = min(self.threads, split.extent)
            src(f"for _part in numba.prange({parts}):")
            src(f"    _s_lo = (_part * {split.extent}) // {parts}")
            src(f"    _s_hi = ((_part + 1) * {split.extent}) // {parts}")
            depth = 1
        loops = []
        for a in s.axes:
            if a is block:
                loops.append(f"for {block_var(a)} in range({-(-a.extent // BLOCK)}):")
            else:
                loops.append(f"for {a.name} in range(_s_lo, _s_hi):" if a is split else
                             f"for {a.name} in range({a.extent}):")
        if block is not None:
            lo = f"{block_var(block)} * {BLOCK}"
            loops.append(f"for {block.name} in range({lo}, min({lo} + {BLOCK}, {block.extent})):")
        for j, line in enumerate(loops):
            with Indent(src, depth + j):
                src(line)
        return depth + len(loops)

    def reduce(self, src: Source, s: Reduce, bound: set[str]) -> None:
        dt = s.dtype
        inf = "inf" if is_float(dt) else None
        c = self.emitter.const
        init = {
            "sum": c(0, dt), "prod": c(1, dt),
            "max": c("-inf", dt) if inf else c(int(np.iinfo(dt).min) if is_int(dt) else False, dt),
            "min": c("inf", dt) if inf else c(int(np.iinfo(dt).max) if is_int(dt) else True, dt),
            "argmax": c("-inf", dt) if inf else c(int(np.iinfo(dt).min) if is_int(dt) else False, dt),
            "argmin": c("inf", dt) if inf else c(int(np.iinfo(dt).max) if is_int(dt) else True, dt),
            "any": "False", "all": "True",
        }[s.kind]
        body = s.body if s.body.dtype == dt or s.kind in ("any", "all") else Cast(s.body, dt)
        (body,) = self.hoist(src, [body], {a.name for a in s.axes})
        (body,), axes = self.flat(src, [body], s.axes)
        if s.kind in ("max", "min") and is_float(dt):
            return self._key_reduce(src, s, body, axes, bound)
        acc = s.local
        src(f"{acc} = {init}")
        # a single loop's own variable is the position (a counter beside it costs a third of a max pool's time)
        pos = axes[0].name if len(axes) == 1 else "_pos"
        if s.index_local:
            src(f"{s.index_local} = 0")
            if pos == "_pos":
                src("_pos = 0")
        with Indent(src, self.loops(src, axes)):
            (v,) = self.values(src, [body], bound, set())
            if s.kind == "sum":
                src(f"{acc} += {v}")
            elif s.kind == "prod":
                src(f"{acc} *= {v}")
            elif s.kind in ("max", "min"):
                src(f"{acc} = {s.kind}({acc}, {v})")
            elif s.kind == "any":
                src(f"{acc} = {acc} or {v}")
            elif s.kind == "all":
                src(f"{acc} = {acc} and {v}")
            else:
                # without branches: a running arg-max over data (a max pool's window) mispredicts half its steps
                op = ">" if s.kind == "argmax" else "<"
                src("_v = " + v)
                nan = f" | ((_v != _v) & ({acc} == {acc}))" if is_float(dt) else ""
                src(f"_take = (_v {op} {acc}){nan}")
                src(f"{acc} = {self._select('_take', '_v', acc)}")
                src(f"{s.index_local} = {self._select('_take', pos, s.index_local)}")
                if pos == "_pos":
                    src("_pos += 1")

    def target(self, buf: str, index) -> Load:
        """A store's place as a read of it, for `flat` to rewrite with the reads."""
        b = self.program.buffers.get(buf)
        return Load(buf, tuple(index), b.dtype if b is not None else "float32")

    def flat(self, src: Source, exprs: list[Expr], axes: tuple[Axis, ...], keep: int = 0,
             shapes: dict[str, tuple[int, ...]] | None = None) -> tuple[list[Expr], tuple[Axis, ...]]:
        """`exprs` and the loops over `axes`, with the innermost of them run as one loop where every access
        walks them in memory order (`flatten`: a pack's or a batch norm's loops over an image's rows and
        columns), the views that takes defined here; unchanged where they do not. `shapes` adds scratch
        buffers (a GEMM's packed operands); `keep` leading axes stay loops of their own."""
        def shape_of(buf: str) -> tuple[int, ...] | None:
            if buf in self.row_names or buf in self._scalars:
                return None
            if shapes and buf in shapes:
                return shapes[buf]
            b = self.program.buffers.get(buf)
            return None if b is None else tuple(b.shape)
        found = flatten(exprs, axes, shape_of, self._extents, keep)
        if found is None:
            return exprs, axes
        for line in found.definitions():
            src(line)
        self._views.update(found.views)
        self._extents[found.axes[-1].name] = found.axes[-1].extent
        return found.exprs, found.axes

    def _key_reduce(self, src: Source, s: Reduce, body: Expr, axes: tuple[Axis, ...], bound: set[str]) -> None:
        """A NaN-propagating float max/min as an integer one over the values' order keys (see `mathlib`),
        which LLVM vectorises; a second integer max over the magnitude bits finds NaNs."""
        self.helpers.add("orderkey")
        ft = compute_dtype(s.dtype)
        it, width = ("int32", 32) if ft == "float32" else ("int64", 64)
        start = np.array(-np.inf if s.kind == "max" else np.inf, ft).view(it)
        key = int(start ^ ((start >> (width - 1)) & np.iinfo(it).max))
        inf_bits = int(np.array(np.inf, ft).view(it))
        k, m, c = self.emitter.tmp("_key"), self.emitter.tmp("_mag"), self.emitter.const
        src(f"{k} = {c(key, it)}")
        src(f"{m} = {c(0, it)}")
        with Indent(src, self.loops(src, axes)):
            (v,) = self.values(src, [body], bound, set())
            src(f"_v = {v}")
            src(f"{k} = _xb_int_{s.kind}({k}, _xb_order_key(_v))")
            src(f"{m} = _xb_int_max({m}, _xb_magnitude_bits(_v))")
        src(f"{s.local} = _xb_from_order_key({k}) if {m} <= {c(inf_bits, it)} else {c('nan', s.dtype)}")

    def scan(self, src: Source, s: Scan) -> None:
        dt = s.dtype
        c = self.emitter.const
        init = {"sum": c(0, dt), "prod": c(1, dt),
                "max": c("-inf", dt) if is_float(dt) else c(int(np.iinfo(dt).min) if is_int(dt) else False, dt),
                "min": c("inf", dt) if is_float(dt) else c(int(np.iinfo(dt).max) if is_int(dt) else True, dt)}[s.kind]
        src(f"_acc = {init}")
        rng = f"range({s.axis.extent} - 1, -1, -1)" if s.reverse else f"range({s.axis.extent})"
        src(f"for {s.axis.name} in {rng}:")
        with src.indent():
            vals = self.values(src, [*s.index, s.body], set(), set())
            v = vals[-1]
            if s.kind == "sum":
                src(f"_acc += {v}")
            elif s.kind == "prod":
                src(f"_acc *= {v}")
            else:
                if is_float(dt):
                    self.helpers.add("runtime")
                    src(f"_acc = _xb_{'maximum' if s.kind == 'max' else 'minimum'}(_acc, {v})")
                else:
                    src(f"_acc = {s.kind}(_acc, {v})")
            src(self.assign(s.buf, vals[:-1], "_acc"))

    def sort(self, src: Source, s: Sort) -> None:
        n = s.axis.extent
        dt = s.body.dtype
        src(f"_row = _xb_new(({n},), {self.np_type(dt)})")
        src(f"for {s.axis.name} in range({n}):")
        with src.indent():
            (v,) = self.values(src, [s.body], set(), set())
            src(f"_row[{s.axis.name}] = {v}")
        if s.descending:   # stable, NaN first: the ascending order of the reversed row, reversed
            src(f'_order = {n - 1} - np.argsort(np.ascontiguousarray(_row[::-1]), kind="mergesort")[::-1]')
        else:
            src('_order = np.argsort(_row, kind="mergesort")')
        src(f"for {s.axis.name} in range({n}):")
        with src.indent():
            idx = ", ".join(self.emitter.expr(i) for i in s.index)
            if s.values_buf:
                src(self.assign(s.values_buf, [idx], f"_row[_order[{s.axis.name}]]"))
            if s.indices_buf:
                src(f"{s.indices_buf}[{idx}] = _order[{s.axis.name}]")


def column_sum(k: Kernel) -> bool:
    """Is `k` a sum over rows into outputs that are contiguous in what it reads (a bias gradient: the sum of a
    [rows, features] matrix over its rows; a LayerNorm weight's gradient, whose terms also read the row's mean and
    scale; a bias gradient read through a permute, in runs of a head's width)? The last dimension of every load
    that depends on an output at all is indexed by the last outer axis alone; after the sum, only per-output
    assignments and stores."""
    if not k.outer or k.row_buffers or not k.stages or not isinstance(k.stages[0], Reduce):
        return False
    r = k.stages[0]
    if r.kind != "sum" or r.index_local or not r.axes:
        return False
    if not all(isinstance(s, Assign) or isinstance(s, Store) and not s.axes and s.scope == "global"
               for s in k.stages[1:]):
        return False
    last, outer = k.outer[-1].name, {a.name for a in k.outer}
    loads = [n for n in r.body.walk() if isinstance(n, Load) and n.index]
    per_output = [ld for ld in loads if outer & set().union(*map(E.free_indices, ld.index))]
    return bool(per_output) and all(E.free_indices(ld.index[-1]) == {last} for ld in per_output)


def row_sums(k: Kernel) -> bool:
    """Is `k` a short sum per point whose terms read along the last outer axis in memory (an upsampling's
    gradient: each output row a sum of 10-20 input rows through a tap table, read column by column)? Every load
    that depends on that axis is indexed by it alone in its last dimension, and only there; at least 8 and at
    most ROW_SUMS_MAX outputs along it and another outer axis; after the sum, only per-output assignments
    and stores."""
    if len(k.outer) < 2 or k.row_buffers or not k.stages or not isinstance(k.stages[0], Reduce):
        return False
    r, last = k.stages[0], k.outer[-1]
    if r.kind != "sum" or r.index_local or not r.axes or not 8 <= last.extent <= ROW_SUMS_MAX:
        return False
    if not all(isinstance(s, Assign) or isinstance(s, Store) and not s.axes and s.scope == "global"
               for s in k.stages[1:]):
        return False
    along = [n for n in r.body.walk() if isinstance(n, Load) and n.index
             and last.name in set().union(*map(E.free_indices, n.index))]
    return bool(along) and all(n.index[-1] == Idx(last.name) and not any(
        last.name in E.free_indices(i) for i in n.index[:-1]) for n in along)


def streamed_store(k: Kernel, program: Program, stages: list) -> int | None:
    """The stage the `stores` knob streams: the last that writes whole contiguous rows of a global buffer (of
    at least four cache lines) at each outer point, or None."""
    if not k.outer:
        return None
    for i in reversed(range(len(stages))):
        s = stages[i]
        b = program.buffers.get(s.buf) if isinstance(s, Store) else None
        if (b is None or s.scope != "global" or len(s.axes) != 1 or b.dtype in lowp.STORE or not b.shape
                or b.role not in ("output", "temp")):
            continue
        a = s.axes[0]
        if (a.extent == b.shape[-1] and s.index[-1] == Idx(a.name)
                and a.extent * storage_dtype(b.dtype).itemsize >= 4 * memory.LINE
                and not any(a.name in E.free_indices(e) for e in s.index[:-1])):
            return i
    return None


def prefetch_plan(k: Kernel, program: Program, stages: list) -> tuple[int, str, Expr, int] | None:
    """For the `prefetch` knob: a row kernel whose first stage reduces a row of a global buffer laid out as
    the kernel's outer points times that row, and whose row-wide store after it can hide the next row's
    fetch. Returns (that store's stage, the buffer, the flat offset of the next row, elements per line); the
    row is a whole number of lines."""
    if not k.outer or not stages or not isinstance(stages[0], Reduce) or len(stages[0].axes) != 1:
        return None
    r = stages[0].axes[0]
    row = (*(Idx(a.name) for a in k.outer), Idx(r.name))
    loads = [n for n in stages[0].body.walk() if isinstance(n, Load) and n.index == row]
    b = program.buffers.get(loads[0].buf) if loads else None
    if b is None or tuple(b.shape) != (*(a.extent for a in k.outer), r.extent) or b.dtype in lowp.STORE:
        return None
    lanes = memory.LINE // storage_dtype(b.dtype).itemsize
    if r.extent % lanes:
        return None
    at = next((i for i, s in enumerate(stages) if i > 0 and isinstance(s, Store) and len(s.axes) == 1
               and s.axes[0].extent == r.extent), None)
    if at is None:
        return None
    outer = tuple(Idx(a.name) for a in k.outer)
    next_row = E.mul(E.add(E.linear(outer, tuple(a.extent for a in k.outer)), E.const(1)), E.const(r.extent))
    return at, loads[0].buf, next_row, lanes


def recompute_rows(k: Kernel) -> list:
    """The kernel's stages with every row-local scratch buffer replaced by recomputing its value where read."""
    defs: dict[str, Store] = {}

    def inline(e: Expr) -> Expr:
        def swap(n: Expr):
            if isinstance(n, Load) and n.buf in defs:
                d = defs[n.buf]
                return E.substitute(d.value, {a.name: i for a, i in zip(d.axes, n.index)})
            return None
        return e.map(swap)

    out = []
    for s in k.stages:
        s = s.replace(inline)
        if isinstance(s, Store) and s.scope == "row":
            defs[s.buf] = s
        else:
            out.append(s)
    return out


def canonical(text: str) -> str:
    """A generated function's code with its own names (the function, parameters, locals) numbered in order of
    first use: equal for kernels that differ only in the names of buffers, axes and locals."""
    tree = ast.parse(text)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    own = {fn.name} | {a.arg for a in fn.args.args}
    own |= {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    names: dict[str, str] = {}
    out, after_dot = [], False
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        t = tok.string
        if tok.type == tokenize.NAME and t in own and not after_dot:
            t = names.setdefault(t, f"_v{len(names)}")
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            out.append(t)
        after_dot = tok.type == tokenize.OP and tok.string == "."
    return " ".join(out)


def _assigned(lines: list[str]) -> set[str]:
    """The names that lines of a function body assign (loop variables included)."""
    tree = ast.parse(textwrap.dedent("\n".join(lines)))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _names(lines: list[str]) -> set[str]:
    """The names that lines of a function body read."""
    tree = ast.parse(textwrap.dedent("\n".join(lines)))
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _writes_param(line: str, params: list[str]) -> bool:
    m = re.match(r"\s*(\w+)\[.*\]\s*[-+*/]?=[^=]", line)
    return bool(m) and m.group(1) in params


ERFINV = '''
@numba.njit(fastmath=FASTMATH, error_model="numpy", cache=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
def _xb_erfinv(y):
    """Inverse error function in float64: M. Giles' single-precision approximation ("Approximating the erfinv
    function", GPU Computing Gems, 2011), then Newton steps on erf(g) = |y| below 0.5 and on
    log(erfc(g)) = log(1 - |y|) above (1 - |y| is exact there, and erfc keeps the tail's relative accuracy)."""
    x = float(y)
    a = abs(x)
    if a >= 1.0:
        return math.copysign(math.inf, x) if a == 1.0 else math.nan
    w = -math.log((1.0 - a) * (1.0 + a))
    tail = w >= 5.0
    if not tail:
        w -= 2.5
        p = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                  0.246640727, 1.50140941):
            p = p * w + c
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                  1.00167406, 2.83297682):
            p = p * w + c
    g = p * a
    t = 1.0 - a
    for _ in range(4 if tail else 2):                # the guess is poorer past 1 - 2**-24 (float64 inputs)
        d = 1.1283791670955126 * math.exp(-g * g)
        if a < 0.5:
            g -= (math.erf(g) - a) / d
        else:                                        # on log(erfc(g)) = log(1 - |y|): steady in the tail
            c = math.erfc(g)
            g += (math.log(c) - math.log(t)) * c / d
    return math.copysign(g, x)
'''


def needs_collapse(outer: tuple[Axis, ...], threads: int) -> int:
    """How many leading outer axes to flatten so the parallel loop has work for every thread."""
    n, c = 1, 0
    for a in outer:
        n *= a.extent
        c += 1
        if n >= 4 * threads:
            break
    return max(c, 1)


"""numba-cuda source from loop-IR kernels: one self-contained `@cuda.jit` kernel per loop-IR kernel.

Three templates, chosen by the kernel and its schedule:

- **point** (`threads_per_point = 1`): a grid-stride loop over the flattened outer space, one thread per point
  running every stage sequentially. Elementwise kernels, short reductions (pooling windows), column
  reductions whose reads are contiguous across points. Row scratch lives in a per-thread local array, or in
  global scratch (one slot per thread of the grid) when it is large.
- **row** (`threads_per_point = T > 1`): `points_per_block = R` outer points per block, T threads per point
  striding over each stage's axes. Reductions combine per-thread partials through a shared-memory tree
  (log2 T steps, one barrier each); stores stride over their axes; scans are block scans (Hillis-Steele
  in shared memory with a running carry); sorts are bitonic sorts over (key, position) pairs, which makes
  them stable. Row scratch lives in shared memory when it fits the block's budget, otherwise in global
  scratch with one slot per resident point (`gridDim.x * R` slots), never recomputed.
- **tiled** (`[Contract, epilogue...]`): a shared-memory tiled GEMM. A block computes a BM x BN tile of the
  flattened (M, N) output, looping over K in steps of BK; each thread holds a TM x TN register tile whose
  rows and columns are strided by the thread grid (conflict-free shared reads, coalesced stores). Operand
  tiles are loaded by evaluating the operand expressions, so a convolution is an implicit GEMM: the window
  arithmetic inlines into the tile load. The epilogue stages run on the accumulators before the store.
  Batch axes map to gridDim.z, M tiles to gridDim.y, N tiles to gridDim.x, each with a grid-stride loop.

Scatter kernels (no outer axes, a copy then `+=` updates) become one launch per stage, the updates with
`cuda.atomic.add`. Every kernel uses grid-stride loops, so any grid size is correct; the simulator runs a
small grid. float16 buffers are storage only: values are computed in float32 (the accumulator types of the
IR already say float32), and a schedule knob chooses float16 or float32 for row scratch and GEMM tiles.
"""
from __future__ import annotations

import contextlib
import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ...dtypes import is_float, is_int, itemsize
from ...errors import BackendError
from ...ir import expr as E
from ...ir.expr import INDEX, Call, Cast, Const, Expr, Idx, Load, Local, Select
from ...ir.kernel import Assign, Axis, Contract, Kernel, Program, Reduce, Scan, ScatterAdd, Sort, Store
from ...ir.schedule import Schedule
from ..pyemit import Emitter, Indent, Source, common, invariants, replace_top_down, subscript

CODEGEN_VERSION = "1"
NP = {"float16": "np.float16", "float32": "np.float32", "float64": "np.float64", "int8": "np.int8",
      "uint8": "np.uint8", "int16": "np.int16", "int32": "np.int32", "int64": "np.int64", "bool": "np.bool_"}
LOCAL_ARRAY_MAX_BYTES = 2048          # per-thread row scratch above this goes to global scratch
SIM_GRID_MAX = 2                      # blocks per grid dimension when the simulator runs a launch
GRID_YZ_MAX = 65535

_MATH = {"exp": "math.exp", "log": "math.log", "sqrt": "math.sqrt", "sin": "math.sin", "cos": "math.cos",
         "tan": "math.tan", "asin": "math.asin", "acos": "math.acos", "atan": "math.atan", "sinh": "math.sinh",
         "cosh": "math.cosh", "tanh": "math.tanh", "asinh": "math.asinh", "acosh": "math.acosh",
         "atanh": "math.atanh", "erf": "math.erf", "log1p": "math.log1p", "expm1": "math.expm1",
         "log2": "math.log2", "log10": "math.log10", "exp2": "math.exp2", "atan2": "math.atan2",
         "hypot": "math.hypot", "copysign": "math.copysign", "fmod": "math.fmod"}
# functions numba-cuda would compute in float64 (or not at all) through `math`: libdevice on the device,
# numpy/scipy under the simulator (which runs the kernels as Python)
_LIBDEVICE = {"floor": ("floorf", "floor", "np.floor"), "ceil": ("ceilf", "ceil", "np.ceil"),
              "trunc": ("truncf", "trunc", "np.trunc"), "round": ("rintf", "rint", "np.rint"),
              "pow": ("powf", "pow", "_sim_pow"), "erfc": ("erfcf", "erfc", "_scipy_special.erfc"),
              "erfinv": ("erfinvf", "erfinv", "_scipy_special.erfinv")}

_SIM_MATH = {"exp": "np.exp", "log": "np.log", "sqrt": "np.sqrt", "sin": "np.sin", "cos": "np.cos",
             "tan": "np.tan", "asin": "np.arcsin", "acos": "np.arccos", "atan": "np.arctan", "sinh": "np.sinh",
             "cosh": "np.cosh", "tanh": "np.tanh", "asinh": "np.arcsinh", "acosh": "np.arccosh",
             "atanh": "np.arctanh", "erf": "_scipy_special.erf", "log1p": "np.log1p", "expm1": "np.expm1",
             "log2": "np.log2", "log10": "np.log10", "exp2": "np.exp2", "atan2": "np.arctan2", "hypot": "np.hypot",
             "copysign": "np.copysign", "fmod": "np.fmod", "isfinite": "np.isfinite"}

HELPERS = {
    "maximum": '''
@cuda.jit(device=True, inline="always")
def _xb_maximum(a, b):
    return a if a > b or a != a else b
''',
    "minimum": '''
@cuda.jit(device=True, inline="always")
def _xb_minimum(a, b):
    return a if a < b or a != a else b
''',
    "fmax": '''
@cuda.jit(device=True, inline="always")
def _xb_fmax(a, b):
    return a if a >= b or b != b else b
''',
    "fmin": '''
@cuda.jit(device=True, inline="always")
def _xb_fmin(a, b):
    return a if a <= b or b != b else b
''',
    "imod": '''
@cuda.jit(device=True, inline="always")
def _xb_ifmod(a, b):
    if b == 0 or b == -1:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r
''',
    # integer // and % as PyTorch: INT_MIN // -1 wraps, by 0 both are 0 (numpy's answer; the GPU's division by
    # zero is undefined)
    "ifloordiv": '''
@cuda.jit(device=True, inline="always")
def _xb_ifloordiv(a, b):
    if b == 0:
        return a - a
    return -a if b == -1 else a // b
''',
    "iremainder": '''
@cuda.jit(device=True, inline="always")
def _xb_iremainder(a, b):
    return a - a if b == 0 or b == -1 else a % b
''',
    # integers to negative powers as PyTorch: 1 for a base of 1, +-1 by parity for -1, else 0; to others by
    # squaring, wrapping (numba's `**` goes through a float pow past an exponent of 65536)
    "ipow": '''
@cuda.jit(device=True, inline="always")
def _xb_ipow(a, b):
    one = a - a + 1
    if b < 0:
        return one if a == 1 else (one if b % 2 == 0 else -one) if a == -1 else one - one
    r, x, e = one, a, b
    while e != 0:
        if e & 1:
            r = r * x
        x = x * x
        e >>= 1
    return r
''',
    # shifts by a count outside [0, 64) (integers compute in 64 bits) as PyTorch: 0, or -1 for negative a >> b
    "shl": '''
@cuda.jit(device=True, inline="always")
def _xb_shl(a, b):
    return a << b if 0 <= b < 64 else a - a
''',
    "shr": '''
@cuda.jit(device=True, inline="always")
def _xb_shr(a, b):
    return a >> b if 0 <= b < 64 else (a - a - 1 if a < 0 else a - a)
''',
    # float -> int as PyTorch on x86 (the GPU's conversion saturates, NaN to 0): truncation; a value the type
    # cannot hold is INT64_MIN for int64, and narrower types go through int32 (INT32_MIN)
    "f2i64": '''
@cuda.jit(device=True, inline="always")
def _xb_f2i64(x):
    return np.int64(x) if -9.223372036854775808e18 <= x < 9.223372036854775808e18 else np.int64(-2**63)
''',
    "f2i32": '''
@cuda.jit(device=True, inline="always")
def _xb_f2i32(x):
    return np.int32(x) if -2147483648.0 <= x < 2147483648.0 else np.int32(-2**31)
''',
}


ATOMIC_DTYPES = ("float32", "float64", "int32", "int64")


def cdt(dtype: str) -> str:
    """The type values of `dtype` are computed in (float16 is storage only)."""
    return "float32" if dtype in ("float16", "bfloat16") else dtype


def _prod(xs) -> int:
    return int(np.prod([int(x) for x in xs], dtype=np.int64)) if xs else 1


def _extents(axes) -> int:
    return _prod([a.extent for a in axes])


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


# ---- launches --------------------------------------------------------------------------------------------

@dataclass
class SharedArray:
    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return _prod(self.shape) * itemsize(self.dtype)


@dataclass
class Scratch:
    """A global scratch array: `per_slot` elements for each of `slots` (a host expression of the grid)."""
    name: str
    per_slot: tuple[int, ...]
    dtype: str
    slots: str                      # "threads" (gridDim.x * blockDim.x) or "rows" (gridDim.x * R)


@dataclass
class Launch:
    """One `@cuda.jit` kernel and how it is launched."""
    name: str
    kernel: str                     # the loop-IR kernel it implements
    template: str                   # point | row | tiled
    params: list[str]               # program buffers, then scratch arrays
    block: tuple[int, int, int]
    grid: tuple[int, int, int]      # the full grid on a GPU
    shared: list[SharedArray] = field(default_factory=list)
    scratch: list[Scratch] = field(default_factory=list)
    source: str = ""
    points_per_block: int = 1
    fastmath: bool = False
    details: dict = field(default_factory=dict)
    bounds: tuple[int, ...] = ()

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def smem_bytes(self) -> int:
        return sum(a.nbytes for a in self.shared)

    def sim_grid(self) -> tuple[int, int, int]:
        return tuple(min(g, SIM_GRID_MAX) for g in self.grid)


# ---- expressions -----------------------------------------------------------------------------------------

def promote_half(e: Expr, row_dtypes: dict[str, str]) -> Expr:
    """Compute float16 values in float32: loads widen, constants/calls/locals are float32; `row_dtypes` gives
    the storage type chosen for row scratch buffers (their loads widen only when stored as float16)."""
    def f(n: Expr):
        if isinstance(n, Load):
            dt = row_dtypes.get(n.buf, n.dtype)
            if dt in ("float16", "bfloat16"):
                return Cast(Load(n.buf, n.index, dt), "float32")
            if dt != n.dtype:
                return Load(n.buf, n.index, dt)
            return None
        if n.dtype not in ("float16", "bfloat16"):
            return None
        if isinstance(n, Cast):
            return n.x if n.x.dtype == "float32" else Cast(n.x, "float32")
        if isinstance(n, Const):
            return Const(n.value, "float32")
        if isinstance(n, Local):
            return Local(n.name, "float32")
        if isinstance(n, Call):
            return Call(n.fn, n.args, "float32")
        if isinstance(n, Select):
            return Select(n.cond, n.a, n.b, "float32")
        return None
    return e.map(f)


def simplify_pow(e: Expr) -> Expr:
    """x ** 2, x ** 3, x ** 0.5, x ** 1 with a constant exponent as multiplications / sqrt."""
    def f(n: Expr):
        if isinstance(n, Call) and n.fn == "pow" and is_float(n.dtype) and isinstance(n.args[1], Const):
            x, p = n.args[0], float(n.args[1].value)
            if p == 1.0:
                return x
            if p == 2.0:
                return Call("mul", (x, x), n.dtype)
            if p == 3.0:
                return Call("mul", (Call("mul", (x, x), n.dtype), x), n.dtype)
            if p == 0.5:
                return Call("sqrt", (x,), n.dtype)
        return None
    return e.map(f)


def zero_d(e: Expr, zero_d_bufs: set[str]) -> Expr:
    """0-d buffers live on the device as 1-element arrays."""
    if not zero_d_bufs:
        return e
    return e.map(lambda n: Load(n.buf, (E.ZERO,), n.dtype) if isinstance(n, Load) and n.buf in zero_d_bufs
                 and not n.index else None)


def _acc(e: Expr, dtype: str) -> Expr:
    return e if e.dtype == dtype else Cast(e, dtype)


def _loads(e: Expr):
    return [n for n in e.walk() if isinstance(n, Load)]


def _reads(stage) -> set[str]:
    return {n.buf for x in stage.exprs() for n in x.walk() if isinstance(n, Load)}


def _writes(stage) -> set[str]:
    out = set()
    for b in (getattr(stage, "buf", None), getattr(stage, "values_buf", None), getattr(stage, "indices_buf", None)):
        if b:
            out.add(b)
    return out


def _stage_axes(s) -> tuple[Axis, ...]:
    if isinstance(s, (Scan, Sort)):
        return (s.axis,)
    return tuple(getattr(s, "axes", ()) or ())


def stage_length(k: Kernel) -> int:
    """The longest loop a stage runs at one outer point (reduction, row, scan or sort length)."""
    return max([_extents(_stage_axes(s)) for s in k.stages] + [1])


def forward_point_stores(k: Kernel) -> Kernel:
    """A later stage reading `buf[index]` that an earlier per-point store just wrote reads the value itself."""
    known: dict[tuple[str, tuple], Expr] = {}
    stages = []
    for s in k.stages:
        if known:
            def f(n: Expr):
                if isinstance(n, Load) and (n.buf, n.index) in known:
                    return known[(n.buf, n.index)]
                return None
            s = s.replace(lambda e: e.map(f))
        if isinstance(s, Store) and not s.axes and s.scope == "global":
            known[(s.buf, tuple(s.index))] = s.value
        stages.append(s)
    return Kernel(k.name, k.kind, k.outer, stages, dict(k.row_buffers), dict(k.locals), list(k.origin))


# ---- classification --------------------------------------------------------------------------------------

def tiled_roles(k: Kernel):
    """(contract, batch, m, n axes) when `k` is `[Contract, per-point epilogue...]`, else None. Axes are
    classified by which operand reads them: both (or neither) -> batch, lhs only -> M, rhs only -> N."""
    if not k.stages or not isinstance(k.stages[0], Contract) or not k.outer:
        return None
    for s in k.stages[1:]:
        if not isinstance(s, (Assign, Store)) or (isinstance(s, Store) and (s.axes or s.scope == "row")):
            return None
    c = k.stages[0]
    lf, rf = E.free_indices(c.lhs), E.free_indices(c.rhs)
    batch, m, n = [], [], []
    for a in k.outer:
        in_l, in_r = a.name in lf, a.name in rf
        (m if in_l and not in_r else n if in_r and not in_l else batch).append(a)
    if not m and not n:
        return None
    return c, batch, m, n


def scatter_phases(k: Kernel) -> list[Kernel] | None:
    """A kernel with no outer axes whose stages are stores and scatter-adds (no per-point values) runs one
    launch per stage, in order; each stage's own axes become the launch's parallel space."""
    if k.outer or not k.stages:
        return None
    if not all(isinstance(s, (Store, ScatterAdd)) and s.axes and getattr(s, "scope", "global") == "global"
               for s in k.stages):
        return None
    if any(isinstance(n, Local) for s in k.stages for x in s.exprs() for n in x.walk()):
        return None
    out = []
    for i, s in enumerate(k.stages):
        inner = Store(s.buf, (), s.index, s.value) if isinstance(s, Store) else \
            ScatterAdd(s.buf, (), s.index, s.value)
        out.append(Kernel(k.name if i == 0 else f"{k.name}_{i}", "scatter" if isinstance(s, ScatterAdd)
                          else "elementwise", tuple(s.axes), [inner]))
    return out


def contiguous_across_points(k: Kernel) -> bool:
    """Do consecutive outer points read consecutive addresses (the innermost outer axis indexes the last
    dimension of every load in the stages, and no stage axis does)?"""
    if not k.outer:
        return False
    inner = k.outer[-1].name
    stage_names = {a.name for s in k.stages for a in _stage_axes(s)}
    loads = [n for s in k.stages for x in s.exprs() for n in x.walk() if isinstance(n, Load)
             and n.buf not in k.row_buffers and n.index]
    if not loads:
        return False
    for ld in loads:
        last = E.free_indices(ld.index[-1])
        if inner not in last or last & stage_names:
            return False
    return True


RESERVED = {"cuda", "np", "math", "grid", "alloc", "launch", "run", "GRID", "BLOCK", "libdevice", "min", "max",
            "abs", "range", "True", "False", "None"}


def safe_names(program: Program) -> dict[str, str]:
    """Buffer names as Python identifiers in the generated module, renamed where they would shadow a module
    name, an axis or a local of the program."""
    import keyword
    taken = set(RESERVED) | set(keyword.kwlist)
    for k in program.kernels:
        taken |= {a.name for a in k.outer} | set(k.locals) | set(k.row_buffers)
        for s in k.stages:
            taken |= {a.name for a in _stage_axes(s)}
            for attr in ("local", "index_local"):
                if getattr(s, attr, None):
                    taken.add(getattr(s, attr))
    out = {}
    for name in program.buffers:
        new = name if name.isidentifier() else "".join(ch if ch.isalnum() else "_" for ch in name)
        while new in taken or new.startswith("_") or (new[:1].isdigit()):
            new = f"b{new}" if new.startswith("_") or new[:1].isdigit() else f"{new}_"
        taken.add(new)
        out[name] = new
    return out


# ---- the module ------------------------------------------------------------------------------------------

class ModuleWriter:
    """The generated module: constants, inline device helpers, kernels, and the host launcher."""

    def __init__(self, program: Program, schedules: dict[str, Schedule], smem_limit: int):
        self.program = program
        self.schedules = schedules
        self.smem_limit = smem_limit
        self.helpers: set[str] = set()
        self.libdevice: set[tuple[str, str]] = set()     # (fn, dtype)
        self.math_used: set[str] = set()                   # math.* functions the kernels call
        self.emitter = Emitter(self._spell, cast=self._cast)
        self.launches: list[Launch] = []
        self.kernel_launches: dict[str, list[Launch]] = {}
        for name, b in program.buffers.items():
            if b.dtype == "bfloat16":
                raise BackendError(f"the cuda backend does not take bfloat16 buffers ({name}) yet",
                                   hint="use float16 or float32 (x.astype(np.float32))")
        self.zero_d = {n for n, b in program.buffers.items() if len(b.shape) == 0}
        self.safe = safe_names(program)
        self.orig = {v: n for n, v in self.safe.items()}

    def rename(self, e: Expr) -> Expr:
        return e.map(lambda n: Load(self.safe[n.buf], n.index, n.dtype)
                     if isinstance(n, Load) and self.safe.get(n.buf, n.buf) != n.buf else None)

    # ---- scalar functions ----------------------------------------------------------------------------
    def _cast(self, src: str, dst: str, text: str) -> str | None:
        if is_float(src) and is_int(dst):
            self.helpers.add("f2i64" if dst == "int64" else "f2i32")
            if dst in ("int64", "int32"):
                return f"_xb_f2i{dst[-2:]}({text})"
            return f"{NP[dst]}(_xb_f2i32({text}))"
        return None

    def _spell(self, fn: str, dtype: str, args: list[str], arg_types: list[str]) -> str | None:
        src = arg_types[0] if arg_types else dtype
        c = self.emitter.const
        if fn in ("maximum", "minimum", "fmax", "fmin") and dtype != INDEX:
            if is_float(dtype):
                self.helpers.add(fn)
                return f"_xb_{fn}({args[0]}, {args[1]})"
            if dtype == "bool":
                return f"({args[0]} {'|' if fn in ('maximum', 'fmax') else '&'} {args[1]})"
            return f"{'max' if fn in ('maximum', 'fmax') else 'min'}({args[0]}, {args[1]})"
        if fn == "abs":
            return f"abs({args[0]})"
        if fn == "neg" and dtype == "bool":
            return f"(not {args[0]})"
        if fn == "reciprocal":
            return f"({c(1.0, dtype)} / {args[0]})"
        if fn == "rsqrt":
            self.math_used.add("sqrt")
            return f"({c(1.0, dtype)} / math.sqrt({args[0]}))"
        if fn == "sigmoid":
            self.math_used.add("exp")
            one = c(1.0, dtype)
            return f"({one} / ({one} + math.exp(-{args[0]})))"
        if fn == "isnan":
            return f"({args[0]} != {args[0]})"
        if fn == "isinf":
            return f"(abs({args[0]}) == {c('inf', src)})"
        if fn == "isfinite":
            self.math_used.add("isfinite")
            return f"math.isfinite({args[0]})"
        if fn == "signbit":
            self.math_used.add("copysign")
            return f"(math.copysign({c(1.0, src)}, {args[0]}) < {c(0.0, src)})"
        if fn == "sign":    # 0 for NaN, as PyTorch
            x = args[0]
            if dtype == "bool":
                return x
            one, zero = c(1 if is_int(dtype) else 1.0, dtype), c(0 if is_int(dtype) else 0.0, dtype)
            return f"({one} if {x} > {zero} else (-{one} if {x} < {zero} else {zero}))"
        if fn == "logical_not":
            return f"(not {args[0]})"
        if fn == "bitwise_not":
            return f"(not {args[0]})" if dtype == "bool" else f"(~{args[0]})"
        if is_int(dtype) and fn in ("fmod", "floordiv", "mod", "pow", "shl", "shr"):
            name = {"fmod": "imod", "mod": "iremainder"}.get(fn, "i" + fn if fn in ("floordiv", "pow") else fn)
            self.helpers.add(name)
            return f"_xb_{'ifmod' if fn == 'fmod' else name}({args[0]}, {args[1]})"
        if fn in _LIBDEVICE and is_float(dtype):
            self.libdevice.add((fn, dtype))
            return f"_ld_{fn}_{dtype[-2:]}({', '.join(args)})"
        if fn in _MATH:
            self.math_used.add(_MATH[fn].split(".", 1)[1])
            return f"{_MATH[fn]}({', '.join(args)})"
        return None

    # ---- expressions -----------------------------------------------------------------------------------
    def prep(self, e: Expr, row_dtypes: dict[str, str]) -> Expr:
        return self.rename(promote_half(simplify_pow(zero_d(e, self.zero_d)), row_dtypes))

    # ---- building ----------------------------------------------------------------------------------------
    def build(self) -> None:
        for k in self.program.kernels:
            sched = self.schedules.get(k.name, Schedule())
            phases = scatter_phases(k)
            if phases is not None:
                launches = [PointWriter(self, ph, sched, origin=k.name, serial=not self.atomic_ok(ph)).launch()
                            for ph in phases]
            elif tiled_roles(k) is not None and sched.get("impl", "tiled") == "tiled":
                launches = [TiledWriter(self, k, sched).launch()]
            elif int(sched.get("threads_per_point", 1)) > 1:
                launches = [RowWriter(self, k, sched).launch()]
            else:
                launches = [PointWriter(self, k, sched).launch()]
            for ln in launches:
                self.check_limits(ln)
            self.kernel_launches[k.name] = launches
            self.launches.extend(launches)

    def atomic_ok(self, k: Kernel) -> bool:
        """Can the scatter-adds of `k` use cuda.atomic.add (float32/64, int32/64)?"""
        return all(self.program.buffers[s.buf].dtype in ATOMIC_DTYPES for s in k.stages if isinstance(s, ScatterAdd))

    def check_limits(self, ln: Launch) -> None:
        if ln.threads > 1024:
            raise BackendError(f"kernel {ln.kernel}: a block of {ln.threads} threads exceeds the 1024 threads "
                               f"per block of every CUDA GPU (max_threads_per_block)",
                               hint="use fewer threads per block: lower threads_per_point/points_per_block, "
                                    "block, or BM/TM x BN/TN")
        if ln.smem_bytes > self.smem_limit:
            parts = ", ".join(f"{a.name} {list(a.shape)} {a.dtype} = {a.nbytes} B" for a in ln.shared)
            raise BackendError(f"kernel {ln.kernel}: {ln.smem_bytes} bytes of shared memory per block exceed "
                               f"the {self.smem_limit} bytes of static shared memory a block may use "
                               f"(shared_mem_per_block_bytes) ({parts})",
                               hint="use smaller tiles (BM, BN, BK), fewer points per block, or "
                                    "scratch='global' / 'auto'")

    # ---- text ------------------------------------------------------------------------------------------
    def module(self) -> str:
        if not self.launches:
            self.build()
        p = self.program
        src = Source()
        src(f'"""CUDA kernels for {p.name} (generated by xbench from the loop IR below)')
        src()
        for line in p.text().splitlines():
            src(line.replace('"""', "'''"))
        src('"""')
        src("import math")
        src()
        src("import numpy as np")
        src("from numba import cuda")
        src("from numba.core import config as _numba_config")
        src()
        src()
        src("def _kernel(**options):")
        src('    """cuda.jit for a kernel (numba\'s CUDA simulator takes no launch bounds)."""')
        src("    if _numba_config.ENABLE_CUDASIM:")
        src('        options.pop("launch_bounds", None)')
        src("    return cuda.jit(**options)")
        if self.libdevice or self.math_used:
            self.simulator_block(src)
        consts = self.emitter.constant_lines()
        if consts:
            src()
            src()
            src.lines.extend(consts)
        for h in sorted(self.helpers):
            src()
            src()
            src.lines.extend(HELPERS[h].strip("\n").splitlines())
        for ln in self.launches:
            src()
            src()
            src.lines.extend(ln.source.splitlines())
        src()
        src()
        src.lines.extend(self.host().splitlines())
        return src.text() + "\n"

    def simulator_block(self, src: Source) -> None:
        """Under the simulator the kernels run as Python: numpy (and scipy) stand in for `math` and libdevice,
        computing in the arrays' own precision and giving NaN/inf where Python's `math` raises."""
        scipy = any(fn in ("erfc", "erfinv") for fn, _ in self.libdevice) or "erf" in self.math_used
        src()
        src()
        src("if _numba_config.ENABLE_CUDASIM:  # the simulator runs kernels as Python: numpy/scipy stand in")
        with src.indent():
            src("import types as _types")
            if scipy:
                src()
                src("import scipy.special as _scipy_special")
            src()
            src("def _quiet(fn):")
            src("    def call(*args):")
            src('        with np.errstate(all="ignore"):')
            src("            return fn(*args)")
            src("    return call")
            src()
            if any(fn == "pow" for fn, _ in self.libdevice):   # numpy's scalar power takes y = 0.5 for sqrt
                src("def _sim_pow(a, b):")
                src("    return np.power(np.array([a]), np.array([b]))[0]")
                src()
            if self.math_used:
                items = ", ".join(f"{fn}=_quiet({_SIM_MATH[fn]})" for fn in sorted(self.math_used))
                src(f"math = _types.SimpleNamespace({items})")
            for fn, dt in sorted(self.libdevice):
                src(f"_ld_{fn}_{dt[-2:]} = _quiet({_LIBDEVICE[fn][2]})")
        if self.libdevice:
            src("else:")
            with src.indent():
                src("from numba.cuda import libdevice")
                for fn, dt in sorted(self.libdevice):
                    name = _LIBDEVICE[fn][0] if dt == "float32" else _LIBDEVICE[fn][1]
                    src(f"_ld_{fn}_{dt[-2:]} = libdevice.{name}")

    def prelude(self, text: str) -> str:
        """Everything before the first kernel: imports, constants and helpers (part of PTX cache keys)."""
        first = self.launches[0].source.splitlines()[0] if self.launches else None
        if first is None:
            return text
        return text.split(first, 1)[0]

    def host(self) -> str:
        p = self.program
        consts = [n for n, b in p.buffers.items() if b.role == "const"]
        src = Source()
        src("GRID = {")
        for ln in self.launches:
            src(f"    {ln.name!r}: {ln.grid!r},")
        src("}")
        src("BLOCK = {")
        for ln in self.launches:
            src(f"    {ln.name!r}: {ln.block!r},")
        src("}")
        src()
        src()
        src("def alloc(grid=GRID):")
        with src.indent():
            src('"""Device arrays for outputs, temporaries and the scratch of each launch."""')
            src("return {")
            for name, b in p.buffers.items():
                if b.role in ("output", "temp") and name not in p.inputs:
                    shape = tuple(b.shape) if b.shape else (1,)
                    src(f"    {name!r}: cuda.device_array({shape!r}, {NP[b.dtype]}),")
            for ln in self.launches:
                for s in ln.scratch:
                    per = ln.threads if s.slots == "threads" else ln.points_per_block
                    slots = f"grid[{ln.name!r}][0] * {per}"
                    shape = ", ".join(str(x) for x in s.per_slot)
                    src(f"    {s.name!r}: cuda.device_array(({slots}, {shape}), {NP[s.dtype]}),")
            src("}")
        src()
        src()
        src("def launch(_b, grid=GRID):")
        with src.indent():
            src('"""Every kernel of the program, in order, on the device arrays `_b` (asynchronous on a GPU)."""')
            for ln in self.launches:
                args = ", ".join(f"_b[{a!r}]" for a in ln.params)
                src(f"{ln.name}[grid[{ln.name!r}], BLOCK[{ln.name!r}]]({args})")
        src()
        src()
        safe = self.safe
        src(f"def run({''.join(safe[n] + ', ' for n in p.inputs + consts)}grid=GRID):")
        with src.indent():
            src("_b = alloc(grid)")
            for name in p.inputs + consts:
                b = p.buffers[name]
                value = safe[name] if b.shape else f"{safe[name]}.reshape(1)"
                src(f"_b[{name!r}] = cuda.to_device({value})")
            src("launch(_b, grid)")
            outs = []
            for o in p.outputs:
                shape = tuple(p.buffers[o].shape)
                get = f"_b[{o!r}].copy_to_host()"
                outs.append(get if shape else f"{get}.reshape(())")
            src(f"return [{', '.join(outs)}]")
        return src.text()


# ---- shared machinery of the kernel writers --------------------------------------------------------------

class BodyWriter(ABC):
    """Emits the stages of a kernel at one outer point; T threads (`_lane` 0..T-1) share the point."""

    T = 1

    def __init__(self, mw: ModuleWriter, k: Kernel, sched: Schedule, origin: str | None = None):
        self.mw = mw
        self.sched = sched
        self.origin = origin or k.name
        self.em = mw.emitter
        self.src = Source()
        self.shared: list[SharedArray] = []
        self.scratch: list[Scratch] = []
        self.locals_arrays: list[tuple[str, tuple[int, ...], str]] = []
        self.row_dtypes: dict[str, str] = {}
        self.row_place: dict[str, str] = {}          # row buffer -> shared | local | global
        self.k = self.prepare(k)

    # ---- preparation -------------------------------------------------------------------------------------
    def temp_dtype(self, dtype: str) -> str:
        if dtype == "float16" and self.sched.get("temp_dtype", "float16") == "float32":
            return "float32"
        return dtype

    def prepare(self, k: Kernel) -> Kernel:
        k = forward_point_stores(k)
        self.row_dtypes = {n: self.temp_dtype(dt) for n, (shape, dt) in k.row_buffers.items()}
        stages = []
        for s in k.stages:
            s = s.replace(lambda e: self.mw.prep(e, self.row_dtypes))
            if isinstance(s, Reduce):
                s = Reduce(s.local, s.kind, s.axes, s.body, cdt(s.dtype), s.index_local)
            elif isinstance(s, Contract):
                s = Contract(s.local, s.axes, s.lhs, s.rhs, cdt(s.dtype), s.roles)
            elif isinstance(s, Scan):
                s = Scan(s.buf, s.axis, s.index, s.body, s.kind, cdt(s.dtype), s.reverse)
            if isinstance(s, Store) and s.buf in self.mw.zero_d and not s.index:
                s = Store(s.buf, s.axes, (E.ZERO,), s.value, s.scope)
            safe = self.mw.safe
            for attr in ("buf", "values_buf", "indices_buf"):
                b = getattr(s, attr, None)
                if b and b in safe and safe[b] != b:
                    s = dataclasses.replace(s, **{attr: safe[b]})
            stages.append(s)
        return Kernel(k.name, k.kind, k.outer, stages, dict(k.row_buffers), dict(k.locals), list(k.origin))

    def params(self) -> list[str]:
        """Program buffer names (and scratch names) in argument order."""
        k = self.k
        bufs = k.reads() + [b for b in k.writes() if b not in k.reads()]
        return [self.mw.orig.get(b, b) for b in bufs] + [s.name for s in self.scratch]

    def arg_names(self) -> str:
        return ", ".join(self.mw.safe.get(p, p) for p in self.params())

    # ---- expressions -------------------------------------------------------------------------------------
    def values(self, exprs: list[Expr]) -> list[str]:
        """Temporaries for shared subexpressions; the spellings of `exprs`."""
        names: dict[Expr, str] = {}
        for sub in common(exprs):
            t = self.em.tmp()
            self.src(f"{t} = {self.em.expr(self.row(sub), names)}")
            names[sub] = t
        return [self.em.expr(self.row(e), names) for e in exprs]

    def hoist(self, exprs: list[Expr], loop_vars: set[str]) -> list[Expr]:
        inv = invariants(exprs, loop_vars)
        if not inv:
            return exprs
        table: dict[Expr, Expr] = {}
        for sub in inv:
            t = self.em.tmp("h")
            self.src(f"{t} = {self.em.expr(self.row(replace_top_down(sub, table)))}")
            table[sub] = Local(t, sub.dtype)
        return [replace_top_down(e, table) for e in exprs]

    def row(self, e: Expr) -> Expr:
        """Row scratch buffers indexed by where they live (a slot of a shared or global array)."""
        if not self.k.row_buffers:
            return e

        def f(n: Expr):
            if isinstance(n, Load) and n.buf in self.k.row_buffers:
                name, lead = self.row_ref(n.buf)
                return Load(name, lead + tuple(n.index), n.dtype)
            return None
        return e.map(f)

    def row_ref(self, buf: str) -> tuple[str, tuple[Expr, ...]]:
        place = self.row_place[buf]
        if place == "local":
            return f"_lo_{buf}", ()
        if place == "shared":
            return f"_sh_{buf}", ((Idx("_r"),) if self.points_per_block > 1 else (E.ZERO,))
        return f"_gs_{buf}", (Idx("_slot"),)

    points_per_block = 1

    def store_target(self, buf: str, index: list[str]) -> str:
        if buf in self.k.row_buffers:
            name, lead = self.row_ref(buf)
            return subscript(name, [self.em.expr(x) for x in lead] + index)
        return subscript(buf, index)

    # ---- loops -----------------------------------------------------------------------------------------
    def unravel(self, flat: str, axes, prefix: str) -> None:
        """Bind each axis name from a flat index over `axes` (row-major)."""
        rem = flat
        axes = list(axes)
        for i, a in enumerate(axes):
            inner = _extents(axes[i + 1:])
            if a.extent == 1:
                self.src(f"{a.name} = 0")
            elif inner == 1:
                self.src(f"{a.name} = {rem}")
            else:
                self.src(f"{a.name} = {rem} // {inner}")
                self.src(f"{prefix}{i} = {rem} - {a.name} * {inner}")
                rem = f"{prefix}{i}"

    @contextlib.contextmanager
    def strided(self, var: str, start: str, stop, step):
        """`for var in range(start, stop, step)` as a while loop (numba's range with a step computes a trip
        count with a 64-bit division and is unrolled with more registers)."""
        src = self.src
        if str(start) == "0" and str(step) == "1":
            src(f"for {var} in range({stop}):")
            with src.indent():
                yield
            return
        src(f"{var} = {start}")
        src(f"while {var} < {stop}:")
        with src.indent():
            yield
            src(f"{var} += {step}")

    @contextlib.contextmanager
    def loop(self, axes, flat: str = "_q", need_flat: bool = False):
        """The loop over a stage's axes at one point, strided over the T threads of the point."""
        if self.T == 1 and not need_flat:
            for j, a in enumerate(axes):
                with Indent(self.src, j):
                    self.src(f"for {a.name} in range({a.extent}):")
            with Indent(self.src, len(axes)):
                yield
            return
        with self.strided(flat, "_lane" if self.T > 1 else "0", _extents(axes), self.T):
            self.unravel(flat, axes, f"{flat}r")
            yield

    def sync(self) -> None:
        if self.T > 1:
            self.src("cuda.syncthreads()")

    # ---- stages --------------------------------------------------------------------------------------------
    def stages(self) -> None:
        dirty: set[str] = set()
        for s in self.k.stages:
            if self.T > 1 and (_reads(s) & dirty):
                self.sync()
                dirty = set()
            synced = self.stage(s)
            if synced:
                dirty = set()
            dirty |= _writes(s)

    def stage(self, s) -> bool:
        """Emit one stage; True when it ends with a block barrier."""
        if isinstance(s, Assign):
            (v,) = self.values([s.value])
            self.src(f"{s.local} = {v}")
            return False
        if isinstance(s, Store):
            return self.store(s)
        if isinstance(s, Reduce):
            return self.reduce(s.local, s.kind, s.axes, s.body, s.dtype, s.index_local)
        if isinstance(s, Contract):
            body = Call("mul", (_acc(s.lhs, s.dtype), _acc(s.rhs, s.dtype)), s.dtype)
            return self.reduce(s.local, "sum", s.axes, body, s.dtype, None)
        if isinstance(s, Scan):
            return self.scan(s)
        if isinstance(s, Sort):
            return self.sort(s)
        if isinstance(s, ScatterAdd):
            return self.scatter(s)
        raise TypeError(type(s).__name__)

    def bounds(self, threads: int) -> tuple[int, ...]:
        """Launch bounds for ptxas: the block size, and the `min_blocks` per SM the schedule asks for."""
        mb = int(self.sched.get("min_blocks", 0))
        return (threads, mb) if mb > 0 else (threads,)

    def decorator(self, fast: bool, threads: int) -> str:
        return f"@_kernel(fastmath={fast}, cache=True, launch_bounds={self.bounds(threads)!r})"

    _ids = 0

    def next_id(self) -> int:
        BodyWriter._ids += 1
        return BodyWriter._ids

    def guard(self) -> str | None:
        """The condition under which this thread may write global memory for its point (None: always)."""
        return None

    def store(self, s: Store) -> bool:
        row = s.buf in self.k.row_buffers
        cond = [] if row else [c for c in (self.guard(),) if c]
        if not s.axes:
            if self.T > 1:
                cond = ["_lane == 0"] + cond
            vals = self.values([*s.index, s.value])
            line = f"{self.store_target(s.buf, vals[:-1])} = {vals[-1]}"
            if cond:
                self.src(f"if {' and '.join(cond)}:")
                with self.src.indent():
                    self.src(line)
            else:
                self.src(line)
            return False
        depth = 0
        if cond:
            self.src(f"if {' and '.join(cond)}:")
            depth = 1
        with Indent(self.src, depth):
            exprs = self.hoist([*s.index, s.value], {a.name for a in s.axes})
            with self.loop(s.axes):
                vals = self.values(exprs)
                self.src(f"{self.store_target(s.buf, vals[:-1])} = {vals[-1]}")
        return False

    def scatter(self, s: ScatterAdd) -> bool:
        dt = self.mw.program.buffers[self.mw.orig.get(s.buf, s.buf)].dtype
        serial = getattr(self, "serial", False)
        if dt not in ATOMIC_DTYPES and not serial:
            raise BackendError(f"kernel {self.origin}: cuda.atomic.add does not take {dt} ({s.buf})",
                               hint="scatter-add into a float32, float64, int32 or int64 tensor")
        cond = self.guard()
        depth = 0
        if cond:
            self.src(f"if {cond}:")
            depth = 1
        with Indent(self.src, depth):
            value = _acc(s.value, cdt(dt))
            with self.loop(s.axes):
                vals = self.values([*s.index, value])
                idx = vals[:-1]
                if serial:            # one thread applies every update in order: no atomics needed
                    self.src(f"{subscript(s.buf, idx)} += {vals[-1]}")
                else:
                    target = idx[0] if len(idx) == 1 else f"({', '.join(idx)})"
                    self.src(f"cuda.atomic.add({s.buf}, {target}, {vals[-1]})")
        return False

    # ---- reductions ------------------------------------------------------------------------------------------
    def init_value(self, kind: str, dt: str) -> str:
        c = self.em.const
        if kind in ("any", "all"):
            return "False" if kind == "any" else "True"
        if kind == "sum":
            return c(0 if not is_float(dt) else 0.0, dt) if dt != "bool" else "False"
        if kind == "prod":
            return c(1 if not is_float(dt) else 1.0, dt)
        hi = kind in ("min", "argmin")
        if is_float(dt):
            return c("inf" if hi else "-inf", dt)
        if dt == "bool":
            return "True" if hi else "False"
        info = np.iinfo(np.dtype(dt))
        return c(int(info.max if hi else info.min), dt)

    def combine(self, kind: str, dt: str, a: str, b: str) -> str:
        if kind == "sum":
            return f"{a} + {b}"
        if kind == "prod":
            return f"{a} * {b}"
        if kind in ("max", "min"):
            if is_float(dt):
                fn = "maximum" if kind == "max" else "minimum"
                self.mw.helpers.add(fn)
                return f"_xb_{fn}({a}, {b})"
            if dt == "bool":
                return f"{a} {'|' if kind == 'max' else '&'} {b}"
            return f"{kind}({a}, {b})"
        if kind == "any":
            return f"{a} or {b}"
        if kind == "all":
            return f"{a} and {b}"
        raise ValueError(kind)

    def reduce(self, acc: str, kind: str, axes, body: Expr, dt: str, index_local: str | None) -> bool:
        _n = self.next_id()
        if kind not in ("any", "all") and body.dtype != dt:
            body = Cast(body, dt)
        src = self.src
        (body,) = self.hoist([body], {a.name for a in axes})
        src(f"{acc} = {self.init_value(kind, dt)}")
        arg = kind in ("argmax", "argmin")
        if arg:
            src(f"{index_local} = 0")
        with self.loop(axes, need_flat=arg):
            (v,) = self.values([body])
            if arg:
                op = ">" if kind == "argmax" else "<"
                src(f"_v{_n} = {v}")
                nan = f" or (_v{_n} != _v{_n} and {acc} == {acc})" if is_float(dt) else ""
                src(f"if _v{_n} {op} {acc}{nan}:")
                with src.indent():
                    src(f"{acc} = _v{_n}")
                    src(f"{index_local} = _q")
            elif kind == "sum":
                src(f"{acc} += {v}")
            elif kind == "prod":
                src(f"{acc} *= {v}")
            else:
                src(f"{acc} = {self.combine(kind, dt, acc, v)}")
        if self.T == 1:
            return False
        red = self.red_array(dt)
        src(f"{red}[_tid] = {acc}")
        if arg:
            redi = self.red_array("int64", "index")
            src(f"{redi}[_tid] = {index_local}")
        src("cuda.syncthreads()")
        src(f"_s = {self.T // 2}")
        src("while _s > 0:")
        with src.indent():
            src("if _lane < _s:")
            with src.indent():
                if arg:
                    op = ">" if kind == "argmax" else "<"
                    src(f"_av{_n} = {red}[_tid]")
                    src(f"_bv{_n} = {red}[_tid + _s]")
                    src(f"_ai{_n} = {redi}[_tid]")
                    src(f"_bi{_n} = {redi}[_tid + _s]")
                    nan = f" or (_bv{_n} != _bv{_n} and (_av{_n} == _av{_n} or _bi{_n} < _ai{_n}))" if is_float(dt) else ""
                    src(f"if _bv{_n} {op} _av{_n} or (_bv{_n} == _av{_n} and _bi{_n} < _ai{_n}){nan}:")
                    with src.indent():
                        src(f"{red}[_tid] = _bv{_n}")
                        src(f"{redi}[_tid] = _bi{_n}")
                else:
                    src(f"{red}[_tid] = {self.combine(kind, dt, f'{red}[_tid]', f'{red}[_tid + _s]')}")
            src("cuda.syncthreads()")
            src("_s >>= 1")
        src(f"{acc} = {red}[_tid - _lane]")
        if arg:
            src(f"{index_local} = {redi}[_tid - _lane]")
        src("cuda.syncthreads()")
        return True

    def red_array(self, dt: str, role: str = "") -> str:
        """The block's shared scratch for combining `dt` values across threads (`role` "index": argmax's
        positions, apart from int64 values)."""
        name = f"_red_{dt}{'_' + role if role else ''}"
        if not any(a.name == name for a in self.shared):
            self.shared.append(SharedArray(name, (self.block_threads,), dt))
        return name

    block_threads = 1

    # ---- scans -----------------------------------------------------------------------------------------------
    def scan(self, s: Scan) -> bool:
        _n = self.next_id()
        src = self.src
        dt = s.dtype
        body = _acc(s.body, dt)
        n = s.axis.extent
        a = s.axis.name
        # a float product scan runs in order on one lane: the tree order multiplies a 0 by a partial product
        # that overflowed (NaN where the answer is 0)
        lane0 = self.T > 1 and s.kind == "prod" and is_float(dt)
        if self.T == 1 or lane0:
            if lane0:
                src("if _lane == 0:")
                src.depth += 1
            src(f"_c{_n} = {self.init_value(s.kind, dt)}")
            rng = f"range({n} - 1, -1, -1)" if s.reverse else f"range({n})"
            src(f"for {a} in {rng}:")
            with src.indent():
                vals = self.values([*s.index, body])
                if s.kind == "sum":
                    src(f"_c{_n} += {vals[-1]}")
                elif s.kind == "prod":
                    src(f"_c{_n} *= {vals[-1]}")
                else:
                    src(f"_c{_n} = {self.combine(s.kind, dt, f'_c{_n}', vals[-1])}")
                cond = self.guard()
                line = f"{subscript(s.buf, vals[:-1])} = _c{_n}"
                if cond:
                    src(f"if {cond}:")
                    src(f"    {line}")
                else:
                    src(line)
            if lane0:
                src.depth -= 1
                self.sync()
            return lane0
        buf = self.red_array(dt)
        T = self.T
        init = self.init_value(s.kind, dt)
        src(f"_c{_n} = {init}")
        with self.strided("_k", "0", n, T):
            src("_q = _k + _lane")
            src(f"_v{_n} = {init}")
            src(f"if _q < {n}:")
            with src.indent():
                src(f"{a} = {n - 1} - _q" if s.reverse else f"{a} = _q")
                (v,) = self.values([body])
                src(f"_v{_n} = {v}")
            src(f"{buf}[_tid] = _v{_n}")
            src("cuda.syncthreads()")
            src("_d = 1")
            src(f"while _d < {T}:")
            with src.indent():
                src("if _lane >= _d:")
                src(f"    _v{_n} = {self.combine(s.kind, dt, f'{buf}[_tid - _d]', f'_v{_n}')}")
                src("cuda.syncthreads()")
                src(f"{buf}[_tid] = _v{_n}")
                src("cuda.syncthreads()")
                src("_d <<= 1")
            src(f"_v{_n} = {self.combine(s.kind, dt, f'_c{_n}', f'_v{_n}')}")
            cond = " and ".join(c for c in (f"_q < {n}", self.guard()) if c)
            src(f"if {cond}:")
            with src.indent():
                src(f"{a} = {n - 1} - _q" if s.reverse else f"{a} = _q")
                idx = self.values(list(s.index))
                src(f"{subscript(s.buf, idx)} = _v{_n}")
            src(f"_c{_n} = {self.combine(s.kind, dt, f'_c{_n}', f'{buf}[_tid - _lane + {T - 1}]')}")
            src("cuda.syncthreads()")
        return True

    # ---- sorts -----------------------------------------------------------------------------------------------
    def sort(self, s: Sort) -> bool:
        _n = self.next_id()
        src = self.src
        n = s.axis.extent
        P2 = next_pow2(n)
        kd = cdt(s.body.dtype)
        keys, idxs = self.sort_arrays(P2, kd)
        a = s.axis.name
        T = self.T
        lane = "_lane" if T > 1 else "0"
        with self.strided("_q", lane, P2, T):
            src(f"if _q < {n}:")
            with src.indent():
                src(f"{a} = _q")
                (v,) = self.values([s.body])
                src(f"{keys}[_q] = {v}")
            src("else:")
            src(f"    {keys}[_q] = {self.init_value('sum', kd)}")
            src(f"{idxs}[_q] = _q")
        self.sync()
        fl = is_float(kd)
        # `before(x, y)`: x precedes y in the sorted row; padding (position >= n) goes last, NaN last ascending and
        # first descending (as PyTorch), ties keep their original order, so the (key, position) order is total and
        # the sort is stable.
        op = ">" if s.descending else "<"
        src("_k = 2")
        src(f"while _k <= {P2}:")
        with src.indent():
            src("_j = _k >> 1")
            src("while _j > 0:")
            with src.indent():
                with self.strided("_q", lane, P2, T):
                    src("_o = _q ^ _j")
                    src("if _o > _q:")
                    with src.indent():
                        src(f"_xk{_n} = {keys}[_q]")
                        src(f"_xi{_n} = {idxs}[_q]")
                        src(f"_yk{_n} = {keys}[_o]")
                        src(f"_yi{_n} = {idxs}[_o]")
                        # y_before_x: does the element at the higher position belong first?
                        nan_x, nan_y = (f"_xk{_n} != _xk{_n}", f"_yk{_n} != _yk{_n}") if fl else ("False", "False")
                        src(f"if _yi{_n} >= {n}:")
                        src(f"    _yb{_n} = False")
                        src(f"elif _xi{_n} >= {n}:")
                        src(f"    _yb{_n} = True")
                        if fl and s.descending:
                            src(f"elif {nan_y}:")
                            src(f"    _yb{_n} = not ({nan_x}) or _yi{_n} < _xi{_n}")
                            src(f"elif {nan_x}:")
                            src(f"    _yb{_n} = False")
                        elif fl:
                            src(f"elif {nan_y}:")
                            src(f"    _yb{_n} = ({nan_x}) and _yi{_n} < _xi{_n}")
                            src(f"elif {nan_x}:")
                            src(f"    _yb{_n} = True")
                        src("else:")
                        src(f"    _yb{_n} = _yk{_n} {op} _xk{_n} or (_yk{_n} == _xk{_n} and _yi{_n} < _xi{_n})")
                        src(f"if _yb{_n} == ((_q & _k) == 0):")
                        with src.indent():
                            src(f"{keys}[_q] = _yk{_n}")
                            src(f"{idxs}[_q] = _yi{_n}")
                            src(f"{keys}[_o] = _xk{_n}")
                            src(f"{idxs}[_o] = _xi{_n}")
                self.sync()
                src("_j >>= 1")
            src("_k <<= 1")
        cond = self.guard()
        depth = 0
        if cond:
            src(f"if {cond}:")
            depth = 1
        with Indent(src, depth), self.strided("_q", lane, n, T):
            src(f"{a} = _q")
            idx = self.values(list(s.index))
            if s.values_buf:
                src(f"{subscript(s.values_buf, idx)} = {keys}[_q]")
            if s.indices_buf:
                src(f"{subscript(s.indices_buf, idx)} = {idxs}[_q]")
        self.sync()
        return self.T > 1

    @abstractmethod
    def sort_arrays(self, P2: int, kd: str) -> tuple[str, str]:
        """Names of the key and index arrays a sort of P2 (a power of two) elements works in, per template."""


# ---- point template -----------------------------------------------------------------------------------------

class PointWriter(BodyWriter):
    """One thread per outer point, grid-stride over the flattened outer space."""

    T = 1

    def __init__(self, mw, k, sched, origin=None, serial: bool = False):
        super().__init__(mw, k, sched, origin)
        self.serial = serial      # scatter-adds without atomics for their type: one thread does all points
        self.block = 1 if serial else int(sched.get("block", 256))
        self.block_threads = self.block

    def place_rows(self) -> None:
        for name, (shape, _) in self.k.row_buffers.items():
            dt = self.row_dtypes[name]
            nbytes = _prod(shape) * itemsize(dt)
            choice = self.sched.get("scratch", "auto")
            if choice == "shared" or (choice == "auto" and nbytes <= LOCAL_ARRAY_MAX_BYTES):
                self.row_place[name] = "local"
                self.locals_arrays.append((f"_lo_{name}", tuple(shape), dt))
            else:
                self.row_place[name] = "global"
                self.scratch.append(Scratch(f"_gs_{name}", tuple(shape), dt, "threads"))

    def sort_arrays(self, P2: int, kd: str) -> tuple[str, str]:
        nbytes = P2 * (itemsize(kd) + 4)
        choice = self.sched.get("scratch", "auto")
        i = len(self.locals_arrays) + len(self.scratch)
        if choice == "shared" or (choice == "auto" and nbytes <= LOCAL_ARRAY_MAX_BYTES):
            self.locals_arrays += [(f"_sk{i}", (P2,), kd), (f"_si{i}", (P2,), "int32")]
            return f"_sk{i}", f"_si{i}"
        self.scratch += [Scratch(f"_gk{i}", (P2,), kd, "threads"), Scratch(f"_gi{i}", (P2,), "int32", "threads")]
        self.src(f"_gkey{i} = _gk{i}[_slot]")
        self.src(f"_gidx{i} = _gi{i}[_slot]")
        return f"_gkey{i}", f"_gidx{i}"

    def launch(self) -> Launch:
        k = self.k
        self.place_rows()
        P = k.points()
        body = Source()
        self.src = Source()
        self.src.depth = 2
        self.unravel("_p", k.outer, "_pr")
        self.stages()
        if not k.stages:
            self.src("pass")
        inner = self.src.lines
        fast = bool(self.sched.get("fast_math", False))
        body(self.decorator(fast, self.block))
        body(f"def {k.name}({self.arg_names()}):")
        with body.indent():
            for name, shape, dt in self.locals_arrays:
                body(f"{name} = cuda.local.array({shape!r}, {NP[dt]})")
            if self.scratch:
                body("_slot = cuda.grid(1)")
            body(f"for _p in range(cuda.grid(1), {P}, cuda.gridsize(1)):")
        body.lines.extend(inner)
        grid = (1, 1, 1) if self.serial else (max(1, min(-(-P // self.block), 1 << 20)), 1, 1)
        return Launch(k.name, self.origin, "point", self.params(), (self.block, 1, 1), grid, [],
                      self.scratch, body.text(), 1, fast,
                      {"points": P, "threads_per_point": 1,
                       **({"serial": "cuda.atomic.add takes no such type: one thread applies the updates"}
                          if self.serial else {})}, self.bounds(self.block))


# ---- row template -------------------------------------------------------------------------------------------

class RowWriter(BodyWriter):
    """T threads per outer point, R points per block."""

    def __init__(self, mw, k, sched, origin=None):
        super().__init__(mw, k, sched, origin)
        self.T = int(sched.get("threads_per_point", 32))
        self.points_per_block = int(sched.get("points_per_block", 1))
        if self.T & (self.T - 1) or self.T < 2:
            raise BackendError(f"kernel {k.name}: threads_per_point = {self.T}; write a power of two (>= 2), or 1 "
                               "for one thread per point")
        if self.points_per_block < 1:
            raise BackendError(f"kernel {k.name}: points_per_block = {self.points_per_block}; write 1 or more")
        self.block_threads = self.T * self.points_per_block

    def guard(self) -> str | None:
        return "_valid" if self.needs_valid else None

    @property
    def needs_valid(self) -> bool:
        return self.points_per_block > 1 and self.k.points() % self.points_per_block != 0

    def place_rows(self, fixed: int) -> None:
        R = self.points_per_block
        choice = self.sched.get("scratch", "auto")
        used = fixed
        for name, (shape, _) in self.k.row_buffers.items():
            dt = self.row_dtypes[name]
            nbytes = R * _prod(shape) * itemsize(dt)
            if choice == "shared" or (choice == "auto" and used + nbytes <= self.mw.smem_limit):
                self.row_place[name] = "shared"
                self.shared.append(SharedArray(f"_sh_{name}", (R, *shape), dt))
                used += nbytes
            else:
                self.row_place[name] = "global"
                self.scratch.append(Scratch(f"_gs_{name}", tuple(shape), dt, "rows"))

    def sort_arrays(self, P2: int, kd: str) -> tuple[str, str]:
        R = self.points_per_block
        i = len(self.shared) + len(self.scratch)
        nbytes = R * P2 * (itemsize(kd) + 4)
        choice = self.sched.get("scratch", "auto")
        used = sum(a.nbytes for a in self.shared) + self.block_threads * 16
        if choice == "shared" or (choice == "auto" and used + nbytes <= self.mw.smem_limit):
            self.shared += [SharedArray(f"_sk{i}", (R, P2), kd), SharedArray(f"_si{i}", (R, P2), "int32")]
            r = "_r" if R > 1 else "0"
            self.src(f"_skey{i} = _sk{i}[{r}]")
            self.src(f"_sidx{i} = _si{i}[{r}]")
            return f"_skey{i}", f"_sidx{i}"
        self.scratch += [Scratch(f"_gk{i}", (P2,), kd, "rows"), Scratch(f"_gi{i}", (P2,), "int32", "rows")]
        self.src(f"_skey{i} = _gk{i}[_slot]")
        self.src(f"_sidx{i} = _gi{i}[_slot]")
        return f"_skey{i}", f"_sidx{i}"

    def launch(self) -> Launch:
        k = self.k
        R, T = self.points_per_block, self.T
        P = k.points()
        groups = -(-P // R)
        # reduction/scan partials are small; count them before placing row scratch
        kinds = {cdt(getattr(s, "dtype", "float32")) for s in k.stages if isinstance(s, (Reduce, Contract, Scan))}
        fixed = sum(self.block_threads * itemsize(dt) for dt in kinds)
        if any(isinstance(s, Reduce) and s.kind in ("argmax", "argmin") for s in k.stages):
            fixed += self.block_threads * 8
        self.place_rows(fixed)
        self.src = Source()
        self.src.depth = 2
        if R > 1:
            self.src(f"_p = _g * {R} + _r")
            if self.needs_valid:
                self.src(f"_valid = _p < {P}")
                self.src(f"_p = min(_p, {P - 1})")
        else:
            self.src("_p = _g")
        self.unravel("_p", k.outer, "_pr")
        self.stages()
        uses_scratch = bool(self.k.row_buffers) or any(isinstance(s, Sort) for s in k.stages)
        if uses_scratch and not isinstance(k.stages[-1], (Sort, Scan)):
            self.src("cuda.syncthreads()")
        self.src("_g += cuda.gridDim.x")
        inner = self.src.lines
        fast = bool(self.sched.get("fast_math", False))
        body = Source()
        body(self.decorator(fast, self.block_threads))
        body(f"def {k.name}({self.arg_names()}):")
        with body.indent():
            for a in self.shared:
                body(f"{a.name} = cuda.shared.array({a.shape!r}, {NP[a.dtype]})")
            body("_tid = cuda.threadIdx.x")
            if R > 1:
                body(f"_lane = _tid & {T - 1}")
                body(f"_r = _tid >> {T.bit_length() - 1}")
            else:
                body("_lane = _tid")
            if self.scratch:
                body(f"_slot = cuda.blockIdx.x * {R} + _r" if R > 1 else "_slot = cuda.blockIdx.x")
            body("_g = cuda.blockIdx.x")
            body(f"while _g < {groups}:")
        body.lines.extend(inner)
        grid = (max(1, min(groups, 1 << 20)), 1, 1)
        return Launch(k.name, self.origin, "row", self.params(), (self.block_threads, 1, 1), grid,
                      self.shared, self.scratch, body.text(), R, fast,
                      {"points": P, "threads_per_point": T, "points_per_block": R,
                       "row_scratch": dict(self.row_place)}, self.bounds(self.block_threads))


# ---- tiled contraction template -----------------------------------------------------------------------------

class TiledWriter:
    """Shared-memory tiled GEMM over the flattened (batch, M, N, K) spaces of a contraction."""

    def __init__(self, mw: ModuleWriter, k: Kernel, sched: Schedule):
        self.mw, self.sched = mw, sched
        self.em = mw.emitter
        helper = PointWriter(mw, k, sched)       # emits index arithmetic, operand values and the epilogue
        self.body = helper
        self.k = helper.k
        self.c, self.batch, self.m, self.n = tiled_roles(self.k)
        self.name = k.name

    def knob(self, name: str, default: int) -> int:
        v = int(self.sched.get(name, default))
        if v < 1:
            raise BackendError(f"kernel {self.name}: {name} = {v}; write a positive integer")
        return v

    def launch(self) -> Launch:
        k, c, src = self.k, self.c, Source()
        self.body.src = src
        BM, BN, BK = self.knob("BM", 64), self.knob("BN", 64), self.knob("BK", 16)
        TM, TN = self.knob("TM", 4), self.knob("TN", 4)
        pad = int(self.sched.get("pad", 1))
        if BM % TM or BN % TN:
            raise BackendError(f"kernel {self.name}: the block tile BM x BN = {BM} x {BN} must be a multiple of the "
                               f"thread tile TM x TN = {TM} x {TN}", hint="choose BM % TM == 0 and BN % TN == 0")
        NTY, NTX = BM // TM, BN // TN
        nthreads = NTX * NTY
        acc_dt = c.dtype
        tile_dt = acc_dt
        if self._half_operands():
            tile_dt = "float16" if self.sched.get("temp_dtype", "float16") == "float16" else "float32"
        M, N, K, B = _extents(self.m), _extents(self.n), _extents(c.axes), _extents(self.batch)
        MT, NT = -(-M // BM), -(-N // BN)
        shared = [SharedArray("_As", (BK, BM + pad), tile_dt), SharedArray("_Bs", (BK, BN + pad), tile_dt)]
        kn = {a.name for a in c.axes}
        lhs_kfast = self._fast_axis(c.lhs, kn)
        rhs_kfast = self._fast_axis(c.rhs, kn)
        fast = bool(self.sched.get("fast_math", False))
        src(self.body.decorator(fast, nthreads))
        src(f"def {k.name}({self.body.arg_names()}):")
        strided = self.body.strided
        with src.indent():
            for a in shared:
                src(f"{a.name} = cuda.shared.array({a.shape!r}, {NP[a.dtype]})")
            src(f"_C = cuda.local.array(({TM}, {TN}), {NP[acc_dt]})")
            src("_tid = cuda.threadIdx.x")
            if NTX & (NTX - 1) == 0:
                src(f"_tx = _tid & {NTX - 1}")
                src(f"_ty = _tid >> {NTX.bit_length() - 1}")
            else:
                src(f"_tx = _tid % {NTX}")
                src(f"_ty = _tid // {NTX}")
            with strided("_bz", "cuda.blockIdx.z", B, "cuda.gridDim.z"):
                self.body.unravel("_bz", self.batch, "_bzr")
                with strided("_by", "cuda.blockIdx.y", MT, "cuda.gridDim.y"):
                    src(f"_m0 = _by * {BM}")
                    with strided("_bx", "cuda.blockIdx.x", NT, "cuda.gridDim.x"):
                        src(f"_n0 = _bx * {BN}")
                        self._block_tile(src, M, N, K, BM, BN, BK, TM, TN, NTX, NTY, nthreads, acc_dt, tile_dt,
                                         lhs_kfast, rhs_kfast)
        grid = (max(1, min(NT, (1 << 31) - 1)), max(1, min(MT, GRID_YZ_MAX)), max(1, min(B, GRID_YZ_MAX)))
        return Launch(k.name, k.name, "tiled", self.body.params(), (nthreads, 1, 1), grid, shared, [],
                      src.text(), 1, fast,
                      {"M": M, "N": N, "K": K, "batch": B, "BM": BM, "BN": BN, "BK": BK, "TM": TM, "TN": TN,
                       "pad": pad, "tile_dtype": tile_dt, "lhs_k_contiguous": lhs_kfast,
                       "rhs_k_contiguous": rhs_kfast}, self.body.bounds(nthreads))

    def _block_tile(self, src: Source, M, N, K, BM, BN, BK, TM, TN, NTX, NTY, nthreads, acc_dt, tile_dt,
                    lhs_kfast, rhs_kfast) -> None:
        """One BM x BN output tile: the K loop over shared tiles, then the epilogue per accumulator."""
        c, k = self.c, self.k
        zero = self.em.const(0 if not is_float(acc_dt) else 0.0, acc_dt)
        for i in range(TM):
            src(" = ".join(f"_c{i}_{j}" for j in range(TN)) + f" = {zero}")
        with self.body.strided("_k0", "0", K, BK):
            self._tile(src, "_As", c.lhs, self.m, "_m0", M, BM, BK, K, lhs_kfast, nthreads, acc_dt)
            self._tile(src, "_Bs", c.rhs, self.n, "_n0", N, BN, BK, K, rhs_kfast, nthreads, acc_dt)
            src("cuda.syncthreads()")
            src(f"for _kk in range({BK}):")
            with src.indent():
                conv = (lambda x: f"{NP[acc_dt]}({x})") if tile_dt != acc_dt else (lambda x: x)
                for i in range(TM):
                    src(f"_a{i} = {conv(f'_As[_kk, _ty + {i * NTY}]' if i else '_As[_kk, _ty]')}")
                for j in range(TN):
                    src(f"_b{j} = {conv(f'_Bs[_kk, _tx + {j * NTX}]' if j else '_Bs[_kk, _tx]')}")
                for i in range(TM):
                    for j in range(TN):
                        src(f"_c{i}_{j} += _a{i} * _b{j}")
            src("cuda.syncthreads()")
        for i in range(TM):
            for j in range(TN):
                src(f"_C[{i}, {j}] = _c{i}_{j}")
        # the epilogue: the stages after the contraction, once per accumulator of the register tile
        src(f"for _i in range({TM}):")
        with src.indent():
            src(f"_gm = _m0 + _ty + _i * {NTY}")
            src(f"if _gm < {M}:")
            with src.indent():
                self.body.unravel("_gm", self.m, "_gmr")
                src(f"for _j in range({TN}):")
                with src.indent():
                    src(f"_gn = _n0 + _tx + _j * {NTX}")
                    src(f"if _gn < {N}:")
                    with src.indent():
                        self.body.unravel("_gn", self.n, "_gnr")
                        src(f"{c.local} = _C[_i, _j]")
                        for s in k.stages[1:]:
                            self.body.stage(s)

    def _half_operands(self) -> bool:
        k0 = self.mw.program.kernels
        orig = next(k for k in k0 if k.name == self.name)
        c = orig.stages[0]
        return c.lhs.dtype == "float16" and c.rhs.dtype == "float16"

    @staticmethod
    def _fast_axis(e: Expr, k_names: set[str]) -> bool:
        """Is the operand contiguous along K (its first load's last index uses a K axis)?"""
        loads = _loads(e)
        if not loads or not loads[0].index:
            return True
        return bool(E.free_indices(loads[0].index[-1]) & k_names)

    def _tile(self, src: Source, name: str, e: Expr, free, base: str, F: int, BF: int, BK: int, K: int,
              kfast: bool, nthreads: int, acc_dt: str) -> None:
        """Load a BK x BF operand tile (zero outside the operand) into shared memory, stored K-major; consecutive
        threads take consecutive elements along the operand's contiguous axis."""
        zero = self.em.const(0 if not is_float(acc_dt) else 0.0, acc_dt)

        def divmod_(x: str, n: int, q: str, r: str) -> None:
            if n & (n - 1) == 0:
                src(f"{q} = {x} >> {n.bit_length() - 1}")
                src(f"{r} = {x} & {n - 1}")
            else:
                src(f"{q} = {x} // {n}")
                src(f"{r} = {x} - {q} * {n}")

        with self.body.strided("_e", "_tid", BF * BK, nthreads):
            if kfast:
                divmod_("_e", BK, "_ff", "_kk")
            else:
                divmod_("_e", BF, "_kk", "_ff")
            src(f"_gf = {base} + _ff")
            src("_gk = _k0 + _kk")
            src(f"_t = {zero}")
            src(f"if _gf < {F} and _gk < {K}:")
            with src.indent():
                self.body.unravel("_gf", free, f"{name}f")
                self.body.unravel("_gk", self.c.axes, f"{name}k")
                (v,) = self.body.values([_acc(e, acc_dt)])
                src(f"_t = {v}")
            src(f"{name}[_kk, _ff] = _t")

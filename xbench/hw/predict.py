"""Work counts of loop-IR kernels and a performance model per target kind.

Counts (`kernel_counts`)
------------------------
Counted from the loop IR the way the backends evaluate it: per stage iteration, each distinct scalar function
of the values (not of the indices) once — the backends share common subexpressions — and a subexpression that
does not depend on the stage's loop variables once per outer point (hoisted). Costs per function come from
`ir/scalar.py` (`ScalarFn.flops`; a transcendental counts its `flops` and is also counted by name). A reduction
combines once per element (1 flop), a contraction does 2 flops per multiply-accumulate (counted on the
"tensor" unit: the work a matrix unit can do) and evaluates its operand expressions once per operand element,
a scan combines once per element, a sort compares n·ceil(log2 n) times per row. `bytes` are compulsory
traffic: the distinct elements of global buffers each kernel reads plus those it writes (index ranges per
dimension, evaluated on the index grids; data-dependent indices from the input arrays when given).

Models (`predict_program`)
--------------------------
cpu (roofline over the memory hierarchy, calibrated by micro-benchmarks, see `CpuModel`)::

    T = overhead + max(T_core, T_mem)
    T_core = sum_f n_f * c_f / threads * imbalance          (BLAS: 2MNK / the measured BLAS rate at that size)
    T_mem  = max(L1 bytes / bw_L1, sum_l served_l / bw_l + DRAM bytes / bw_DRAM)

`served_l` are the bytes each level below L1 delivers (fills that hit there, write-backs into it) from the
cache simulation; bandwidths are the calibrated reads of data resident in that level (all cores, or one core for
a serial kernel), so a level's transfers are not also charged to the levels above it. Compute and data
movement overlap (out-of-order cores, hardware prefetch): the max, as in a roofline.

gpu (roofline with latency hiding)::

    T = launch + max(T_core, T_L1, T_L2, T_DRAM)
    T_core = flops / (fp32 CUDA-core peak) + transcendentals * cost / (SFU rate)     (x busiest SM's share)
    T_L1   = L1 sectors / bw_L1                                                      (x busiest SM's share)
    T_L2, T_DRAM = max(bytes / bandwidth, waves * bytes per block / bytes in flight per block * latency)
    bytes in flight per block = warps * bytes per warp request * independent loads per iteration
                                (a tiled GEMM: its A and B tiles of one K step)

The cuda backend's kernels use CUDA cores, not tensor cores (numba-cuda has no MMA), so contractions run at the
fp32 vector peak times a tiled-SIMT efficiency. Occupancy (resident blocks per SM) comes from the artifact's
ptxas resources, or the warp limit when there is none. The busiest SM runs `waves` rounds of co-resident
blocks; its share of the work (1/SMs when the grid fills the GPU evenly, more with few blocks or a partial last
wave) scales the compute and L1 terms; memory is at least latency-bound per block (Little's law).

npu (Ascend: the MTE2 -> Vector/Cube -> MTE3 pipeline of each AI core)::

    cycles per tile: t_in = MTE2 bytes / ddr_rate (bytes beyond the compulsory reads: re-reads from L2 at
    l2_read_rate), t_vec = vector repeats, t_cube = fractals, t_scalar = scalar GetValue/SetValue accesses x
    their cost (serial with the vector work they feed: the compute stage is max(t_vec, t_cube) + t_scalar),
    t_out = MTE3 bytes / ub_to_ddr_rate (write side limited to ddr_rate); with double buffering the stages overlap:
    T_core = max(stages) * tiles + (sum(stages) - max(stages)) (fill and drain); single buffering: the sum.
    T = launch + waves * T_core / clock, and at least the compulsory MTE bytes / HBM bandwidth.

The counters come from the CPU twin when the ascend backend ran the kernel, else from the loop IR (MTE2 = the
kernel's compulsory reads, MTE3 = its writes, one vector repeat per 256 bytes of each vector operation,
cube fractals = MNK over the MACs of one fractal of the operand type, `cube_fractal`: 16x16x16 for float16, 16x8x16
for float32), with 48 vector cores for vector kernels and 24 cube cores for contractions; a cube fractal a cycle.

Every constant not calibrated or read from a target file is a `ModelAssumption` listed in `ASSUMPTIONS` with
where it comes from.
"""
from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ..dtypes import is_float, itemsize
from ..ir.contraction import roles as contract_roles
from ..ir.contraction import shift_plan
from ..ir.expr import INDEX, Call, Expr, Idx, Load, Local
from ..ir.kernel import Assign, Contract, Kernel, Program, Reduce, Scan, ScatterAdd, Sort, Store
from ..ir.scalar import lookup
from .target import Target, TargetError, get_target
from .traces import KernelCache
from .traces.points import _extent, _stage_axes

# ---- model assumptions (numbers not calibrated here nor in a target file) -----------------------------------


@dataclass(frozen=True)
class ModelAssumption:
    value: float
    source: str


ASSUMPTIONS: dict[str, ModelAssumption] = {
    "gpu_launch_us": ModelAssumption(3.0, "typical back-to-back kernel launch overhead on H100/A100 (2-4 us); "
                                          "model assumption, uncertain"),
    "gpu_dram_latency_cycles": ModelAssumption(600.0, "global-memory latency of Ampere/Hopper GPUs, about 500-800 "
                                                      "SM cycles in microbenchmark studies; model assumption"),
    "gpu_l2_latency_cycles": ModelAssumption(250.0, "L2 hit latency of Ampere/Hopper GPUs, about 200-300 SM "
                                                    "cycles in microbenchmark studies; model assumption"),
    "gpu_sfu_per_sm_per_cycle": ModelAssumption(16.0, "CUDA C++ Programming Guide, arithmetic instruction "
                                                      "throughput: 16 results per clock per SM for 32-bit "
                                                      "reciprocal, rsqrt, log2, exp2, sin, cos (cc 8.x/9.0)"),
    "gpu_transcendental_fp32_ops": ModelAssumption(8.0, "accurate libdevice expf/logf/erff/tanhf: one SFU "
                                                        "instruction plus about 8 FP32 instructions of range "
                                                        "reduction and correction; model assumption"),
    "gpu_simt_gemm_efficiency": ModelAssumption(0.6, "a shared-memory tiled SIMT GEMM (register tiles, no tensor "
                                                     "cores) reaches roughly 50-70 % of the FP32 peak; model "
                                                     "assumption"),
    "gpu_bytes_per_warp_request": ModelAssumption(128.0, "a coalesced 32-lane access of 4-byte elements: 4 sectors"),
    "npu_launch_us": ModelAssumption(5.0, "Ascend kernel launch overhead, a few microseconds; model assumption, "
                                          "uncertain"),
    "npu_vector_repeat_cycles": ModelAssumption(1.0, "one 256-byte vector repeat issued per cycle (the target "
                                                     "file's vector_bytes_per_cycle); transcendental APIs "
                                                     "(Exp, Ln, Sqrt) assumed 4 repeats' worth"),
    "npu_transcendental_repeats": ModelAssumption(4.0, "Exp/Ln/Sqrt/Tanh vector APIs cost several repeats of "
                                                       "simple arithmetic; model assumption"),
    "npu_tile_bytes": ModelAssumption(32768.0, "the Ascend C tutorials' tile of 8-16 K elements per queue buffer "
                                               "when the backend does not report its tile length"),
    "npu_scalar_access_cycles": ModelAssumption(10.0, "one GetValue / SetValue in a generated element loop: the "
                                                      "scalar load or store plus the index arithmetic, bounds "
                                                      "test and loop branch around it, about 10 instructions on "
                                                      "the AI core's in-order scalar unit, which also issues "
                                                      "every vector and MTE instruction (Ascend C guide, "
                                                      "'Compute Units': 'a mini CPU ... weaker computing "
                                                      "capability'; the SetValue API page: 'Do not use SetValue "
                                                      "... frequently. Otherwise, the performance deteriorates'); "
                                                      "model assumption, uncertain: calibrate on hardware"),
    "npu_reread_l2": ModelAssumption(1.0, "fraction of the MTE2 bytes beyond a vector kernel's compulsory reads "
                                          "served by the L2 (192 MiB) at l2_read_rate instead of DDR: re-reads of "
                                          "lines the core fetched moments before (stencil taps copied one after "
                                          "another, rows streamed once per statistic); model assumption"),
    "cpu_scan_latency_cycles": ModelAssumption(4.0, "a running sum is a dependency chain of FP adds: 4 cycles "
                                                    "latency on Zen and recent Intel cores (Agner Fog, "
                                                    "instruction tables)"),
}


# ---- counting ----------------------------------------------------------------------------------------------

@dataclass
class KernelCounts:
    """Work and compulsory traffic of one kernel (see the module docstring for what is counted)."""

    kernel: str
    kind: str
    points: int
    flops: dict[tuple[str, str], float] = field(default_factory=dict)    # (dtype, unit) -> FLOP
    functions: dict[str, float] = field(default_factory=dict)           # scalar fn / reduce kind -> evaluations
    transcendentals: float = 0.0
    reads: dict[str, int] = field(default_factory=dict)                 # buffer -> distinct bytes read
    writes: dict[str, int] = field(default_factory=dict)                # buffer -> distinct bytes written
    accesses: float = 0.0                  # element loads and stores of global buffers (each re-read counted)
    access_bytes: float = 0.0
    scratch_accesses: float = 0.0          # loads and stores of row-local scratch
    contraction: tuple[int, int, int, int] | None = None      # (batch, M, N, K) of a contraction kernel
    short_reductions: dict[str, float] = field(default_factory=dict)   # reduce kind -> steps in loops < 64 long
    dtype: str = "float32"                 # the kernel's main compute type
    operand_dtype: str | None = None       # what a contraction multiplies (a matrix unit's rate depends on it)

    @property
    def total_flops(self) -> float:
        return float(sum(self.flops.values()))

    @property
    def bytes_read(self) -> int:
        return int(sum(self.reads.values()))

    @property
    def bytes_written(self) -> int:
        return int(sum(self.writes.values()))

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        return self.total_flops / self.bytes if self.bytes else math.inf

    def flops_on(self, unit: str) -> float:
        return float(sum(v for (_, u), v in self.flops.items() if u == unit))


SHORT_REDUCTION = 64     # a reduction loop shorter than this overlaps with its neighbours' (pooling windows)


def _is_index_only(e: Expr) -> bool:
    return not any(isinstance(n, (Load, Local)) for n in e.walk())


def _value_calls(exprs: Sequence[Expr]) -> list[Call]:
    """Distinct calls that compute values (not addresses or index masks) in `exprs`."""
    found: dict[Call, None] = {}

    def walk(e: Expr) -> None:
        if isinstance(e, Load):
            return                               # index arithmetic inside a load is address computation
        if isinstance(e, Call) and not _is_index_only(e):
            found.setdefault(e)
        for c in e.children():
            walk(c)

    for e in exprs:
        walk(e)
    return list(found)


def _call_dtype(c: Call) -> str:
    if c.dtype == "bool" and c.args:
        return c.args[0].dtype
    return c.dtype


def _add(d: dict, key, v: float) -> None:
    if v:
        d[key] = d.get(key, 0.0) + v


class _Counter:
    def __init__(self, k: Kernel):
        self.k = k
        self.c = KernelCounts(k.name, k.kind, k.points())
        self.P = k.points()

    def calls(self, exprs: Sequence[Expr], loop: set[str], iters: float, per_point: float) -> None:
        """Count the value calls of `exprs`: those using a loop variable `iters` times per point, the others
        once per point."""
        for call in _value_calls(exprs):
            names = {n.name for n in call.walk() if isinstance(n, Idx)}
            n = iters if names & loop else per_point
            fn = lookup(call.fn, len(call.args))
            dt = _call_dtype(call)
            if dt == INDEX and not is_float(dt):
                dt = "int64"
            _add(self.c.flops, (dt, "vector"), fn.flops * n * self.P)
            _add(self.c.functions, call.fn, n * self.P)
            if fn.transcendental:
                self.c.transcendentals += n * self.P

    def count(self) -> KernelCounts:
        for s in self.k.stages:
            axes = _stage_axes(s)
            loop = {a.name for a in axes}
            n = float(_extent(axes))
            if isinstance(s, Reduce):
                self.calls([s.body], loop, n, 1)
                _add(self.c.flops, (s.dtype, "vector"), n * self.P)
                _add(self.c.functions, f"reduce_{s.kind}", n * self.P)
                if n < SHORT_REDUCTION:
                    _add(self.c.short_reductions, f"reduce_{s.kind}", n * self.P)
            elif isinstance(s, Contract):
                roles = contract_roles(self.k)
                if roles is not None:
                    c, batch, m, nn = roles
                    B, M, N, K = _extent(batch), _extent(m), _extent(nn), _extent(c.axes)
                    self.c.contraction = (B, M, N, K)
                    self._operand(c.lhs, B * M * K)
                    self._operand(c.rhs, B * N * K)
                else:
                    self.calls([s.lhs, s.rhs], loop, n, 1)
                lt, rt = s.lhs.dtype, s.rhs.dtype
                self.c.operand_dtype = lt if lt == rt and is_float(lt) else s.dtype
                _add(self.c.flops, (self.c.operand_dtype, "tensor"), 2 * n * self.P)
                _add(self.c.functions, "mac", n * self.P)
                self.c.dtype = s.dtype
            elif isinstance(s, Assign):
                self.calls([s.value], loop, 1, 1)
            elif isinstance(s, Store):
                self.calls([s.value], loop, n, 1)
            elif isinstance(s, Scan):
                self.calls([s.body], loop, n, 1)
                _add(self.c.flops, (s.dtype, "vector"), n * self.P)
                _add(self.c.functions, f"scan_{s.kind}", n * self.P)
            elif isinstance(s, Sort):
                self.calls([s.body], loop, n, 1)
                cmp = n * max(1, math.ceil(math.log2(max(n, 2))))
                _add(self.c.flops, (s.body.dtype, "vector"), cmp * self.P)
                _add(self.c.functions, "sort_compare", cmp * self.P)
            elif isinstance(s, ScatterAdd):
                self.calls([s.value], loop, n, 1)
                _add(self.c.flops, (s.value.dtype, "vector"), n * self.P)
                _add(self.c.functions, "add", n * self.P)
        dts = [d for (d, _), v in sorted(self.c.flops.items(), key=lambda kv: -kv[1]) if is_float(d)]
        if self.c.contraction is None and dts:
            self.c.dtype = dts[0]
        return self.c

    def _operand(self, e: Expr, elements: float) -> None:
        for call in _value_calls([e]):
            fn = lookup(call.fn, len(call.args))
            _add(self.c.flops, (_call_dtype(call), "vector"), fn.flops * elements)
            _add(self.c.functions, call.fn, elements)
            if fn.transcendental:
                self.c.transcendentals += elements


def _loads_of(e: Expr, skip: set[str]) -> list[Load]:
    return [n for n in e.walk() if isinstance(n, Load) and n.buf not in skip]


def _access_counts(k: Kernel, c: KernelCounts, sizes: Mapping[str, int]) -> None:
    """Element loads/stores per kernel run (distinct loads per iteration, hoisting as the backends do)."""
    P = k.points()
    rows = set(k.row_buffers)
    roles = contract_roles(k)
    for s in k.stages:
        axes = _stage_axes(s)
        loop = {a.name for a in axes}
        n = float(_extent(axes))
        exprs = list(s.exprs())
        if isinstance(s, Contract) and roles is not None:
            _, batch, m, nn = roles
            B, M, N, K = _extent(batch), _extent(m), _extent(nn), _extent(s.axes)
            for part, count in ((s.lhs, B * M * K), (s.rhs, B * N * K)):
                for ld in dict.fromkeys(_loads_of(part, rows)):
                    c.accesses += count
                    c.access_bytes += count * sizes.get(ld.buf, 4)
            continue
        for ld in dict.fromkeys(n_ for e in exprs for n_ in e.walk() if isinstance(n_, Load)):
            names = {x.name for x in ld.walk() if isinstance(x, Idx)}
            times = (n if names & loop else 1) * P
            if ld.buf in rows:
                c.scratch_accesses += times
            else:
                c.accesses += times
                c.access_bytes += times * sizes.get(ld.buf, 4)
        bufs = [b for b in (getattr(s, "buf", None), getattr(s, "values_buf", None), getattr(s, "indices_buf", None))
                if b]
        for b in bufs:
            times = n * P * (2 if isinstance(s, ScatterAdd) else 1)
            if b in rows:
                c.scratch_accesses += times
            else:
                c.accesses += times
                c.access_bytes += times * sizes.get(b, 4)


_FOOTPRINT_GRID = 1 << 22


def _dim_sets(load: Load, k: Kernel, extents: Mapping[str, int], data: Mapping[str, np.ndarray],
              shape: tuple[int, ...]) -> list[tuple[tuple[int, ...], np.ndarray | None]] | None:
    """Per group of dimensions that share loop variables: (dims, distinct linearised index tuples), or None for
    a group too large to enumerate (then the whole extent of those dims)."""
    from .traces.points import _Grid, _Unknown
    free = [{n.name for n in i.walk() if isinstance(n, Idx)} for i in load.index]
    groups: list[tuple[set[int], set[str]]] = []
    for d, f in enumerate(free):
        merged = ({d}, set(f))
        rest = []
        for g in groups:
            if g[1] & merged[1]:
                merged = (g[0] | merged[0], g[1] | merged[1])
            else:
                rest.append(g)
        groups = rest + [merged]
    out = []
    for dims, names in groups:
        dims_t = tuple(sorted(dims))
        size = int(np.prod([extents.get(n, 1) for n in names], dtype=np.int64)) if names else 1
        if size > _FOOTPRINT_GRID:
            out.append((dims_t, None))
            continue
        if size == 0 or any(shape[d] == 0 for d in dims_t):     # an empty loop nest touches nothing
            out.append((dims_t, np.zeros(0, np.int64)))
            continue
        names_l = sorted(names)
        grids = np.meshgrid(*[np.arange(extents.get(n, 1), dtype=np.int64) for n in names_l], indexing="ij") \
            if names_l else []
        env = {n: g.reshape(-1) for n, g in zip(names_l, grids)}
        g = _Grid(env, data, None, {})   # type: ignore[arg-type]
        try:
            lin: Any = np.zeros(1, np.int64)
            for d in dims_t:
                v = np.asarray(g.value(load.index[d])).astype(np.int64)
                v = np.clip(np.broadcast_to(v, (max(size, 1),)), 0, shape[d] - 1)
                lin = lin * shape[d] + v
            out.append((dims_t, np.unique(lin)))
        except _Unknown:
            out.append((dims_t, None))
    return out


def _footprint(loads: Sequence[Load], k: Kernel, shape: tuple[int, ...], data: Mapping[str, np.ndarray]) -> int:
    """Distinct elements of a buffer that `loads` (or stores, as Load-shaped index tuples) touch."""
    total = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if not shape:
        return 1
    extents = {a.name: a.extent for a in k.outer}
    for s in k.stages:
        for a in _stage_axes(s):
            extents[a.name] = a.extent
    per_load = [_dim_sets(ld, k, extents, data, shape) for ld in loads]
    structure = {tuple(d for d, _ in p) for p in per_load}
    if len(structure) == 1:
        union: dict[tuple[int, ...], np.ndarray | None] = {}
        for p in per_load:
            for dims, vals in p:
                if vals is None or union.get(dims, 0) is None:
                    union[dims] = None
                else:
                    prev = union.get(dims)
                    union[dims] = vals if prev is None and dims not in union else np.union1d(prev, vals)
        count = 1
        for dims, vals in union.items():
            count *= int(np.prod([shape[d] for d in dims], dtype=np.int64)) if vals is None else len(vals)
        return min(count, total)
    count = 0
    for p in per_load:
        n = 1
        for dims, vals in p:
            n *= int(np.prod([shape[d] for d in dims], dtype=np.int64)) if vals is None else len(vals)
        count += n
    return min(count, total)


def kernel_counts(program: Program, kernel: Kernel, data: Mapping[str, np.ndarray] | None = None) -> KernelCounts:
    """Flops, function evaluations, accesses and compulsory bytes of one kernel (module docstring)."""
    data = data or {}
    c = _Counter(kernel).count()
    sizes = {n: itemsize(b.dtype) for n, b in program.buffers.items()}
    _access_counts(kernel, c, sizes)
    rows = set(kernel.row_buffers)
    loads: dict[str, list[Load]] = {}
    for e in kernel.exprs():
        for n in e.walk():
            if isinstance(n, Load) and n.buf not in rows and n.buf in program.buffers:
                loads.setdefault(n.buf, [])
                if n not in loads[n.buf]:
                    loads[n.buf].append(n)
    for buf, lds in loads.items():
        b = program.buffers[buf]
        c.reads[buf] = _footprint(lds, kernel, tuple(b.shape), data) * itemsize(b.dtype)
    for s in kernel.stages:
        for buf in (getattr(s, "buf", None), getattr(s, "values_buf", None), getattr(s, "indices_buf", None)):
            if not buf or buf in rows or buf not in program.buffers:
                continue
            b = program.buffers[buf]
            index = s.index if not isinstance(s, Sort) else s.index
            fp = _footprint([Load(buf, tuple(index), b.dtype)], kernel, tuple(b.shape), data)
            c.writes[buf] = max(c.writes.get(buf, 0), fp * itemsize(b.dtype))
            if isinstance(s, ScatterAdd):
                c.reads[buf] = max(c.reads.get(buf, 0), fp * itemsize(b.dtype))
    return c


def program_counts(program: Program, data: Mapping[str, np.ndarray] | None = None) -> list[KernelCounts]:
    return [kernel_counts(program, k, data) for k in program.kernels]


def program_data(program: Program, arrays: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """The contents the traces may need: inputs (in `program.inputs` order) and constants."""
    out = {n: np.asarray(a) for n, a in zip(program.inputs, arrays)}
    for n, b in program.buffers.items():
        if b.role == "const" and b.value is not None:
            out[n] = np.asarray(b.value)
    return out




# ---- the cpu model's constants, from micro-benchmarks --------------------------------------------------------

MODEL_VERSION = 12


_UNARY_CHAIN = {"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "tanh", "erf", "erfc", "sigmoid", "sin",
                "cos", "tan", "atan", "sinh", "cosh", "asinh", "sqrt", "rsqrt", "reciprocal", "abs", "neg", "floor",
                "ceil", "round", "trunc", "sign"}
_BINARY_CHAIN = {"add", "sub", "mul", "div", "maximum", "minimum", "pow", "atan2", "hypot"}
CHAIN = 8               # terms added to the calibration kernel of a function


def _apply(name: str, y):
    """One application of scalar function `name` to y in (0.3, 1.3) (a binary one with y + 0.5 as its second
    operand; log-like ones on y + 1)."""
    import xbench as xb
    if name in _BINARY_CHAIN:
        f = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "div": lambda a, b: a / b, "maximum": xb.maximum, "minimum": xb.minimum,
             "pow": lambda a, b: a ** b}.get(name) or getattr(xb, name)
        return f(y, y + 0.5)
    if name == "neg":
        return -y
    if name in ("log", "log2", "log10"):
        return getattr(xb, name)(y + 1.0)
    return getattr(xb, name)(y)


@functools.cache
def _chain_op(name: str | None, depth: int):
    """y = sum over i < depth of f(x * a_i + b_i) (no f: of x * a_i + b_i): independent applications, as a fused
    kernel evaluates several functions of its operands (they vectorise and overlap); one load and one store per
    element."""
    import xbench as xb

    def body(x):
        y = x * 0.0
        for i in range(depth):
            arg = x * (0.5 + 0.05 * i) + 0.01 * i
            y = y + (_apply(name, arg) if name else arg)
        return y
    return xb.tensor_op(body, name=f"calib_terms_{name or 'affine'}_{depth}")


# cheap vector operations priced as one class ("simple"), and the operators measured for it# cheap vector operations priced as one class ("simple"), and the operators measured for it
SIMPLE = frozenset({"add", "sub", "mul", "neg", "abs", "maximum", "minimum", "fmax", "fmin", "sign", "copysign",
                    "floor", "ceil", "trunc", "round", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
                    "logical_or", "logical_not", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor",
                    "bitwise_not", "shl", "shr", "isnan", "isinf", "isfinite", "signbit"})


@dataclass
class CpuModel:
    """Constants of the cpu model, each measured by a micro-benchmark (never by the operators predicted).

    threads: numba's thread count when measured (what a parallel loop of the cpu backend runs on);
    call_us / parallel_us: a serial / parallel (prange) numba kernel call that does nothing;
    task_us: launching a kernel that is one parallel loop (`backends.cpu.tasks`) with nothing to do;
    run_us: the host side of `Artifact.run` (argument checks, output allocation) beyond one kernel call;
    c_op_ns: one vector operation per element per core (2 / single-core FMA peak), the floor of every cost;
    c_access_ns: one 4-byte load from L1 on one core (4 B / its measured L1 bandwidth); loads and stores are
      priced by the memory terms, which the in-core term overlaps, so this only corrects reduction costs;
    fn_ns: one evaluation of a scalar function per element per core, from `y = sum_i f(x * a_i + b_i)` with 1
      and 9 independent terms on 2048 elements in L1 through the cpu backend (their difference: fixed costs and
      loads cancel; independent terms vectorise and overlap as in a fused kernel, where a dependent chain would
      not); "simple": the cheap operations (`SIMPLE`: add, compare, min/max, ...), a third of a term without a
      function (a multiply and two adds); "reduce_<kind>": one step of a row reduction (the slope
      between 4 and 12 rows of 1024, minus a load); "scan": one step of a running sum (a numba prefix-sum
      loop, minus its load and store);
    blas_flops: FLOP/s of np.dot called from numba (the BLAS and path the backend uses) on square GEMMs of
      `BLAS_SIZES` ("float32@256", ...; "float32" is the largest), interpolated by FLOP count (`blas_rate`);
    bw_1core: bytes/s of one thread reading data resident in each cache level, and of the triad from memory.
    """

    host: str
    cores: int
    threads: int
    call_us: float
    parallel_us: float
    task_us: float
    run_us: float
    c_op_ns: float
    c_access_ns: float
    fn_ns: dict[str, float]
    blas_flops: dict[str, float]
    bw_1core: dict[str, float]
    measured: str
    version: int = MODEL_VERSION

    def fn(self, name: str) -> float:
        if name in SIMPLE:
            return self.fn_ns.get("simple", self.c_op_ns)
        return self.fn_ns.get(name, self.fn_ns.get("simple", self.c_op_ns))


def _median_time(fn, *, warmup: int = 2, reps: int = 5, min_s: float = 0.01) -> float:
    """Median seconds of one call of fn (batches of calls at least `min_s` long)."""
    from ..profile.timing import bench
    t = bench(fn, warmup=warmup, samples=reps, min_sample_s=min_s, max_total_s=2.0)
    return t.median_ms / 1e3


def _measure_overheads() -> tuple[float, float, float, float]:
    import numba

    import xbench as xb

    from ..backends.cpu import tasks

    @numba.njit(cache=True, nogil=True)
    def _serial(a, b, c):
        c[0] = a[0]

    @numba.njit(parallel=True, cache=True, nogil=True)
    def _parallel(a, b, c):
        for i in numba.prange(c.shape[0]):
            c[i] = a[i]

    @numba.cfunc(tasks.SIGNATURE, cache=True)
    def _task(args, dims, steps, data):
        a, c = tasks.array_of(args[1], (4,), np.float32), tasks.array_of(args[2], (4,), np.float32)
        lo, hi = tasks.chunk_bounds(args[0], dims[0])
        for i in range(lo, hi):
            c[i] = a[i]

    x = np.zeros(4, np.float32)
    _serial(x, x, x.copy())
    _parallel(x, x, x.copy())
    y = x.copy()
    call = _median_time(lambda: _serial(x, x, y))
    par = _median_time(lambda: _parallel(x, x, y))
    task = _median_time(lambda: tasks.parallel_for(_task, 0, 4, x, y))
    op = xb.tensor_op(lambda v: v + 1.0, name="calib_overhead")
    one = np.zeros(1, np.float32)
    art = op.compile("cpu", one, schedule={"k0_elementwise": {"parallel": False}})
    art.run(one)
    run = _median_time(lambda: art.run(one))
    return call * 1e6, par * 1e6, task * 1e6, max(0.0, (run - call) * 1e6)


def _op_time(op, *args) -> float:
    """Median seconds of one run of `op` on the cpu backend, serial."""
    prog = op.lower(*args)
    art = op.compile("cpu", *args, schedule={k.name: {"parallel": False} for k in prog.kernels})
    arrays = op.arrays(*args)
    art.run(*arrays)
    return _median_time(lambda: art.run(*arrays))


def _chain_cost(name: str | None, n: int = 2048) -> float:
    """ns per term per element of `_chain_op(name)` (None: a term without a function, a multiply and two adds):
    the difference between 1 and 1 + CHAIN terms on n elements resident in L1, divided by CHAIN * n."""
    x = np.random.default_rng(0).uniform(0.3, 1.2, n).astype(np.float32)
    short, long_ = _chain_op(name, 1), _chain_op(name, 1 + CHAIN)
    return max(0.0, (_op_time(long_, x) - _op_time(short, x)) * 1e9 / (CHAIN * n))


@functools.cache
def _reduce_op(kind: str):
    import xbench as xb
    return xb.tensor_op(lambda x: getattr(x, kind)(axis=-1), name=f"calib_reduce_{kind}")


def _reduce_cost(kind: str) -> float:
    """ns per element of a row reduction (rows of 1024): the slope between 4 and 12 rows (fixed costs cancel)."""
    op = _reduce_op(kind)
    rng = np.random.default_rng(0)
    t = [_op_time(op, rng.uniform(0.5, 1.5, (r, 1024)).astype(np.float32)) for r in (4, 12)]
    return max(0.0, (t[1] - t[0]) * 1e9 / (8 * 1024))


BLAS_SIZES = (64, 128, 256, 512)      # square GEMMs the BLAS rate is measured on


def blas_rate(model: CpuModel, dtype: str, flops: float) -> float:
    """FLOP/s of one BLAS call doing `flops`: the measured rates of square GEMMs interpolated (log-log) by
    their FLOP count, flat beyond the measured range."""
    pts = sorted((2.0 * n ** 3, model.blas_flops[f"{dtype}@{n}"]) for n in BLAS_SIZES
                 if f"{dtype}@{n}" in model.blas_flops)
    if not pts:
        return model.blas_flops.get(dtype, model.blas_flops.get("float32", 1e9))
    xs = np.log([p[0] for p in pts])
    ys = np.log([p[1] for p in pts])
    return float(np.exp(np.interp(math.log(max(flops, 1.0)), xs, ys)))


def _prefix_slope() -> float:
    """Marginal ns per element of a serial running sum in numba (4 Ki to 32 Ki float32 elements)."""
    import numba

    @numba.njit(cache=True, nogil=True)
    def prefix(x, y):
        s = np.float32(0.0)
        for i in range(x.shape[0]):
            s += x[i]
            y[i] = s

    times = []
    for n in (4096, 32768):
        x = np.ones(n, np.float32)
        y = np.empty_like(x)
        prefix(x, y)
        times.append(_median_time(lambda x=x, y=y: prefix(x, y)))
    return max(0.0, (times[1] - times[0]) * 1e9 / (32768 - 4096))


def _model_path():
    from ..config import cache_dir
    return cache_dir("hw") / "cpu-model.json"


def _host_key(target: Target) -> str:
    import numba
    return f"{target.full_name} | {target.origin} | {numba.get_num_threads()} threads | model {MODEL_VERSION}"


def calibrate_cpu_model(target: Target | str = "cpu-local", functions: Sequence[str] = (), *, force: bool = False,
                        verbose: bool = False, quick: bool = False) -> CpuModel:
    """The cpu model's constants for `target` (the local CPU), measured once and cached with the calibration they
    belong to; functions not measured yet are measured and added (a few tenths of a second each). Each constant
    is the median of three measurements (`quick=True`: one, and BLAS on two sizes)."""
    reps = 1 if quick else 3
    from ..cache import atomic_write
    t = get_target(target) if isinstance(target, str) else target
    if t.kind != "cpu":
        raise TargetError(f"the cpu model calibrates the local CPU; {t.name} is a {t.kind}")
    path = _model_path()
    key = _host_key(t)
    model: CpuModel | None = None
    if not force:
        try:
            d = json.loads(path.read_text())
            if d.get("host") == key and d.get("version") == MODEL_VERSION:
                model = CpuModel(**d)
        except (OSError, ValueError, TypeError):
            model = None
    changed = False
    if model is None:
        from .calibrate import blas_gemm, measure_read, measure_triad
        if verbose:
            print("xbench: calibrating the cpu model (overheads, in-core costs, BLAS, 1-thread bandwidth)")
        call, par, task, run = _measure_overheads()
        peak1 = (t.cpu.single_core_peak.get("float32") if t.cpu else None) or t.peak_flops("float32") / t.compute_units
        c_op = 2.0 / peak1 * 1e9
        c_access = 0.0                      # set from the one-core L1 bandwidth below
        blas = {}
        gemm = blas_gemm
        for dt in (np.float32, np.float64):
            for n in (BLAS_SIZES[::2] if quick else BLAS_SIZES):
                a = np.random.default_rng(1).standard_normal((n, n)).astype(dt)
                c_ = np.empty_like(a)
                gemm(a, a, c_)
                rate = float(np.median([2 * n ** 3 / _median_time(lambda a=a, c_=c_: gemm(a, a, c_))
                                        for _ in range(reps)]))
                blas[f"{np.dtype(dt).name}@{n}"] = rate
            blas[np.dtype(dt).name] = blas[f"{np.dtype(dt).name}@{n}"]
        bw1 = {}
        for lv in t.caches:
            share = lv.size_bytes if lv.scope != "shared" else lv.size_bytes // max(1, t.compute_units)
            bw1[lv.name] = measure_read(share // 2, 1, 3, 0.02)[0]
        llc = max(lv.size_bytes for lv in t.caches) if t.caches else 1 << 25
        bw1[t.memory.name] = measure_triad(1, 2 * llc // 8, 5)[2]      # best of runs, as the all-core triad
        first = t.caches[0].name if t.caches else None
        c_access = 4e9 / bw1[first] if first else 0.0
        import datetime as _dt

        import numba
        model = CpuModel(key, t.compute_units, numba.get_num_threads(), call, par, task, run, c_op, c_access, {},
                         blas,
                         bw1, _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
        changed = True
    if "scan" not in model.fn_ns and any(f.startswith("scan_") for f in functions):
        # a running sum: one dependent add per element (the cpu backend's scan loop)
        model.fn_ns["scan"] = max(model.c_op_ns, float(np.median([_prefix_slope() for _ in range(reps)]))
                                  - 2 * model.c_access_ns)
        changed = True
    if "simple" not in model.fn_ns:
        # one cost for the cheap vector operations: a third of a term without a function (a mul, two adds)
        model.fn_ns["simple"] = max(model.c_op_ns, float(np.median([_chain_cost(None) for _ in range(reps)])) / 3)
        changed = True
    for name in functions:
        if name in model.fn_ns or name in SIMPLE or name in ("mac",) or name.startswith(("scan_", "sort_")):
            continue
        try:
            if name.startswith("reduce_"):
                kind = name[len("reduce_"):]
                if kind not in ("sum", "max", "min", "prod"):
                    continue
                per = float(np.median([_reduce_cost(kind) for _ in range(reps)])) - model.c_access_ns
            elif name in _UNARY_CHAIN or name in _BINARY_CHAIN:
                extra = 4 if name in _BINARY_CHAIN else 3           # the term's mul and adds (and y + 0.5)
                per = float(np.median([_chain_cost(name) for _ in range(reps)])) - extra * model.fn_ns["simple"]
            else:
                continue
        except Exception:  # a function the cpu backend cannot compile alone: priced as a simple operation
            continue
        model.fn_ns[name] = max(model.fn_ns["simple"], per)     # a function costs at least a cheap operation
        changed = True
    if changed:
        atomic_write(path, json.dumps(asdict(model), indent=1))
    return model


# ---- predictions -------------------------------------------------------------------------------------------

@dataclass
class KernelPrediction:
    kernel: str
    target: str
    time_s: float
    terms: dict[str, float]              # seconds of each model term
    bound: str                           # the dominant term
    notes: list[str] = field(default_factory=list)

    @property
    def time_ms(self) -> float:
        return self.time_s * 1e3


@dataclass
class ProgramPrediction:
    target: str
    kernels: list[KernelPrediction]
    overhead_s: float                    # per-operator host time (cpu: Artifact.run)
    model: str

    @property
    def time_s(self) -> float:
        return self.overhead_s + sum(k.time_s for k in self.kernels)

    @property
    def time_ms(self) -> float:
        return self.time_s * 1e3


def _dominant(terms: Mapping[str, float], keys: Sequence[str]) -> str:
    return max(keys, key=lambda k: terms.get(k, 0.0))


def predict_cpu_kernel(c: KernelCounts, target: Target, model: CpuModel, cache: KernelCache | None = None, *,
                       schedule: Mapping[str, Any] | None = None, regions: int | None = None,
                       as_tasks: bool = True) -> KernelPrediction:
    """`regions`: the parallel regions the kernel runs (default: one when its schedule is parallel; the BLAS
    path of a contraction: see `traces.blas_regions`), launched as tasks (`backends.cpu.tasks`) or, with
    `as_tasks` false, as numba's parallel loops."""
    sched = dict(schedule or {})
    parallel = bool(sched.get("parallel", c.points > 1))
    threads = max(1, min(model.threads, c.points)) if parallel else 1
    notes: list[str] = []
    P = max(c.points, 1)
    imbalance = math.ceil(P / threads) / (P / threads)
    blas = c.contraction is not None and sched.get("impl", "blas") == "blas" and c.dtype in ("float32", "float64")
    if regions is None or as_tasks:
        overhead = ((regions or 1) * model.task_us if parallel else model.call_us) * 1e-6
    else:
        overhead = (model.call_us + regions * max(0.0, model.parallel_us - model.call_us)) * 1e-6
    clock_flops = (target.cpu.single_core_peak.get("float32") if target.cpu else 0) or \
        target.peak_flops("float32") / model.cores
    ns = 0.0
    for fn, n in c.functions.items():
        if fn == "mac":
            continue
        if fn.startswith("scan_"):
            ns += n * (model.fn_ns["scan"] if "scan" in model.fn_ns else
                       ASSUMPTIONS["cpu_scan_latency_cycles"].value * (32.0 / clock_flops) * 1e9)
        elif fn.startswith("sort_"):
            ns += n * 4 * (32.0 / clock_flops) * 1e9
        else:
            short = c.short_reductions.get(fn, 0.0)
            # a long reduction is a dependency chain (its calibrated cost); short ones overlap like plain ops
            ns += (n - short) * model.fn(fn) + short * model.fn("simple")
    if blas:
        B, M, N, K = c.contraction
        rate = blas_rate(model, c.dtype, 2.0 * M * N * K)          # one BLAS call per batch point
        gemm = 2.0 * B * M * N * K / rate
        core = gemm + ns * 1e-9 / max(1, model.threads)
        notes.append(f"BLAS at {rate / 1e9:.1f} GFLOP/s (np.dot from numba, interpolated by size)")
    else:
        if "mac" in c.functions:
            ns += c.functions["mac"] * model.c_op_ns
        core = ns * 1e-9 / threads * imbalance
    terms = {"overhead": overhead, "core": core}
    mem = 0.0
    if cache is not None:
        l1 = target.level(cache.levels[0].name) if cache.levels else None
        bw = _cpu_bw(target, model, model.threads if blas else threads)
        terms["l1"] = cache.access_bytes / bw.get(l1.name if l1 else "l1", math.inf)
        lower = 0.0
        for lv in cache.levels[1:]:
            served = (lv.load_hits + lv.store_hits + lv.store_misses) * lv.line_bytes
            t_l = served / bw.get(lv.name, math.inf)
            terms[lv.name] = t_l
            lower += t_l
        t_dram = cache.dram_bytes / bw[target.memory.name]
        terms["dram"] = t_dram
        mem = max(terms["l1"], lower + t_dram)
    else:
        bw = _cpu_bw(target, model, threads)
        mem = c.bytes / bw[target.memory.name]
        terms["dram"] = mem
        notes.append("no cache simulation: compulsory bytes at memory bandwidth")
    t = overhead + max(core, mem)
    bound = "core" if core >= mem else _dominant(terms, [k for k in terms if k not in ("overhead", "core")])
    if overhead > max(core, mem):
        bound = "overhead"
    return KernelPrediction(c.kernel, target.name, t, terms, bound, notes)


def _cpu_bw(target: Target, model: CpuModel, threads: int) -> dict[str, float]:
    """Bandwidth of each level for `threads` threads: the calibrated all-core figures, or one core's; a level is
    never taken faster than the one above it (measurements on a shared machine can say otherwise)."""
    out = {}
    above = math.inf
    for lv in target.memory_levels:
        if lv.bandwidth is None:
            continue
        if threads >= model.cores and model.threads >= model.cores:
            bw = lv.bandwidth
        else:
            bw = model.bw_1core.get(lv.name, lv.bandwidth / model.cores)
        out[lv.name] = above = min(bw, above)
    return out


def predict_gpu_kernel(c: KernelCounts, target: Target, cache: KernelCache | None = None, *,
                       resources: Mapping[str, Any] | None = None) -> KernelPrediction:
    res = dict(resources or {})
    notes: list[str] = []
    sms = target.compute_units
    clock = target.clock_hz
    A = ASSUMPTIONS
    core = 0.0
    for (dt, unit), f in c.flops.items():
        try:
            peak = target.peak_flops(dt if is_float(dt) and dt not in ("float16", "bfloat16") else "float32",
                                     "vector")
        except TargetError:
            peak = target.peak_flops("float32", "vector")
        if unit == "tensor":
            core += f / (peak * A["gpu_simt_gemm_efficiency"].value)
        else:
            core += f / (peak / 2)            # one instruction per operation (FMA peak counts 2)
    if any(unit == "tensor" for _, unit in c.flops):
        notes.append(f"contraction on CUDA cores: the vector peak x {A['gpu_simt_gemm_efficiency'].value:g} tiled-SIMT "
                     "efficiency, not the tensor cores (xbench's cuda backend emits no MMA instructions)")
    peak32 = target.peak_flops("float32", "vector")
    core += c.transcendentals * (1.0 / (A["gpu_sfu_per_sm_per_cycle"].value * sms * clock)
                                 + A["gpu_transcendental_fp32_ops"].value / (peak32 / 2))
    terms: dict[str, float] = {"launch": A["gpu_launch_us"].value * 1e-6, "core": core}
    if cache is not None:
        for lv in cache.levels:
            try:
                bw = target.bandwidth(lv.name)
            except TargetError:
                continue
            terms[lv.name] = lv.accesses * lv.line_bytes / bw
        terms["dram"] = cache.dram_bytes / target.bandwidth("memory")
    else:
        terms["dram"] = c.bytes / target.bandwidth("memory")
        notes.append("no cache simulation: compulsory bytes at HBM bandwidth")
    # the busiest SM: `waves` rounds of `coresident` blocks; each block's memory time is at least its bytes over
    # what its warps keep in flight, times the latency (Little's law), when the bandwidth does not bind first
    threads = int(res.get("threads_per_block", 256))
    grid = res.get("grid", [max(1, math.ceil(max(c.points, 1) / threads)), 1, 1])
    blocks = max(1, int(np.prod(grid)))
    wpb = max(1, math.ceil(threads / 32))
    max_warps = target.gpu.max_warps_per_sm if target.gpu else 64
    bps = int(res.get("blocks_per_sm") or max(1, min(32, max_warps // wpb)))
    coresident = min(bps, math.ceil(blocks / sms))
    waves = math.ceil(blocks / (sms * bps))
    if res.get("template") == "tiled" or (c.contraction is not None and "BM" in res):
        # a tiled GEMM requests a whole A and B tile per K step before it synchronises
        inflight = (int(res.get("BM", 64)) + int(res.get("BN", 64))) * int(res.get("BK", 16)) * itemsize(c.dtype)
    else:
        loads_per_iter = max(1.0, min(4.0, c.accesses / max(c.points, 1) / max(1.0, _iters(c))))
        inflight = wpb * A["gpu_bytes_per_warp_request"].value * loads_per_iter        # per block
    per_sm = waves * coresident / blocks * sms            # busiest SM's share of the work, relative to 1/SMs
    core *= per_sm
    terms["core"] = core
    if "l1" in terms:
        terms["l1"] *= per_sm
    hiding = 1.0
    for name, key in (("l2", "gpu_l2_latency_cycles"), ("dram", "gpu_dram_latency_cycles")):
        if name not in terms:
            continue
        peak_bw = target.bandwidth("memory") if name == "dram" else target.bandwidth(name)
        moved = terms[name] * peak_bw
        latency_bound = waves * (moved / blocks) / inflight * A[key].value / clock
        if name == "dram" and latency_bound > 0:
            hiding = min(1.0, terms[name] / latency_bound)
        terms[name] = max(terms[name], latency_bound)
    mem = max(v for k, v in terms.items() if k not in ("launch", "core"))
    terms["hiding"] = hiding
    terms["waves"] = float(waves)
    body = max(core, mem)
    t = terms["launch"] + body
    if "theoretical_occupancy" in res:
        notes.append(f"occupancy {res['theoretical_occupancy']:.0%} ({res.get('occupancy_limiter', '?')})")
    kinds = [k for k in terms if k not in ("launch", "core", "hiding", "waves")]
    bound = "launch" if terms["launch"] > body else ("core" if core >= mem else _dominant(terms, kinds))
    if bound == "dram" and hiding < 1:
        notes.append(f"memory latency-bound: {hiding:.0%} of the bandwidth ({blocks} blocks, {coresident} per SM)")
    return KernelPrediction(c.kernel, target.name, t, terms, bound, notes)


def _iters(c: KernelCounts) -> float:
    """Stage iterations per point (elementwise: 1)."""
    if c.contraction is not None:
        return float(c.contraction[3])
    n = sum(v for k, v in c.functions.items() if k.startswith("reduce_"))
    return max(1.0, n / max(c.points, 1)) if n else 1.0


_COUNTER_KEYS = ("mte2_bytes", "mte3_bytes", "vec_instr", "cube_macs", "cube_fractals", "fixpipe_bytes", "mte2_instr",
                 "scalar_gm_reads", "scalar_gm_writes", "scalar_ub_reads", "scalar_ub_writes")
_SCALAR_KEYS = ("scalar_gm_reads", "scalar_gm_writes", "scalar_ub_reads", "scalar_ub_writes")
_TRANSCENDENTAL_APIS = ("Exp", "Ln", "Log", "Sqrt", "Rsqrt", "Tanh", "Erf", "Sigmoid", "Sin", "Cos", "Power",
                        "Reciprocal")


def cube_fractal(target: Target, dtype: str) -> tuple[int, int, int] | None:
    """(m, k, n): the MACs one cube core does per cycle on `dtype` operands, as a fractal: m and n the target's cube
    shape, k from its listed tensor peak for the dtype (peak = cube cores x m k n x 2 x clock; on the 910B k is
    32 bytes of operand: 16 for float16, 8 for float32, 32 for int8). None when the target lists no cube rate."""
    npu = target.npu
    if npu is None:
        return None
    try:
        peak = target.peak_flops(dtype, "tensor")
    except TargetError:
        return None
    k = round(peak / (2 * npu.cube_cores * target.clock_hz * npu.cube_m * npu.cube_n))
    return (npu.cube_m, max(1, k), npu.cube_n)


def _cube_note(dtype: str, shape: tuple[int, int, int] | None) -> str:
    if shape is None:
        return f"contraction on the vector unit: the target lists no cube rate for {dtype} operands"
    m, k, n = shape
    return (f"contraction on the cube: {dtype} operands, one {m}x{k}x{n} fractal ({m * k * n} MACs) per cycle per "
            f"core (peak.{dtype}.tensor)")


def ascend_counters(c: KernelCounts, target: Target, resources: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The launches of one kernel as the Ascend model reads them: per launch its block dim, buffer count and
    per-core counters (mte2_bytes, mte3_bytes, vec_instr, cube_fractals, cube_macs, fixpipe_bytes, mte2_instr, and
    the scalar unit's GM / UB accesses).

    `resources` is the kernel's entry of the ascend artifact (`{"launches": [...]}` with block_dim, buffer_num,
    tile_length) plus, after a run, the twin's counters of its launches under "counters" (a list of the
    artifact's `counters["launches"]` entries for this kernel: totals, per_core, ops). Without counters they are
    derived from the loop IR (module docstring) and spread evenly over the cores; a launch of the scalar form then
    reads and writes every element it touches on the scalar unit."""
    res = dict(resources or {})
    lres = list(res.get("launches") or [])
    npu = target.npu
    operands = str(next((lr["in_dtype"] for lr in lres if lr.get("in_dtype")), None) or c.operand_dtype or c.dtype)
    shape = cube_fractal(target, operands) if c.contraction is not None else None
    cube = shape is not None
    cores = (npu.cube_cores if cube else npu.vector_cores) if npu else target.compute_units
    counted = [cl for cl in (res.get("counters") or []) if isinstance(cl, Mapping) and "per_core" in cl]
    launches = []
    if counted:
        for i, cl in enumerate(counted):
            lr = lres[i] if i < len(lres) else {}
            ops = dict(cl.get("ops") or {})
            total_vec = float(sum(ops.values())) or float(cl["totals"].get("vec_instr", 0)) or 1.0
            heavy = sum(v for k, v in ops.items() if any(k.startswith(t) for t in _TRANSCENDENTAL_APIS))
            weight = 1.0 + (ASSUMPTIONS["npu_transcendental_repeats"].value - 1.0) * heavy / total_vec
            per_core = [{k: float(pc.get(k, 0)) for k in _COUNTER_KEYS} for pc in cl["per_core"]]
            for pc in per_core:
                pc["vec_cycles"] = pc["vec_instr"] * weight
            launches.append({"block_dim": int(cl.get("block_dim", len(per_core))),
                             "buffer_num": int(lr.get("buffer_num", 2)), "per_core": per_core,
                             "totals": {k: float(cl["totals"].get(k, 0)) for k in _COUNTER_KEYS}})
        source = "twin"
    else:
        vec = 0.0
        for fn, n in c.functions.items():
            if fn == "mac":
                continue
            try:
                heavy = lookup(fn, 1).transcendental
            except KeyError:
                heavy = False
            factor = ASSUMPTIONS["npu_transcendental_repeats"].value if heavy else 1.0
            vec += n * itemsize(c.dtype if is_float(c.dtype) else "float32") / 256.0 * factor
        fr = macs = 0.0
        if c.contraction is not None:
            B, M, N, K = c.contraction
            macs = B * M * N * K
            if cube:
                fm, fk, fn = shape
                fr = B * math.ceil(M / fm) * math.ceil(N / fn) * math.ceil(K / fk)
            else:     # multiply-adds on the vector unit, one repeat per 256 bytes of operands
                vec += macs * itemsize(operands if is_float(operands) else "float32") / 256.0
        lr = lres[0] if lres else {}
        blocks = int(lr.get("block_dim") or min(cores, max(1, c.points)))
        tile = float(lr.get("tile_length", 0) or 0) * itemsize(c.dtype) or ASSUMPTIONS["npu_tile_bytes"].value
        totals = {"mte2_bytes": float(c.bytes_read), "mte3_bytes": float(c.bytes_written), "vec_instr": vec,
                  "cube_macs": macs, "cube_fractals": fr, "fixpipe_bytes": 0.0,
                  "mte2_instr": max(1.0, c.bytes_read / tile), **{k: 0.0 for k in _SCALAR_KEYS}}
        if lr.get("form") == "scalar":     # every element through GetValue / SetValue, no DataCopy
            size = float(itemsize(c.dtype))
            totals.update({"mte2_bytes": 0.0, "mte3_bytes": 0.0, "mte2_instr": 0.0, "vec_instr": 0.0,
                           "scalar_gm_reads": c.bytes_read / size, "scalar_gm_writes": c.bytes_written / size})
        one = {k: v / blocks for k, v in totals.items()}
        one["vec_cycles"] = one["vec_instr"]
        launches.append({"block_dim": blocks, "buffer_num": int(lr.get("buffer_num", 2)),
                         "per_core": [dict(one) for _ in range(blocks)], "totals": totals})
        source = "loop IR"
    totals = {k: sum(ln["totals"][k] for ln in launches) for k in _COUNTER_KEYS}
    # the compulsory reads come from DDR; a vector kernel's MTE2 bytes beyond them are re-reads (see npu_reread_l2)
    ddr = 1.0
    if len(launches) == 1 and not cube and totals["mte2_bytes"] > c.bytes_read > 0:
        ddr = 1.0 - ASSUMPTIONS["npu_reread_l2"].value * (1.0 - c.bytes_read / totals["mte2_bytes"])
    return {"launches": launches, "totals": totals, "source": source, "cores": cores, "mte2_ddr_fraction": ddr,
            "unit": _cube_note(operands, shape) if c.contraction is not None else None,
            "ub_bytes": max([int(lr.get("ub_total", 0)) for lr in lres] or [0]) or None,
            "ub_budget": max([int(lr.get("ub_budget", 0)) for lr in lres] or [0]) or None}


def _pipeline(stages: Mapping[str, float], tiles: float, buffers: int) -> float:
    """Cycles of a CopyIn -> Compute -> CopyOut pipeline over `tiles` tiles: overlapped with double buffering
    (the slowest stage for every tile, plus the others once to fill and drain), summed with one buffer."""
    if buffers >= 2:
        top = max(stages.values())
        return top + (sum(stages.values()) - top) / max(tiles, 1.0)
    return sum(stages.values())


def predict_npu_kernel(c: KernelCounts, target: Target, resources: Mapping[str, Any] | None = None
                       ) -> KernelPrediction:
    if target.npu is None:
        raise TargetError(f"{target.name} is not an NPU target")
    r = target.npu.rates
    k = ascend_counters(c, target, resources)
    cores = int(k["cores"])
    clock = target.clock_hz
    rd = r.get("ddr_read_rate", r.get("ddr_rate", 32.0))
    l2 = r.get("l2_read_rate", r.get("l2_rate", rd))
    wr = min(r.get("ub_to_ddr_rate", 64.0), r.get("ddr_write_rate", r.get("ddr_rate", 32.0)))
    ddr = k["mte2_ddr_fraction"]
    scalar = ASSUMPTIONS["npu_scalar_access_cycles"].value
    body = 0.0
    terms = {"mte2": 0.0, "vector": 0.0, "cube": 0.0, "scalar": 0.0, "mte3": 0.0}
    for ln in k["launches"]:
        worst, worst_stages = 0.0, {}
        for pc in ln["per_core"]:
            st = {"mte2": pc["mte2_bytes"] * (ddr / rd + (1.0 - ddr) / l2),
                  "vector": pc["vec_cycles"] * ASSUMPTIONS["npu_vector_repeat_cycles"].value,
                  "cube": pc["cube_fractals"], "scalar": sum(pc.get(n, 0.0) for n in _SCALAR_KEYS) * scalar,
                  "mte3": (pc["mte3_bytes"] + pc["fixpipe_bytes"]) / wr}
            cyc = _pipeline({"mte2": st["mte2"], "compute": max(st["vector"], st["cube"]) + st["scalar"],
                             "mte3": st["mte3"]}, pc["mte2_instr"], ln["buffer_num"])
            if cyc >= worst:
                worst, worst_stages = cyc, st
        waves = math.ceil(max(1, ln["block_dim"]) / cores)
        body += waves * worst / clock
        for n, v in worst_stages.items():
            terms[n] += waves * v / clock
    t_tot = k["totals"]
    hbm = (t_tot["mte2_bytes"] * ddr + t_tot["mte3_bytes"] + t_tot["fixpipe_bytes"]) / target.bandwidth("memory")
    launch = ASSUMPTIONS["npu_launch_us"].value * 1e-6 * len(k["launches"])
    terms.update({"launch": launch, "hbm": hbm})
    t = launch + max(body, hbm)
    bound = "hbm" if hbm > body else max(("mte2", "vector", "cube", "scalar", "mte3"), key=lambda n: terms[n])
    if launch > max(body, hbm):
        bound = "launch"
    blocks = ", ".join(str(ln["block_dim"]) for ln in k["launches"])
    notes = [f"counters from the {k['source']}", f"block_dim {blocks} on {cores} cores, buffer_num "
             f"{', '.join(str(ln['buffer_num']) for ln in k['launches'])}"]
    if k["unit"]:
        notes.append(k["unit"])
    accesses = sum(t_tot[n] for n in _SCALAR_KEYS)
    if accesses:
        notes.append(f"{accesses:,.0f} scalar GetValue/SetValue accesses at {scalar:g} cycles each "
                     f"({terms['scalar'] * 1e6:.3g} us on the busiest core)")
    if ddr < 1.0:
        notes.append(f"{1.0 - ddr:.0%} of the MTE2 bytes re-read from L2")
    return KernelPrediction(c.kernel, target.name, t, terms, bound, notes)


def roofline_time(c: KernelCounts, target: Target, *, unit: str | None = None) -> float:
    """max(flops / peak, compulsory bytes / memory bandwidth) in seconds (the roofline's bound). Flops run on their
    own unit (contractions on the matrix unit) unless `unit` says otherwise; float32 contractions on a target that
    lists no float32 matrix rate but a TF32 one (a GPU's tensor cores) run as TF32, cuDNN's default for
    convolutions."""
    t = 0.0
    for (dt, u), f in c.flops.items():
        u = unit or u
        tries = [(dt, u), *([("tfloat32", u)] if dt == "float32" and u == "tensor" else []), (dt,), ("float32",)]
        for args in tries:
            try:
                peak = target.peak_flops(*args)
                break
            except TargetError:
                continue
        t += f / peak
    return max(t, c.bytes / target.bandwidth("memory"))


def launch_time(target: Target) -> float:
    """One kernel launch's overhead on `target`, in seconds (the model's assumption; 0 on a CPU)."""
    key = {"gpu": "gpu_launch_us", "npu": "npu_launch_us"}.get(target.kind)
    return ASSUMPTIONS[key].value * 1e-6 if key else 0.0


def predict_program(program: Program, target: Target | str, *, counts: Sequence[KernelCounts] | None = None,
                    caches: Sequence[KernelCache] | None = None, schedules: Mapping[str, Mapping] | None = None,
                    resources: Mapping[str, Mapping] | None = None, model: CpuModel | None = None,
                    data: Mapping[str, np.ndarray] | None = None) -> ProgramPrediction:
    """Predicted time of each kernel of `program` on `target` and of the whole operator.

    `caches` (from `traces.simulate_program`) give the traffic per level; without them the compulsory bytes are
    used. `schedules` / `resources`: per kernel, the backend's schedule and the artifact's per-kernel resources
    (cuda: launch configuration and occupancy; ascend: the twin's counters)."""
    t = get_target(target) if isinstance(target, str) else target
    counts = list(counts) if counts is not None else program_counts(program, data)
    caches = list(caches) if caches is not None else [None] * len(counts)
    schedules = schedules or {}
    resources = resources or {}
    out = []
    if t.kind == "cpu":
        from .traces import blas_regions
        fns = sorted({f for c in counts for f in c.functions})
        model = model or calibrate_cpu_model(t, fns)
        for k, c, ch in zip(program.kernels, counts, caches):
            sched = dict(schedules.get(c.kernel) or {})
            regions, as_tasks = None, True
            if c.contraction is not None and sched.get("impl", "blas") == "blas" and c.dtype in ("float32",
                                                                                                 "float64"):
                merged = bool(sched.get("merge_batch")) and sched.get("window", "pack") == "pack"
                regions = blas_regions(program, k, merged)
                if merged:                                # one GEMM over every batch point's columns
                    B, M, N, K = c.contraction
                    c = replace(c, contraction=(1, M, B * N, K))
                # a loop over several batch points with parallel loops inside keeps numba's parallel loops
                as_tasks = c.contraction[0] == 1 or bool(sched.get("batch_parallel"))
                plan = shift_plan(k) if sched.get("window") in ("shift", "winograd") else None
                if plan is not None:
                    B, M, _, _ = c.contraction
                    if sched["window"] == "winograd":     # 16 GEMMs per batch point over the 2x2 output tiles
                        gemms, cols = 16, -(-plan.out[0] // 2) * -(-plan.out[1] // 2)
                    else:                                 # one GEMM per tap and batch point, over Hout x Wp columns
                        gemms, cols = plan.taps[0].extent * plan.taps[1].extent, plan.out[0] * plan.padded[1]
                    c = replace(c, contraction=(B * gemms, M, cols, plan.chan.extent))
                    regions = 1 + (1 if sched.get("batch_parallel") else B)
            out.append(predict_cpu_kernel(c, t, model, ch, schedule=sched, regions=regions, as_tasks=as_tasks))
        return ProgramPrediction(t.name, out, model.run_us * 1e-6, "cpu roofline over the cache hierarchy")
    if t.kind == "gpu":
        from .traces import GpuLaunch
        for k, c, ch in zip(program.kernels, counts, caches):
            res = dict(resources.get(c.kernel) or {})
            if "grid" not in res:               # no artifact: the cuda backend's default launch
                limit = t.gpu.shared_mem_per_block_bytes if t.gpu else 48 * 1024
                ln = GpuLaunch.default(k, limit)
                res.update({"template": ln.template, "grid": list(ln.grid), "threads_per_block": ln.block,
                            **{n: v for n, v in ln.tile.items() if n in ("BM", "BN", "BK")}})
            out.append(predict_gpu_kernel(c, t, ch, resources=res))
        return ProgramPrediction(t.name, out, 0.0, "gpu roofline with latency hiding")
    for c in counts:
        out.append(predict_npu_kernel(c, t, resources.get(c.kernel)))
    return ProgramPrediction(t.name, out, 0.0, "ascend MTE2/vector/cube/MTE3 pipeline")


def predict_kernel_ms(art, kernel: str, target: Target | str) -> float:
    """Predicted milliseconds of one kernel of a compiled artifact on `target` (its schedule and the backend's
    resources — launch configuration, occupancy, twin counters — taken into account). The tuner's cost on
    backends without their hardware here."""
    pred = predict_program(art.program, target, schedules={k.name: dict(k.schedule) for k in art.kernels},
                           resources={k.name: dict(k.resources) for k in art.kernels})
    for k in pred.kernels:
        if k.kernel == kernel:
            return k.time_ms
    raise KeyError(f"no kernel {kernel!r} in {art.program.name}")


__all__ = ["ASSUMPTIONS", "CpuModel", "KernelCounts", "KernelPrediction", "ModelAssumption", "ProgramPrediction",
           "ascend_counters", "calibrate_cpu_model", "kernel_counts", "launch_time", "predict_cpu_kernel",
           "predict_gpu_kernel", "predict_kernel_ms", "predict_npu_kernel", "predict_program", "program_counts",
           "program_data", "roofline_time"]

"""The cpu backend: generated Python compiled by numba (parallel loops, vectorisable math), written as real
files in the cache directory so numba's own `cache=True` keeps the machine code between sessions."""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import gc
import os
import re
import threading
import time
from pathlib import Path

import numpy as np

from ...cache import digest, import_source, write_once
from ...config import cache_dir, log, tool_versions
from ...dtypes import is_float, to_numpy
from ...errors import BackendError
from ...ir import contraction
from ...ir import expr as E
from ...ir.expr import Call, Idx, Load, Select
from ...ir.kernel import Kernel, Program, ScatterAdd
from ...ir.scalar import lookup
from ...ir.schedule import Knob, Schedule
from .. import Artifact, KernelInfo
from . import (
    numba_cache,  # noqa: F401 - checks numba's cache files of xbench functions (before codegen's)
    spin,  # noqa: F401 - how long idle threads spin, set before the libraries that start them load
)
from .codegen import ModuleWriter, needs_collapse, prefetch_plan, storage_dtype, streamed_store
from .contract import merged_batch_pays, panel_rows
from .lowp import LOAD as LOWP
from .order import transposes

PREFETCH_LINES = (2, 4, 8)

CODEGEN_VERSION = "18"
# The price of a parallel loop, for the default parallel/serial choice (`parallel_pays`): launching one on
# numba's threading layer and waiting for its threads costs ~12-15 us with threads that sleep between loops
# (OMP_WAIT_POLICY=PASSIVE, set in `spin`), and the serial work it splits costs ~0.1 ns per scalar evaluation plus
# ~0.15 ns per transcendental call in it (vectorised, in L2: add, exp, tanh, softmax at 128^2-512^2 float32,
# 2-core Zen 5). A loop goes parallel when the time it saves is twice its launch: on a shared host the other
# cores are often busy, and a parallel loop then waits for the slowest thread.
LAUNCH_US = 15.0
EVAL_NS = 0.1
TRANSCENDENTAL_NS = 0.15
# a transposing kernel's element (`order.transposes`), read in vectors and written a line at a time: ~1-2 ns
# (SegFormer's [tokens, channels] -> [channels, H, W] bias adds, 524,288 bfloat16 elements in 1.0 ms serial)
TRANSPOSE_NS = 1.0
PARALLEL_MARGIN = 2.0
# Kernels the cost model puts under this many microseconds of serial work compile at LLVM's -O1 instead of -O3:
# half the compile time (~0.15 s against ~0.3 s a kernel here), and at most a few microseconds a call lost to
# loops that are not vectorised. Whole-model graphs have hundreds of such kernels (batch statistics, running
# averages, small epilogues).
OPT_FULL_US = 10.0
# On OpenBLAS, a GEMM of fewer multiply-adds than this runs on one BLAS thread: ~80 us of work on one core, where
# waking OpenBLAS's second thread costs 10-20 us and, when another process holds the other core, a time slice
# (4-16 ms). MKL shares the OpenMP threads, awake between loops, and picks its own count for a small GEMM: there
# every GEMM keeps BLAS's threads (GPT-2's decode step, its GEMMs 8 rows high: 3.2 -> 2.8 ms).
BLAS_THREAD_WORK = 1 << 23
# a BLAS contraction's own loops (packing, the epilogue: numba parallel regions of ~3 us each) run in parallel
# from this many output points
BLAS_PARALLEL_POINTS = 1 << 17
# A batch of matrix-vector products this short (a depthwise convolution: 1 x 9 by 9 x H·W per channel) runs as
# loops: a BLAS call costs 1-2 us before any work, the loops ~0.1 us for such a product, vectorised along it.
GEMV_LOOPS_K = 64
# So does a batch of row vectors times matrices of at most this many elements, 8 columns or more (a decoded
# token's attention over its cache, per head: 1 x 160 by 160 x 64): one accumulator row, vectorised along the
# columns, where BLAS costs its call per head again (GPT-2's decode attention 204 -> 140 us a layer, 32 heads).
GEMV_LOOPS_WORK = 1 << 15
# And a row vector times a matrix of at most this many columns, however long: BLAS's product is a GEMV over a
# packed copy of the matrix, where the loops read it in place (a depthwise convolution's weight gradient, per
# channel 1 x 4096 by a 4096 x 9 window: 128 channels 14.9 -> 3.1 ms in bfloat16, 5.8 -> 2.6 in float32).
GEMV_LOOPS_COLS = 16
_modules: dict[str, object] = {}
_lock = threading.Lock()


def threads() -> int:
    import numba
    return numba.get_num_threads()


def _extent(axes) -> int:
    return int(np.prod([a.extent for a in axes], dtype=np.int64)) if axes else 1


def _stage_extent(s) -> int:
    return _extent((s.axis,) if hasattr(s, "axis") else getattr(s, "axes", None) or ())


def _unit_stride(e, axis) -> bool:
    """Whether the (bounds-checked) read `e` walks its last dimension with `axis`, one element a step: the loops
    over it vectorise (a strided window's do not, unless over a plane's phases, and BLAS over its packed copy
    is faster). A choice between two such reads (a KV cache with a decoded token's row in it) does too."""
    if isinstance(e, Select) and isinstance(e.a, Load) and isinstance(e.b, Load):
        return _unit_stride(e.a, axis) and _unit_stride(e.b, axis)
    checked = contraction.bounds_checked(e)
    e = checked[0] if checked else e
    form = contraction.affine(e.index[-1]) if isinstance(e, Load) and e.index else None
    return form is not None and form.get(axis.name, 0) == 1


def _small_gemms_serial() -> bool:
    """Whether small GEMMs run on one thread (`BLAS_THREAD_WORK`): where the BLAS is OpenBLAS."""
    from . import blas
    return blas.PROVIDER == "openblas"


def kernel_work(k: Kernel) -> int:
    """Scalar evaluations a kernel performs (outer points times the work of its stages)."""
    return k.points() * max(sum(_stage_extent(s) for s in k.stages), 1)


def serial_us(k: Kernel) -> float:
    """The kernel's serial time by the launch-decision model: EVAL_NS per scalar evaluation, plus
    TRANSCENDENTAL_NS per transcendental call evaluated, plus TRANSPOSE_NS per point of a transpose."""
    ns = 0.0
    for s in k.stages:
        calls = 0
        for e in s.exprs():
            for n in e.walk():
                if isinstance(n, Call):
                    with contextlib.suppress(KeyError, ValueError, TypeError):
                        calls += bool(lookup(n.fn, len(n.args)).transcendental)
        ns += _stage_extent(s) * (EVAL_NS + TRANSCENDENTAL_NS * calls)
    return k.points() * (ns + (TRANSPOSE_NS if transposes(k) else 0.0)) * 1e-3


def parallel_pays(k: Kernel, n_threads: int | None = None, work_us: float | None = None) -> bool:
    """Whether running the kernel's outer loop on `n_threads` threads (default: numba's) saves PARALLEL_MARGIN
    times its launch: serial * (1 - 1/threads) > PARALLEL_MARGIN * LAUNCH_US, the serial time `work_us`
    (default `serial_us`)."""
    # a kernel with no outer loop (scatter-adds) splits its scatter-adds along their disjoint axes
    span = k.points() if k.outer else max([a.extent for s in k.stages if isinstance(s, ScatterAdd)
                                           for a in [s.disjoint_axis()] if a is not None] + [1])
    t = min(n_threads or threads(), span)
    if t <= 1:
        return False
    work = serial_us(k) if work_us is None else work_us
    return work * (1.0 - 1.0 / t) > PARALLEL_MARGIN * LAUNCH_US


def _packed(roles) -> int:
    """Elements of the operands a contraction must pack (any but a load at its plain axes: an expression, a
    window): a weight gradient's packed window can be 100x its output."""
    c, _, m, n = roles
    k = _extent(c.axes)
    plain = lambda e: isinstance(e, Load) and all(isinstance(i, Idx) for i in e.index)     # noqa: E731
    return (0 if plain(c.lhs) else _extent(m) * k) + (0 if plain(c.rhs) else _extent(n) * k)


@functools.cache
def _linked_sources() -> str:
    """A digest of the modules whose numba functions generated kernels call: numba links their code into each
    kernel's cached machine code and keys that cache on the kernel's own file only, so a kernel cached before
    one of them changed would keep running the old code (`blas.dot` calling another BLAS)."""
    from . import bf16gemm, blas, lowp, mathlib, memory, tasks, winograd
    return digest(*(Path(m.__file__).read_text() for m in (bf16gemm, blas, lowp, mathlib, memory, tasks, winograd)))


class CpuArtifact(Artifact):
    module: object = None
    const_args: tuple = ()

    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return self.consume(list(arrays))

    def consume(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        args = self._args(arrays)
        arrays.clear()
        args += self.const_args
        outs = self.module.run(args)
        return [o if dt is None else o.view(dt) for o, dt in zip(outs, self._lowp[1])]

    def kernel_runners(self, *arrays: np.ndarray) -> dict:
        """One zero-argument callable per kernel, over buffers filled by a full run: time kernels one by one."""
        from .runtime import blas_threads
        bufs = self.module.buffers(*self._args(arrays), *self.const_args)
        out = {}
        for name, (fn, params, one_blas) in self.module.KERNELS.items():
            args = tuple(bufs[q] for q in params)

            def call(fn=fn, args=args, one_blas=one_blas):
                if one_blas:
                    with blas_threads(1):
                        fn(*args)
                else:
                    fn(*args)
            out[name] = call
        return out

    def _args(self, arrays) -> list[np.ndarray]:
        return [a.view(np.uint16) if lowp else a for a, lowp in zip(self.check_inputs(arrays), self._lowp[0])]

    @functools.cached_property
    def _lowp(self) -> tuple[list[bool], list]:
        """Which inputs are 16-bit floats (the kernels read their bits as uint16), and the numpy dtype of each
        such output (None for the others)."""
        b = self.program.buffers
        return ([b[n].dtype in LOWP for n in self.program.inputs],
                [to_numpy(b[n].dtype) if b[n].dtype in LOWP else None for n in self.program.outputs])


class CpuBackend:
    name = "cpu"
    default_target = "cpu-local"

    def available(self) -> tuple[bool, str]:
        try:
            import numba
        except ImportError:
            return False, "numba is not installed (pip install numba)"
        return True, f"numba {numba.__version__}"

    def knobs(self, kernel: Kernel, program: Program | None = None) -> dict[str, Knob]:
        """The kernel's knobs; those that depend on its buffers' shapes and roles (`stores`, `prefetch`) only
        when `program` is given."""
        d = self.default_schedule(kernel)
        out = {"parallel": Knob("parallel", (True, False), d["parallel"], "run the outer loop on all cores")}
        if kernel.outer:
            out["collapse"] = Knob("collapse", tuple(range(1, len(kernel.outer) + 1)), d["collapse"],
                                   "leading outer axes flattened into the parallel loop")
        if "impl" in d:
            out["impl"] = Knob("impl", ("blas", "loops", "points"), d["impl"],
                               "contraction: BLAS panels, blocked loops, or a dot per output point")
        if "blas_threads" in d:
            out["blas_threads"] = Knob("blas_threads", (0, 1), d["blas_threads"],
                                       "contraction: BLAS's own thread count (0), or one thread (small GEMMs)")
        if "batch_parallel" in d:
            out["batch_parallel"] = Knob("batch_parallel", (False, True), d["batch_parallel"],
                                         "contraction: one single-threaded GEMM per core over the batch, "
                                         "instead of multithreaded BLAS per GEMM")
        if "merge_batch" in d:
            out["merge_batch"] = Knob("merge_batch", (False, True), d["merge_batch"],
                                      "contraction whose left operand is the same at every batch point (a "
                                      "convolution's weight): the points' columns side by side in one GEMM, instead "
                                      "of a GEMM per point")
        if "window" in d:
            choices = ("shift", "pack", "winograd") if contraction.shift_plan(kernel).winograd else ("shift", "pack")
            out["window"] = Knob("window", choices, d["window"],
                                 "convolution: one GEMM per window tap over a zero-padded copy of the input, "
                                 "the window packed into one operand (im2col) for a single GEMM, or (3x3, "
                                 "stride 1, no dilation) Winograd F(2x2, 3x3): 16 GEMMs at 4/9 of the products")
        if "panel" in d:
            out["panel"] = Knob("panel", panel_rows(kernel), d["panel"],
                                "contraction: pack the right operand this many rows of its outer column axis at "
                                "a time (0: whole), so each packed panel is multiplied from cache (with window = "
                                "pack)")
        if kernel.row_buffers:
            out["row_buffer"] = Knob("row_buffer", (True, False), True,
                                     "keep a fused row in a scratch buffer, or recompute it where it is read")
        if program is not None and streamed_store(kernel, program, kernel.stages) is not None:
            out["stores"] = Knob("stores", ("cached", "streaming"), "cached",
                                 "write whole output rows with non-temporal stores (no read of the lines first, "
                                 "not kept in cache), from a per-thread row")
        ahead = prefetch_plan(kernel, program, kernel.stages) if program is not None else None
        if ahead is not None:
            row = kernel.stages[ahead[0]].axes[0].extent
            out["prefetch"] = Knob("prefetch", (0, *(n for n in PREFETCH_LINES if row % (n * ahead[3]) == 0)), 0,
                                   "while computing on a row, fetch the next one, this many cache lines per step "
                                   "(0: none)")
        out["opt"] = Knob("opt", (1, 3), d["opt"],
                          "LLVM optimisation level: 1 compiles in about half the time, 3 vectorises loops (the "
                          "default for kernels whose work the cost model puts at OPT_FULL_US or more)")
        out["fast_math"] = Knob("fast_math", (True, False), True,
                                "vectorisable approximations of exp/log/tanh/erf (bounded ulp error)")
        return out

    def check(self, program: Program, kernel: Kernel, schedule: Schedule) -> str | None:
        """Combinations that are the same code as another: panels only split a packed window operand."""
        if schedule.get("window", "pack") != "pack" and schedule.get("panel", 0):
            return "panel applies to the packed window (window = pack) only"
        if schedule.get("merge_batch") and (schedule.get("window", "pack") != "pack" or schedule.get("panel", 0)
                                            or schedule.get("batch_parallel")):
            return "merge_batch packs every batch point's window for one GEMM (window = pack, no panel or " \
                   "batch_parallel)"
        return None

    def default_schedule(self, kernel: Kernel) -> Schedule:
        s = {"parallel": parallel_pays(kernel),
             "collapse": needs_collapse(kernel.outer, threads()) if kernel.outer else 1, "fast_math": True,
             "opt": 3 if serial_us(kernel) >= OPT_FULL_US else 1}
        roles = contraction.roles(kernel) if kernel.kind == "contract" else None
        if roles is not None:
            acc = kernel.stages[0].dtype
            m, n, k = _extent(roles[2]), _extent(roles[3]), _extent(roles[0].axes)
            short = k <= GEMV_LOOPS_K or m == 1 and (n >= 8 and k * n <= GEMV_LOOPS_WORK or n <= GEMV_LOOPS_COLS)
            gemv = min(m, n) == 1 and short \
                and (contraction.plane_plan(kernel) is not None or _unit_stride(roles[0].rhs, roles[3][-1]))
            s["impl"] = "blas" if acc in ("float32", "float64") and not gemv else "loops"
            batches = _extent(roles[1])
            # enough independent GEMMs to give every core whole ones: cheaper than BLAS's own threading
            per_batch = batches > 1 and batches >= 2 * threads()
            if s["impl"] == "blas":
                # BLAS threads the GEMM itself; the kernel's own loops only pack operands and write the output,
                # unless its batch loop runs the GEMMs on the cores
                s["parallel"] = s["parallel"] and (per_batch or max(kernel.points(), _packed(roles))
                                                   >= BLAS_PARALLEL_POINTS)
                s["blas_threads"] = 1 if kernel_work(kernel) < BLAS_THREAD_WORK and _small_gemms_serial() else 0
            if len(panel_rows(kernel)) > 1:
                s["panel"] = 0
            plan = contraction.shift_plan(kernel) if s["impl"] == "blas" else None
            if plan is not None:       # a 1x1 window has nothing to shift: one GEMM, over views where they exist
                s["window"] = "winograd" if plan.winograd else "shift" if any(t.extent > 1 for t in plan.taps) \
                    else "pack"
            if batches > 1:
                s["batch_parallel"] = per_batch
            if batches > 1 and s["impl"] == "blas" and not (
                    {a.name for a in roles[1]} & E.free_indices(roles[0].lhs)):
                s["merge_batch"] = merged_batch_pays(roles)
                if s["merge_batch"]:
                    s["batch_parallel"] = False
                    if "window" in s:
                        s["window"] = "pack"
        return Schedule(s)

    def _write(self, program: Program, schedules: dict[str, Schedule]) -> tuple[str, str, Path, bool]:
        writer = ModuleWriter(program, schedules, threads())
        writer.fast_math = all(s.get("fast_math", True) for s in schedules.values())
        source = writer.module()
        key = digest(CODEGEN_VERSION, source, tool_versions(), _linked_sources())
        path = cache_dir("cpu") / f"{program.name}_{key}.py"
        existed = path.exists()
        write_once(path, source)
        return source, key, path, existed

    def prepare(self, program: Program, schedules: dict[str, Schedule]) -> tuple:
        """Write the module for `program` and return a picklable job: `warm(job)`, run in another process,
        compiles it into numba's on-disk cache so the later `compile` here only loads machine code."""
        source, key, path, _ = self._write(program, schedules)
        parts, tasks = _lazy_names(source)
        sigs = [*((name, None) for name in parts), *((k.name, _signature_spec(program, k)) for k in program.kernels),
                *((name, None) for name in tasks)]
        return str(path), key, sigs

    def compile(self, program: Program, schedules: dict[str, Schedule] | None = None, **options) -> CpuArtifact:
        schedules = schedules or {k.name: self.default_schedule(k) for k in program.kernels}
        t0 = time.perf_counter()
        source, key, path, existed = self._write(program, schedules)
        with _no_gc():
            module = _load(path, key)
            jit_ms = _compile_all(module, program, fresh=not existed, path=path, key=key)
        ms = (time.perf_counter() - t0) * 1e3
        infos, functions = [], _functions(source)
        for k in program.kernels:
            infos.append(KernelInfo(k.name, k.kind, _function_source(functions, k.name), schedules[k.name],
                                    {"parallel": bool(schedules[k.name].get("parallel")), "work": kernel_work(k)}))
        consts = tuple(np.require(np.asarray(b.value).astype(to_numpy(b.dtype)), requirements="C").view(storage_dtype(b.dtype))
                       for b in program.buffers.values() if b.role == "const")
        art = CpuArtifact(self.name, program, source, infos,
                          {"file": str(path), "numba": tool_versions()["numba"], "threads": threads(),
                           "jit_ms": round(jit_ms, 1), "kernels": len(program.kernels)},
                          compile_ms=ms, cache_hit=existed)
        art.module = module
        art.const_args = consts
        return art


@contextlib.contextmanager
def _no_gc():
    """The cyclic garbage collector paused: numba's compiler allocates objects fast enough to set off full
    collections, each a walk over numba's own large heap (0.1-0.15 s of an operator's compile). What the
    compile leaves for the collector is collected at its next pass after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _load(path: Path, key: str):
    name = f"xbench_cpu_{key}"
    with _lock:
        if name in _modules:
            return _modules[name]
        module = import_source(name, path)
        _modules[name] = module
        return module


def _signature_spec(program: Program, k: Kernel) -> list[tuple[str, int]]:
    """(storage dtype, ndim) of each buffer parameter of kernel `k`, in the generated function's order."""
    params = k.reads() + [b for b in k.writes() if b not in k.reads()]
    return [(storage_dtype(program.buffers[p].dtype).name, len(program.buffers[p].shape)) for p in params]


def _runs_as_tasks(module, name: str) -> bool:
    """Whether kernel `name` (or the kernel it is an alias of: `k4 = k1`) runs as tasks of an njit part."""
    fn = getattr(getattr(module, name), "__name__", name)
    return hasattr(module, f"{fn}_part") or hasattr(module, f"{fn}_part0")


def _compile_kernel(module, name: str, spec: list[tuple[str, int]] | None) -> None:
    """Compile kernel `name` of `module` for C-contiguous buffers, at the LLVM optimisation level its schedule
    chose (the module's `OPT`), or, with no `spec`, the module's part or task `name` (`tasks.Part`, `tasks.Task`).
    A kernel run as tasks is its parts, but for its serial set-up (`<kernel>_head`)."""
    import numba
    from numba.core import config
    from numba.core.compiler_lock import global_compiler_lock
    fn = getattr(module, name)
    if spec is None:
        fn.compile()
        return
    if _runs_as_tasks(module, name):
        fn = getattr(module, f"{fn.__name__}_head", None)          # its serial set-up, when it has one
        if fn is None:
            return
    sig = tuple(numba.types.Array(numba.from_dtype(np.dtype(d)), n, "C") for d, n in spec)
    with global_compiler_lock:
        before = config.OPT
        config.OPT = type(before)(getattr(module, "OPT", {}).get(name, 3))
        try:
            fn.compile(sig)
        finally:
            config.OPT = before


# A fresh module with at least this many distinct kernel functions per extra process is compiled in parallel:
# a worker costs about 1.5 s to start (Python, numba, xbench), about what compiling ten kernels costs.
KERNELS_PER_WORKER = 12
_WARM = "import json, sys; from xbench.backends.cpu import warm; warm(json.loads(sys.stdin.read()))"


def compile_workers(n_functions: int) -> int:
    """Extra processes to compile `n_functions` new kernel functions with: one per core no other task holds,
    beyond this one (`XBENCH_COMPILE_WORKERS` sets the number; 0 compiles in this process only)."""
    given = os.environ.get("XBENCH_COMPILE_WORKERS")
    if given is not None:
        try:
            return max(0, int(given))
        except ValueError:
            raise BackendError(f"XBENCH_COMPILE_WORKERS={given!r} is not a number",
                               hint="set it to how many extra processes compile kernels (0: none)") from None
    from .tasks import free_cores
    return max(0, min(free_cores() - 1, n_functions // KERNELS_PER_WORKER))


def _lazy_names(source: str) -> tuple[list[str], list[str]]:
    """The parts and the tasks a generated module defines (`tasks.Part`, `tasks.Task`), which compile on first use."""
    found = re.findall(r"^@_XB_(PART|TASK)\b.*\ndef (\w+)\(", source, flags=re.M)
    return [name for kind, name in found if kind == "PART"], [name for kind, name in found if kind == "TASK"]


def _compile_all(module, program: Program, fresh: bool = False, path: Path | None = None, key: str = "") -> float:
    """Compile (or load from numba's cache) every kernel for C-contiguous arrays of its buffers, and the module's
    parts and task. A fresh module's distinct functions and parts are shared out among worker processes
    (`compile_workers`) that compile them into numba's cache while this process compiles its own share; then
    everything loads here, the task last (it calls the parts)."""
    t0 = time.perf_counter()
    sigs = [(k.name, _signature_spec(program, k)) for k in program.kernels]
    distinct = {}
    for name, spec in sigs:
        fn = getattr(module, name)
        if not _runs_as_tasks(module, name) and id(fn) not in distinct:
            distinct[id(fn)] = (name, spec)
    parts, tasks = _lazy_names(Path(module.__file__).read_text())
    jobs = [*((name, None) for name in parts), *distinct.values()]
    workers = compile_workers(len(jobs)) if fresh and path is not None else 0
    if workers:
        shares = [jobs[i::workers + 1] for i in range(workers + 1)]
        with cf.ThreadPoolExecutor(workers) as pool:
            running = [pool.submit(_compile_elsewhere, (str(path), key, share)) for share in shares[1:] if share]
            _compile_kernels(module, program, shares[0])
            for r in running:
                r.result()
    _compile_kernels(module, program, [*sigs, *((name, None) for name in tasks)])
    return (time.perf_counter() - t0) * 1e3


def _compile_kernels(module, program: Program, sigs) -> None:
    for name, spec in sigs:
        try:
            _compile_kernel(module, name, spec)
        except Exception as exc:  # a compiler failure is ours, not the user's: show the kernel
            raise BackendError(f"numba could not compile kernel {name} of {program.name}: "
                               f"{str(exc).splitlines()[0]}",
                               hint=f"the generated source is in {module.__file__}") from exc


def _compile_elsewhere(job) -> None:
    """Compile a share of a module's kernels into numba's cache in a worker process; a worker that fails
    leaves its kernels to be compiled here (any real error is raised then, with the kernel named)."""
    import json
    import sys

    from ... import toolchain
    try:
        toolchain.run([sys.executable, "-c", _WARM], tool="a compile worker", what="compiling kernels",
                      input=json.dumps(job), env=os.environ.copy())
    except toolchain.ToolError as exc:
        log.debug("compile worker failed: %s", exc.message)


def warm(job: tuple) -> None:
    """Compile a module written by `CpuBackend.prepare` into numba's cache (run in a worker process)."""
    path, key, sigs = job
    with _no_gc():
        module = _load(Path(path), key)
        for name, spec in sigs:
            _compile_kernel(module, name, spec)


def _function_source(functions: dict[str, str], name: str) -> str:
    """The text of kernel `name` in a generated module (run as tasks: its parts and launcher, and the module's
    task that calls the part), from the module's `_functions`."""
    parts = [functions.get(f"{name}_part", "")]
    while part := functions.get(f"{name}_part{len(parts) - 1}"):
        parts.append(part)
    parts.append(functions.get(name, ""))
    if any(parts[:-1]):
        parts.append(functions.get("_xb_task", ""))
    return "\n\n\n".join(p for p in parts if p)


def _functions(source: str) -> dict[str, str]:
    """Each top-level function of a generated module by name, with its decorator: one pass over the source."""
    lines = source.splitlines()
    out: dict[str, str] = {}
    for start, line in enumerate(lines):
        if not line.startswith("def "):
            continue
        end = start + 2
        while end < len(lines) and (not lines[end] or lines[end].startswith(" ")):
            end += 1
        first = start - 1 if start > 0 and lines[start - 1].startswith("@") else start
        out.setdefault(line[4:line.index("(")], "\n".join(lines[first:end]).rstrip())
    return out


backend = CpuBackend()
log.debug("cpu backend loaded")
__all__ = ["backend", "CpuBackend", "is_float"]

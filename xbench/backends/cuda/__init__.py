"""The cuda backend: numba-cuda kernels generated from the loop IR.

`op.compile("cuda", *arrays, cc="sm_90")` writes one Python module per program (kernels + host launcher) into
`cache_dir("cuda")`, produces PTX for the requested compute capability in a helper process, runs `ptxas -v`
on it and computes the theoretical occupancy of every launch. `Artifact.run` executes the kernels on the GPU
when there is one, otherwise in numba's CUDA simulator (then `.predicted` is True: timings of this backend
come from models, not from this machine).
"""
from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import threading
import time
import warnings
from typing import Any

import numpy as np

from ...cache import digest, import_source, write_once
from ...config import cache_dir, log, tool_versions
from ...errors import BackendError, SimulatorLimitError
from ...hw.occupancy import OccupancyError, device_limits, occupancy
from ...ir.kernel import Kernel, Program
from ...ir.schedule import Knob, Schedule, validate
from .. import Artifact, KernelInfo
from . import device
from .codegen import CODEGEN_VERSION, Launch, ModuleWriter, scatter_phases
from .knobs import default_schedule as _default_schedule
from .knobs import knobs as _knobs

_modules: dict[str, Any] = {}
_lock = threading.Lock()


@contextlib.contextmanager
def _ieee_quiet():
    """Simulated kernels compute with numpy scalars, which warn on division by zero or overflow where a GPU
    quietly gives inf or NaN; those warnings say nothing about the kernel and are not shown."""
    if device.mode() != "simulator":
        yield
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


class CudaArtifact(Artifact):
    """A compiled program: `.source`, `.ptx` (per CUDA kernel), `.resources`, `.run(*arrays)`.

    For timing on a GPU: `b = art.device_args(*arrays)`, then `art.launch(b)` (asynchronous) as often as
    needed, and `art.outputs(b)` to read the results back."""

    ptx: dict[str, str]
    cc: str = ""
    path: str = ""
    launches: list[Launch]

    def _module(self):
        device.cuda_module()              # chooses GPU or simulator before numba.cuda is first imported
        key = self.path
        with _lock:
            if key not in _modules:
                name = "xbench_cuda_" + key.rsplit("_", 1)[-1].removesuffix(".py")
                _modules[key] = import_source(name, key)
            return _modules[key]

    def _grid(self) -> dict[str, tuple[int, int, int]]:
        if device.mode() == "simulator":
            return {ln.name: ln.sim_grid() for ln in self.launches}
        return {ln.name: ln.grid for ln in self.launches}

    def _arrays(self, arrays) -> list[np.ndarray]:
        p = self.program
        out = self.check_inputs(arrays)
        for b in p.buffers.values():
            if b.role == "const":
                out.append(np.require(b.value, np.dtype(b.dtype), "C"))
        return out

    def sim_seconds(self) -> float:
        """About how long numba's CUDA simulator takes to run this artifact once: fitted to the suite's gate and
        to softmax, GELU and matmul sweeps (71 runs of 0.1-13 s; within 0.9-2x of the time taken for 8 in 10),
        each launch starting its threads, a thread-per-point kernel's points times their stages, a tiled GEMM's
        multiply-adds, and a row kernel's elements and, dearer, its barriers: each row's threads meet once per
        halving of a tree reduction."""
        total = 0.0
        # a thread-per-point kernel's thread loops over its stages; a kernel run as scatter phases (one launch
        # per stage, over that stage's own axes) does one element per point
        stages = {k.name: 1 if scatter_phases(k) is not None else
                  max([_extent(st) for st in k.stages] + [1]) * max(1, len(k.stages))
                  for k in self.program.kernels}
        for ln in self.launches:
            d = ln.details
            total += SIM_LAUNCH_S
            if ln.template == "tiled":
                total += d["M"] * d["N"] * d["K"] * d.get("batch", 1) / SIM_RATES["tiled"]
            elif ln.template == "row":
                threads = d.get("threads_per_point", 1)
                total += d["points"] * stages.get(ln.kernel, 1) / SIM_RATES["row"]
                total += d["points"] * threads * max(1.0, math.log2(threads)) * SIM_BARRIER_S
            else:
                total += d.get("points", 1) * stages.get(ln.kernel, 1) / SIM_RATES["point"]
        return total

    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        module = self._module()
        if device.mode() == "simulator":
            _sim_guard(self)
        with _ieee_quiet():
            return module.run(*self._arrays(arrays), grid=self._grid())

    def device_args(self, *arrays: np.ndarray) -> dict:
        """Every buffer of the program on the device (inputs copied there), ready for `launch`."""
        module, grid = self._module(), self._grid()
        cuda = device.cuda_module()
        b = module.alloc(grid)
        consts = [n for n, buf in self.program.buffers.items() if buf.role == "const"]
        for name, a in zip(self.program.inputs + consts, self._arrays(arrays)):
            b[name] = cuda.to_device(a if a.shape else a.reshape(1))
        return b

    def launch(self, b: dict) -> None:
        """Launch every kernel on the device arrays from `device_args` (asynchronous on a GPU)."""
        module = self._module()
        with _ieee_quiet():
            module.launch(b, self._grid())

    def outputs(self, b: dict) -> list[np.ndarray]:
        outs = []
        for o in self.program.outputs:
            host = b[o].copy_to_host()
            outs.append(host.reshape(()) if not self.program.buffers[o].shape else host)
        return outs


SIM_RATES = {"point": 4e5, "tiled": 1.7e6, "row": 8e6}    # per second: points x stages, multiply-adds, elements
SIM_BARRIER_S = 8.6e-5     # a row kernel's barriers, per row, thread on it and halving
SIM_LAUNCH_S = 0.025       # starting a launch's threads
SIM_WARN_S = 10.0          # a simulated run estimated to take longer says so first
SIM_MAX_S = 120.0          # ... and one past this is refused (XBENCH_CUDASIM_MAX_S changes it; 0: no limit)


def _extent(stage) -> int:
    axes = getattr(stage, "axes", None) or ((stage.axis,) if hasattr(stage, "axis") else ())
    return int(np.prod([a.extent for a in axes], dtype=np.int64)) if axes else 1


def sim_limit() -> float:
    raw = os.environ.get("XBENCH_CUDASIM_MAX_S", "").strip()
    if not raw:
        return SIM_MAX_S
    try:
        value = float(raw)
    except ValueError:
        raise BackendError(f"XBENCH_CUDASIM_MAX_S={raw!r} is not a number of seconds",
                           hint="e.g. XBENCH_CUDASIM_MAX_S=600, or 0 for no limit") from None
    return value if value > 0 else float("inf")


def _sim_guard(art: CudaArtifact) -> None:
    """Refuse a simulated run estimated past `sim_limit()` (with the ways out), warn before a long one."""
    est = art.sim_seconds()
    limit = sim_limit()
    shapes = ", ".join(f"{n}: {art.program.buffers[n].type_str()}" for n in art.program.inputs)
    if est > limit:
        raise SimulatorLimitError(
            f"{art.program.name} on cuda: no CUDA GPU here, and numba's CUDA simulator (Python threads) would "
            f"take about {_human(est)} for {shapes} (the limit is {_human(limit)})",
            hint="run it on smaller inputs (the simulator checks correctness, not speed), on a machine with a "
                 "CUDA GPU, or on backend='cpu'; xb.profile predicts its GPU time without running it; or allow "
                 f"it: XBENCH_CUDASIM_MAX_S={int(est * 2)} (0: no limit)")
    if est > SIM_WARN_S:
        warnings.warn(f"xbench: {art.program.name} on cuda runs in numba's CUDA simulator (no CUDA GPU here): "
                      f"about {_human(est)} for {shapes}", stacklevel=3)


def _human(seconds: float) -> str:
    if seconds == float("inf"):
        return "no limit"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def ptx_default() -> bool:
    """`$XBENCH_CUDA_PTX`: 1 (the default) assembles every compile's PTX with ptxas for its resources; 0 runs
    kernels without (no ptxas needed)."""
    raw = os.environ.get("XBENCH_CUDA_PTX", "").strip().lower()
    if raw in ("", "1", "on", "true", "yes"):
        return True
    if raw in ("0", "off", "false", "no"):
        return False
    raise BackendError(f"XBENCH_CUDA_PTX={raw!r} is not understood",
                       hint="set XBENCH_CUDA_PTX=1 (assemble PTX with ptxas for resources) or 0 (run without)")


class CudaBackend:
    name = "cuda"
    default_target = "h100"

    def available(self) -> tuple[bool, str]:
        if importlib.util.find_spec("numba_cuda") is None and importlib.util.find_spec("numba.cuda") is None:
            return False, 'numba-cuda is not installed (pip install "numba-cuda>=0.30" "nvidia-cuda-nvrtc==13.0.*")'
        where = "a CUDA GPU" if device.mode() == "gpu" else "numba's CUDA simulator (no CUDA GPU found)"
        return True, f"numba-cuda; kernels run on {where}"

    def knobs(self, kernel: Kernel, program: Program | None = None) -> dict[str, Knob]:
        return _knobs(kernel)

    def default_schedule(self, kernel: Kernel) -> Schedule:
        return _default_schedule(kernel)

    def check(self, program: Program, kernel: Kernel, schedule: Schedule, cc: Any = None) -> str | None:
        """Why `schedule` cannot run `kernel` on `cc` (threads or shared memory per block over the limit), without
        compiling anything; None when it can. The tuner prunes with it."""
        key_cc = device.normalize_cc(cc) if cc is not None else (device.device_cc() or device.DEFAULT_CC)
        limits, _ = device_limits(key_cc)
        one = Program(program.name, program.buffers, program.inputs, program.outputs, [kernel], graph=program.graph)
        writer = ModuleWriter(one, {kernel.name: schedule}, limits.shared_mem_per_block_bytes)
        try:
            writer.build()
        except BackendError as exc:
            return exc.message
        over = [ln for ln in writer.launches if ln.threads > limits.max_threads_per_block]
        return f"{over[0].threads} threads per block exceed {limits.max_threads_per_block}" if over else None

    def doctor(self) -> tuple[bool, str, list[str]]:
        """Whether a default compile (the one `op.run` makes) works here, why, and notes on the PTX tools."""
        from . import ptx as P
        ok, why = self.available()
        if not ok:
            return ok, why, []
        try:
            on = ptx_default()
        except BackendError as exc:
            return False, exc.message, []
        if not on:
            return True, why, ["PTX resources: off (XBENCH_CUDA_PTX=0): kernels run; no registers, spills or "
                               "occupancy from ptxas"]
        ptxas = P.find_ptxas()
        if ptxas is None:
            return False, ("ptxas (the CUDA toolkit's PTX assembler) was not found, and every compile (op.run "
                           "too) assembles PTX for its resources"), [f"fix: {P.PTXAS_HINT}"]
        try:
            version = P.ptxas_version(ptxas)
        except BackendError as exc:
            return False, exc.message, [f"fix: {P.PTXAS_HINT}"]
        return True, why, [f"PTX resources: ptxas {version} ({ptxas})"]

    def compile(self, program: Program, schedules: dict[str, Schedule] | None = None, *, cc: Any = None,
                ptx: bool | None = None, **options) -> CudaArtifact:
        """Generate, write and (with `ptx=True`) assemble the kernels of `program` for `cc` (default: the GPU's
        compute capability, else sm_90). Refuses schedules over the limits of that architecture. `ptx` defaults
        to `$XBENCH_CUDA_PTX` (1, the default: assemble with ptxas for resources; 0: run without)."""
        if ptx is None:
            ptx = ptx_default()
        if options:
            raise BackendError(f"the cuda backend has no compile option {', '.join(map(repr, options))}",
                               hint="options: cc='sm_90' (or 'sm_80', (9, 0), '9.0'), ptx=True/False")
        key_cc = device.normalize_cc(cc) if cc is not None else (device.device_cc() or device.DEFAULT_CC)
        arch = f"sm_{key_cc[0]}{key_cc[1]}"
        limits, limits_source = device_limits(key_cc)
        schedules = schedules or {k.name: self.default_schedule(k) for k in program.kernels}
        for k in program.kernels:             # schedules given straight to the backend, not through op.compile
            validate(self.knobs(k, program), schedules.get(k.name, {}), k.name)
        t0 = time.perf_counter()
        writer = ModuleWriter(program, schedules, limits.shared_mem_per_block_bytes)
        writer.build()
        for ln in writer.launches:
            if ln.threads > limits.max_threads_per_block:
                raise BackendError(f"kernel {ln.kernel}: {ln.threads} threads per block exceed the "
                                   f"{limits.max_threads_per_block} allowed on {arch} (max_threads_per_block)")
        source = writer.module()
        key = digest(CODEGEN_VERSION, source, tool_versions())
        path = cache_dir("cuda") / f"{program.name}_{key}.py"
        existed = path.exists()
        write_once(path, source)

        ptx_text: dict[str, str] = {}
        res: dict[str, dict] = {ln.name: self._launch_resources(ln) for ln in writer.launches}
        tools: dict[str, str] = {}
        if ptx:
            ptx_text, tools = self._assemble(program, writer, source, str(path), key, key_cc, res, arch)
        else:
            tools = {"ptxas": "not run (ptx=False or XBENCH_CUDA_PTX=0)"}
        ms = (time.perf_counter() - t0) * 1e3

        infos = []
        for k in program.kernels:
            lns = writer.kernel_launches[k.name]
            kres = dict(res[lns[0].name])
            if len(lns) > 1:
                kres["launches"] = {ln.name: res[ln.name] for ln in lns}
                rs = [res[ln.name] for ln in lns]
                if "registers" in kres:           # the kernel's figures: its most demanding launch
                    worst = min(rs, key=lambda r: r["theoretical_occupancy"])
                    kres.update({n: max(r[n] for r in rs) for n in
                                 ("registers", "smem_bytes", "stack_frame_bytes", "spill_stores_bytes",
                                  "spill_loads_bytes", "barriers")})
                    kres.update({n: worst[n] for n in ("theoretical_occupancy", "occupancy_limiter",
                                                       "blocks_per_sm", "active_warps_per_sm")})
            infos.append(KernelInfo(k.name, k.kind, "\n\n".join(ln.source for ln in lns), schedules[k.name], kres))
        art = CudaArtifact(self.name, program, source, infos,
                           self._totals(writer.launches, res, arch, str(path), tools, limits_source),
                           compile_ms=ms, cache_hit=existed, predicted=device.mode() != "gpu")
        art.ptx = ptx_text
        art.cc = arch
        art.path = str(path)
        art.launches = writer.launches
        return art

    # ---- resources -------------------------------------------------------------------------------------------
    @staticmethod
    def _launch_resources(ln: Launch) -> dict[str, Any]:
        return {
            "function": ln.name, "template": ln.template, "grid": list(ln.grid), "block": list(ln.block),
            "threads_per_block": ln.threads, "sim_grid": list(ln.sim_grid()),
            "shared_arrays": {a.name: {"shape": list(a.shape), "dtype": a.dtype, "bytes": a.nbytes}
                              for a in ln.shared},
            "smem_allocated_bytes": ln.smem_bytes,
            "scratch_arrays": {s.name: {"per_slot": list(s.per_slot), "dtype": s.dtype, "slots": s.slots}
                               for s in ln.scratch},
            "fast_math": ln.fastmath, **ln.details,
        }

    def _assemble(self, program, writer, source, path, key, cc, res, arch):
        from . import ptx as P

        def error(message, hint):
            return BackendError(message, hint=hint)

        ptxas = P.find_ptxas()
        if ptxas is None:
            raise BackendError("ptxas (the CUDA toolkit's PTX assembler) was not found, so register and shared "
                               "memory usage cannot be reported",
                               hint="install the CUDA toolkit and put its bin/ folder on PATH (or set CUDA_HOME); "
                                    "or run without PTX resources: pass ptx=False to op.compile, or set "
                                    "XBENCH_CUDA_PTX=0 for every compile (op.run too)")
        prelude = writer.prelude(source)
        ncv = P.numba_cuda_version()
        items = []
        for ln in writer.launches:
            sig = [self._param_type(program, ln, p) for p in ln.params]
            items.append({"key": digest("ptx", CODEGEN_VERSION, prelude, ln.source, sig, cc, ln.fastmath,
                                        ln.bounds, ncv),
                          "function": ln.name, "sig": sig, "cc": list(cc), "fastmath": ln.fastmath,
                          "launch_bounds": list(ln.bounds)})
        ptx_by_key = P.generate(items, path, f"xbench_cuda_ptx_{key}", error)
        ptx_text = {}
        for ln, it in zip(writer.launches, items):
            text = ptx_by_key[it["key"]]
            ptx_text[ln.name] = text
            info = P.resources(text, cc, ptxas, error)
            r = res[ln.name]
            r.update({k: v for k, v in info.items() if k != "ptxas_output"})
            r["ptxas_output"] = info["ptxas_output"]
            try:
                occ = occupancy(cc, ln.threads, info["registers"], info["smem_bytes"])
            except OccupancyError as exc:
                raise BackendError(f"kernel {ln.kernel} cannot launch on {arch}: {exc}".replace("xbench: ", ""),
                                   hint=f"change its schedule ({', '.join(writer.schedules[ln.kernel])})") from None
            r.update(occ.as_metrics())
            r["occupancy_block_limits"] = dict(occ.block_limits)
        tools = {"ptxas": P.ptxas_version(ptxas), "numba_cuda": ncv}
        return ptx_text, tools

    @staticmethod
    def _param_type(program: Program, ln: Launch, name: str) -> list:
        if name in program.buffers:
            b = program.buffers[name]
            return [b.dtype, max(1, len(b.shape))]
        s = next(s for s in ln.scratch if s.name == name)
        return [s.dtype, 1 + len(s.per_slot)]

    @staticmethod
    def _totals(launches: list[Launch], res: dict, arch: str, path: str, tools: dict, limits_source: str) -> dict:
        out: dict[str, Any] = {"cc": arch, "file": str(path), "mode": device.mode(), "launches": len(launches),
                               "limits_from": limits_source, **tools}
        if launches and "registers" in res[launches[0].name]:
            rs = [res[ln.name] for ln in launches]
            worst = min(rs, key=lambda r: r["theoretical_occupancy"])
            out.update({
                "registers_max": max(r["registers"] for r in rs),
                "smem_bytes_max": max(r["smem_bytes"] for r in rs),
                "spill_bytes": sum(r["spill_stores_bytes"] + r["spill_loads_bytes"] for r in rs),
                "stack_frame_bytes_max": max(r["stack_frame_bytes"] for r in rs),
                "theoretical_occupancy_min": worst["theoretical_occupancy"],
                "occupancy_limiter": worst["occupancy_limiter"],
            })
        return out


backend = CudaBackend()
log.debug("cuda backend loaded")
__all__ = ["backend", "CudaBackend", "CudaArtifact"]

"""The ascend backend: Ascend C generated from the loop IR, built and run on xbench's CPU twin.

`op.compile("ascend", *arrays)` writes one Ascend C source per program (kernels in the official style, tiling
structs, host tiling functions; see `codegen.py`), compiles it with g++ against the twin header
(`twin/include`), calls the generated host tiling functions and returns an `AscendArtifact`:

- `.source`: the kernel file as a user would read it (device code, then the host tiling code);
- `.resources`: per launch the UB plan (bytes per queue/buffer, total against the budget), tile length,
  buffer count, block dim, L1/L0 use of cube kernels, what runs on the scalar path; after a run also the
  twin's counters (`"counters"`);
- `.run(*arrays)`: one host thread per block; `.counters(*arrays)` runs and returns the counters alone
  (MTE2/MTE3 bytes, vector instructions and elements, cube MACs per core, queue traffic);
- `.predicted` is True: no NPU runs here, timings of this backend come from models fed by the counters.

Real CANN: `scripts/ascend_build_cann.sh` builds the same source with a CANN toolkit (see docs/ascend.md).
"""
from __future__ import annotations

import ctypes
import functools
import re
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dtypes import to_numpy
from ...errors import BackendError
from ...ir.kernel import Kernel, Program
from ...ir.schedule import Knob, Schedule
from .. import Artifact, KernelInfo
from . import twin
from .codegen import Launch, ProgramWriter, prefer_tiles
from .matmul import cube_use

CODEGEN_VERSION = "1"
TARGET = "ascend-910b"
# -Og: generated programs build in about half the -O2 time; the twin runs them within 2x of -O2
BUILD_FLAGS = ("-Og",)


@functools.cache
def target_spec(name: str = TARGET):
    from ...hw.target import get_target
    return get_target(name).npu


@dataclass
class LaunchInfo:
    """A launch as the host runs it: its generated description and the tiling the host function filled."""
    launch: Launch
    block_dim: int
    tiling: Any                      # the ctypes structure (passed to the kernel through GM)

    def tiling_values(self) -> dict[str, Any]:
        out = {n: int(getattr(self.tiling, n)) for n, _ in self.launch.fields}
        if self.launch.cube:
            out["cube"] = {n: int(getattr(self.tiling.cube, n)) for n in twin.TCUBETILING_FIELDS}
        return out


class AscendArtifact(Artifact):
    """A compiled program on the twin. `run(*arrays)` executes every launch in order; `counters(*arrays)`
    runs and returns the twin's counters; `last_counters` holds the most recent run's."""

    lib: twin.TwinLibrary
    launches: list[LaunchInfo]
    extra: dict[str, tuple[tuple[int, ...], str]]
    config: twin.TwinConfig
    last_counters: dict[str, Any] | None = None

    def _inputs(self, arrays) -> dict[str, np.ndarray]:
        p = self.program
        bufs: dict[str, np.ndarray] = dict(zip(p.inputs, self.check_inputs(arrays)))
        for name, b in p.buffers.items():
            if b.role == "const":
                bufs[name] = np.ascontiguousarray(np.asarray(b.value).astype(to_numpy(b.dtype)))
            elif b.role in ("output", "temp") and name not in bufs:
                bufs[name] = _garbage(b.shape, b.dtype)
        for name, (shape, dtype) in self.extra.items():
            bufs[name] = _garbage(shape, dtype)
        return bufs

    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        bufs = self._inputs(arrays)
        per_launch = []
        workspace = None
        for info in self.launches:
            ln = info.launch
            if ln.workspace and (workspace is None or workspace.nbytes < ln.workspace):
                workspace = np.empty(ln.workspace, np.uint8)
            args = [_gm(bufs[n]) for n in ln.args]
            res = self.lib.launch(ln.entry, info.block_dim, *args, workspace if ln.workspace else None,
                                  info.tiling, config=self.config)
            per_launch.append(_counters(info, res))
        self.last_counters = {"launches": per_launch, "totals": _sum([c["totals"] for c in per_launch])}
        self.resources["counters"] = self.last_counters
        outs = []
        for name in self.program.outputs:
            src = self.program.aliases.get(name)
            outs.append(bufs[src].copy() if src is not None else bufs[name])
        return outs

    def counters(self, *arrays: np.ndarray) -> dict[str, Any]:
        """Run once and return the twin's counters: per launch (block dim, totals, per-core values, vector
        instructions by API, UB buffers) and summed over launches."""
        self.run(*arrays)
        return self.last_counters


def _garbage(shape, dtype: str) -> np.ndarray:
    """Output and temporary buffers start as 0xFF bytes (NaN for floats), so an element a kernel forgets to
    write shows up in the comparison with the reference."""
    a = np.empty(tuple(shape), to_numpy(dtype))
    a.reshape(-1).view(np.uint8)[:] = 0xFF
    return a


def _gm(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint8) if a.dtype == np.bool_ else a


def _sum(dicts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = max(out.get(k, 0), v) if k == "ub_high_water" else out.get(k, 0) + v
    return out


def _counters(info: LaunchInfo, res: twin.LaunchResult) -> dict[str, Any]:
    return {
        "entry": info.launch.entry, "kernel": info.launch.kernel, "role": info.launch.role,
        "block_dim": res.block_dim, "totals": dict(res.totals), "per_core": [dict(b) for b in res.blocks],
        "ops": dict(res.op_totals),
        "buffers": [[{"kind": b.kind, "position": b.position, "num": b.num, "bytes": b.bytes, "address": b.address}
                     for b in blk] for blk in res.buffers[:1]],
        "elapsed_s": res.elapsed_s,
    }


class AscendBackend:
    name = "ascend"
    default_target = TARGET

    def available(self) -> tuple[bool, str]:
        try:
            cxx, version = twin.compiler()
        except BackendError as exc:
            return False, exc.message + (f" ({exc.hint})" if exc.hint else "")
        return True, f"Ascend C on the CPU twin ({cxx}: {version})"

    def knobs(self, kernel: Kernel, program: Program | None = None) -> dict[str, Knob]:
        d = self.default_schedule(kernel)
        out = {
            "buffer_num": Knob("buffer_num", (2, 1), d["buffer_num"],
                               "TQue depth: 2 double-buffers CopyIn/Compute/CopyOut, 1 saves UB"),
            "tile_length": Knob("tile_length", (0, 256, 512, 1024, 2048, 4096, 8192, 16384), d["tile_length"],
                                "elements per vector tile (0: the largest that fits, spread over the cores); "
                                "shrunk to fit the Unified Buffer"),
            "block_dim": Knob("block_dim", (0, 1, 2, 4, 8, 16, 24, 48), d["block_dim"],
                              "cores to launch on (0: all the target has)"),
        }
        if kernel.kind in ("row", "reduce"):
            out["row_mode"] = Knob("row_mode", ("auto", "resident", "stream"), d["row_mode"],
                                   "row kernels: keep a row in the UB (one GM read) or stream it in tiles")
        return out

    def default_schedule(self, kernel: Kernel) -> Schedule:
        s: dict[str, Any] = {"buffer_num": 2, "tile_length": 0, "block_dim": 0}
        if kernel.kind in ("row", "reduce"):
            s["row_mode"] = "auto"
        return Schedule(s)

    def check(self, program: Program, kernel: Kernel, schedule: Schedule, target: str = TARGET) -> str | None:
        """Why `schedule` cannot run `kernel` (a Unified Buffer or L1/L0 plan that cannot fit even shrunk), found
        by planning and writing the kernel without building it; None when it can. The tuner prunes with it."""
        if schedule.get("buffer_num", 2) not in (1, 2):
            return f"buffer_num must be 1 or 2, got {schedule.get('buffer_num')!r}"
        npu = target_spec(target)
        one = Program(program.name, program.buffers, program.inputs, program.outputs, [kernel], graph=program.graph)
        try:
            ProgramWriter(one, {kernel.name: schedule}, ub_bytes=npu.ub_bytes, vector_cores=npu.vector_cores,
                          cube_cores=npu.cube_cores, l1_bytes=npu.l1_bytes, l0a_bytes=npu.l0a_bytes,
                          l0b_bytes=npu.l0b_bytes, l0c_bytes=npu.l0c_bytes).write()
        except BackendError as exc:
            return exc.message
        return None

    def compile(self, program: Program, schedules: dict[str, Schedule] | None = None,
                target: str = TARGET, **options) -> AscendArtifact:
        if options:
            raise BackendError(f"the ascend backend takes no option(s) {', '.join(options)}",
                               hint="options: target='ascend-910b'; schedules per kernel: buffer_num, "
                                    "tile_length, block_dim, row_mode")
        schedules = schedules or {k.name: self.default_schedule(k) for k in program.kernels}
        for k in program.kernels:
            bn = schedules.get(k.name, Schedule()).get("buffer_num", 2)
            if bn not in (1, 2):
                raise BackendError(f"kernel {k.name}: buffer_num must be 1 or 2, got {bn!r}")
        npu = target_spec(target)
        t0 = time.perf_counter()
        pw = ProgramWriter(program, schedules, ub_bytes=npu.ub_bytes, vector_cores=npu.vector_cores,
                           cube_cores=npu.cube_cores, l1_bytes=npu.l1_bytes, l0a_bytes=npu.l0a_bytes,
                           l0b_bytes=npu.l0b_bytes, l0c_bytes=npu.l0c_bytes)
        source, launches = pw.write()
        source = f"// xbench ascend codegen {CODEGEN_VERSION}\n" + source
        config = twin.TwinConfig(ub_bytes=npu.ub_bytes, l1_bytes=npu.l1_bytes, l0a_bytes=npu.l0a_bytes,
                                 l0b_bytes=npu.l0b_bytes, l0c_bytes=npu.l0c_bytes, max_cube_cores=npu.cube_cores)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", program.name)[:40] or "program"
        cached = twin.is_built(source, name=name, extra_flags=BUILD_FLAGS)
        lib = twin.build(source, name=name, extra_flags=BUILD_FLAGS)
        infos = []
        for ln in launches:
            infos.append(_host_tiling(lib, ln, schedules.get(ln.kernel, Schedule())))
        ms = (time.perf_counter() - t0) * 1e3
        kernels = []
        for k in program.kernels:
            mine = [i for i in infos if i.launch.kernel == k.name]
            res = {"launches": [_launch_resources(i) for i in mine]}
            ksrc = "\n".join(_entry_source(source, i.launch) for i in mine)
            kernels.append(KernelInfo(k.name, k.kind, ksrc, schedules[k.name], res))
        resources = {
            "target": target, "ub_budget": npu.ub_bytes, "source_file": str(lib.source_path),
            "library": str(lib.path), "launches": [_launch_resources(i) for i in infos],
            "scalar_path": [p for i in infos for p in i.launch.plan.get("scalar_path", [])],
            "fallbacks": dict(pw.fallbacks),
            "workspaces": {n: {"shape": list(s), "dtype": d} for n, (s, d) in pw.extra.items()},
        }
        art = AscendArtifact(self.name, program, source, kernels, resources, compile_ms=ms, cache_hit=cached,
                             predicted=True)
        art.lib = lib
        art.launches = infos
        art.extra = dict(pw.extra)
        art.config = config
        art.last_counters = None
        return art


def _host_tiling(lib: twin.TwinLibrary, ln: Launch, sched: Schedule) -> LaunchInfo:
    fields = ([("cube", twin.TCubeTiling)] if ln.cube else []) + [(n, ctypes.c_uint32) for n, _ in ln.fields]
    struct = type(ln.struct, (ctypes.Structure,), {"_fields_": fields})
    fn = lib.host_function(ln.host, ctypes.c_uint32, [ctypes.POINTER(struct), ctypes.c_uint32])
    cores = int(sched.get("block_dim", 0) or 0) or ln.cores
    t = struct()
    block_dim = int(fn(ctypes.byref(t), min(cores, ln.cores)))
    info = LaunchInfo(ln, block_dim, t)
    if ln.cube:
        use = cube_use(info.tiling_values()["cube"], ln.plan["in_bytes"])
        for level, used in use.items():
            budget = ln.plan[level.replace("_bytes", "_budget")]
            if used > budget:
                raise BackendError(f"{ln.entry}: the Matmul tiling needs {used} bytes of {level[:-6].upper()}, "
                                   f"more than the {budget} the core has")
    return info


def _launch_resources(info: LaunchInfo) -> dict[str, Any]:
    ln = info.launch
    out = {"entry": ln.entry, "role": ln.role, "block_dim": info.block_dim, **ln.plan,
           "tiling": info.tiling_values()}
    if ln.cube:
        c = out["tiling"]["cube"]
        out["single_core"] = {"M": c["singleCoreM"], "N": c["singleCoreN"], "K": c["singleCoreK"]}
        out.update(cube_use(c, ln.plan["in_bytes"]))
    return out


def _entry_source(source: str, ln: Launch) -> str:
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f"// Tiling of {ln.entry}:")), None)
    end = next((i for i, line in enumerate(lines) if line == f"XBENCH_TWIN_LAUNCH({ln.entry})"), None)
    if start is None or end is None:
        return ""
    return "\n".join(lines[start:end + 2])


backend = AscendBackend()
__all__ = ["backend", "AscendBackend", "AscendArtifact", "prefer_tiles"]

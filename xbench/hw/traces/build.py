"""The trace of a program's kernel on a target, as its backend's schedule or launch runs it."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...ir.contraction import roles as contract_roles
from ...ir.contraction import shift_plan
from ...ir.kernel import Kernel, Program
from ..target import Target
from .blas import blas_trace, shift_trace
from .gpu import GpuLaunch, GpuTrace
from .points import CpuPointTrace, KernelTrace, Layout, layout

# ---- building the traces of a program ---------------------------------------------------------------------

def vector_bytes(target: Target) -> int:
    """The width of one vector load on a cpu target (64 with AVX-512, 32 with AVX2, else 16)."""
    isa = set(target.cpu.isa) if target.cpu else set()
    return 64 if "avx512f" in isa else 32 if "avx2" in isa or "avx" in isa else 16


def cpu_trace(program: Program, kernel: Kernel, target: Target, *, schedule: Mapping[str, Any] | None = None,
              lay: Layout | None = None, data: Mapping[str, np.ndarray] | None = None) -> KernelTrace:
    """The trace of `kernel` as the cpu backend runs it with `schedule` (parallel, impl) on `target`."""
    lay = lay or layout(program)
    sched = dict(schedule or {})
    cores = target.cpu.cores if target.cpu else target.compute_units
    parallel = bool(sched.get("parallel", True))
    impl = sched.get("impl", "blas" if kernel.kind == "contract" else None)
    roles = contract_roles(kernel)
    if roles is not None and impl == "blas" and roles[0].dtype in ("float32", "float64"):
        plan = shift_plan(kernel) if sched.get("window") in ("shift", "winograd") else None
        if plan is not None:
            t = shift_trace(program, kernel, plan, lay, cores=cores, vec=vector_bytes(target), data=data)
            if sched["window"] == "winograd":
                t.notes.append("Winograd F(2x2, 3x3) traced as the shifted GEMMs over the same padded copy: its "
                               "transformed tiles and 16 smaller GEMMs are not traced")
            return t
        t = blas_trace(program, kernel, lay, cores=cores, vec=vector_bytes(target), data=data)
        if sched.get("merge_batch") and sched.get("window", "pack") == "pack":
            t.notes.append("merge_batch: traced as a GEMM per batch point; the backend packs every point's columns "
                           "for one GEMM, reading the left operand once")
        return t
    t = CpuPointTrace(program, kernel, lay, cores=cores, parallel=parallel, data=data)
    if roles is not None and impl == "loops":
        t.notes.append("integer contraction: traced in the loop-IR order (the backend's i-k-j loops differ)")
    return t


def gpu_trace(program: Program, kernel: Kernel, target: Target, *, resources: Mapping[str, Any] | None = None,
              lay: Layout | None = None, data: Mapping[str, np.ndarray] | None = None) -> KernelTrace:
    """The trace of `kernel` as the cuda backend launches it on `target` (one stream per SM)."""
    lay = lay or layout(program)
    if resources and "template" in resources:
        launch = GpuLaunch.from_resources(resources)
    else:
        limit = target.gpu.shared_mem_per_block_bytes if target.gpu else 48 * 1024
        launch = GpuLaunch.default(kernel, limit)
    return GpuTrace(program, kernel, lay, launch, target.compute_units, data)

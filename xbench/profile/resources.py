"""What each backend's toolchain reported about an artifact, as tables with names and units.

`resource_tables(backend, artifact)` gives (title, header, rows) tables of plain strings: the artifact's totals,
one column per kernel (or launch) of the per-kernel figures, and an Ascend launch's Unified Buffer plan. Keys
the tables know get a readable name and a unit (registers per thread, bytes in B/KiB, occupancy in %, grids as
x × y × z); other scalar keys are shown under their own name with a unit read from their suffix; the
toolchain's raw output, file paths and the counters of the latest run stay out (the profiler reports those).
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

Table = tuple[str, list[str], list[list[str]]]

# key -> (name, unit): unit is "B", "ms", "%" (a fraction shown in %), "x" (a grid), "regs", "" (as it is)
LABELS: dict[str, tuple[str, str]] = {
    # totals
    "numba": ("numba", ""), "threads": ("threads", ""), "jit_ms": ("JIT compile", "ms"), "kernels": ("kernels", ""),
    "cc": ("architecture", ""), "mode": ("runs on", ""), "launches": ("launches", ""),
    "limits_from": ("occupancy limits from", ""), "ptxas": ("ptxas", ""), "numba_cuda": ("numba-cuda", ""),
    "registers_max": ("registers / thread (max)", "regs"), "smem_bytes_max": ("shared memory / block (max)", "B"),
    "spill_bytes": ("register spills", "B"), "stack_frame_bytes_max": ("stack frame (max)", "B"),
    "theoretical_occupancy_min": ("theoretical occupancy (min)", "%"), "occupancy_limiter": ("limited by", ""),
    "target": ("target", ""), "ub_budget": ("Unified Buffer per core", "B"),
    # cpu kernels
    "parallel": ("parallel", ""), "work": ("scalar evaluations", ""),
    # cuda kernels and launches
    "template": ("template", ""), "grid": ("grid", "x"), "block": ("block", "x"), "sim_grid": ("grid in the simulator", "x"),
    "threads_per_block": ("threads / block", ""), "points": ("outer points", ""),
    "threads_per_point": ("threads / point", ""), "points_per_block": ("points / block", ""),
    "registers": ("registers / thread", "regs"), "smem_bytes": ("shared memory / block", "B"),
    "smem_allocated_bytes": ("shared arrays / block", "B"), "stack_frame_bytes": ("stack frame", "B"),
    "spill_stores_bytes": ("spill stores", "B"), "spill_loads_bytes": ("spill loads", "B"),
    "barriers": ("barriers", ""), "gmem_bytes": ("global data", "B"),
    "theoretical_occupancy": ("theoretical occupancy", "%"), "blocks_per_sm": ("blocks / SM", ""),
    "active_warps_per_sm": ("warps / SM", ""), "fast_math": ("fast math", ""), "arch": ("architecture", ""),
    "BM": ("tile rows (BM)", ""), "BN": ("tile columns (BN)", ""), "BK": ("K step (BK)", ""),
    "TM": ("rows / thread (TM)", ""), "TN": ("columns / thread (TN)", ""),
    "M": ("M", ""), "N": ("N", ""), "K": ("K", ""), "batch": ("batch", ""),
    # ascend launches
    "role": ("role", ""), "form": ("form", ""), "block_dim": ("cores (blockDim)", ""),
    "tile_length": ("tile length (elements)", ""), "buffer_num": ("buffers per queue", ""),
    "ub_total": ("Unified Buffer used", "B"), "row_mode": ("rows", ""), "rows": ("row count", ""),
    "row_extent": ("row length", ""), "slots": ("scratch slots", ""),
}
HIDDEN = {"ptxas_output", "function", "entry", "counters", "file", "source_file", "library", "cmem_bytes",
          "shared_arrays", "scratch_arrays", "row_scratch", "occupancy_block_limits", "tiling", "ub", "notes",
          "scalar_path", "fallbacks", "workspaces", "registers_per_thread", "shared_mem_per_block",
          "ub_reserved_for_select", "a", "b", "c", "cube", "in_dtype", "in_bytes", "epilogue",
          "l0a_budget", "l0b_budget", "l0c_budget", "l1_budget"}


def fmt_bytes(n: float) -> str:
    n = int(n)
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


def _unit(key: str) -> str:
    if key in LABELS:
        return LABELS[key][1]
    if key.endswith(("_bytes", "_budget")):
        return "B"
    if key.endswith("_ms"):
        return "ms"
    return ""


def value_text(key: str, v: Any) -> str:
    """`v` with the unit its key calls for, e.g. 9216 -> '9.0 KiB', 1.0 -> '100 %', [8, 1, 1] -> '8 × 1 × 1'."""
    from .timing import fmt_time
    unit = _unit(key)
    if isinstance(v, bool):
        return "yes" if v else "no"
    if unit == "B" and isinstance(v, (int, float)):
        return fmt_bytes(v)
    if unit == "ms" and isinstance(v, (int, float)):
        return fmt_time(float(v)).strip()
    if unit == "%" and isinstance(v, (int, float)):
        return f"{100 * v:.0f} %"
    if unit == "regs" and isinstance(v, (int, float)):
        return f"{int(v)}"
    if unit == "x" and isinstance(v, (list, tuple)):
        return " × ".join(str(int(x)) for x in v)
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v) or "—"
    return str(v)


def label(key: str) -> str:
    return LABELS.get(key, (key.replace("_", " "), ""))[0]


def _shown(key: str, v: Any) -> bool:
    if key in HIDDEN or isinstance(v, Mapping):
        return False
    if isinstance(v, (list, tuple)) and not (_unit(key) == "x" or all(isinstance(x, (int, float, str)) for x in v)):
        return False
    return not (isinstance(v, str) and os.path.isabs(v))


def _launches(kernel: Any) -> list[tuple[str, Mapping[str, Any]]]:
    launches = kernel.resources.get("launches")
    if isinstance(launches, Mapping):                # cuda: launch name -> resources
        return [(str(n), r) for n, r in launches.items() if isinstance(r, Mapping)]
    if isinstance(launches, list) and launches and all(isinstance(x, Mapping) for x in launches):
        return [(str(x.get("entry", f"{kernel.name}[{i}]")), x) for i, x in enumerate(launches)]
    return [(kernel.name, kernel.resources)]


def resource_tables(backend: str, artifact: Any) -> list[Table]:
    """The tables of one artifact (module docstring)."""
    out: list[Table] = []
    totals = [[label(k), value_text(k, v)] for k, v in artifact.resources.items() if _shown(k, v)]
    if totals:
        out.append((f"{backend}: totals", ["", "value"], totals))
    per: dict[str, dict[str, Any]] = {}
    ub_plans: list[tuple[str, Mapping[str, Any]]] = []
    for k in artifact.kernels:
        for name, res in _launches(k):
            per[name] = {key: v for key, v in res.items() if _shown(key, v) and key != "ub_budget"}
            if isinstance(res.get("ub"), Mapping) and res["ub"]:
                ub_plans.append((name, res))
    if per:
        keys: list[str] = []
        for res in per.values():
            keys.extend(k for k in res if k not in keys)
        rows = [[label(key), *(value_text(key, res[key]) if key in res else "—" for res in per.values())]
                for key in keys]
        out.append((f"{backend}: per kernel", ["", *per], rows))
    for name, res in ub_plans:
        rows = [[buf, str(b.get("kind", "")), str(b.get("position", "")), f"{b.get('num', 1)} × "
                 f"{fmt_bytes(b.get('bytes', 0))}", fmt_bytes(b.get("total", 0))] for buf, b in res["ub"].items()]
        budget = res.get("ub_budget")
        total = res.get("ub_total")
        if total is not None:
            share = f" ({100 * total / budget:.1f} % of {fmt_bytes(budget)})" if budget else ""
            rows.append(["total", "", "", "", fmt_bytes(total) + share])
        out.append((f"{backend}: Unified Buffer plan of {name} (per core)",
                    ["buffer", "kind", "position", "buffers", "bytes"], rows))
    return out


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    return "\n".join(indent + line for line in lines)

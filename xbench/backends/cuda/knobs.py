"""Schedule knobs of the cuda backend and the default choice for each kernel."""
from __future__ import annotations

from ...ir.kernel import Kernel, Sort
from ...ir.schedule import Knob, Schedule
from .codegen import _extents, contiguous_across_points, next_pow2, scatter_phases, stage_length, tiled_roles

POW2 = tuple(1 << i for i in range(11))            # 1 .. 1024


def _half(k: Kernel, program_buffers=None) -> bool:
    """Does the kernel hold float16 values in scratch (row buffers, or float16 GEMM operands)?"""
    if any(dt == "float16" for _, dt in k.row_buffers.values()):
        return True
    roles = tiled_roles(k)
    if roles is not None:
        c = roles[0]
        return c.lhs.dtype == "float16" and c.rhs.dtype == "float16"
    return False


def default_threads(k: Kernel) -> tuple[int, int]:
    """(threads per outer point, outer points per block) for a non-tiled kernel."""
    L, P = stage_length(k), k.points()
    if k.kind == "elementwise" or L <= 16:
        return 1, 1
    if contiguous_across_points(k) and P >= 2048:
        return 1, 1                            # e.g. column sums: thread per column, coalesced rows
    if k.kind == "scan" and P >= 4096:
        return 1, 1
    if any(isinstance(s, Sort) for s in k.stages):
        T = min(512, max(32, next_pow2(L) // 2))
    else:
        T = min(512, max(32, next_pow2(-(-L // 8))))   # about 8 elements per thread
    R = max(1, min(256 // T, next_pow2(P)))
    return T, R


def tile_defaults(k: Kernel) -> dict:
    c, batch, m, n = tiled_roles(k)
    M, N, K, B = _extents(m), _extents(n), _extents(c.axes), _extents(batch)
    if M >= 512 and N >= 512 and -(-M // 128) * -(-N // 128) * B >= 200:
        # 128 x 128 tiles when they still give every SM of a large GPU (100-132 SMs) a block or two;
        # 8 x 8 accumulators per thread, registers capped for two blocks per SM (no spills at 126)
        return {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "min_blocks": 2}
    BM = 64 if M >= 48 else max(16, next_pow2(M))
    BN = 64 if N >= 48 else max(16, next_pow2(N))
    TM = 4 if BM >= 64 else 2
    TN = 4 if BN >= 64 else 2
    BK = 16 if K >= 16 else max(4, next_pow2(K))
    return {"BM": BM, "BN": BN, "BK": BK, "TM": TM, "TN": TN}


def default_schedule(k: Kernel) -> Schedule:
    s: dict = {"fast_math": False, "min_blocks": 0}
    if scatter_phases(k) is not None:
        s["block"] = 256
        return Schedule(s)
    if tiled_roles(k) is not None:
        s.update(tile_defaults(k))
        s.update({"impl": "tiled", "pad": 1})
        if _half(k):
            s["temp_dtype"] = "float16"
        return Schedule(s)
    T, R = default_threads(k)
    s["threads_per_point"] = T
    if T == 1:
        s["block"] = 256
    else:
        s["points_per_block"] = R
    if k.row_buffers or any(isinstance(st, Sort) for st in k.stages):
        s["scratch"] = "auto"
    if _half(k):
        s["temp_dtype"] = "float16"
    return Schedule(s)


def knobs(k: Kernel) -> dict[str, Knob]:
    d = default_schedule(k)
    out = {"fast_math": Knob("fast_math", (False, True), d["fast_math"],
                             "numba-cuda fastmath (flush denormals, approximate division/sqrt, no NaN/inf "
                             "guarantees)")}
    out["min_blocks"] = Knob("min_blocks", (0, 1, 2, 3, 4), d.get("min_blocks", 0),
                             "launch bounds: blocks per SM ptxas must leave room for (caps registers per "
                             "thread; 0 = only the block size)")
    if "block" in d or "threads_per_point" in d or "BM" in d:
        out["block"] = Knob("block", POW2[5:], d.get("block", 256),
                            "threads per block when each thread handles whole outer points")
    if "BM" in d:
        out["impl"] = Knob("impl", ("tiled", "points"), d["impl"],
                           "contraction: shared-memory tiled GEMM, or a dot product per output point")
        for name, choices, doc in (("BM", (16, 32, 64, 128, 256), "block tile rows (flattened M)"),
                                   ("BN", (16, 32, 64, 128, 256), "block tile columns (flattened N)"),
                                   ("BK", (4, 8, 16, 32, 64), "K step of the shared-memory tiles"),
                                   ("TM", (1, 2, 4, 8, 16), "register tile rows per thread"),
                                   ("TN", (1, 2, 4, 8, 16), "register tile columns per thread"),
                                   ("pad", (0, 1, 2, 4), "extra elements per shared tile row (bank conflicts)")):
            out[name] = Knob(name, choices, d[name], doc)
    if "threads_per_point" in d or "BM" in d:
        out["threads_per_point"] = Knob("threads_per_point", POW2, d.get("threads_per_point", 1),
                                        "1: one thread per outer point; more: the threads of a block share a "
                                        "point (reductions through shared memory)")
        out["points_per_block"] = Knob("points_per_block", POW2[:7], d.get("points_per_block", 1),
                                       "outer points per block when threads share a point")
    if "scratch" in d:
        out["scratch"] = Knob("scratch", ("auto", "shared", "global"), d["scratch"],
                              "row scratch and sort buffers: on chip (shared memory; a local array with one "
                              "thread per point), in global memory, or on chip when they fit")
    if "temp_dtype" in d:
        out["temp_dtype"] = Knob("temp_dtype", ("float16", "float32"), d["temp_dtype"],
                                 "storage type of float16 scratch (row buffers, GEMM tiles); math is float32")
    return out

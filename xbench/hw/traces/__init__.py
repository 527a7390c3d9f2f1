"""Memory-access traces of loop-IR kernels, in the order a backend runs them, for the cache simulator.

Layout
------
Global buffers (inputs, outputs, temporaries, constants) lie one after another from address 0, each starting
at a multiple of `ALIGN` (4 KiB, a page). Row-local scratch, BLAS packing buffers and the CUDA backend's
global scratch lie after them, one region per stream (core or SM), reused by every kernel.

What is an access
-----------------
Each `Load` of a kernel's expressions and each store is one access of the element's size, at the byte address
of the element in its buffer (row-major). Within one iteration of a stage a `Load` that appears several times
is read once (the backends share common subexpressions); a `Load` that does not depend on the stage's loop
variables is read once per outer point, before the loop (the backends hoist it). Only the taken side of a
`Select` is read; its condition is evaluated on the index grid (with the input arrays' contents when it reads
them). Indices that read data (gather, embedding) are evaluated from the arrays given in `data`; a kernel whose
addresses depend on values computed inside the kernel cannot be traced (`TraceError`).

cpu (numba)
-----------
The outer loop is the parallel loop: its points (flattened row-major) are split into one contiguous chunk per
core, as numba's static scheduler does, and each core's accesses form one stream; a kernel the schedule runs
serially is one stream. At each point the stages run in order (`Reduce`: its loop nest; `Store`: its loop
nest, the store last in each iteration; `Scan`: one load/store step per element; `ScatterAdd`: the loads, then
a read-modify-write of the target; `Sort`: the row gathered into scratch, ceil(log2 n) merge passes over the
scratch, then the outputs written). Accesses are per element (`granularity = "element"`).

Contractions the cpu backend hands to BLAS (`impl = "blas"`) are traced as the packing passes the generated
code runs (operands that are not plain views are packed element by element into `_A[M, K]`, `_B[K, N]`), a
GotoBLAS/BLIS-style blocked GEMM, and the epilogue pass when the result is not written in place. The GEMM model
uses BLIS's Haswell blocking (`bli_cntx_init_haswell.c`: float32 MR x NR = 16 x 6, MC 168, KC 256, NC 4080;
float64 8 x 6, MC 72, KC 256, NC 4080): per (NC, KC) block the B panel is packed (shared by the cores), each
core packs its MC x KC blocks of A and runs the micro-kernel over MR x NR tiles, which reads the packed panels
one k-step at a time and loads and stores its tile of C. These accesses are vector-sized (32 bytes with AVX2,
64 with AVX-512: `granularity = "vector"`), not per element.

gpu (cuda backend)
------------------
Blocks go to SMs round-robin (block b on SM b mod #SMs) and each SM runs its blocks in order; the launch
configuration (template, grid, block, threads per point, points per block, GEMM tiles, where row scratch
lives) is read from the cuda artifact's per-kernel resources, else from the backend's documented default
(256 threads, one point per thread). Within a block, warps issue each access in turn (instruction-major,
warp-minor). A warp's access is coalesced into the distinct 32-byte sectors its active lanes touch; each sector
is one access (`granularity = "sector"`, what Nsight Compute's sector hit rates count). Templates: *point*
(thread g of the grid handles points g, g + grid size, ...), *row* (T threads per point stride over each stage's
loop, R points per block; reductions combine in shared memory; row scratch in shared memory makes no global
access), *tiled* (per block a BM x BN tile of the output: for each BK step the A and B tiles are loaded from
their operand expressions, lanes along the operand's contiguous axis, then the epilogue stores the tile).

Units
-----
A `KernelTrace` is consumed in *steps*: every stream advances by one unit per step (cpu: a segment of a stage
at one outer point, at most `SEGMENT` iterations; BLAS: one packing panel or micro-kernel call; gpu: one block
per SM). `generate(lo, hi)` returns one `Trace` per stream for steps [lo, hi), so a window of a large kernel is
generated without the rest (see `simulate_program`).
"""
from __future__ import annotations

from .blas import BlasGemmTrace, blas_regions, blas_trace, shift_trace
from .build import cpu_trace, gpu_trace, vector_bytes
from .gpu import GpuLaunch, GpuTrace
from .points import ALIGN, SEGMENT, CpuPointTrace, KernelTrace, Layout, SequenceTrace, TraceError, layout
from .simulate import KernelCache, LevelTraffic, footprint_trace, simulate_program

__all__ = ["ALIGN", "SEGMENT", "BlasGemmTrace", "CpuPointTrace", "GpuLaunch", "GpuTrace", "KernelCache",
           "KernelTrace", "Layout", "LevelTraffic", "SequenceTrace", "TraceError", "blas_regions", "blas_trace",
           "cpu_trace", "footprint_trace", "gpu_trace", "layout", "shift_trace", "simulate_program", "vector_bytes"]

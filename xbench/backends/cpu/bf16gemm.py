"""GEMM of bfloat16 operands into float32 on CPUs with AVX512-BF16, for contractions whose operands are
bfloat16 (autocast's matmuls, linears and attention).

OpenBLAS has no bfloat16 GEMM: through SGEMM both operands are first widened and then multiplied at float32's
rate. `vdpbf16ps` multiplies 16 pairs of bfloat16 and adds both products of each pair into a float32 lane: 32
products per instruction, twice an FMA's. The micro-kernel is LLVM IR emitted by a numba intrinsic (an MR x NR
tile of float32 sums held in registers over KC pairs of the contraction); blocking and packing around it are
plain numba:

- B is packed once into panels of NR columns, each column's pair of consecutive k adjacent (the instruction's
  operand layout), zero-padded to whole panels and pairs;
- each work item (a block of MC rows, and a group of panels when there are fewer row blocks than threads) packs
  its rows of A the same way, MR rows per micro-panel, and runs the micro-kernel over every tile, KC pairs at a
  time, storing (first block) or adding into C.

Numbers: the instruction rounds each product pair's sum into its lane and flushes subnormal inputs and results to
zero (as oneDNN's bfloat16 GEMM, which PyTorch runs on such CPUs); the order of the sums differs from SGEMM's,
well within bfloat16's tolerance.

Where xbench's float32 GEMMs run on torch's MKL (`blas`) and the CPU is Intel's, kernels' calls go to MKL's
bfloat16 GEMM for the layouts it takes and reach this GEMM (or `amx`) for the rest (`link`): MKL's is faster there
at large sizes and for a single row (2048^3: 1,348 GFLOP/s against the AMX GEMM's 715; 1x768x2304: 85 against 7).
On AMD's CPUs MKL's runs at its float32 rate, and this GEMM is twice as fast (`mkl_runs_bf16`).
"""
from __future__ import annotations

import functools
import os

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from . import blas
from .tasks import data, entry_point, strided_at

MR, NV = 6, 4                 # a tile of MR rows by NV vectors of 16 columns: 24 accumulators in registers
NR = 16 * NV
KC = 256                      # pairs of k per micro-kernel call (A's micro-panel: 6 KiB, in L1; B's: 64 KiB, in L2)
MC = 48                       # rows per work item


@functools.cache
def available() -> bool:
    """Whether numba compiles for a CPU with AVX512-BF16 (the host's, unless NUMBA_CPU_NAME names another)."""
    import llvmlite.binding as ll
    if numba.config.CPU_NAME not in (None, "host"):
        return "+avx512bf16" in (numba.config.CPU_FEATURES or "")
    try:
        return bool(ll.get_host_cpu_features().get("avx512bf16"))
    except RuntimeError:
        return False


class LLVMType(ir.Type):
    """An LLVM type llvmlite has no class for, by its name in the IR: `bfloat` (vdpbf16ps's operands), `x86_amx`."""

    def __init__(self, name: str):
        self._name = name

    def _to_string(self):
        return self._name

    def __eq__(self, other):
        return isinstance(other, LLVMType) and other._name == self._name

    def __hash__(self):
        return hash(("LLVMType", self._name))


@intrinsic
def tile(typingctx, a_addr, b_addr, pairs, c_addr, ldc, accumulate):
    """C[MR, NR] (float32 rows `ldc` elements apart at c_addr) = (C if accumulate else 0) + A's micro-panel (pairs
    x MR uint32 at a_addr: the bfloat16 of row r at k = 2p, 2p + 1) times B's (pairs x NR uint32 at b_addr);
    pairs >= 1."""
    if not all(isinstance(t, types.Integer) for t in (a_addr, b_addr, pairs, c_addr, ldc)):
        return None
    if not isinstance(accumulate, (types.Boolean, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        i32, i64, f32 = ir.IntType(32), ir.IntType(64), ir.FloatType()
        v16i, v16f, v32b = ir.VectorType(i32, 16), ir.VectorType(f32, 16), ir.VectorType(LLVMType("bfloat"), 32)
        a, b, n, c, ld = (builder.sext(v, i64) if v.type.width < 64 else v for v in args[:5])
        add = builder.icmp_unsigned("!=", args[5], ir.Constant(args[5].type, 0))
        name = "llvm.x86.avx512bf16.dpbf16ps.512"
        dot = builder.module.globals.get(name) or ir.Function(builder.module,
                                                              ir.FunctionType(v16f, [v16f, v32b, v32b]), name)
        pa, pb, pc = (builder.inttoptr(a, i32.as_pointer()), builder.inttoptr(b, v16i.as_pointer()),
                      builder.inttoptr(c, f32.as_pointer()))

        def c_vector(r, v):                   # row r, columns [16 v, 16 v + 16) of C
            at = builder.gep(pc, [builder.add(builder.mul(ir.Constant(i64, r), ld), ir.Constant(i64, 16 * v))])
            return builder.bitcast(at, v16f.as_pointer())

        entry = builder.block
        load = builder.append_basic_block("tile.load")
        loop, done = builder.append_basic_block("tile.loop"), builder.append_basic_block("tile.done")
        builder.cbranch(add, load, loop)
        builder.position_at_end(load)
        start = []
        for r in range(MR):
            row = []
            for v in range(NV):
                ld_ = builder.load(c_vector(r, v))
                ld_.align = 4
                row.append(ld_)
            start.append(row)
        builder.branch(loop)
        builder.position_at_end(loop)
        p = builder.phi(i64)
        p.add_incoming(ir.Constant(i64, 0), entry)
        p.add_incoming(ir.Constant(i64, 0), load)
        acc = [[builder.phi(v16f) for _ in range(NV)] for _ in range(MR)]
        for r in range(MR):
            for v in range(NV):
                acc[r][v].add_incoming(ir.Constant(v16f, None), entry)
                acc[r][v].add_incoming(start[r][v], load)
        cols = []
        for v in range(NV):
            ld_ = builder.load(builder.gep(pb, [builder.add(builder.mul(p, ir.Constant(i64, NV)), ir.Constant(i64, v))]))
            ld_.align = 4
            cols.append(builder.bitcast(ld_, v32b))
        undef, zeros = ir.Constant(v16i, ir.Undefined), ir.Constant(v16i, [0] * 16)
        new = []
        for r in range(MR):
            ld_ = builder.load(builder.gep(pa, [builder.add(builder.mul(p, ir.Constant(i64, MR)), ir.Constant(i64, r))]))
            ld_.align = 4
            pair = builder.bitcast(builder.shuffle_vector(builder.insert_element(undef, ld_, ir.Constant(i32, 0)),
                                                          undef, zeros), v32b)
            new.append([builder.call(dot, [acc[r][v], pair, cols[v]]) for v in range(NV)])
        nxt = builder.add(p, ir.Constant(i64, 1))
        p.add_incoming(nxt, loop)
        for r in range(MR):
            for v in range(NV):
                acc[r][v].add_incoming(new[r][v], loop)
        builder.cbranch(builder.icmp_signed("<", nxt, n), loop, done)
        builder.position_at_end(done)
        for r in range(MR):
            for v in range(NV):
                builder.store(new[r][v], c_vector(r, v)).align = 4
        return context.get_dummy_value()

    return types.void(a_addr, b_addr, pairs, c_addr, ldc, accumulate), codegen


@intrinsic
def interleave(typingctx, dst_addr, lo_addr, hi_addr, vectors):
    """dst[i] = lo[i] | hi[i] << 16 for i < 16 * vectors: two runs of uint16 (rows 2p and 2p + 1 of a row-major B)
    into the uint32 pairs of a panel, 16 at a time."""
    if not all(isinstance(t, types.Integer) for t in (dst_addr, lo_addr, hi_addr, vectors)):
        return None

    def codegen(context, builder, signature, args):
        i16, i32, i64 = ir.IntType(16), ir.IntType(32), ir.IntType(64)
        v16s, v16i = ir.VectorType(i16, 16), ir.VectorType(i32, 16)
        dst, lo, hi, n = (builder.sext(v, i64) if v.type.width < 64 else v for v in args)
        pd, pl, ph = (builder.inttoptr(dst, v16i.as_pointer()), builder.inttoptr(lo, v16s.as_pointer()),
                      builder.inttoptr(hi, v16s.as_pointer()))
        with cgutils.for_range(builder, n) as loop:
            i = loop.index
            lo_v, hi_v = builder.load(builder.gep(pl, [i])), builder.load(builder.gep(ph, [i]))
            lo_v.align = hi_v.align = 2
            both = builder.or_(builder.zext(lo_v, v16i), builder.shl(builder.zext(hi_v, v16i),
                                                                      ir.Constant(v16i, [16] * 16)))
            builder.store(both, builder.gep(pd, [i])).align = 4
        return context.get_dummy_value()

    return types.void(dst_addr, lo_addr, hi_addr, vectors), codegen


@numba.njit(nogil=True, cache=True)
def _pair(lo, hi):
    return np.uint32(lo) | (np.uint32(hi) << np.uint32(16))


@numba.njit(nogil=True, cache=True)
def _pack_b_panel(b, bp, j):
    """Panel j of B ([K, N] uint16) into bp[j] ([pairs, NR] uint32), read along B's contiguous axis."""
    K, N = b.shape
    n0 = j * NR
    width = min(NR, N - n0)
    if b.strides[0] < b.strides[1]:                     # columns contiguous (a transposed weight): down each
        for c in range(width):
            for p in range(K // 2):
                bp[j, p, c] = _pair(b[2 * p, n0 + c], b[2 * p + 1, n0 + c])
            if K % 2:
                bp[j, K // 2, c] = _pair(b[K - 1, n0 + c], 0)
    else:
        vectors = width // 16 if b.strides[1] == 2 else 0
        for p in range(K // 2):
            if vectors:
                interleave(bp[j, p].ctypes.data, b[2 * p, n0:].ctypes.data, b[2 * p + 1, n0:].ctypes.data, vectors)
            for c in range(16 * vectors, width):
                bp[j, p, c] = _pair(b[2 * p, n0 + c], b[2 * p + 1, n0 + c])
        if K % 2:
            for c in range(width):
                bp[j, K // 2, c] = _pair(b[K - 1, n0 + c], 0)
    for p in range(bp.shape[1]):
        for c in range(width, NR):
            bp[j, p, c] = 0


@numba.njit(nogil=True, cache=True)
def _pack_a(a, ap, m0, tiles, q0, q1):
    """Rows [m0, m0 + tiles * MR) of A ([M, K] uint16) at pairs [q0, q1) into ap ([tiles, >= q1 - q0, MR]
    uint32), rows past M zero."""
    M, K = a.shape
    whole = min(q1, K // 2)                             # pairs with both halves inside K
    rows = max(0, min(tiles * MR, M - m0))
    if a.strides[1] >= a.strides[0]:                    # columns contiguous (a transposed operand): each pair of
        run = np.empty(rows, np.uint32)                 # A's columns interleaved down the block's rows, then dealt
        vectors = rows // 16 if a.strides[0] == 2 else 0  # to its tiles
        for p in range(q0, whole):
            if vectors:
                interleave(run.ctypes.data, a[m0:, 2 * p].ctypes.data, a[m0:, 2 * p + 1].ctypes.data, vectors)
            for i in range(16 * vectors, rows):
                run[i] = _pair(a[m0 + i, 2 * p], a[m0 + i, 2 * p + 1])
            for t in range(tiles):
                for r in range(max(0, min(MR, rows - t * MR))):
                    ap[t, p - q0, r] = run[t * MR + r]
    for t in range(tiles):
        top = m0 + t * MR
        live = max(0, min(MR, M - top))
        if a.strides[1] < a.strides[0]:                 # rows contiguous: along each row
            for r in range(live):
                for p in range(q0, whole):
                    ap[t, p - q0, r] = _pair(a[top + r, 2 * p], a[top + r, 2 * p + 1])
        if whole < q1:                                  # odd K: the last pair's second half is 0
            for r in range(live):
                ap[t, whole - q0, r] = _pair(a[top + r, K - 1], 0)
        for p in range(q1 - q0):
            for r in range(live, MR):
                ap[t, p, r] = 0


@numba.njit(nogil=True, cache=True)
def _item(a, bp, out, m0, j0, j1, q0, q1, add, ap, acc):
    """Rows [m0, m0 + MC) of out over B's panels [j0, j1) and pairs [q0, q1): A's rows packed into ap
    ([MC // MR, >= q1 - q0, MR]), each tile's sums stored into C (first KC block, unless `add`) or added; edge
    tiles go through acc ([MR, NR])."""
    M = a.shape[0]
    N = out.shape[1]
    rows = min(MC, M - m0)
    tiles = (rows + MR - 1) // MR
    _pack_a(a, ap, m0, tiles, q0, q1)
    direct = out.strides[1] == 4 and out.strides[0] % 4 == 0
    ldc = out.strides[0] // 4
    for p0 in range(q0, q1, KC):
        n = min(KC, q1 - p0)
        more = add or p0 > q0
        for j in range(j0, j1):
            n0 = j * NR
            width = min(NR, N - n0)
            for t in range(tiles):
                top = m0 + t * MR
                height = min(MR, M - top)
                pa, pb = ap[t, p0 - q0:].ctypes.data, bp[j, p0:].ctypes.data
                if direct and width == NR and height == MR:          # a whole tile: into C itself
                    tile(pa, pb, n, out[top, n0:].ctypes.data, ldc, more)
                    continue
                for r in range(height):                           # an edge tile (or a strided C): through acc
                    for c in range(width):
                        acc[r, c] = out[top + r, n0 + c] if more else 0.0
                tile(pa, pb, n, acc.ctypes.data, NR, more)
                for r in range(height):
                    for c in range(width):
                        out[top + r, n0 + c] = acc[r, c]


@numba.njit(nogil=True, cache=True)
def _plan(M, N, pairs, threads):
    """(row blocks, panels, panel groups, K splits). Groups: as many as it takes to give every thread four items
    (each group packs its row block of A again: a pass over A per group, against the imbalance of a thread's
    last block). Where fewer tiles than threads remain (a weight gradient: small output, a long sum over tokens),
    the sum is split instead, each thread adding its part of K into a C of its own."""
    blocks = (M + MC - 1) // MC
    panels = (N + NR - 1) // NR
    groups = min(panels, max(1, (4 * threads + blocks - 1) // blocks))
    splits = 1
    if threads > 1 and blocks * panels < 2 * threads and pairs >= 2 * KC:
        splits = min(threads, pairs // KC)
        groups = 1
    return blocks, panels, groups, splits


@numba.njit(nogil=True, cache=True)
def _fill(out, add):
    """An empty sum: 0, or C unchanged when adding."""
    if not add:
        for i in range(out.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] = 0.0


@numba.njit(nogil=True, cache=True, parallel=True)
def gemm(a, b, out, threads, add=False):
    """out[M, N] (float32) (+)= a[M, K] @ b[K, N], a and b bfloat16 bits (uint16, any strides), on `threads` of
    numba's threads (an argument: numba.get_num_threads() in compiled code keeps the function out of numba's
    cache)."""
    M, K = a.shape
    N = b.shape[1]
    if K == 0:
        _fill(out, add)
        return
    pairs = (K + 1) // 2
    blocks, panels, groups, splits = _plan(M, N, pairs, threads)
    bp = np.empty((panels, pairs, NR), np.uint32)
    for j in numba.prange(panels):
        _pack_b_panel(b, bp, j)
    if splits > 1:
        parts = np.empty((splits, M, N), np.float32)
        for s in numba.prange(splits):
            q0, q1 = pairs * s // splits, pairs * (s + 1) // splits
            ap = np.empty((MC // MR, q1 - q0, MR), np.uint32)
            acc = np.empty((MR, NR), np.float32)
            for i in range(blocks):
                _item(a, bp, parts[s], i * MC, 0, panels, q0, q1, False, ap, acc)
        for i in range(M):
            for j in range(N):
                v = out[i, j] if add else np.float32(0.0)
                for s in range(splits):
                    v += parts[s, i, j]
                out[i, j] = v
        return
    items = blocks * groups
    for t in numba.prange(threads):              # one range of items per thread, with its own scratch
        ap = np.empty((MC // MR, pairs, MR), np.uint32)
        acc = np.empty((MR, NR), np.float32)
        for w in range(items * t // threads, items * (t + 1) // threads):
            i, g = w // groups, w % groups
            _item(a, bp, out, i * MC, panels * g // groups, panels * (g + 1) // groups, 0, pairs, add, ap, acc)


@numba.njit(nogil=True, cache=True)
def gemm_serial(a, b, out, add=False):
    """`gemm` on the calling thread alone (inside a kernel's own parallel loop: one GEMM per core)."""
    M, K = a.shape
    N = b.shape[1]
    if K == 0:
        _fill(out, add)
        return
    pairs = (K + 1) // 2
    panels = (N + NR - 1) // NR
    bp = np.empty((panels, pairs, NR), np.uint32)
    for j in range(panels):
        _pack_b_panel(b, bp, j)
    ap = np.empty((MC // MR, pairs, MR), np.uint32)
    acc = np.empty((MR, NR), np.float32)
    for m0 in range(0, M, MC):
        _item(a, bp, out, m0, 0, panels, 0, pairs, add, ap, acc)


# Kernels call the GEMM through C entry points (`tasks.entry_point`), not as numba functions, whose code numba
# would link into every kernel and optimise again there (the GEMM with its parallel loops: 0.5 s of every bfloat16
# contraction's cold compile). The entry points take each array as its data pointer and strides in bytes.
_C_SIG = types.void(types.voidptr, types.intp, types.intp, types.voidptr, types.intp, types.intp, types.voidptr,
                    types.intp, types.intp, types.intp, types.intp, types.intp, types.intp, types.intp)


@numba.njit(inline="always", nogil=True)
def views(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N):
    """An entry point's A, B and C as arrays."""
    return (strided_at(a, (M, K), (sa0, sa1), np.uint16), strided_at(b, (K, N), (sb0, sb1), np.uint16),
            strided_at(out, (M, N), (so0, so1), np.float32))


def _gemm_entry(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add):
    A, B, C = views(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N)
    gemm(A, B, C, threads, add != 0)


def _serial_entry(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add):
    A, B, C = views(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N)
    gemm_serial(A, B, C, add != 0)


_gemm_c = types.ExternalFunction("xbench_gemm_bf16", _C_SIG)
_serial_c = types.ExternalFunction("xbench_gemm_bf16_serial", _C_SIG)
_own_gemm_c = types.ExternalFunction("xbench_gemm_bf16_own", _C_SIG)
_own_serial_c = types.ExternalFunction("xbench_gemm_bf16_serial_own", _C_SIG)


@numba.njit(inline="always", nogil=True)
def _cblas(s0, s1, rows, cols, size):
    """(CBLAS transpose, leading dimension) of a [rows, cols] view with byte strides s0, s1 and items of `size`
    bytes: 111 for a row-major matrix, 112 for the transpose of one; (0, 0) for any other layout. A vector's
    stride along its one row (column) is free."""
    if s1 == size and (rows == 1 or s0 >= size * max(1, cols)) and s0 % size == 0:
        return 111, max(1, cols) if rows == 1 else s0 // size
    if s0 == size and (cols == 1 or s1 >= size * max(1, rows)) and s1 % size == 0:
        return 112, max(1, rows) if cols == 1 else s1 // size
    return 0, 0


@numba.njit(inline="always", nogil=True)
def _mkl(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add):
    """MKL's bfloat16 GEMM where it takes all three layouts (C row-major), on `threads` of this thread's MKL
    threads (one inside a parallel loop); whether it ran."""
    ta, lda = _cblas(sa0, sa1, M, K, 2)
    tb, ldb = _cblas(sb0, sb1, K, N, 2)
    tc, ldc = _cblas(so0, so1, M, N, 4)
    if ta == 0 or tb == 0 or tc != 111 or M == 0 or N == 0 or K == 0:
        return False
    before = blas.set_local_threads(1 if threads <= 1 or blas.omp_level() > 0 else threads)
    blas.gemm_bf16(101, ta, tb, M, N, K, np.float32(1.0), a, lda, b, ldb, np.float32(1.0 if add != 0 else 0.0),
                   out, ldc)
    blas.set_local_threads(before)
    return True


def _mkl_entry(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add):
    if not _mkl(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add):
        _own_gemm_c(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add)


def _mkl_serial_entry(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add):
    if not _mkl(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, 1, add):
        _own_serial_c(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add)


@functools.cache
def mkl_runs_bf16() -> bool:
    """Whether `link` routes to MKL's bfloat16 GEMM: where it runs at bfloat16's rate. MKL picks its kernels by the CPU's vendor:
    on an AMD EPYC with AVX512-BF16 it runs at its SGEMM's rate (150-190 GFLOP/s on 2 cores, against the
    vdpbf16ps GEMM's 330-400), so only Intel's CPUs route to it. `XBENCH_BF16_GEMM=mkl` (or `=own`) decides
    instead."""
    choice = os.environ.get("XBENCH_BF16_GEMM", "").lower()
    if choice in ("mkl", "own"):
        return choice == "mkl"
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("vendor_id") and "GenuineIntel" in line for line in f)
    except OSError:
        return False


@functools.cache
def link(serial: bool) -> str:
    """Register the entry point `call_serial` (or `call`) calls: before any function that calls it is compiled or
    loaded from the cache (a generated module that does runs this first). Behind it, where xbench's float32
    GEMMs run on torch's MKL and it has a bfloat16 GEMM (`blas.MKL_BF16`) that runs in bfloat16 here
    (`mkl_runs_bf16`), MKL's for the operand layouts it takes, on the same threads; for the others, and everywhere else, `gemm_serial` (`gemm`), or their AMX twins
    (`amx`) where the CPU has AMX and Linux lets this process use it. Returns which: "mkl", "amx" or
    "vdpbf16ps"."""
    from numba.np.ufunc import parallel

    from . import amx

    parallel._launch_threads()          # the threading layer's symbols, which `gemm` loaded from the cache needs
    ext = _serial_c if serial else _gemm_c
    own = "amx" if amx.permitted() else "vdpbf16ps"
    entry = {("amx", True): amx.serial_entry, ("amx", False): amx.gemm_entry,
             ("vdpbf16ps", True): _serial_entry, ("vdpbf16ps", False): _gemm_entry}[own, serial]
    if not (blas.MKL_BF16 and mkl_runs_bf16()):
        entry_point(ext.symbol, _C_SIG, entry)
        return own
    entry_point((_own_serial_c if serial else _own_gemm_c).symbol, _C_SIG, entry)
    entry_point(ext.symbol, _C_SIG, _mkl_serial_entry if serial else _mkl_entry)
    return "mkl"


@numba.njit(nogil=True, cache=True)
def call(a, b, out, threads, add=False):
    """`gemm(a, b, out, threads, add)` through its entry point (`link(False)` first)."""
    _gemm_c(data(a), a.strides[0], a.strides[1], data(b), b.strides[0], b.strides[1], data(out), out.strides[0],
            out.strides[1], a.shape[0], a.shape[1], b.shape[1], threads, 1 if add else 0)


@numba.njit(nogil=True, cache=True)
def call_serial(a, b, out, add=False):
    """`gemm_serial(a, b, out, add)` through its entry point (`link(True)` first)."""
    _serial_c(data(a), a.strides[0], a.strides[1], data(b), b.strides[0], b.strides[1], data(out), out.strides[0],
              out.strides[1], a.shape[0], a.shape[1], b.shape[1], 1, 1 if add else 0)

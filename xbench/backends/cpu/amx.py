"""GEMM of bfloat16 operands into float32 on Intel AMX (Sapphire Rapids and later), the unit PyTorch's bfloat16
matmuls run on through oneDNN; `bf16gemm` routes its entry points here where the CPU has it.

A tile register holds 16 rows of 64 bytes; `tdpbf16ps` adds a 16 x 32 bfloat16 tile of A times a 32 x 16 one of B
(stored as 16 rows of k-pairs, the layout `bf16gemm` packs B into) into a 16 x 16 float32 tile of C: 8,192
products per instruction, 16 times `vdpbf16ps`'s. The micro-kernel (`tiles`, LLVM IR emitted by a numba intrinsic;
LLVM allocates the tile registers and writes their configuration) keeps a 32 x 32 block of C in four tiles over
KC of the contraction, loading two tiles of A and two of B per step. A is copied once into rows of whole 32-element
steps (zero-padded), B into `bf16gemm`'s panels; each thread takes a run of the 32 x 32 blocks of C.

Linux lets a process use the tile registers only once it asks (`arch_prctl(ARCH_REQ_XCOMP_PERM)`): `permitted`
asks, and only a process it answered yes runs these functions (an AMX instruction would otherwise kill it).
"""
from __future__ import annotations

import ctypes
import functools
import platform

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from .bf16gemm import NR, LLVMType, _fill, _pack_b_panel, views

BLOCK = 32                    # rows and columns of C per micro-kernel call: 2 x 2 tiles
STEP = 32                     # k per tile step (16 pairs: a tile row of 64 bytes)
KC = 8                        # steps per micro-kernel call: A's 32 x 256 block (16 KiB) and B's (32 KiB) in L1/L2

_ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA, _SYS_ARCH_PRCTL = 0x1023, 18, 158


@functools.cache
def permitted() -> bool:
    """Whether numba compiles for a CPU with AMX-BF16 and Linux gave this process the tile registers."""
    import llvmlite.binding as ll
    if numba.config.CPU_NAME not in (None, "host") or platform.system() != "Linux" or platform.machine() != "x86_64":
        return False
    try:
        features = ll.get_host_cpu_features()
    except RuntimeError:
        return False
    if not (features.get("amx-tile") and features.get("amx-bf16")):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0


@intrinsic
def tiles(typingctx, a_addr, lda, b_addr, steps, c_addr, ldc, accumulate):
    """C[32, 32] (float32, rows `ldc` bytes apart) = (C if accumulate else 0) + A[32, 32 steps] (bfloat16, rows
    `lda` bytes apart) @ B (16 steps rows of k-pairs, 32 uint32 of them used, rows NR * 4 bytes apart); steps >= 1."""
    if not all(isinstance(t, types.Integer) for t in (a_addr, lda, b_addr, steps, c_addr, ldc)):
        return None
    if not isinstance(accumulate, (types.Boolean, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        i8, i16, i64, tile = ir.IntType(8), ir.IntType(16), ir.IntType(64), LLVMType("x86_amx")
        ptr = i8.as_pointer()
        a, la, b, n, c, lc = (builder.sext(v, i64) if v.type.width < 64 else v for v in args[:6])
        add = builder.icmp_unsigned("!=", args[6], ir.Constant(args[6].type, 0))

        def declare(name, ret, params):
            return builder.module.globals.get(name) or ir.Function(builder.module, ir.FunctionType(ret, params), name)

        load = declare("llvm.x86.tileloadd64.internal", tile, [i16, i16, ptr, i64])
        dot = declare("llvm.x86.tdpbf16ps.internal", tile, [i16, i16, i16, tile, tile, tile])
        store = declare("llvm.x86.tilestored64.internal", ir.VoidType(), [i16, i16, ptr, i64, tile])
        zero = declare("llvm.x86.tilezero.internal", tile, [i16, i16])
        rows, width = ir.Constant(i16, 16), ir.Constant(i16, 64)

        def at(base, offset):
            return builder.inttoptr(builder.add(base, offset), ptr)

        def c_at(i, j):                      # tile (i, j) of C: rows 16 i.., columns 16 j..
            return at(c, builder.add(builder.mul(ir.Constant(i64, 16 * i), lc), ir.Constant(i64, 64 * j)))

        both = [(i, j) for i in range(2) for j in range(2)]
        load_c, zero_c = builder.append_basic_block("amx.load"), builder.append_basic_block("amx.zero")
        loop, done = builder.append_basic_block("amx.loop"), builder.append_basic_block("amx.done")
        builder.cbranch(add, load_c, zero_c)
        builder.position_at_end(load_c)
        loaded = {ij: builder.call(load, [rows, width, c_at(*ij), lc]) for ij in both}
        builder.branch(loop)
        builder.position_at_end(zero_c)
        zeros = {ij: builder.call(zero, [rows, width]) for ij in both}
        builder.branch(loop)
        builder.position_at_end(loop)
        s = builder.phi(i64)
        s.add_incoming(ir.Constant(i64, 0), load_c)
        s.add_incoming(ir.Constant(i64, 0), zero_c)
        acc = {ij: builder.phi(tile) for ij in both}
        for ij in both:
            acc[ij].add_incoming(loaded[ij], load_c)
            acc[ij].add_incoming(zeros[ij], zero_c)
        k_bytes, b_rows = builder.mul(s, ir.Constant(i64, 2 * STEP)), builder.mul(s, ir.Constant(i64, 16 * NR * 4))
        a_t = [builder.call(load, [rows, width, at(a, builder.add(k_bytes, builder.mul(ir.Constant(i64, 16 * i), la))),
                                   la]) for i in range(2)]
        b_t = [builder.call(load, [rows, width, at(b, builder.add(b_rows, ir.Constant(i64, 64 * j))),
                                   ir.Constant(i64, NR * 4)]) for j in range(2)]
        new = {(i, j): builder.call(dot, [rows, width, width, acc[i, j], a_t[i], b_t[j]]) for i, j in both}
        nxt = builder.add(s, ir.Constant(i64, 1))
        s.add_incoming(nxt, loop)
        for ij in both:
            acc[ij].add_incoming(new[ij], loop)
        builder.cbranch(builder.icmp_signed("<", nxt, n), loop, done)
        builder.position_at_end(done)
        for ij in both:
            builder.call(store, [rows, width, c_at(*ij), lc, new[ij]])
        return context.get_dummy_value()

    return types.void(a_addr, lda, b_addr, steps, c_addr, ldc, accumulate), codegen


@numba.njit(nogil=True, cache=True)
def _pack_a_rows(a, ap, r0, r1):
    """Rows [r0, r1) of A ([M, K] uint16, any strides) into ap ([>= M, whole steps] uint16), zero past M and K."""
    M, K = a.shape
    for r in range(r0, r1):
        if r < M:
            for k in range(K):
                ap[r, k] = a[r, k]
            for k in range(K, ap.shape[1]):
                ap[r, k] = 0
        else:
            for k in range(ap.shape[1]):
                ap[r, k] = 0


@numba.njit(nogil=True, cache=True)
def _blocks(ap, bp, out, w0, w1, add, acc):
    """Blocks [w0, w1) of out (32 x 32, row-major over out's blocks) (+)= ap @ bp, KC steps at a time; blocks
    that overhang out (or a strided out) go through acc ([32, 32] float32)."""
    M, N = out.shape
    cols = (N + BLOCK - 1) // BLOCK
    steps = ap.shape[1] // STEP
    direct = out.strides[1] == 4
    for s0 in range(0, steps, KC):
        n = min(KC, steps - s0)
        more = add or s0 > 0
        for w in range(w0, w1):
            top, left = (w // cols) * BLOCK, (w % cols) * BLOCK
            pa = ap[top, s0 * STEP:].ctypes.data
            pb = bp[left // NR, s0 * STEP // 2, left % NR:].ctypes.data
            if direct and top + BLOCK <= M and left + BLOCK <= N:
                tiles(pa, ap.strides[0], pb, n, out[top, left:].ctypes.data, out.strides[0], more)
                continue
            height, width = min(BLOCK, M - top), min(BLOCK, N - left)
            for r in range(BLOCK):
                for c in range(BLOCK):
                    acc[r, c] = out[top + r, left + c] if more and r < height and c < width else 0.0
            tiles(pa, ap.strides[0], pb, n, acc.ctypes.data, BLOCK * 4, more)
            for r in range(height):
                for c in range(width):
                    out[top + r, left + c] = acc[r, c]


@numba.njit(nogil=True, cache=True)
def _buffers(a, b):
    """A's copy (rows a whole number of blocks, k of steps) and B's panels (k-pairs of whole steps, zero), with
    the count of C's blocks."""
    M, K = a.shape
    N = b.shape[1]
    steps = (K + STEP - 1) // STEP
    rows = (M + BLOCK - 1) // BLOCK * BLOCK
    ap = np.empty((rows, steps * STEP), np.uint16)
    bp = np.zeros(((N + NR - 1) // NR, steps * STEP // 2, NR), np.uint32)
    return ap, bp, rows // BLOCK * ((N + BLOCK - 1) // BLOCK)


@numba.njit(nogil=True, cache=True, parallel=True)
def gemm(a, b, out, threads, add=False):
    """out[M, N] (float32) (+)= a[M, K] @ b[K, N], a and b bfloat16 bits (uint16, any strides), on `threads` of
    numba's threads; only in a process `permitted` answered yes."""
    if a.shape[1] == 0:
        _fill(out, add)
        return
    ap, bp, items = _buffers(a, b)
    for j in numba.prange(bp.shape[0]):
        _pack_b_panel(b, bp, j)
    blocks = ap.shape[0] // BLOCK
    for t in numba.prange(threads):
        _pack_a_rows(a, ap, blocks * t // threads * BLOCK, blocks * (t + 1) // threads * BLOCK)
    for t in numba.prange(threads):
        acc = np.empty((BLOCK, BLOCK), np.float32)
        _blocks(ap, bp, out, items * t // threads, items * (t + 1) // threads, add, acc)


@numba.njit(nogil=True, cache=True)
def gemm_serial(a, b, out, add=False):
    """`gemm` on the calling thread alone (inside a kernel's own parallel loop)."""
    if a.shape[1] == 0:
        _fill(out, add)
        return
    ap, bp, items = _buffers(a, b)
    for j in range(bp.shape[0]):
        _pack_b_panel(b, bp, j)
    _pack_a_rows(a, ap, 0, ap.shape[0])
    _blocks(ap, bp, out, 0, items, add, np.empty((BLOCK, BLOCK), np.float32))


# the C entry points `bf16gemm.link` registers in a process `permitted` answered yes (its signature `_C_SIG`)
def gemm_entry(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add):
    A, B, C = views(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N)
    gemm(A, B, C, threads, add != 0)


def serial_entry(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N, threads, add):
    A, B, C = views(a, sa0, sa1, b, sb0, sb1, out, so0, so1, M, K, N)
    gemm_serial(A, B, C, add != 0)

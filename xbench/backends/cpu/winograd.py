"""Winograd's F(2x2, 3x3) for 3x3 stride-1 convolutions (Lavin and Gray, "Fast Algorithms for Convolutional
Neural Networks", 2015), as three transforms around 16 GEMMs, compiled once per dtype and cached with the
package.

Each 2x2 output tile is A^T [(G g G^T) * (B^T d B)] A over the 4x4 input tile d it reads, with

    G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

so that summing over channels is, per element e of the 4x4 transform, one GEMM U[e] [M, C] @ V[e] [C, tiles]:
4 products per output point instead of 9. The transforms are functions of their own, not inlined into the
generated kernel, so their buffers are arguments marked `noalias` and the tile loops vectorise; `tiles` runs
them a block of tile rows at a time, so that the transformed block is multiplied from cache.

Kernels call `tiles` through a C entry point registered as a symbol (`external`), not as a numba function:
numba links a called function's code into the caller and optimises and compiles it again, which cost every
convolution's cold compile 0.45 s. The small `weights` is called as a numba function (0.2 s of cold compile):
loading a second entry point from the cache would cost every new process 12 ms of its warm start.
"""
from __future__ import annotations

import functools

import numba
import numpy as np
from numba import types

from .blas import dot
from .tasks import NoAliasCompiler, array_at, entry_point

_JIT = dict(nogil=True, cache=True, fastmath=True, error_model="numpy", pipeline_class=NoAliasCompiler)


@numba.njit(inline="always")
def _g(x0, x1, x2, half):
    """G x for a column x of 3."""
    return x0, half * (x0 + x1 + x2), half * (x0 - x1 + x2), x2


@numba.njit(inline="always")
def _bt(x0, x1, x2, x3):
    """B^T x for a column x of 4."""
    return x0 - x2, x1 + x2, x2 - x1, x1 - x3


@numba.njit(inline="always")
def _at(x0, x1, x2, x3):
    """A^T x for a column x of 4."""
    return x0 + x1 + x2, x1 - x2 - x3


@numba.njit(**_JIT)
def weights(w, u):
    """u[e, m, c] = (G g G^T)[e // 4, e % 4] of each filter g[r, s] = w[r·3 + s, m, c]."""
    half = w.dtype.type(0.5)
    for m in range(w.shape[1]):
        for c in range(w.shape[2]):
            # G g: its columns are G times g's columns
            a0, a1, a2, a3 = _g(w[0, m, c], w[3, m, c], w[6, m, c], half)
            b0, b1, b2, b3 = _g(w[1, m, c], w[4, m, c], w[7, m, c], half)
            c0, c1, c2, c3 = _g(w[2, m, c], w[5, m, c], w[8, m, c], half)
            # (G g) G^T: each row times G^T is G times that row
            u[0, m, c], u[1, m, c], u[2, m, c], u[3, m, c] = _g(a0, b0, c0, half)
            u[4, m, c], u[5, m, c], u[6, m, c], u[7, m, c] = _g(a1, b1, c1, half)
            u[8, m, c], u[9, m, c], u[10, m, c], u[11, m, c] = _g(a2, b2, c2, half)
            u[12, m, c], u[13, m, c], u[14, m, c], u[15, m, c] = _g(a3, b3, c3, half)


@numba.njit(**_JIT)
def inputs(x, v, i0, th, tw, wp, c0, c1):
    """v[e, c, (i - i0)·tw + j] = (B^T d B)[e // 4, e % 4] of the 4x4 tile d at row 2i, column 2j of the padded
    plane x[c] (rows of `wp`), for tile rows i0 <= i < i0 + th and channels c0 <= c < c1."""
    for c in range(c0, c1):
        xc = x[c]
        for i in range(th):
            o = 2 * (i0 + i) * wp
            r0, r1, r2, r3 = xc[o:], xc[o + wp:], xc[o + 2 * wp:], xc[o + 3 * wp:]
            for j in range(tw):
                t, q = i * tw + j, 2 * j
                # B^T d: per column of d
                a0, a1, a2, a3 = _bt(r0[q], r1[q], r2[q], r3[q])
                b0, b1, b2, b3 = _bt(r0[q + 1], r1[q + 1], r2[q + 1], r3[q + 1])
                c0_, c1_, c2_, c3_ = _bt(r0[q + 2], r1[q + 2], r2[q + 2], r3[q + 2])
                d0, d1, d2, d3 = _bt(r0[q + 3], r1[q + 3], r2[q + 3], r3[q + 3])
                # (B^T d) B: per row
                v[0, c, t], v[1, c, t], v[2, c, t], v[3, c, t] = _bt(a0, b0, c0_, d0)
                v[4, c, t], v[5, c, t], v[6, c, t], v[7, c, t] = _bt(a1, b1, c1_, d1)
                v[8, c, t], v[9, c, t], v[10, c, t], v[11, c, t] = _bt(a2, b2, c2_, d2)
                v[12, c, t], v[13, c, t], v[14, c, t], v[15, c, t] = _bt(a3, b3, c3_, d3)


@numba.njit(**_JIT)
def products(u, v, p):
    """p[e] = u[e] @ v[e] for the 16 elements of the transforms."""
    for e in range(16):
        dot(u[e], v[e], p[e])


@numba.njit(**_JIT)
def outputs(p, y, t0, m0, m1):
    """y[m, 4(t0 + t) + 2a + b] = (A^T P A)[a, b] of P[e // 4, e % 4] = p[e, m, t], for rows m0 <= m < m1:
    each tile's four outputs together (written in one contiguous run, which vectorises; the reader gathers)."""
    for m in range(m0, m1):
        for t in range(p.shape[2]):
            # A^T P: per column of P
            a0, a1 = _at(p[0, m, t], p[4, m, t], p[8, m, t], p[12, m, t])
            b0, b1 = _at(p[1, m, t], p[5, m, t], p[9, m, t], p[13, m, t])
            c0, c1 = _at(p[2, m, t], p[6, m, t], p[10, m, t], p[14, m, t])
            d0, d1 = _at(p[3, m, t], p[7, m, t], p[11, m, t], p[15, m, t])
            o = 4 * (t0 + t)
            y[m, o], y[m, o + 1] = _at(a0, b0, c0, d0)
            y[m, o + 2], y[m, o + 3] = _at(a1, b1, c1, d1)


# tiles per block: the block's transformed inputs and products stay in the core's L2 (2 x 16 x 64 x 196 floats)
BLOCK_TILES = 196


def block_rows(tw: int) -> int:
    """Rows of tiles per block for `tw` tiles per row."""
    return max(1, BLOCK_TILES // tw)


@numba.njit(**_JIT)
def tiles(x, u, v, p, y, tw, wp, i0, i1):
    """y's tiles in tile rows i0 <= i < i1 from the padded planes x, a block of rows at a time through the
    scratch v [16, C, rows·tw] and p [16, M, rows·tw] (the last block in the front of them)."""
    rows, C, M = v.shape[2] // tw, v.shape[1], p.shape[1]
    for a in range(i0, i1, rows):
        n = min(rows, i1 - a) * tw
        vb = v.reshape(-1)[:16 * C * n].reshape(16, C, n)
        pb = p.reshape(-1)[:16 * M * n].reshape(16, M, n)
        inputs(x, vb, a, n // tw, tw, wp, 0, C)
        products(u, vb, pb)
        outputs(pb, y, a * tw, 0, M)


# ---- C entry points -------------------------------------------------------------------------------------------
# compiled (or loaded from the cache) by `external`, for the dtypes kernels use;
# pointers first (x, u, v, p, y), then the sizes C, M, plane, rows, tw, wp, i0, i1, tiles
TILES_SIG = types.void(*(types.voidptr,) * 5, *(types.int64,) * 9)


def _tiles_float32(x, u, v, p, y, C, M, plane, rows, tw, wp, i0, i1, tiles_):
    f = np.float32
    tiles(array_at(x, (C, plane), f), array_at(u, (16, M, C), f), array_at(v, (16, C, rows * tw), f),
          array_at(p, (16, M, rows * tw), f), array_at(y, (M, 4 * tiles_), f), tw, wp, i0, i1)


def _tiles_float64(x, u, v, p, y, C, M, plane, rows, tw, wp, i0, i1, tiles_):
    f = np.float64
    tiles(array_at(x, (C, plane), f), array_at(u, (16, M, C), f), array_at(v, (16, C, rows * tw), f),
          array_at(p, (16, M, rows * tw), f), array_at(y, (M, 4 * tiles_), f), tw, wp, i0, i1)


@functools.cache
def external(dtype: str) -> types.ExternalFunction:
    """`tiles` for `dtype` as an external function numba-compiled kernels call by symbol name; the symbol is
    registered here, before any kernel that calls it is compiled or loaded from the cache."""
    return entry_point(f"xbench_winograd_tiles_{dtype}", TILES_SIG, globals()[f"_tiles_{dtype}"])

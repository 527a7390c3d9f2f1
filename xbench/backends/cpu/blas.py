"""BLAS GEMM entry points for generated kernels, compiled once per installation and cached with the package.

Typing and lowering `np.dot` costs numba about 0.4 s in every kernel that calls it; generated kernels call
`dot` here instead, whose machine code (one per operand layout) numba loads from its cache.

`np.dot` in numba takes whole contiguous matrices; the shifted-GEMM convolution multiplies overlapping runs of
one padded buffer, which only a leading dimension can describe. The calls go through numba's own binding of
SciPy's BLAS (`numba_xxgemm`, the function `np.dot` lowers to), so kernels that use them stay cacheable.
"""
from __future__ import annotations

import numba
import numpy as np
from numba.extending import overload
from numba.np.linalg import _BLAS, ensure_blas

ensure_blas()


@numba.njit(nogil=True, cache=True)
def dot(a, b, out):
    """out = a @ b (2-d, any layouts numba's np.dot takes)."""
    np.dot(a, b, out)


def _xxgemm(sample, kind, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """numba's binding of SciPy's ?gemm for the dtype of the array `sample`. It takes raw pointers and exists
    only inside numba-compiled code (the overload below); from Python, call `dot` or `tap_gemms`."""
    raise TypeError("xbench.backends.cpu.blas._xxgemm is a BLAS binding for numba-compiled code only; "
                    "from Python use blas.dot(a, b, out) or blas.tap_gemms(...)")


@overload(_xxgemm)
def _ol_xxgemm(sample, kind, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    fn = _BLAS().numba_xxgemm(sample.dtype)

    def impl(sample, kind, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        return fn(kind, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    return impl


# a top-level function whose globals are plain objects: numba's cache keys a closure on its cells, which a
# gemm binding does not hash stably, so a closure would be compiled again in every process
@numba.njit(nogil=True, cache=True)
def tap_gemms(x, w, c, taps_per_row, row_step, col_step):
    """c[M, L] = sum over taps t of w[t] [M, K] @ (the run of x's rows [K, L] starting at column
    (t // taps_per_row) * row_step + (t % taps_per_row) * col_step), x's row stride as leading dimension."""
    code, notrans = (115 if x.itemsize == 4 else 100), 110         # 's' or 'd', 'n'
    one = np.ones(1, x.dtype)
    zero = np.zeros(1, x.dtype)
    xf = x.reshape(-1)
    m, n, k = c.shape[1], c.shape[0], w.shape[2]
    for t in range(w.shape[0]):
        off = (t // taps_per_row) * row_step + (t % taps_per_row) * col_step
        # column-major: c^T [L, M] = run^T [L, K] @ w[t]^T [K, M]
        _xxgemm(x, code, notrans, notrans, m, n, k, one.ctypes, xf[off:].ctypes, x.shape[1], w[t].ctypes, k,
                (zero if t == 0 else one).ctypes, c.ctypes, m)


@numba.njit(nogil=True, cache=True)
def _layout(x):
    """(BLAS op, leading dimension) of a 2-d view as the transpose of a column-major matrix: 'n' for a row-major
    view, 't' for a transposed one; (0, 0) for any other layout."""
    s = x.itemsize
    if x.strides[1] == s and x.strides[0] >= max(1, x.shape[1]) * s:
        return 110, x.strides[0] // s
    if x.strides[0] == s and x.strides[1] >= max(1, x.shape[0]) * s:
        return 116, x.strides[1] // s
    return 0, 0


@numba.njit(nogil=True, cache=True)
def dot_add(a, b, out):
    """out += a @ b (2-d; `out` C-contiguous): one GEMM with beta = 1, for a sum of products over an axis
    that leads both operands (a 1x1 convolution's weight gradient, summed over the batch)."""
    op_a, ld_a = _layout(a)
    op_b, ld_b = _layout(b)
    if op_a == 0 or op_b == 0 or not out.flags.c_contiguous:
        out += a @ b
        return
    code = 115 if a.itemsize == 4 else 100                           # 's' or 'd'
    one = np.ones(1, a.dtype)
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    # column-major: out^T [n, m] += b^T [n, k] @ a^T [k, m]
    _xxgemm(a, code, op_b, op_a, n, m, k, one.ctypes, b.ctypes, ld_b, a.ctypes, ld_a, one.ctypes, out.ctypes, n)

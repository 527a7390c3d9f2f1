"""BLAS GEMM with explicit leading dimensions, callable from generated kernels.

`np.dot` in numba takes whole contiguous matrices; the shifted-GEMM convolution multiplies overlapping runs of
one padded buffer, which only a leading dimension can describe. These are numba's own binding of SciPy's BLAS
(`numba_xxgemm`, the function `np.dot` lowers to), so kernels that call them stay cacheable.

    gemm_float32(ord('s'), transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)   # column-major, Fortran's
"""
from __future__ import annotations

import numba
from numba.np.linalg import _BLAS, ensure_blas

ensure_blas()
gemm_float32 = _BLAS().numba_xxgemm(numba.float32)
gemm_float64 = _BLAS().numba_xxgemm(numba.float64)

"""BLAS GEMM entry points for generated kernels, compiled once per installation and cached with the package.

Typing and lowering `np.dot` costs numba about 0.4 s in every kernel that calls it; generated kernels call
`dot` here instead, whose machine code (one per operand layout) numba loads from its cache. The shifted-GEMM
convolution multiplies overlapping runs of one padded buffer, which only a leading dimension can describe
(`tap_gemms`).

Which BLAS. A process has one OpenMP runtime (numba's omp layer and torch bind to whichever libgomp loaded first),
so where PyTorch is loaded when this module is imported (the bridge, the benchmark suite), GEMMs go to torch's
MKL (`PROVIDER == "mkl"`): its threads are the ones numba's loops and torch's own ops run on. SciPy's OpenBLAS,
what numba's `np.dot` calls, starts threads of its own, which spin for a while after each GEMM and take the cores
from the next loop's threads (BERT's forward program here: 50 ms with OpenBLAS, 37 ms with MKL). Elsewhere,
or with `XBENCH_BLAS=openblas`, it is SciPy's OpenBLAS. Either is called through the symbols `xbench_sgemm` and
`xbench_dgemm` (the Fortran ABI: every argument a pointer), registered when this module loads, before any
function that calls them is compiled or loaded from numba's cache; with MKL also its bfloat16 GEMM
(`gemm_bf16`, which `bf16gemm` routes to).

A GEMM called inside a parallel loop (one per core, `blas_threads == 1` kernels) runs on its own thread: MKL
there would open a nested parallel region of its own, its threads competing with the loop's for the cores
(attention's batched products in BERT: 0.5 ms a kernel alone, 7-35 ms in program order).
"""
from __future__ import annotations

import ctypes
import functools
import os
import sys

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .tasks import entry_point, share_threads

_P = types.voidptr
_F_SIG = types.void(*([_P] * 13))         # ?gemm_(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

_sgemm = types.ExternalFunction("xbench_sgemm", _F_SIG)
_dgemm = types.ExternalFunction("xbench_dgemm", _F_SIG)
# for compiled code: the calling thread's OpenMP nesting level (0 outside parallel loops, and always 0 on OpenBLAS),
# and MKL_Set_Num_Threads_Local (the limit before; OpenBLAS: nothing changes)
omp_level = types.ExternalFunction("xbench_omp_get_level", types.int32())
set_local_threads = types.ExternalFunction("xbench_mkl_local_threads", types.int32(types.int32))
_I = types.int32
# cblas_gemm_bf16bf16f32(layout, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), where MKL_BF16
gemm_bf16 = types.ExternalFunction("xbench_mkl_gemm_bf16", types.void(_I, _I, _I, _I, _I, _I, types.float32, _P, _I, _P,
                                                                       _I, types.float32, _P, _I))


def _outside_parallel_regions():
    return 0


def _unchanged(n):
    return n


def _torch_mkl():
    """libtorch_cpu (ctypes) where torch is loaded in this process and its BLAS is MKL, else None."""
    torch = sys.modules.get("torch")
    if torch is None or os.environ.get("XBENCH_BLAS", "").lower() == "openblas":
        return None
    try:
        if not torch.backends.mkl.is_available():
            return None
        lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"),
                          mode=os.RTLD_NOLOAD)
        # torch's OpenMP runtime is in the process's global scope
        if not all(hasattr(lib, n) for n in ("sgemm_", "dgemm_", "MKL_Set_Num_Threads_Local")) or \
                not hasattr(ctypes.CDLL(None), "omp_get_level"):
            return None
    except OSError:
        return None
    return lib


def _scipy_gemm(name: str) -> int:
    """The address of SciPy's ?gemm (its Cython BLAS, as numba's np.dot finds it)."""
    from scipy.linalg import cython_blas
    cap = cython_blas.__pyx_capi__[name]
    get_name, get_pointer = ctypes.pythonapi.PyCapsule_GetName, ctypes.pythonapi.PyCapsule_GetPointer
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(cap, get_name(cap))


def _link() -> tuple[str, bool]:
    import llvmlite.binding as ll
    addr = lambda f: ctypes.cast(f, ctypes.c_void_p).value           # noqa: E731
    lib = _torch_mkl()
    if lib is None:
        ll.add_symbol("xbench_sgemm", _scipy_gemm("sgemm"))
        ll.add_symbol("xbench_dgemm", _scipy_gemm("dgemm"))
        entry_point(omp_level.symbol, omp_level.sig, _outside_parallel_regions)     # OpenBLAS: never limited per call
        entry_point(set_local_threads.symbol, set_local_threads.sig, _unchanged)
        return "openblas", False
    ll.add_symbol("xbench_sgemm", addr(lib.sgemm_))
    ll.add_symbol("xbench_dgemm", addr(lib.dgemm_))
    ll.add_symbol(set_local_threads.symbol, addr(lib.MKL_Set_Num_Threads_Local))
    ll.add_symbol(omp_level.symbol, addr(ctypes.CDLL(None).omp_get_level))
    share_threads(True)
    bf16 = hasattr(lib, "cblas_gemm_bf16bf16f32")
    if bf16:
        ll.add_symbol(gemm_bf16.symbol, addr(lib.cblas_gemm_bf16bf16f32))
    return "mkl", bf16


PROVIDER, MKL_BF16 = _link()          # MKL_BF16: MKL's bfloat16 GEMM is linked as `gemm_bf16` (`bf16gemm` routes to it)


@functools.cache
def _set_local():
    """MKL_Set_Num_Threads_Local (ctypes): the calling thread's MKL thread count; returns the one before."""
    fn = _torch_mkl().MKL_Set_Num_Threads_Local
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
    return fn


def local_threads(n: int) -> int:
    """Limit the GEMMs this thread calls to `n` threads (0: MKL's default again); the limit before. MKL only."""
    return _set_local()(n)


def _xxgemm(sample, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """?gemm for the dtype of the array `sample`, by value (the pointers as `.ctypes`). It exists only inside
    numba-compiled code (the overload below); from Python, call `dot` or `tap_gemms`."""
    raise TypeError("xbench.backends.cpu.blas._xxgemm is a BLAS binding for numba-compiled code only; "
                    "from Python use blas.dot(a, b, out) or blas.tap_gemms(...)")


@overload(_xxgemm)
def _ol_xxgemm(sample, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    fn = _sgemm if sample.dtype == types.float32 else _dgemm

    def impl(sample, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
        v = np.empty(7, np.int32)           # the by-reference scalars: transa, transb, m, n, k, lda, ldb, ldc
        v[0], v[1], v[2], v[3], v[4], v[5], v[6] = transa, transb, m, n, k, lda, ldb
        w = np.empty(1, np.int32)
        w[0] = ldc
        inside = omp_level() > 0               # in a parallel loop: this thread alone
        before = set_local_threads(1) if inside else 0
        fn(v[0:].ctypes, v[1:].ctypes, v[2:].ctypes, v[3:].ctypes, v[4:].ctypes, alpha, a, v[5:].ctypes, b,
           v[6:].ctypes, beta, c, w.ctypes)
        if inside:
            set_local_threads(before)

    return impl


# a top-level function whose globals are plain objects: numba's cache keys a closure on its cells, which a
# gemm binding does not hash stably, so a closure would be compiled again in every process
@numba.njit(nogil=True, cache=True)
def tap_gemms(x, w, c, taps_per_row, row_step, col_step):
    """c[M, L] = sum over taps t of w[t] [M, K] @ (the run of x's rows [K, L] starting at column
    (t // taps_per_row) * row_step + (t % taps_per_row) * col_step), x's row stride as leading dimension."""
    notrans = 110                                                   # 'n'
    one = np.ones(1, x.dtype)
    zero = np.zeros(1, x.dtype)
    xf = x.reshape(-1)
    m, n, k = c.shape[1], c.shape[0], w.shape[2]
    for t in range(w.shape[0]):
        off = (t // taps_per_row) * row_step + (t % taps_per_row) * col_step
        # column-major: c^T [L, M] = run^T [L, K] @ w[t]^T [K, M]
        _xxgemm(x, notrans, notrans, m, n, k, one.ctypes, xf[off:].ctypes, x.shape[1], w[t].ctypes, k,
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
def _gemm(a, b, out, beta):
    """out = a @ b + beta * out, `out` C-contiguous and `a`, `b` in a layout BLAS takes (`_layout`)."""
    op_a, ld_a = _layout(a)
    op_b, ld_b = _layout(b)
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    one = np.ones(1, a.dtype)
    b_ = np.full(1, beta, a.dtype)
    # column-major: out^T [n, m] = b^T [n, k] @ a^T [k, m] (+ beta out^T)
    _xxgemm(a, op_b, op_a, n, m, k, one.ctypes, b.ctypes, ld_b, a.ctypes, ld_a, b_.ctypes, out.ctypes, max(1, n))


@numba.njit(nogil=True, cache=True)
def _product(a, b, out, beta):
    """out = a @ b + beta * out (beta 0 or 1; 2-d arrays of any layout)."""
    if out.shape[0] == 0 or out.shape[1] == 0:
        return
    if a.shape[1] == 0:
        if beta == 0:
            out[:] = 0
        return
    if _layout(a)[0] == 0:
        a = np.ascontiguousarray(a)
    if _layout(b)[0] == 0:
        b = np.ascontiguousarray(b)
    if out.flags.c_contiguous:
        _gemm(a, b, out, beta)
    else:
        c = np.empty(out.shape, out.dtype)
        _gemm(a, b, c, 0)
        if beta == 0:
            out[:] = c
        else:
            out += c


@numba.njit(nogil=True, cache=True)
def dot(a, b, out):
    """out = a @ b (2-d: one GEMM for row-major or transposed views, others copied first)."""
    _product(a, b, out, 0)


@numba.njit(nogil=True, cache=True)
def dot_add(a, b, out):
    """out += a @ b: one GEMM with beta = 1, for a sum of products over an axis that leads both operands (a 1x1
    convolution's weight gradient, summed over the batch)."""
    _product(a, b, out, 1)

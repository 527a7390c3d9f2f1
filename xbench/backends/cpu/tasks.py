"""Parallel loops run on numba's threading layer without numba's parallel compiler.

A kernel whose body is one parallel loop is compiled serially over a range of it, `part(*buffers, lo, hi)`,
plus a C-callable `task(args, dims, steps, data)` with the signature of numba's gufunc kernels, which views the
buffers and calls the part. `parallel_for` hands the task to numba's threading layer: the same threads and the
same scheduler (equal static chunks) that a `prange` loop runs on. A `prange` loop would instead compile a
second function and run numba's parallel analysis passes over the body, twice the serial compile time.

The threading layer calls `task(args, dims, ...)` once per chunk with `args[0]` advanced to the chunk's start
in an index array and `dims[0]` the chunk's length; the buffers' pointers follow with step 0.
"""
from __future__ import annotations

import ctypes
import functools

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

SIGNATURE = types.void(types.CPointer(types.voidptr), types.CPointer(types.intp), types.CPointer(types.intp),
                       types.voidptr)


@intrinsic
def chunk_start(typingctx, ptr):
    """The int64 that `ptr` points at (the chunk's first index)."""
    if ptr != types.voidptr:
        return None

    def codegen(context, builder, signature, args):
        return builder.load(builder.bitcast(args[0], ir.IntType(64).as_pointer()))

    return types.int64(ptr), codegen


@intrinsic
def array_at(typingctx, ptr, shape, dtype):
    """The C-contiguous array of `dtype` and `shape` (a tuple of ints) at `ptr`, owned elsewhere."""
    if ptr != types.voidptr or not isinstance(shape, types.UniTuple) or not isinstance(shape.dtype, types.Integer):
        return None
    if not isinstance(dtype, (types.NumberClass, types.DType)):
        return None
    elt = dtype.instance_type if isinstance(dtype, types.NumberClass) else dtype.dtype
    arrty = types.Array(elt, len(shape), "C")

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        dims = [builder.sext(d, intp) if d.type.width < intp.width else d
                for d in cgutils.unpack_tuple(builder, args[1], len(shape))]
        lltype = context.get_data_type(elt)
        size = context.get_abi_sizeof(lltype)
        strides, step = [], ir.Constant(intp, size)
        for d in reversed(dims):
            strides.insert(0, step)
            step = builder.mul(step, d)
        ary = context.make_array(arrty)(context, builder)
        context.populate_array(ary, data=builder.bitcast(args[0], lltype.as_pointer()), shape=dims,
                               strides=strides, itemsize=ir.Constant(intp, size), meminfo=None)
        return ary._getvalue()

    return arrty(ptr, shape, dtype), codegen


@functools.cache
def _launcher():
    import llvmlite.binding as ll
    from numba.np.ufunc import parallel

    parallel._launch_threads()
    c = ctypes
    return c.CFUNCTYPE(None, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_size_t, c.c_size_t,
                       c.c_int)(ll.address_of_symbol("numba_parallel_for"))


@functools.lru_cache(maxsize=64)
def _indices(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.int64)


def parallel_for(task, n: int, *arrays: np.ndarray) -> None:
    """Run the compiled `task` over [0, n) on numba's threads (`numba.set_num_threads` applies); `arrays` are
    the C-contiguous buffers it views, in order."""
    import numba

    if n <= 0:
        return
    threads = max(1, min(numba.get_num_threads(), n))
    k = len(arrays) + 1
    idx = _indices(n)
    argv = (ctypes.c_void_p * k)(idx.ctypes.data, *(a.ctypes.data for a in arrays))
    steps = (ctypes.c_size_t * k)(idx.itemsize)
    _launcher()(task.address, argv, (ctypes.c_size_t * 1)(n), steps, None, 0, k, threads)

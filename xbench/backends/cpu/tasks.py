"""Parallel loops run on numba's threading layer without numba's parallel compiler.

A kernel whose body is one parallel loop is compiled serially over a range of it, as a C function
`part(*data pointers, lo, hi)` (`Part`; a kernel of several loops in sequence, a contraction's packing and
epilogue around its GEMM, as one part per loop, launched in turn), plus a C-callable `task(args, dims, steps,
data)` with the signature of numba's gufunc kernels, which reads the buffers' data pointers and calls the part.
The part's pointers are marked `noalias`
(`NoAliasCompiler`), as numba marks a `prange` body whose arrays it proved distinct: a kernel's buffers are
distinct allocations, or inputs it only reads, so LLVM may keep loads in registers across stores and vectorise
without overlap checks. `parallel_for` hands the task to numba's threading layer: the same threads and the same
scheduler (equal static chunks) that a `prange` loop runs on. A `prange` loop would instead compile a second
function and run numba's parallel analysis passes over the body, twice the serial compile time.

As for numba's own parallel loops, the first argument is a schedule, one [start, end) row per thread, and the
threading layer calls `task(args, dims, ...)` with `args[0]` at the first of its `dims[0]` rows (the OpenMP
layer hands out single rows, the workqueue layer runs of them); the buffers' pointers follow with step 0.
A generated module has one task for all its parts (a C-callable function costs numba about 0.15 s to compile):
the `data` pointer carries the index of the part to run. Parts and the task compile on first use, so that the
backend can compile a fresh module's parts side by side in its compile workers, and the task, last, after them.
"""
from __future__ import annotations

import copy
import ctypes
import functools
import os
import time

import numpy as np
from llvmlite import ir
from numba import get_num_threads, set_num_threads
from numba.core import cgutils, compiler, types
from numba.extending import intrinsic, typeof_impl
from numba.np.arrayobj import _empty_nd_impl

SIGNATURE = types.void(types.CPointer(types.voidptr), types.CPointer(types.intp), types.CPointer(types.intp),
                       types.voidptr)


class Part:
    """A kernel's parallel loop over rows [lo, hi), compiled on first use (or loaded from numba's cache) as a C
    function of its buffers' data pointers, marked `noalias` (`NoAliasCompiler`), and the range. Its address is
    added to the JIT's symbols, and the module's task calls it by that name (numba code sees a part as that
    external function): numba links the code of every numba function a function calls into the caller and
    optimises and compiles it again there, which for a task holding every loop of a module was a third of the
    loops' compile time, in one process. Parts compile side by side in compile workers; the task, last, only
    calls them."""

    def __init__(self, fn, **options):
        self.fn, self.options = fn, options
        functools.update_wrapper(self, fn)
        self.sig = types.void(*[types.voidptr] * (fn.__code__.co_argcount - 2), types.int64, types.int64)
        # the module's file name carries its content's hash: one symbol per module and part, the same in every process
        module = os.path.splitext(os.path.basename(fn.__code__.co_filename))[0]
        self.external = types.ExternalFunction(f"xbench_{module}_{fn.__name__}", self.sig)
        self._cfunc = None

    def compile(self):
        """The compiled C function (numba's `CFunc`), its address registered under its symbol."""
        if self._cfunc is None:
            import llvmlite.binding as ll
            from numba import cfunc
            self._cfunc = cfunc(self.sig, cache=True, pipeline_class=NoAliasCompiler, **self.options)(self.fn)
            ll.add_symbol(self.external.symbol, self._cfunc.address)
        return self._cfunc

    @property
    def cache_hits(self) -> int:
        return self.compile().cache_hits


def part(**options):
    """The decorator of a generated kernel's part (`Part`), with numba's options (`fastmath`, `error_model`)."""
    return lambda fn: Part(fn, **options)


@typeof_impl.register(Part)
def _typeof_part(value, c):
    return value.external


class Task:
    """A module's C-callable task (`SIGNATURE`), which calls the part its `data` pointer names; compiled, or
    loaded from numba's cache, on first use, after the parts it calls (`Part`): importing a module compiles
    nothing."""

    def __init__(self, fn):
        self.fn = fn
        self._cfunc = None
        functools.update_wrapper(self, fn)

    def compile(self):
        """The compiled C function (numba's `CFunc`)."""
        if self._cfunc is None:
            from numba import cfunc
            for p in self.parts:
                p.compile()
            self._cfunc = cfunc(SIGNATURE, cache=True)(self.fn)
        return self._cfunc

    @property
    def parts(self) -> list[Part]:
        """The parts the task calls."""
        found = (self.fn.__globals__.get(name) for name in self.fn.__code__.co_names)
        return [p for p in found if isinstance(p, Part)]

    @property
    def address(self) -> int:
        return (self._cfunc or self.compile()).address

    @property
    def cache_hits(self) -> int:
        return self.compile().cache_hits


class NoAliasCompiler(compiler.Compiler):
    """numba's pipeline, with the function's pointer arguments (its arrays' data) marked `noalias`."""

    def __init__(self, typingctx, targetctx, library, args, return_type, flags, locals):
        flags = copy.copy(flags)
        flags.noalias = True
        super().__init__(typingctx, targetctx, library, args, return_type, flags, locals)


@intrinsic
def chunk_bounds(typingctx, ptr, rows):
    """(lo, hi) of the `rows` consecutive rows of the schedule at `ptr` (int64 pairs [start, end))."""
    if ptr != types.voidptr or not isinstance(rows, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        sched = builder.bitcast(args[0], i64.as_pointer())
        last = builder.sub(builder.mul(builder.sext(args[1], i64) if args[1].type.width < 64 else args[1],
                                       ir.Constant(i64, 2)), ir.Constant(i64, 1))
        pair = (builder.load(sched), builder.load(builder.gep(sched, [last])))
        return context.make_tuple(builder, signature.return_type, pair)

    return types.UniTuple(types.int64, 2)(ptr, rows), codegen


@intrinsic
def address(typingctx, ptr):
    """The integer value of a pointer (a task's `data` argument carries a small integer)."""
    if ptr != types.voidptr:
        return None

    def codegen(context, builder, signature, args):
        return builder.ptrtoint(args[0], ir.IntType(64))

    return types.int64(ptr), codegen


@intrinsic
def data(typingctx, arr):
    """The data pointer of an array (for C functions called by symbol)."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.bitcast(ary.data, ir.IntType(8).as_pointer())

    return types.voidptr(arr), codegen


@intrinsic
def keep(typingctx, arrays):
    """Nothing: a use of the arrays (a tuple) after a C function was called with their `data` pointers. numba
    frees an array after the last statement that names it, which would otherwise be the `data` call, before the
    C function runs: a scratch array allocated in a parallel loop was freed and handed to the next thread's
    allocation while the first thread still wrote through its pointer."""
    if not isinstance(arrays, types.BaseTuple) or not all(isinstance(a, types.Array) for a in arrays):
        return None

    def codegen(context, builder, signature, args):
        return context.get_dummy_value()

    return types.void(arrays), codegen


def _contiguous(typingctx, shape, dtype, data):
    """(signature, codegen) of an intrinsic whose value is the C-contiguous array of `dtype` and `shape` (a tuple
    of ints, its second argument) at the pointer `data(builder, first argument)`, owned elsewhere."""
    if not isinstance(shape, types.UniTuple) or not isinstance(shape.dtype, types.Integer):
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
        context.populate_array(ary, data=builder.bitcast(data(builder, args[0]), lltype.as_pointer()), shape=dims,
                               strides=strides, itemsize=ir.Constant(intp, size), meminfo=None)
        return ary._getvalue()

    return arrty(types.voidptr, shape, dtype), codegen


@intrinsic
def array_at(typingctx, ptr, shape, dtype):
    """The C-contiguous array of `dtype` and `shape` (a tuple of ints) at `ptr`, owned elsewhere."""
    return _contiguous(typingctx, shape, dtype, lambda builder, p: p) if ptr == types.voidptr else None


# where an ndarray object keeps its data pointer: numpy's C API reads it there (PyArray_DATA), just after the
# object header; checked on an array below
DATA_AT = object.__basicsize__
_probe = np.zeros(1)
if ctypes.c_void_p.from_address(id(_probe) + DATA_AT).value != _probe.ctypes.data:
    raise ImportError(f"numpy {np.__version__} keeps an array's data pointer elsewhere than numpy's C API does; "
                      "xbench's parallel launches read it there")
del _probe


def _object_data(builder, p):
    """The data pointer of the ndarray object at `p`."""
    i8p = ir.IntType(8).as_pointer()
    return builder.load(builder.bitcast(builder.gep(p, [ir.Constant(ir.IntType(64), DATA_AT)]), i8p.as_pointer()))


@intrinsic
def object_data(typingctx, obj):
    """The data pointer of the ndarray object at `obj` (its `id`), read where numpy's C API reads it."""
    if obj != types.voidptr:
        return None
    return types.voidptr(obj), lambda context, builder, signature, args: _object_data(builder, args[0])


@intrinsic
def array_of(typingctx, obj, shape, dtype):
    """`array_at` the data of the ndarray object at `obj` (its `id`): the pointer is read from the object here,
    in the task, as Python reads `id(a)` in 30 ns and `a.__array_interface__` in 1 us."""
    return _contiguous(typingctx, shape, dtype, _object_data) if obj == types.voidptr else None


@intrinsic
def strided_at(typingctx, ptr, shape, strides, dtype):
    """The array of `dtype` and `shape` at `ptr` with `strides` (bytes; tuples of ints), owned elsewhere."""
    if (ptr != types.voidptr or not isinstance(shape, types.UniTuple) or not isinstance(strides, types.UniTuple)
            or len(shape) != len(strides) or not isinstance(dtype, (types.NumberClass, types.DType))):
        return None
    elt = dtype.instance_type if isinstance(dtype, types.NumberClass) else dtype.dtype
    arrty = types.Array(elt, len(shape), "A")

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        widen = lambda v: builder.sext(v, intp) if v.type.width < intp.width else v  # noqa: E731
        lltype = context.get_data_type(elt)
        ary = context.make_array(arrty)(context, builder)
        context.populate_array(ary, data=builder.bitcast(args[0], lltype.as_pointer()),
                               shape=[widen(d) for d in cgutils.unpack_tuple(builder, args[1], len(shape))],
                               strides=[widen(d) for d in cgutils.unpack_tuple(builder, args[2], len(shape))],
                               itemsize=ir.Constant(intp, context.get_abi_sizeof(lltype)), meminfo=None)
        return ary._getvalue()

    return arrty(ptr, shape, strides, dtype), codegen


def _new(zero: bool):
    def new(typingctx, shape, dtype):
        if (not isinstance(shape, types.BaseTuple) or not all(isinstance(t, types.Integer) for t in shape)
                or not isinstance(dtype, types.NumberClass)):
            return None
        arrty = types.Array(dtype.instance_type, len(shape), "C")

        def codegen(context, builder, signature, args):
            dims = [context.cast(builder, v, t, types.intp)
                    for v, t in zip(cgutils.unpack_tuple(builder, args[0]), signature.args[0])]
            ary = _empty_nd_impl(context, builder, arrty, dims)
            if zero:
                cgutils.memset(builder, ary.data, builder.mul(ary.itemsize, ary.nitems), 0)
            return ary._getvalue()

        return arrty(shape, dtype), codegen
    return new


# A kernel's scratch arrays, allocated by code emitted in the kernel itself: numba's own np.empty / np.zeros
# are compiled anew in every process for every shape arity and dtype they are called with (0.1-0.3 s each).
new_array = intrinsic(_new(False))
new_array.__doc__ = "np.empty(shape, dtype) for a tuple of ints and a numpy scalar type, as an intrinsic."
new_zeros = intrinsic(_new(True))
new_zeros.__doc__ = "np.zeros(shape, dtype) for a tuple of ints and a numpy scalar type, as an intrinsic."


def entry_point(name: str, sig: types.Signature, fn) -> types.ExternalFunction:
    """`fn` compiled (or loaded from numba's cache) as a C function of `sig`, its address added to the JIT's
    symbols as `name`: numba-compiled code calls the returned external function by that name, without linking
    `fn`'s code into its own (numba links the code of every numba function a function calls, and optimises and
    compiles it again there). Register it before any function that calls it is compiled or loaded."""
    import llvmlite.binding as ll
    from numba import cfunc
    ll.add_symbol(name, cfunc(sig, cache=True)(fn).address)
    return types.ExternalFunction(name, sig)


@functools.cache
def _launcher():
    import llvmlite.binding as ll
    from numba.np.ufunc import parallel

    parallel._launch_threads()
    c = ctypes
    return c.CFUNCTYPE(None, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_void_p, c.c_size_t, c.c_size_t,
                       c.c_int)(ll.address_of_symbol("numba_parallel_for"))


@functools.lru_cache(maxsize=256)
def _launch_args(n: int, threads: int, k: int) -> tuple:
    """The schedule ([start, end) of each thread's equal share of [0, n)) and the ctypes arguments that
    describe it and `k - 1` buffers."""
    cuts = [n * i // threads for i in range(threads + 1)]
    sched = np.array([cuts[:-1], cuts[1:]], dtype=np.int64).T.copy()
    return sched, sched.ctypes.data, (ctypes.c_size_t * 1)(threads), (ctypes.c_size_t * k)(sched.strides[0])


_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
_loadavg: list[int] = []
_own: dict[str, int] = {}           # this process's threads: /proc/self/task/<id>/stat, open
_shared = [False]


def share_threads(shared: bool) -> None:
    """Whether every parallel library the kernels call runs on numba's OpenMP threads (the GEMMs on torch's MKL,
    `blas.PROVIDER`): then a thread of this process that is running is one of ours, spinning for the next loop,
    not another task holding a core (`free_cores`)."""
    _shared[0] = shared


def _own_running() -> int:
    """This process's threads in the running state, other than this one."""
    try:
        if "stat" not in _own or int(os.pread(_own["stat"], 512, 0).rsplit(b")", 1)[1].split()[17]) != len(_own) - 1:
            for fd in _own.values():
                os.close(fd)
            _own.clear()
            _own["stat"] = os.open("/proc/self/stat", os.O_RDONLY)
            for tid in os.listdir("/proc/self/task"):
                _own[tid] = os.open(f"/proc/self/task/{tid}/stat", os.O_RDONLY)
        states = [os.pread(fd, 512, 0) for tid, fd in _own.items() if tid != "stat"]
    except (OSError, ValueError, IndexError):
        _own.clear()
        return 0
    return max(0, sum(s[s.rindex(b")") + 2] == 82 for s in states) - 1)          # 'R', less this thread


# free_cores' answer holds this long: a step launches hundreds of parallel loops, and reading /proc for each cost
# 2-20 us (a pread per thread of this process where others share the host), as much as the loop on a small map
FREE_CORES_NS = 2_000_000
_free: list[int] = [0, 0]           # [when, answer]


def free_cores() -> int:
    """Cores not running another task right now (/proc/loadavg's count of runnable tasks, read in about a
    microsecond from an open file; this thread is one of them), as read at most FREE_CORES_NS ago. A parallel
    loop waits for its slowest thread: where other processes hold the cores, a thread of ours waits for a time
    slice (4-16 ms) before it runs. Where the kernels' libraries share numba's threads (`share_threads`), those of
    this process's threads that are running are our own threads spinning for the next loop, and are not counted
    (about 1.5 us a thread)."""
    now = time.monotonic_ns()
    if now - _free[0] >= FREE_CORES_NS:
        _free[:] = now, _read_free_cores()
    return _free[1]


def _read_free_cores() -> int:
    try:
        if not _loadavg:
            _loadavg.append(os.open("/proc/loadavg", os.O_RDONLY))
        running = int(os.pread(_loadavg[0], 64, 0).split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return _CORES
    others = running - 1
    if others > 0 and _shared[0]:
        others -= _own_running()
    return max(1, _CORES - max(0, others))


def parallel_for(task, which: int, n: int, *arrays: np.ndarray) -> None:
    """Run the compiled `task` over [0, n) on numba's threads (`numba.set_num_threads` applies) that have a
    core free (`free_cores`), one chunk per thread, with `which` as its data pointer (the kernel to run);
    `arrays` are the C-contiguous ndarrays it views (`array_of`), in order, passed as the objects' addresses."""
    if n <= 0:
        return
    asked = get_num_threads()
    threads = max(1, min(asked, n, free_cores()))
    k = len(arrays) + 1
    _, sched, dims, steps = _launch_args(n, threads, k)
    argv = (ctypes.c_void_p * k)(sched, *map(id, arrays))
    _launcher()(task.address, argv, dims, steps, which or None, 0, k, threads)
    if threads != asked:
        # the threading layer keeps a launch's thread count as this thread's setting: give the next one back
        set_num_threads(asked)

"""Host-side helpers the generated cpu modules import: BLAS thread limits and the caching allocator."""
from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import threading

import numpy as np


@functools.cache
def _controller():
    from threadpoolctl import ThreadpoolController
    return ThreadpoolController()


@functools.cache
def _openblas() -> tuple:
    """(get, set) thread-count functions of each OpenBLAS mapped into this process, found in /proc/self/maps;
    () where there is none or no such file. threadpoolctl finds every BLAS, but by scanning every loaded
    library (13 ms, on each new process's first call of a kernel that limits BLAS threads)."""
    try:
        with open("/proc/self/maps") as f:
            mapped = {line.split(None, 5)[-1].strip() for line in f if ".so" in line}
    except OSError:
        return ()
    names = {p: p.rsplit("/", 1)[-1].lower() for p in mapped}
    if any(k in n for n in names.values() for k in ("mkl", "blis", "accelerate", "flexiblas")):
        return ()                                   # another BLAS is loaded: threadpoolctl knows them all
    paths = sorted(p for p, n in names.items() if "openblas" in n)
    out = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        except OSError:
            return ()
        names = [f"{p}openblas_{{}}_num_threads{s}" for p in ("", "scipy_") for s in ("", "64_")]
        name = next((n for n in names if hasattr(lib, n.format("set"))), None)
        if name is None:
            return ()
        get, set_ = getattr(lib, name.format("get")), getattr(lib, name.format("set"))
        get.restype, set_.argtypes = ctypes.c_int, [ctypes.c_int]
        out.append((get, set_))
    return tuple(out)


@contextlib.contextmanager
def blas_threads(n: int):
    """Limit the kernels' GEMMs to `n` threads (kernels that run one GEMM per core, or a small one, ask for 1):
    with torch's MKL (`blas.PROVIDER`), this thread's (a GEMM inside a parallel loop runs on one thread already);
    with OpenBLAS, every loaded BLAS's (`openblas_threads`)."""
    from . import blas
    if blas.PROVIDER != "mkl":
        with openblas_threads(n):
            yield
        return
    before = blas.local_threads(n)
    try:
        yield
    finally:
        blas.local_threads(before)


@contextlib.contextmanager
def openblas_threads(n: int):
    """Limit every loaded BLAS to `n` threads: through the OpenBLAS entry points directly where every BLAS numba
    and numpy use is an OpenBLAS, else threadpoolctl."""
    libs = _openblas()
    if not libs:
        with _controller().limit(limits=n, user_api="blas"):
            yield
        return
    before = [get() for get, _ in libs]
    for _, set_ in libs:
        set_(n)
    try:
        yield
    finally:
        for (_, set_), k in zip(libs, before):
            set_(k)


# ---- the caching host allocator -------------------------------------------------------------------------
# A fresh multi-megabyte numpy array is fresh pages: the first write to each faults and zeroes it, which
# costs an elementwise kernel as much as its own memory traffic. Outputs and temporaries of 1 MiB or more
# come instead from blocks that earlier results gave back when their last view died, as PyTorch's device
# allocators do. Each array's base is a lease (a ctypes view of the block) whose finaliser returns the
# block, so a block is reused only once nothing can see it.

MIN_BYTES = 1 << 20
ALIGN = 64


class HostPool:
    """Free blocks by size, at most `limit` bytes of them (`$XBENCH_HOST_POOL_MB`, default 1024)."""

    def __init__(self, limit: int | None = None):
        if limit is None:
            limit = int(os.environ.get("XBENCH_HOST_POOL_MB", "1024")) << 20
        self.limit = limit
        self.free: dict[int, list[np.ndarray]] = {}
        self.free_bytes = 0
        self.fresh = 0                      # blocks allocated because none of their size was free
        self._lock = threading.RLock()      # a lease can die (and give back) inside `take`, on any thread

    def empty(self, shape, dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes < MIN_BYTES:
            return np.empty(shape, dtype)
        block = self.take(nbytes)
        lease = _lease_type(nbytes).from_buffer(block)
        lease.pool, lease.block = self, block
        return np.frombuffer(lease, dtype).reshape(shape)

    def take(self, nbytes: int) -> np.ndarray:
        with self._lock:
            blocks = self.free.get(nbytes)
            if blocks:
                self.free_bytes -= nbytes
                return blocks.pop()
            self.fresh += 1
        raw = np.empty(nbytes + ALIGN, np.uint8)
        start = -raw.ctypes.data % ALIGN
        return raw[start:start + nbytes]

    def give(self, block: np.ndarray) -> None:
        with self._lock:
            if self.free_bytes + block.nbytes <= self.limit:
                self.free.setdefault(block.nbytes, []).append(block)
                self.free_bytes += block.nbytes

    def clear(self) -> None:
        with self._lock:
            self.free.clear()
            self.free_bytes = 0


@functools.cache
def _lease_type(nbytes: int) -> type:
    class Lease(ctypes.c_char * nbytes):
        def __del__(self):
            pool = getattr(self, "pool", None)
            if pool is not None:
                pool.give(self.block)
    return Lease


POOL = HostPool()
empty = POOL.empty


def release() -> None:
    """Give freed host memory back to the system: the pool's free blocks, then (glibc) the free pages of the
    heap, which glibc keeps otherwise. A long run of many models grows by both (the benchmark suite reached 20 GB
    of resident memory by its twelfth workload, holding under 1 GB)."""
    import gc
    POOL.clear()
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):       # not glibc: nothing more to give back
        ctypes.CDLL("libc.so.6").malloc_trim(0)

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


@contextlib.contextmanager
def blas_threads(n: int):
    """Limit every loaded BLAS to `n` threads (kernels that run one GEMM per core ask for 1)."""
    with _controller().limit(limits=n, user_api="blas"):
        yield


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

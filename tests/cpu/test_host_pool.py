"""The caching host allocator: a block is reused only after every view of it has died, results are
ordinary aligned writeable arrays, and the free list stays within its limit."""
import gc

import numpy as np

import xbench as xb
from xbench.backends.cpu.runtime import MIN_BYTES, HostPool

N = MIN_BYTES // 4          # float32 elements in one pooled block


def test_a_block_comes_back_only_when_its_last_view_dies():
    pool = HostPool()
    a = pool.empty((N,), np.float32)
    where = a.ctypes.data
    view = a[10:].reshape(-1, 2)
    del a
    b = pool.empty((N,), np.float32)
    assert b.ctypes.data != where                   # the slice still holds it
    del view
    gc.collect()
    c = pool.empty((2, N // 2), np.float32)         # same bytes, another shape
    assert c.ctypes.data == where
    assert pool.fresh == 2


def test_results_are_aligned_writeable_c_arrays_of_the_asked_dtype():
    pool = HostPool()
    for dtype in (np.float64, np.float32, np.uint16, np.int64, np.bool_):
        shape = (3, MIN_BYTES // 3 + 7)               # pooled even at one byte per element
        a = pool.empty(shape, dtype)
        assert a.dtype == dtype and a.shape == shape and a.base is not None
        assert a.flags.c_contiguous and a.flags.writeable and a.ctypes.data % 64 == 0
        a[...] = 1
        assert a.sum() == a.size


def test_small_arrays_are_plain_numpy_and_the_free_list_is_capped():
    pool = HostPool(limit=3 * MIN_BYTES)
    assert pool.empty((4,), np.float32).base is None
    blocks = [pool.empty((N,), np.float32) for _ in range(5)]
    del blocks
    gc.collect()
    assert pool.free_bytes == 3 * MIN_BYTES
    pool.clear()
    assert pool.free_bytes == 0


def test_cpu_results_reuse_the_blocks_of_dropped_results_and_stay_correct():
    x = np.random.default_rng(3).standard_normal((512, 1024)).astype(np.float32)
    want = xb.ops.gelu.run(x, backend="reference")
    first = xb.ops.gelu(x)
    where = first.ctypes.data
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)
    kept = xb.ops.gelu(x + 1)                      # `first` is alive: a second block
    assert kept.ctypes.data != where
    del first
    gc.collect()
    again = xb.ops.gelu(x)
    assert again.ctypes.data == where
    np.testing.assert_allclose(again, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(kept, xb.ops.gelu.run(x + 1, backend="reference"), rtol=1e-5, atol=1e-6)


def test_release_gives_the_free_blocks_back():
    from xbench.backends.cpu import runtime
    a = runtime.empty((1 << 20,), np.float32)                 # 4 MiB: from the pool
    del a
    assert runtime.POOL.free_bytes >= 4 << 20
    runtime.release()
    assert runtime.POOL.free_bytes == 0 and not runtime.POOL.free

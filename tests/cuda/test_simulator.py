"""xbench's block scheduler for numba's CUDA simulator keeps the simulator's semantics: barriers, threads that
finish early, barrier counts, several blocks, and a thread's exception raised from the launch."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from xbench.backends.cuda import device

pytestmark = pytest.mark.skipif(device.mode() != "simulator",
                                reason="a CUDA GPU runs this process's kernels: test_simulator_elsewhere.py runs "
                                       "this module with the simulator on")
# the simulator swaps the kernel's module-level `cuda` for its own kernel API
cuda = device.cuda_module() if device.mode() == "simulator" else None


def test_it_is_the_scheduler_the_simulator_uses():
    from numba.cuda.simulator import kernel
    assert getattr(kernel.BlockManager, "xbench", False)


def test_a_tree_reduction_over_barriers_in_each_of_three_blocks():
    @cuda.jit
    def block_sums(x, out):
        sm = cuda.shared.array(64, np.float64)
        t, b = cuda.threadIdx.x, cuda.blockIdx.x
        acc, i = 0.0, t
        while i < x.shape[1]:
            acc += x[b, i]
            i += 64
        sm[t] = acc
        cuda.syncthreads()
        s = 32
        while s > 0:
            if t < s:
                sm[t] += sm[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            out[b] = sm[0]

    x = np.random.default_rng(0).standard_normal((3, 300))
    out = np.zeros(3)
    block_sums[3, 64](x, out)
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-12)


def test_threads_that_finish_before_a_barrier_do_not_hold_it():
    @cuda.jit
    def shift(x, out):
        sm = cuda.shared.array(16, np.float32)
        t = cuda.threadIdx.x
        if t >= 16:
            return
        sm[t] = x[t]
        cuda.syncthreads()
        out[t] = sm[(t + 1) % 16]

    x = np.arange(16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    shift[1, 48](x, out)
    np.testing.assert_array_equal(out, np.roll(x, -1))


def test_a_barrier_counts_the_threads_whose_predicate_holds():
    @cuda.jit
    def count(x, out):
        t = cuda.threadIdx.x
        n = cuda.syncthreads_count(x[t] > 0)
        if t == 0:
            out[0] = n

    x = np.array([1, -1, 2, 0, 5, -3, 7, 1], np.float32)
    out = np.zeros(1, np.int32)
    count[1, 8](x, out)
    assert out[0] == 5


def test_a_threads_exception_is_raised_from_the_launch_and_nothing_hangs():
    @cuda.jit
    def faulty(x):
        t = cuda.threadIdx.x
        if t == 3:
            x[100] = 1.0                     # out of bounds: the simulator raises IndexError
        cuda.syncthreads()
        x[t] = t

    raised = []

    def launch():
        try:
            faulty[1, 8](np.zeros(8, np.float32))
        except Exception as exc:
            raised.append(exc)

    runner = threading.Thread(target=launch, daemon=True)
    runner.start()
    runner.join(60)
    assert not runner.is_alive(), "the launch did not return"
    assert len(raised) == 1 and isinstance(raised[0], IndexError) and "tid=[3, 0, 0]" in str(raised[0])

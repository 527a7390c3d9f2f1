"""The cpu backend's default parallel/serial choice follows its launch model (`parallel_pays`), not a fixed count."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.backends import cpu
from xbench.backends import get as get_backend

N, D, M = xb.dims("N D M")


@xb.tensor_op
def softmax(x: Tensor[N, D]) -> Tensor[N, D]:
    e = xb.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@xb.tensor_op
def add(a: Tensor[N, D], b: Tensor[N, D]) -> Tensor[N, D]:
    return a + b


def _kernel(op, *shapes):
    arrays = [np.zeros(s, np.float32) for s in shapes]
    (k,) = op.lower(*arrays).kernels
    return k


def test_serial_time_counts_evaluations_and_transcendentals():
    k = _kernel(add, (256, 256), (256, 256))
    assert cpu.serial_us(k) == 256 * 256 * cpu.EVAL_NS * 1e-3
    s = _kernel(softmax, (256, 256))
    # four row loops (max, exp, sum, divide), two scalar assignments and one exp per element
    per_row = (4 * 256 + 2) * cpu.EVAL_NS + 256 * cpu.TRANSCENDENTAL_NS
    assert abs(cpu.serial_us(s) - 256 * per_row * 1e-3) < 1e-9


@xb.tensor_op
def to_channels_first(x: Tensor, bias: Tensor):
    # [tokens, channels] + bias -> [batch, channels, tokens]: read along channels, written along tokens
    return (x + bias).reshape(4, 1024, 128).transpose(0, 2, 1)


def test_a_transpose_costs_more_per_element_and_goes_parallel_where_a_plain_add_of_its_size_does_not():
    t = _kernel(to_channels_first, (4096, 128), (128,))
    plain = _kernel(add, (4096, 128), (4096, 128))
    assert cpu.transposes(t) and not cpu.transposes(plain)
    assert cpu.serial_us(t) == 4096 * 128 * (cpu.EVAL_NS + cpu.TRANSPOSE_NS) * 1e-3
    assert cpu.parallel_pays(t, 2) and not cpu.parallel_pays(plain, 2)
    x, b = np.random.default_rng(0).standard_normal((4096, 128), np.float32), np.arange(128, dtype=np.float32)
    art = to_channels_first.compile("cpu", x, b)
    assert ("_xb_parallel_for(" in art.source) == (cpu.threads() > 1)
    np.testing.assert_array_equal(art.run(x, b)[0], (x + b).reshape(4, 1024, 128).transpose(0, 2, 1))


def test_softmax_256_runs_serially_and_1024_in_parallel_on_two_threads():
    be = get_backend("cpu")
    small, large = _kernel(softmax, (256, 256)), _kernel(softmax, (1024, 1024))
    assert not cpu.parallel_pays(small, 2)
    assert cpu.parallel_pays(large, 2)
    if cpu.threads() == 2:
        assert be.default_schedule(small)["parallel"] is False
        assert be.default_schedule(large)["parallel"] is True


def test_the_choice_is_monotonic_in_size_and_threads():
    decisions = [cpu.parallel_pays(_kernel(softmax, (n, 256)), 2) for n in (16, 64, 128, 256, 512, 1024, 4096)]
    assert decisions == sorted(decisions) and decisions[0] is False and decisions[-1] is True
    k = _kernel(softmax, (512, 512))
    by_threads = [cpu.parallel_pays(k, t) for t in (1, 2, 4, 16)]
    assert by_threads == sorted(by_threads) and by_threads[0] is False


def test_saved_time_must_exceed_twice_the_launch():
    k = _kernel(add, (64, 64), (64, 64))
    edge = 2 * cpu.PARALLEL_MARGIN * cpu.LAUNCH_US            # on 2 threads half the work is saved
    assert not cpu.parallel_pays(k, 2, work_us=edge * 0.99)
    assert cpu.parallel_pays(k, 2, work_us=edge * 1.01)
    one_row = _kernel(softmax, (1, 4096))
    assert not cpu.parallel_pays(one_row, 2, work_us=1e6)   # one outer point: nothing to split


_SEEN_BY_BLAS = """
import os, sys
seen = []
class Watch:                       # what OpenBLAS will read when scipy's copy loads (scipy.linalg's import)
    def find_spec(self, name, path=None, target=None):
        if name == "scipy.linalg":
            seen.append(os.environ.get("OPENBLAS_THREAD_TIMEOUT"))
sys.meta_path.insert(0, Watch())
import xbench.backends.cpu
import scipy.linalg
print(os.environ["OMP_WAIT_POLICY"], seen[0])
"""


def test_backend_makes_threads_sleep_between_loops_unless_told_otherwise():
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT")}
    out = subprocess.run([sys.executable, "-c", _SEEN_BY_BLAS], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["PASSIVE", "16"]           # set before scipy's OpenBLAS loads
    out = subprocess.run([sys.executable, "-c", _SEEN_BY_BLAS], capture_output=True, text=True, check=True,
                         env={**env, "OMP_WAIT_POLICY": "ACTIVE", "OPENBLAS_THREAD_TIMEOUT": "28"})
    assert out.stdout.split() == ["ACTIVE", "28"]


def test_parallel_loops_use_only_the_cores_no_other_task_is_running_on(tmp_path, monkeypatch):
    from xbench.backends.cpu import tasks

    def with_loadavg(text):
        f = tmp_path / "loadavg"
        f.write_text(text)
        monkeypatch.setattr(tasks, "_loadavg", [os.open(f, os.O_RDONLY)])
        try:
            return tasks._read_free_cores()
        finally:
            os.close(tasks._loadavg[0])

    monkeypatch.setattr(tasks, "_CORES", 4)
    monkeypatch.setattr(tasks, "_shared", [False])
    monkeypatch.setattr(tasks, "_own_running", lambda: 1)
    assert with_loadavg("0.50 0.40 0.30 1/120 999\n") == 4          # only this thread runs
    assert with_loadavg("2.50 2.40 2.30 3/120 999\n") == 2          # two others hold two cores
    assert with_loadavg("9.00 8.00 7.00 12/140 999\n") == 1         # oversubscribed: run on this thread alone
    assert with_loadavg("garbled\n") == 4
    # the GEMMs on numba's threads too: a running thread of this process is ours, spinning for the next loop
    tasks.share_threads(True)
    assert with_loadavg("2.50 2.40 2.30 3/120 999\n") == 3          # one other task, and one thread of ours
    assert with_loadavg("0.50 0.40 0.30 1/120 999\n") == 4


def test_the_free_cores_are_read_again_only_after_a_while(monkeypatch):
    from xbench.backends.cpu import tasks
    reads = []
    monkeypatch.setattr(tasks, "_read_free_cores", lambda: reads.append(1) or len(reads))
    monkeypatch.setattr(tasks, "_free", [0, 0])
    assert [tasks.free_cores() for _ in range(3)] == [1, 1, 1]
    monkeypatch.setattr(tasks, "FREE_CORES_NS", 0)
    assert [tasks.free_cores() for _ in range(2)] == [2, 3]


def test_this_process_running_threads_are_counted():
    import threading
    import time

    import numba

    from xbench.backends.cpu import tasks

    @numba.njit(nogil=True)
    def spin(seconds_ns):
        x = 0.0
        for i in range(seconds_ns):
            x += i * 1e-9
        return x

    spin(10)
    t = threading.Thread(target=spin, args=(300_000_000,))          # about 0.3 s of work, without the GIL
    t.start()
    try:
        seen = [tasks._own_running() for _ in range(50) if not time.sleep(0.002)]
    finally:
        t.join()
    assert max(seen) >= 1


def test_a_loop_on_fewer_threads_leaves_numbas_thread_count_alone():
    import numba

    # one row: the loop runs on one thread, which the threading layer would keep as this thread's setting
    x = np.random.default_rng(0).standard_normal((1, 4096)).astype(np.float32)
    (k,) = softmax.lower(x).kernels
    art = softmax.compile("cpu", x, schedule={k.name: {"parallel": True}})
    before = numba.get_num_threads()
    out = art.run(x)[0]
    assert numba.get_num_threads() == before
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-5)


B, C, O, H, W = xb.dims("B C O H W")


@xb.tensor_op
def conv_weight_grad(g: Tensor[B, O, H, W], x: Tensor[B, C, H, W]):
    # a 3x3 convolution's weight gradient: a small output, its window operand packed from the whole input
    pad = xb.pad(x, (0, 0, 0, 0, 1, 1, 1, 1))
    cols = xb.stack([pad[:, :, r:r + 32, s:s + 32] for r in range(3) for s in range(3)], axis=2)
    return xb.einsum("bohw,bckhw->ock", g, cols)


def test_a_contraction_that_packs_far_more_than_it_writes_packs_in_parallel():
    """ResNet's stem weight gradient writes 9,408 values from a window of 1.2 M packed elements: its packing
    loops run on every thread although its output alone would not pay for a launch."""
    g, x = np.zeros((8, 16, 32, 32), np.float32), np.zeros((8, 3, 32, 32), np.float32)
    kernels = [k for k in conv_weight_grad.lower(g, x).kernels if k.kind == "contract"]
    assert kernels
    k = kernels[-1]
    assert k.points() < cpu.BLAS_PARALLEL_POINTS <= cpu._packed(cpu.contraction.roles(k))
    assert get_backend("cpu").default_schedule(k)["parallel"]


@xb.tensor_op
def mm(a: Tensor[N, D], b: Tensor[D, M]) -> Tensor[N, M]:
    return a @ b


def test_small_gemms_run_on_one_thread_on_openblas_and_on_blas_threads_on_mkl(monkeypatch):
    """OpenBLAS's own threads cost a small GEMM more than they give; MKL shares the OpenMP threads and picks its
    own count. A decode step's projection, 8 x 256 by 256 x 768, is small; 512^3 is not."""
    from xbench.backends.cpu import blas
    small, large = _kernel(mm, (8, 256), (256, 768)), _kernel(mm, (512, 512), (512, 512))
    assert cpu.kernel_work(small) < cpu.BLAS_THREAD_WORK <= cpu.kernel_work(large)
    backend = get_backend("cpu")
    for provider, want in (("openblas", 1), ("mkl", 0)):
        monkeypatch.setattr(blas, "PROVIDER", provider)
        assert backend.default_schedule(small)["blas_threads"] == want, provider
        assert backend.default_schedule(large)["blas_threads"] == 0, provider


B, H, L, S, C = xb.dims("B H L S C")


@xb.tensor_op
def rows_times_matrices(p: Tensor[B, H, L, S], v: Tensor[B, H, S, C]):
    return p @ v


def test_a_batch_of_row_vectors_times_small_matrices_runs_as_loops():
    # a decoded token's attention over its cache, per batch and head: 1 x 160 by 160 x 64 is loops (one
    # accumulator row vectorised along the 64 columns); a wider matrix, or a block of rows, stays on BLAS
    rng = np.random.default_rng(0)
    be = get_backend("cpu")
    for (rows, keys, cols), impl in (((1, 160, 64), "loops"), ((1, 1024, 64), "blas"), ((4, 160, 64), "blas")):
        p = rng.standard_normal((8, 4, rows, keys)).astype(np.float32)
        v = rng.standard_normal((8, 4, keys, cols)).astype(np.float32)
        (k,) = [k for k in rows_times_matrices.lower(p, v).kernels if k.kind == "contract"]
        assert be.default_schedule(k)["impl"] == impl, (rows, keys, cols)
        if impl == "loops":
            got = rows_times_matrices.compile("cpu", p, v).run(p, v)[0]
            np.testing.assert_allclose(got, p.astype(np.float64) @ v, rtol=1e-5, atol=1e-4)


def test_a_batch_of_gemms_one_per_core_runs_its_batch_loop_in_parallel():
    # four heads' [128 x 128] @ [128 x 64] with a packed operand: fewer points and less packing than
    # BLAS_PARALLEL_POINTS, but with the batch split over the cores the loop runs the GEMMs themselves
    be = get_backend("cpu")
    p = np.zeros((4, 128, 128), np.float32)
    w, v = np.ones(128, np.float32), np.zeros((4, 128, 64), np.float32)
    (k,) = [k for k in packed_heads.lower(p, w, v).kernels if k.kind == "contract"]
    assert k.points() < cpu.BLAS_PARALLEL_POINTS and cpu.parallel_pays(k)
    s = be.default_schedule(k)
    assert s["batch_parallel"] == (2 * cpu.threads() <= 4)
    assert s["parallel"] == s["batch_parallel"]
    if cpu.threads() == 2:
        assert s["parallel"] is True


H, L, S = xb.dims("H L S")


@xb.tensor_op
def packed_heads(p: Tensor[H, L, S], w: Tensor[S], v: Tensor[H, S, D]):
    return (p / w) @ v


@xb.tensor_op
def rows_times_updated_cache(p: Tensor[B, H, L, S], v: Tensor[B, H, S, C], row: Tensor[B, H, L, C], pos: Tensor[O]):
    # a decoded token's attention over its cache with the token's own row in it (index_copy at one position)
    at = (xb.arange(v.shape[2]) == pos).reshape((v.shape[2], 1))
    return p @ xb.where(at, row, v)


def test_a_row_vector_times_a_cache_with_a_row_replaced_runs_as_loops():
    # either read is unit-stride along the columns, so the choice between them is too: loops, as over the
    # cache alone, the choice made once per cache row
    rng = np.random.default_rng(1)
    p = rng.standard_normal((8, 4, 1, 160)).astype(np.float32)
    v = rng.standard_normal((8, 4, 160, 64)).astype(np.float32)
    row = rng.standard_normal((8, 4, 1, 64)).astype(np.float32)
    pos = np.array([37], np.int64)
    (k,) = [k for k in rows_times_updated_cache.lower(p, v, row, pos).kernels if k.kind == "contract"]
    assert get_backend("cpu").default_schedule(k)["impl"] == "loops"
    art = rows_times_updated_cache.compile("cpu", p, v, row, pos)
    want = v.astype(np.float64).copy()
    want[:, :, 37] = row[:, :, 0]
    np.testing.assert_allclose(art.run(p, v, row, pos)[0], p.astype(np.float64) @ want, rtol=1e-5, atol=1e-4)

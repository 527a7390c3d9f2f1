"""Kernels lifted by xb.compat.from_cuda, against the kernels themselves: each form the lifting covers, run on new
inputs (other shapes than the ones from_cuda verified on) through the operator and through the kernel launched
directly, plus what the operator lowers to (a contraction for the matmuls, one fused kernel for a stencil)."""
import numpy as np
import pytest

import xbench as xb

from . import kernels as K

RNG = np.random.default_rng(7)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def run(kernel, grid, block, *args):
    """Launch the legacy kernel on numpy arrays (it writes its outputs in place)."""
    kernel[grid, block](*args)
    return args


def kinds(op, *args, **kwargs):
    return [k.kind for k in op.lower(*args, **kwargs).kernels]


def test_saxpy_one_thread_per_element():
    op = xb.compat.from_cuda(K.saxpy, out="out")
    assert all(c.ok for c in op.checks) and op.checks
    assert "return a * x + y" in op.source
    assert list(op.signature.parameters) == ["a", "x", "y"]
    x, y = randn(300), randn(300)
    out = np.zeros(300, np.float32)
    K.launch_saxpy(2.5, x, y, out)
    np.testing.assert_allclose(op(2.5, x, y), out, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(op(2.5, x, y), 2.5 * x + y, rtol=2e-6, atol=1e-6)


def test_numba_docs_vector_add_in_float64():
    op = xb.compat.from_cuda(K.vecadd, out="c")
    a, b = RNG.random(129), RNG.random(129)
    c = np.zeros(129)
    run(K.vecadd, 5, 32, a, b, c)
    got = op(a, b)
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, c)


def test_grid_stride_loop_covers_every_element_once():
    op = xb.compat.from_cuda(K.scaled_exp, out="out")
    assert "alpha * xb.exp(x)" in op.source
    x = randn(300)
    out = np.full(300, np.nan, np.float32)
    run(K.scaled_exp, 2, 32, x, 0.75, out)          # 64 threads, each loops over ~5 elements
    np.testing.assert_allclose(op(x, 0.75), out, rtol=2e-6)


def test_2d_grid_over_a_matrix_with_a_broadcast_row():
    op = xb.compat.from_cuda(K.add_bias_2d, out="out")
    x, b = randn(13, 29), randn(29)
    out = np.zeros_like(x)
    run(K.add_bias_2d, (2, 4), (8, 8), x, b, out)
    np.testing.assert_array_equal(op(x, b), out)


@pytest.mark.parametrize("shape", [(45,), (3,)])
def test_1d_stencil_with_boundary_conditions(shape):
    op = xb.compat.from_cuda(K.smooth, out="out")
    assert "xb.pad" in op.source and "xb.where" in op.source
    x = randn(*shape)
    out = np.zeros_like(x)
    run(K.smooth, 2, 32, x, out)
    np.testing.assert_allclose(op(x), out, rtol=2e-6)
    assert kinds(op, x) == ["elementwise"]


def test_2d_five_point_stencil():
    op = xb.compat.from_cuda(K.jacobi, out="out")
    u = randn(11, 17)
    out = np.zeros_like(u)
    run(K.jacobi, (2, 3), (8, 8), u, out)
    np.testing.assert_allclose(op(u), out, rtol=2e-6)
    assert kinds(op, u) == ["elementwise"]


def test_row_reductions_written_as_loops_in_the_thread():
    s = xb.compat.from_cuda(K.row_sum, out="out")
    sm = xb.compat.from_cuda(K.row_softmax, out="out")
    assert "xb.sum(x, axis=1)" in s.source
    x = randn(9, 33)
    out = np.zeros(9, np.float32)
    run(K.row_sum, 1, 32, x, out)
    np.testing.assert_allclose(s(x), out, rtol=1e-5, atol=1e-5)
    out2 = np.zeros_like(x)
    run(K.row_softmax, 1, 32, x, out2)
    np.testing.assert_allclose(sm(x), out2, rtol=1e-5, atol=1e-7)
    assert kinds(sm, x) == ["row"]


def test_running_values_stored_in_the_loop_are_scans():
    cs = xb.compat.from_cuda(K.row_cumsum, out="out")
    mb = xb.compat.from_cuda(K.max_before, out="out")
    assert "return xb.cumsum(x, axis=1)" in cs.source and "xb.cummax" in mb.source
    x = randn(6, 300)                               # longer than loops are ever unrolled
    out = np.zeros_like(x)
    run(K.row_cumsum, 1, 32, x, out)
    np.testing.assert_allclose(cs(x), out, rtol=1e-4, atol=1e-4)
    assert kinds(cs, x) == ["scan"]
    out2 = np.zeros_like(x)
    run(K.max_before, 1, 32, x, out2)
    np.testing.assert_array_equal(mb(x), out2)
    assert np.isneginf(out2[:, 0]).all()


def test_a_loop_overwriting_one_element_keeps_its_last_iteration():
    op = xb.compat.from_cuda(K.last_column, out="out")
    assert "x[:, x.shape[1] - 1]" in op.source
    x = randn(5, 8)
    np.testing.assert_array_equal(op(x), 2 * x[:, -1])


def test_strided_stores_that_interleave_cover_the_output():
    op = xb.compat.from_cuda(K.interleave, out="out", shape=lambda x: (2 * x.shape[0],))
    x = randn(40)
    out = np.zeros(80, np.float32)
    run(K.interleave, 2, 32, x, out)
    np.testing.assert_array_equal(op(x), out)


def test_a_flat_1d_launch_over_a_matrix():
    op = xb.compat.from_cuda(K.scale_flat, out="out")
    assert "return x * 3" in op.source
    x = randn(7, 9)
    out = np.zeros_like(x)
    run(K.scale_flat, 2, 32, x, out)
    np.testing.assert_array_equal(op(x), out)


def test_numba_docs_matmul_lifts_to_a_contraction():
    op = xb.compat.from_cuda(K.matmul, out="C")
    assert "return A @ B" in op.source
    A, B = randn(5, 23), randn(23, 7)
    C = np.zeros((5, 7), np.float32)
    run(K.matmul, (1, 1), (16, 16), A, B, C)
    np.testing.assert_allclose(op(A, B), C, rtol=1e-5, atol=1e-5)
    assert kinds(op, A, B) == ["contract"]


def test_numba_docs_shared_memory_matmul_is_a_contraction():
    op = xb.compat.from_cuda(K.fast_matmul, out="C", launch=K.launch_fast_matmul)
    assert "return A @ B" in op.source
    A, B = randn(5, 23), randn(23, 7)               # the documentation's non-square case
    C = np.zeros((5, 7), np.float32)
    K.launch_fast_matmul(A, B, C)
    np.testing.assert_allclose(op(A, B), C, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(op(A, B), A @ B, rtol=1e-5, atol=1e-5)
    assert kinds(op, A, B) == ["contract"]


def test_shared_memory_matmul_launched_too_small_sums_what_the_kernel_sums():
    # one block along x: gridDim.x tiles of 4 cover only the first 4 of K = 9, and the kernel (so the operator)
    # contracts only those
    A, B = randn(6, 9), randn(9, 3)
    op = xb.compat.from_cuda(K.fast_matmul, out="C", grid=(1, 2), example=(A, B))
    C = np.zeros((6, 3), np.float32)
    run(K.fast_matmul, (1, 2), (4, 4), A, B, C)
    np.testing.assert_allclose(op(A, B), C, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(C, A[:, :4] @ B[:4], rtol=1e-5, atol=1e-5)


def test_numba_docs_heat_equation_with_a_grid_barrier():
    op = xb.compat.from_cuda(K.solve_heat_equation, out=("buf_0", "buf_1"),
                             example=dict(buf_0=randn(21, dtype=np.float64), timesteps=3, k=0.25))
    assert list(op.signature.parameters) == ["buf_0", "timesteps", "k"]
    data = np.zeros(25)
    data[12] = 100.0
    b0, b1 = data.copy(), np.zeros_like(data)
    run(K.solve_heat_equation, 1, 32, b0, b1, 4, 0.25)
    got0, got1 = op(data, 4, 0.25)
    np.testing.assert_allclose(got0, b0, rtol=1e-12)
    np.testing.assert_allclose(got1, b1, rtol=1e-12)
    np.testing.assert_allclose(got0.sum(), 100.0, rtol=1e-12)       # heat is conserved


def test_numba_docs_shared_memory_reduction_tree():
    op = xb.compat.from_cuda(K.array_sum, out="data", block=K.NELEM, grid=1,
                             example=dict(data=np.arange(K.NELEM, dtype=np.int32)))
    data = RNG.integers(-50, 50, K.NELEM).astype(np.int32)
    mine = data.copy()
    run(K.array_sum, 1, K.NELEM, mine)
    got = op(data)
    np.testing.assert_array_equal(got, mine)
    assert got[0] == data.sum() and (got[1:] == data[1:]).all()


def test_device_functions_numba_jit_and_cuda_device():
    op = xb.compat.from_cuda(K.cpu_gpu_compat, out="res")
    x, y, z = RNG.random(40), RNG.random(40), RNG.random(40)
    res = np.zeros(40)
    run(K.cpu_gpu_compat, 2, 32, res, x, y, z)
    np.testing.assert_allclose(op(x, y, z), res, rtol=1e-12)
    c = xb.compat.from_cuda(K.clamp_all, out="out")
    x = randn(50)
    np.testing.assert_array_equal(c(x), np.clip(x, -0.5, 0.5))


def test_atomic_add_at_a_fixed_address_is_a_sum():
    op = xb.compat.from_cuda(K.total, out="out", init=0.0, shape=(1,))
    x = randn(300)
    out = np.zeros(1, np.float32)
    run(K.total, 10, 32, x, out)
    np.testing.assert_allclose(op(x), out, rtol=1e-4)
    assert kinds(op, x)[0] == "reduce"


def test_in_place_update_takes_and_returns_the_array():
    op = xb.compat.from_cuda(K.scale_in_place, out="x")
    assert list(op.signature.parameters) == ["x", "factor"]
    x = randn(70)
    mine = x.copy()
    run(K.scale_in_place, 3, 32, mine, 3.0)
    np.testing.assert_allclose(op(x, 3.0), mine, rtol=1e-6)


def test_reading_back_its_own_stores_keeps_an_output_write_only():
    op = xb.compat.from_cuda(K.read_own_writes, out="out")
    assert list(op.signature.parameters) == ["x"]
    x = randn(50)
    np.testing.assert_array_equal(op(x), np.where(x > 0, (x + 1) * 2, x + 1))


def test_data_dependent_reads_become_a_gather():
    op = xb.compat.from_cuda(K.take, out="out")
    table = randn(31)
    idx = RNG.integers(0, 31, 50)
    out = np.zeros(50, np.float32)
    run(K.take, 2, 32, table, idx, out)
    np.testing.assert_array_equal(op(table, idx), out)


def test_two_outputs():
    op = xb.compat.from_cuda(K.min_max, out=("lo", "hi"))
    x = randn(10, 6)
    lo, hi = op(x)
    np.testing.assert_array_equal(lo, x.min(axis=1))
    np.testing.assert_array_equal(hi, x.max(axis=1))


def test_non_contiguous_inputs_read_as_the_kernel_reads_them():
    op = xb.compat.from_cuda(K.add_bias_2d, out="out")
    big = randn(20, 40)
    x, b = big[::2, 1::3], big[3, ::3][:13]
    assert not x.flags.c_contiguous
    out = np.zeros(x.shape, np.float32)
    run(K.add_bias_2d, (2, 2), (8, 8), np.ascontiguousarray(x), np.ascontiguousarray(b), out)
    np.testing.assert_array_equal(op(x, b), out)


@pytest.mark.parametrize("kernel, out, kw", [(K.saxpy, "out", {}), (K.jacobi, "out", {}),
                                             (K.fast_matmul, "C", {"launch": K.launch_fast_matmul})],
                         ids=["saxpy", "jacobi", "fast_matmul"])
def test_lifted_operators_run_on_cuda_and_ascend(kernel, out, kw):
    op = xb.compat.from_cuda(kernel, out=out, backends=("cuda", "ascend"), **kw)
    assert {c.backend for c in op.checks} == {"cuda", "ascend"}
    assert all(c.ok for c in op.checks), [str(c) for c in op.checks if not c.ok]

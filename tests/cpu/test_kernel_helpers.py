"""The helpers generated cpu kernels call: scratch allocation intrinsics, and Winograd's F(2x2, 3x3) transforms
checked piece by piece against the direct convolution in float64."""
import numba
import numpy as np
import pytest

from xbench.backends.cpu import winograd
from xbench.backends.cpu.mathlib import select
from xbench.backends.cpu.tasks import new_array, new_zeros

rng = np.random.default_rng(7)


@numba.njit
def _scratch(n):
    a = new_zeros((3, n), np.float32)
    b = new_array((n,), np.int64)
    c = new_zeros((2, 1, n), np.float64)
    b[:] = 5
    return a, b, c


def test_scratch_intrinsics_give_c_arrays_of_the_asked_shape_dtype_and_zeros():
    for n in (1, 7, 1000):
        a, b, c = _scratch(n)
        assert (a.shape, a.dtype, b.shape, b.dtype, c.shape, c.dtype) == \
            ((3, n), np.float32, (n,), np.int64, (2, 1, n), np.float64)
        assert a.flags.c_contiguous and c.flags.c_contiguous
        assert not a.any() and not c.any() and (b == 5).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("h,w", [(4, 4), (7, 10), (1, 3)])
def test_winograd_transforms_compute_a_3x3_convolution(dtype, h, w):
    """weights -> inputs -> products -> outputs on a padded plane equals the 3x3 correlation of that plane,
    tile by tile, including the tiles past an odd edge."""
    C, M = 5, 3
    th, tw = -(-h // 2), -(-w // 2)
    hp, wp = 2 * th + 2, 2 * tw + 2
    x = np.zeros((C, hp, wp), dtype)
    x[:, 1:h + 1, 1:w + 1] = rng.standard_normal((C, h, w))
    g = rng.standard_normal((M, C, 3, 3)).astype(dtype)
    u = np.empty((16, M, C), dtype)
    winograd.weights(np.ascontiguousarray(g.transpose(2, 3, 0, 1).reshape(9, M, C)), u)
    v = np.empty((16, C, th * tw), dtype)
    winograd.inputs(x.reshape(C, -1), v, 0, th, tw, wp, 0, C)
    p = np.empty((16, M, th * tw), dtype)
    winograd.products(u, v, p)
    y = np.empty((M, 4 * th * tw), dtype)
    winograd.outputs(p, y, 0, 0, M)
    # by blocks of two tile rows (the last one short when th is odd), tile rows 1.. only
    y2 = np.zeros_like(y)
    winograd.tiles(x.reshape(C, -1), u, np.empty((16, C, 2 * tw), dtype), np.empty((16, M, 2 * tw), dtype), y2,
                   tw, wp, 1, th)
    # the same products up to the BLAS kernel's summation order for another number of columns
    np.testing.assert_allclose(y2[:, 4 * tw:], y[:, 4 * tw:], atol=1e-5 if dtype == np.float32 else 1e-12)
    assert not y2[:, :4 * tw].any()
    got = y.reshape(M, th, tw, 2, 2).transpose(0, 1, 3, 2, 4).reshape(M, 2 * th, 2 * tw)
    win = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(1, 2))
    want = np.einsum("chwrs,mcrs->mhw", win, g.astype(np.float64))[:, :2 * th, :2 * tw]
    np.testing.assert_allclose(got, want, atol=2e-5 if dtype == np.float32 else 1e-12)


def test_openblas_threads_limits_every_openblas_and_restores_it():
    """The direct OpenBLAS path agrees with threadpoolctl's view of every BLAS, inside and after the limit."""
    import scipy.linalg  # noqa: F401  (the BLAS numba's binding calls)
    from threadpoolctl import threadpool_info

    from xbench.backends.cpu import runtime
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    assert len(runtime._openblas()) == sum(i["internal_api"] == "openblas" for i in threadpool_info())
    with runtime.openblas_threads(1):
        assert all(i["num_threads"] == 1 for i in threadpool_info() if i["user_api"] == "blas")
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before


@numba.njit
def _chosen(c, a, b):
    return select(c, a, b)


def test_select_chooses_between_values_of_any_numeric_type():
    assert _chosen(True, np.float32(1.5), np.float32(2.5)) == np.float32(1.5)
    assert _chosen(False, np.float32(1.5), np.float32(2.5)) == np.float32(2.5)
    assert _chosen(np.int64(3), 7, 9) == 7 and _chosen(np.int64(0), 7, 9) == 9
    assert _chosen(False, np.float32(1.0), 2.0) == 2.0           # unified to float64
    assert _chosen(True, False, True) is False


def test_a_where_of_plain_reads_computes_both_branches_and_selects_and_a_guarded_read_stays_a_branch():
    """`where` over elements read at the kernel's own indices is one select of two values (no branch to
    mispredict on a random mask, and a loop that vectorises); a padded window's read outside its bounds
    must not be made, so it stays behind its condition."""
    import xbench as xb
    a, b, c = (rng.standard_normal((4, 64, 8, 8)).astype(np.float32) for _ in range(3))

    @xb.tensor_op
    def relu_grad_add(a, b, c):
        return xb.where(a > 0, b + c, 0.0 * b)

    art = relu_grad_add.compile("cpu", a, b, c)
    assert "_xb_select(" in art.source
    np.testing.assert_array_equal(art.run(a, b, c)[0], np.where(a > 0, b + c, np.float32(0) * b))
    pad = xb.ops.constant_pad_nd.compile("cpu", a, (1, 1, 1, 1))
    assert "_xb_select(" not in pad.source and " if " in pad.source
    np.testing.assert_array_equal(pad.run(a)[0], np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1))))


def test_a_running_argmax_chooses_by_selects_keeping_the_first_maximum_and_the_first_nan():
    import xbench as xb
    x = rng.integers(0, 4, (64, 37)).astype(np.float32)         # many ties
    x[5, 7] = x[5, 20] = np.nan
    art = xb.ops.argmax.compile("cpu", x, 1)
    assert "_xb_select(_take" in art.source and "if _v" not in art.source
    assert "_pos" not in art.source                 # one loop: its own variable is the position
    np.testing.assert_array_equal(art.run(x)[0], np.argmax(x, axis=1))      # numpy: first maximum, first NaN


def _weighted_rows(x, w):
    # per leading index, its own weight for each of the rows (an upsampling's gradient: a tap table per row)
    return (x * w.reshape(w.shape + (1,))).sum(axis=1)


def test_a_short_sum_of_weighted_rows_adds_whole_rows_in_the_order_of_one_output_at_a_time():
    import xbench as xb
    op = xb.tensor_op(_weighted_rows)
    x = rng.standard_normal((4, 20, 48)).astype(np.float32)
    w = rng.standard_normal((4, 20)).astype(np.float32)
    art = op.compile("cpu", x, w)
    assert "_r_acc[" in art.source             # a row of 48 accumulators per leading index, vectorised along it
    want = np.zeros((4, 48), np.float32)
    for r in range(20):                        # float32, one term after another
        want += x[:, r, :] * w[:, r:r + 1]
    np.testing.assert_array_equal(art.run(x, w)[0], want)
    # summed along the last axis, the terms run across the outputs' row: one output at a time
    assert "_r_acc[" not in xb.ops.sum.compile("cpu", x, 2).source

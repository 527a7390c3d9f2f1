"""Reductions whose innermost axes every read walks as whole trailing dimensions run them as one loop over a
flattened view (`ModuleWriter.flat_reads`), which LLVM vectorises; other reads keep the nest."""
import ml_dtypes
import numpy as np
import pytest

import xbench as xb

rng = np.random.default_rng(11)


@xb.tensor_op
def channel_sums(x, g):
    return (x * g).sum(axis=(0, 2, 3)), x.max(axis=(0, 2, 3))


@xb.tensor_op
def transposed_sum(x, y):
    return (x + y.transpose(0, 1, 3, 2)).sum(axis=(2, 3))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_a_sum_and_a_max_over_each_images_rows_and_columns_run_as_one_loop(dtype):
    x = rng.standard_normal((4, 6, 5, 7)).astype(dtype)
    g = rng.standard_normal((4, 6, 5, 7)).astype(dtype)
    x[1, 2, 3, 4] = np.nan                                   # the max propagates NaN through the flat loop too
    art = channel_sums.compile("cpu", x, g)
    assert ".reshape((4, 6, 35))" in art.source
    s, m = (np.asarray(v, np.float64) for v in art.run(x, g))
    x64, g64 = x.astype(np.float64), g.astype(np.float64)
    want_s = (x64 * g64).sum(axis=(0, 2, 3))
    tol = 1e-5 if dtype == np.float32 else 0.02 * np.nanmax(np.abs(want_s))
    np.testing.assert_allclose(s[np.arange(6) != 2], want_s[np.arange(6) != 2], atol=tol)
    assert np.isnan(s[2]) and np.isnan(m[2])
    np.testing.assert_array_equal(m[np.arange(6) != 2], x64.max(axis=(0, 2, 3))[np.arange(6) != 2])


def test_a_read_that_walks_the_axes_in_another_order_keeps_the_nest():
    x, y = rng.standard_normal((3, 4, 6, 6)).astype(np.float32), rng.standard_normal((3, 4, 6, 6)).astype(np.float32)
    art = transposed_sum.compile("cpu", x, y)
    assert ".reshape(" not in art.source
    np.testing.assert_allclose(art.run(x, y)[0], (x + y.transpose(0, 1, 3, 2)).sum(axis=(2, 3)), atol=1e-5)

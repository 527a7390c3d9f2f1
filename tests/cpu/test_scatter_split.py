"""A scatter-add runs on every core by cutting an axis that addresses its own dimension of the target into one
range per thread: no two threads add into one element, and every element gets its additions in serial order."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import xbench as xb
from xbench.backends.cpu import parallel_pays
from xbench.ir import expr as E
from xbench.ir.expr import Idx, Load, add
from xbench.ir.kernel import Axis, ScatterAdd


def test_the_disjoint_axis_is_one_that_alone_indexes_a_target_dimension():
    b, d, e = Axis("b", 50), Axis("d", 8), Axis("e", 3)
    row = Load("idx", (Idx("b"),), "int64")
    value = Load("src", (Idx("b"), Idx("d")), "float32")
    assert ScatterAdd("t", (b, d), (row, Idx("d")), value).disjoint_axis() is d
    # d also moves the row the point adds into, but points differing in d still differ in the column
    assert ScatterAdd("t", (b, d), (add(row, Idx("d")), Idx("d")), value).disjoint_axis() is d
    # b moves the row only through the indices it loads: points differing in it may meet
    assert ScatterAdd("t", (b,), (row, E.const(0)), value).disjoint_axis() is None
    # of two such axes, the longer one is cut
    assert ScatterAdd("t", (b, e, d), (row, Idx("e"), Idx("d")), value).disjoint_axis() is d


def test_index_add_splits_across_threads_with_the_serial_result_bit_for_bit(monkeypatch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3000, 64)).astype(np.float32)
    idx = rng.integers(0, 3000, 12000).astype(np.int64)       # many points add into the same rows
    src = rng.standard_normal((12000, 64)).astype(np.float32)
    split = xb.ops.index_add.compile("cpu", x, 0, idx, src, schedule={"k0_scatter": {"parallel": True}})
    serial = xb.ops.index_add.compile("cpu", x, 0, idx, src, schedule={"k0_scatter": {"parallel": False}})
    # the split runs as tasks on numba's threads, the target zeroed once before them
    assert "_xb_parallel_for(" in split.source and "k0_scatter_head(" in split.source
    assert "_xb_parallel_for(" not in serial.source and "numba.prange(" not in serial.source
    got = split.run(x, idx, src)[0]
    np.testing.assert_array_equal(got, serial.run(x, idx, src)[0])
    ref = x.astype(np.float64)
    np.add.at(ref, idx, src)
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    # the default decides by the work: these 770 k additions are worth a parallel launch, 8 are not
    assert parallel_pays(split.program.kernels[0], n_threads=2)
    tiny = xb.ops.index_add.lower(x[:2, :4], 0, idx[:2] % 2, src[:2, :4])
    assert not parallel_pays(tiny.kernels[0], n_threads=2)


@xb.tensor_op
def add_along_rows(x, idx, upd):
    return xb.scatter_add_along_axis(x, idx, upd, axis=1)


def test_a_scatter_add_along_an_axis_splits_across_threads_by_row_whatever_the_rows_indices():
    # torch's scatter_add(dim=1): each row adds only into itself, its column indices loaded per point (a max
    # pool's gradient, one row per plane)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 50)).astype(np.float32)
    idx = rng.integers(-50, 50, (64, 200))              # negative indices count from the end
    upd = rng.standard_normal((64, 200)).astype(np.float32)
    split = add_along_rows.compile("cpu", x, idx, upd, schedule={"k0_scatter": {"parallel": True}})
    assert "_xb_parallel_for(" in split.source
    (scatter,) = [s for s in split.program.kernels[0].stages if isinstance(s, ScatterAdd)]
    assert scatter.disjoint_axis() is scatter.axes[0] and scatter.index[0] == scatter.axes[0].var
    want = torch.zeros(64, 50, dtype=torch.float64).scatter_add_(1, torch.from_numpy(idx % 50),
                                                               torch.from_numpy(upd).double()).numpy() + x
    np.testing.assert_allclose(split.run(x, idx, upd)[0], want, rtol=1e-5, atol=1e-5)
    serial = add_along_rows.compile("cpu", x, idx, upd, schedule={"k0_scatter": {"parallel": False}})
    np.testing.assert_array_equal(split.run(x, idx, upd)[0], serial.run(x, idx, upd)[0])
    with pytest.raises(xb.XbenchError, match="indices with 2 dims"):
        add_along_rows.compile("cpu", x, idx[0], upd[0])


@xb.tensor_op
def resample_rows(x):
    # a resampling's source rows: a captured table, every entry inside the axis
    return x[np.array([0, 0, 1, 2, 2, 3])] * 2.0


@xb.tensor_op
def last_rows(x):
    return x[np.array([-1, 0, 2])]


def test_a_read_through_a_captured_table_inside_its_axis_needs_no_wrap_or_clamp():
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)
    art = resample_rows.compile("cpu", x)
    assert "< 0" not in art.source and "min(max(" not in art.source
    np.testing.assert_array_equal(art.run(x)[0], x[[0, 0, 1, 2, 2, 3]] * 2)
    # a negative entry counts from the end, as every index does
    art = last_rows.compile("cpu", x)
    assert "< 0" in art.source
    np.testing.assert_array_equal(art.run(x)[0], x[[-1, 0, 2]])

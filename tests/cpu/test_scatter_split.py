"""A scatter-add runs on every core by cutting an axis that addresses its own dimension of the target into one
range per thread: no two threads add into one element, and every element gets its additions in serial order."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench.backends.cpu import parallel_pays
from xbench.ir.expr import Idx, Load, add
from xbench.ir.kernel import Axis, ScatterAdd


def test_the_disjoint_axis_is_one_that_alone_indexes_a_target_dimension():
    b, d, e = Axis("b", 50), Axis("d", 8), Axis("e", 3)
    row = Load("idx", (Idx("b"),), "int64")
    value = Load("src", (Idx("b"), Idx("d")), "float32")
    assert ScatterAdd("t", (b, d), (row, Idx("d")), value).disjoint_axis() is d
    # d also moves the row the point adds into: points differing in d may meet
    assert ScatterAdd("t", (b, d), (add(row, Idx("d")), Idx("d")), value).disjoint_axis() is None
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

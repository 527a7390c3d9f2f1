"""The row kernels' memory knobs (`stores`: streaming stores, `prefetch`: the next row fetched while computing
on this one): where they are offered, and that every value computes the operator as the float64 reference."""
import itertools

import numpy as np
import pytest

import xbench as xb
from xbench import ops

from . import numpy_ops as N

rng = np.random.default_rng(11)


def _knobs(op, *args):
    prog = op.lower(*args)
    (k,) = prog.kernels
    return k.name, xb.backends.get("cpu").knobs(k, prog)


def test_row_kernels_offer_streaming_stores_and_prefetch_where_rows_allow():
    name, knobs = _knobs(ops.softmax, np.zeros((8, 4096), np.float32))
    assert knobs["stores"].choices == ("cached", "streaming") and knobs["stores"].default == "cached"
    assert knobs["prefetch"].choices == (0, 2, 4, 8) and knobs["prefetch"].default == 0
    # a row of 48 floats is three lines: too short to stream, and 2 lines per step do not divide it
    _, knobs = _knobs(ops.layer_norm, np.zeros((8, 48), np.float32), 48, np.ones(48, np.float32), None)
    assert "stores" not in knobs and knobs["prefetch"].choices == (0,)
    # a row that is not a whole number of lines has no prefetch; without the program, neither knob
    _, knobs = _knobs(ops.softmax, np.zeros((8, 1000), np.float32))
    assert "stores" in knobs and "prefetch" not in knobs
    prog = ops.softmax.lower(np.zeros((8, 4096), np.float32))
    assert not {"stores", "prefetch"} & set(xb.backends.get("cpu").knobs(prog.kernels[0]))


@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("shape", [(37, 1024), (3, 5, 256), (9, 1000)])
def test_every_stores_and_prefetch_value_computes_the_row_ops(shape, parallel):
    """softmax, log_softmax, layer_norm and rms_norm with rows that start off a line boundary (1000 floats) and
    two outer axes flattened into one loop; in tasks and, unparallelised, as one serial loop."""
    x = rng.standard_normal(shape).astype(np.float32) * 3
    w, b = rng.standard_normal(shape[-1]).astype(np.float32), rng.standard_normal(shape[-1]).astype(np.float32)
    x64 = x.astype(np.float64)
    cases = [(ops.softmax, (x,), N.softmax(x64, -1)), (ops.log_softmax, (x,), N.log_softmax(x64, -1)),
             (ops.layer_norm, (x, shape[-1], w, b), N.layer_norm(x64, w, b)),
             (ops.rms_norm, (x, shape[-1], w), N.rms_norm(x64, w))]
    for op, args, expect in cases:
        name, knobs = _knobs(op, *args)
        assert "stores" in knobs, op.name
        prefetches = knobs["prefetch"].choices if "prefetch" in knobs else (0,)
        for stores, lines in itertools.product(knobs["stores"].choices, prefetches):
            sched = {name: {"stores": stores, "parallel": parallel} | ({"prefetch": lines} if lines else {})}
            art = op.compile("cpu", *args, schedule=sched)
            assert ("_xb_stream(" in art.source) == (stores == "streaming")
            assert ("_xb_prefetch(" in art.source) == (lines > 0)
            np.testing.assert_allclose(art.run(*op.arrays(*args))[0], expect, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{op.name} {sched}")

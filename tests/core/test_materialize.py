"""What lowering keeps in a buffer (`LowerCtx.plan`): a value read more than once that costs more than CHEAP to
recompute is kept; where it only moves another value's elements (a pooling's overlapping windows), that value is
kept instead when it is no larger, and each reader gathers from it."""
import numpy as np

import xbench as xb


@xb.tensor_op
def norm_relu_pool(x: xb.Tensor["N", "C", "H", "W"], w: xb.Tensor["C"], b: xb.Tensor["C"]):
    y = xb.ops.relu((x - 0.25) * 1.5 * w.reshape(-1, 1, 1) + b.reshape(-1, 1, 1))
    return xb.ops.max_pool2d_with_offsets(y, 3, 2, 1)        # windows read by a max and by an argmax


def test_overlapping_windows_of_a_computed_value_keep_the_value_not_the_windows():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 16, 16)).astype(np.float32)
    w, b = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    prog = norm_relu_pool.lower(x, w, b)
    temps = [tuple(buf.shape) for buf in prog.buffers.values() if buf.role == "temp"]
    assert temps == [(2, 4, 16, 16)]                         # not the [2, 4, 8, 8, 9] windows
    got = norm_relu_pool.compile("cpu", x, w, b).run(x, w, b)
    want = norm_relu_pool.compile("reference", x, w, b).run(x, w, b)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])

"""Select branches on the ascend backend: a tile computes both sides of a Select and picks per element (or per
tile, for a uniform condition), so the side not taken must never read outside a buffer."""
import numpy as np

import xbench as xb

rng = np.random.default_rng(5)


@xb.tensor_op
def scaled_then_looked_up(x: xb.Tensor["B", "F"], w: xb.Tensor["F", "K"], table: xb.Tensor["V", "K"],
                          ids: xb.Tensor["B", "C"]):
    # DeepFM's field embeddings: out[b, f, k] = x[b, f] * w[f, k] for f < F, else table[ids[b, f - F], k]
    return xb.concat([xb.expand_dims(x, 2) * w, xb.gather(table, ids)], axis=1)


@xb.tensor_op
def padded_scaled_rows(x: xb.Tensor["B", "F"], z: xb.Tensor["B", "F", "K"]):
    # out[b, g, k] = x[b, g] * z[b, g, k] for g < F, else 0
    return xb.pad(xb.expand_dims(x, 2) * z, ((0, 0), (0, 3), (0, 0)))

def test_concat_reads_no_operand_past_its_end():
    """The first operand's scalar x[b, f] is uniform over a tile: it was read for f >= F too (x[B-1, F] lies
    past x's end and the twin stopped the launch)."""
    x, w = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((4, 4)).astype(np.float32)
    table = rng.standard_normal((10, 4)).astype(np.float32)
    ids = rng.integers(0, 10, (8, 3)).astype(np.int64)
    for r in xb.verify(scaled_then_looked_up, x, w, table, ids, backend="ascend"):
        assert r.ok, r.message
    out = scaled_then_looked_up.compile("ascend", x, w, table, ids).run(x, w, table, ids)
    out = out[0] if isinstance(out, (list, tuple)) else out
    np.testing.assert_allclose(out[:, :4], x[:, :, None] * w, rtol=1e-6)
    np.testing.assert_array_equal(out[:, 4:], table[ids])


def test_padding_reads_no_element_past_the_operand():
    x, z = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((5, 4, 6)).astype(np.float32)
    for r in xb.verify(padded_scaled_rows, x, z, backend="ascend"):
        assert r.ok, r.message
    out = padded_scaled_rows.compile("ascend", x, z).run(x, z)
    out = out[0] if isinstance(out, (list, tuple)) else out
    assert out.shape == (5, 7, 6) and not out[:, 4:].any()

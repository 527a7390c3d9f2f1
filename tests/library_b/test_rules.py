"""The library's documented rules for part-B operators, with hand-computed numbers: padded data-dependent
results, index clamping, colliding scatters, NaN order in sorts, required static sizes, attention edge cases."""
import math

import numpy as np
import pytest

import xbench as xb

from .helpers import f32

ops = xb.ops


def run(op, *args, **kw):
    """On the cpu backend, checked against the reference backend too."""
    for c in xb.verify(op, *args, backend="cpu", **kw):
        assert c.ok, c.message
    return op(*args, **kw)


def test_nonzero_pads_with_fill_and_counts():
    x = np.array([[0, 3, 0], [5, 0, 7]], np.int32)
    idx, count = run(ops.nonzero, x)
    assert idx.shape == (6, 2) and idx.dtype == np.int64 and int(count) == 3
    np.testing.assert_array_equal(idx[:3], [[0, 1], [1, 0], [1, 2]])
    np.testing.assert_array_equal(idx[3:], -1)
    small, count = run(ops.nonzero, x, 2, 9)             # size 2: the third index is dropped, the count is not
    np.testing.assert_array_equal(small, [[0, 1], [1, 0]])
    assert int(count) == 3


def test_masked_select_and_unique_padding():
    x = np.array([4.0, -1.0, 4.0, 2.0, -1.0, 4.0], np.float32)
    vals, n = run(ops.masked_select, x, x > 0)
    assert int(n) == 4
    np.testing.assert_array_equal(vals, [4, 4, 2, 4, 0, 0])
    uniq, inverse, counts, n = run(ops._unique2, x, True, True, True)
    assert int(n) == 3
    np.testing.assert_array_equal(uniq[:3], [-1, 2, 4])
    np.testing.assert_array_equal(inverse, [2, 0, 2, 1, 0, 2])
    np.testing.assert_array_equal(counts, [2, 1, 3, 0, 0, 0])
    runs, inv, cnt, n = run(ops.unique_consecutive, np.array([1, 1, 2, 2, 2, 1], np.int64), True, True)
    assert int(n) == 3
    np.testing.assert_array_equal(runs[:3], [1, 2, 1])
    np.testing.assert_array_equal(inv, [0, 0, 1, 1, 1, 2])
    np.testing.assert_array_equal(cnt[:3], [2, 3, 1])


def test_indices_wrap_negative_and_clamp_out_of_range():
    x = np.arange(10, dtype=np.float32) * 10
    np.testing.assert_array_equal(run(ops.take, x, np.array([-1, 3, 99, -99], np.int64)), [90, 30, 90, 0])
    out = run(ops.index_add, np.zeros(4, np.float32), 0, np.array([-1, 7], np.int64), np.array([1, 2], np.float32))
    np.testing.assert_array_equal(out, [0, 0, 0, 3])


def test_colliding_overwrites_give_the_mean():
    self = np.zeros((3,), np.float32)
    out = run(ops.scatter, self, 0, np.array([1, 1, 2], np.int64), np.array([2.0, 4.0, 5.0], np.float32))
    np.testing.assert_allclose(out, [0, 3, 5])


def test_scatter_reduce_amax_without_self():
    self = np.full((3,), 100.0, np.float32)
    out = run(ops.scatter_reduce, self, 0, np.array([0, 0, 2], np.int64), np.array([1.0, 7.0, -2.0], np.float32),
              "amax", include_self=False)
    np.testing.assert_array_equal(out, [7, 100, -2])        # position 1 receives nothing and keeps self


def test_descending_sort_puts_nan_first_and_keeps_ties_in_order():
    x = np.array([1.0, np.nan, 3.0, 1.0, np.nan], np.float32)
    values, idx = run(ops.sort, x, 0, True)
    assert np.isnan(values[:2]).all()
    np.testing.assert_array_equal(values[2:], [3, 1, 1])
    np.testing.assert_array_equal(idx, [1, 4, 2, 0, 3])
    values, idx = run(ops.sort, x, 0, False)
    np.testing.assert_array_equal(idx, [0, 3, 2, 1, 4])


def test_static_sizes_are_required_where_pytorch_infers_them():
    with pytest.raises(ValueError, match="num_classes"):
        ops.one_hot(np.array([1, 2], np.int64))
    with pytest.raises(ValueError, match="output_size"):
        ops.repeat_interleave(f32(3), np.array([1, 2, 0], np.int64))
    out = run(ops.repeat_interleave, np.array([5, 6, 7], np.float32), np.array([1, 2, 0], np.int64),
              output_size=3)
    np.testing.assert_array_equal(out, [5, 6, 6])


def test_attention_row_without_keys_is_zero_with_lse_minus_inf():
    q, k, v = f32(1, 1, 3, 4), f32(1, 1, 5, 4), f32(1, 1, 5, 4)
    mask = np.ones((3, 5), bool)
    mask[1] = False
    out = run(ops.scaled_dot_product_attention, q, k, v, mask)
    np.testing.assert_array_equal(out[0, 0, 1], 0)
    # flash-attn bottom-right causal with more queries than keys: the first rows see no key
    qf, kf, vf = f32(1, 4, 2, 4), f32(1, 2, 2, 4), f32(1, 2, 2, 4)
    o, lse = run(ops._flash_attention_forward, qf, kf, vf, None, None, 4, 2, 0.0, True, False)
    np.testing.assert_array_equal(o[0, :2], 0)
    assert np.isneginf(lse[0, :, :2]).all() and np.isfinite(lse[0, :, 2:]).all()


def test_varlen_flash_attention_equals_one_call_per_sequence():
    cq, ck = np.array([0, 3, 7], np.int32), np.array([0, 5, 8], np.int32)
    q, k, v = f32(7, 2, 4), f32(8, 2, 4), f32(8, 2, 4)
    out, lse = run(ops._flash_attention_forward, q, k, v, cq, ck, 4, 5, 0.0, True, False)
    for s in range(2):
        qs, ks = slice(cq[s], cq[s + 1]), slice(ck[s], ck[s + 1])
        o1, l1 = ops._flash_attention_forward(q[None, qs], k[None, ks], v[None, ks], None, None, 4, 5, 0.0, True,
                                              False)
        np.testing.assert_allclose(out[qs], o1[0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lse[:, qs], l1[0], rtol=1e-5, atol=1e-6)


def test_rotary_embedding_rotates_pairs_by_the_position_angle():
    # one head of dim 2: the rotation of (1, 0) by angle theta is (cos, sin)
    theta = np.array([[0.0], [0.3], [1.1]], np.float32)
    cos, sin = np.cos(theta), np.sin(theta)
    q = np.tile(np.array([1.0, 0.0], np.float32), (1, 3, 1, 1))
    qe, ke = run(ops.apply_rotary_pos_emb, q, q, cos, sin)
    np.testing.assert_allclose(qe[0, :, 0], np.concatenate([cos, sin], 1), rtol=1e-6, atol=1e-7)
    assert np.allclose(np.linalg.norm(ke[0, :, 0], axis=-1), 1.0)


def test_cross_entropy_by_hand():
    logits = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    target = np.array([0, -100], np.int64)
    want = -(2.0 - math.log(math.exp(2.0) + 2.0))          # the second row is ignored
    np.testing.assert_allclose(run(ops.cross_entropy_loss, logits, target), want, rtol=1e-6)


def test_copy_returns_the_value_self_would_hold():
    self = np.zeros((2, 3), np.int32)
    out = run(ops.copy_, self, np.array([1.7, -2.2, 3.9], np.float32))
    np.testing.assert_array_equal(out, [[1, -2, 3], [1, -2, 3]])
    assert out.dtype == np.int32

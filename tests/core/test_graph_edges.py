"""Patterns whole-model graphs are full of, on every backend: elementwise ops reading a 0-d value across the
cpu parallel threshold, outputs that are captured constants, library operators called on tensors in a list,
an input called `out`, and PyTorch's promotion of 0-d tensors."""
import numpy as np
import pytest
import torch

import xbench as xb
from xbench.ir.kernel import Program

rng = np.random.default_rng(7)
SMALL = ("reference", "cuda", "ascend")


@xb.tensor_op
def over_sum(x: xb.Tensor):
    return x / x.sum()


@xb.tensor_op
def centred_where(x: xb.Tensor, m: xb.Tensor):
    return xb.where(m, 0.5, x - x.mean())


@pytest.mark.parametrize("n", [2 ** 17, 2 ** 17 + 5, 3 * 2 ** 16])
def test_elementwise_reading_a_0d_reduction_on_cpu(n):
    x = rng.random(n).astype(np.float32) + 0.5
    np.testing.assert_allclose(over_sum(x), x / x.astype(np.float64).sum(), rtol=2e-5)
    x2 = x.reshape(-1, n // 2 ** 10) if n % 2 ** 10 == 0 else x.reshape(1, -1)
    m = rng.random(x2.shape) < 0.3
    expect = np.where(m, 0.5, x2 - x2.astype(np.float64).mean())
    np.testing.assert_allclose(centred_where(x2, m), expect, rtol=1e-5, atol=1e-5)
    prog: Program = over_sum.lower(x)
    assert any(b.shape == () for b in prog.buffers.values())      # the pattern reaches the backend as a 0-d buffer


@pytest.mark.parametrize("backend", SMALL)
def test_elementwise_reading_a_0d_reduction_small(backend):
    x = rng.random((5, 7)).astype(np.float32) + 0.5
    np.testing.assert_allclose(over_sum.run(x, backend=backend), x / x.astype(np.float64).sum(), rtol=2e-5)


W = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5


@xb.tensor_op
def captured(x: xb.Tensor):
    return xb.asarray(W), x + 1


@xb.tensor_op
def mask_from_empty(x: xb.Tensor):
    keep = xb.ops.bernoulli(xb.ops.empty(x.shape, dtype="float32"), p=0.5, seed=3)
    return keep


@pytest.mark.parametrize("backend", ("cpu",) + SMALL)
def test_an_output_that_is_a_captured_constant(backend):
    x = np.zeros(2, np.float32)
    for _ in range(2):                                  # a second call must not return the previous output's memory
        w, y = captured.run(x, backend=backend)
        np.testing.assert_array_equal(w, W)
        np.testing.assert_array_equal(y, x + 1)
        x = x + 3
    m = mask_from_empty.run(np.zeros((4, 64), np.float32), backend=backend)
    ref = mask_from_empty.run(np.zeros((4, 64), np.float32), backend="reference")
    np.testing.assert_array_equal(m, ref)
    assert 0.3 < m.mean() < 0.7


@xb.tensor_op
def joined(a: xb.Tensor, b: xb.Tensor):
    return xb.ops.cat([a, b * 2], dim=0), xb.ops.stack((a[:2], b[:2]), dim=1)


def test_library_operator_on_tensors_in_a_list():
    a, b = rng.random(3).astype(np.float32), rng.random(4).astype(np.float32)
    c, s = joined(a, b)
    np.testing.assert_array_equal(c, np.concatenate([a, b * 2]))
    np.testing.assert_array_equal(s, np.stack([a[:2], b[:2]], axis=1))


@xb.tensor_op
def named_out(x: xb.Tensor, out: xb.Tensor):
    return x * out, x + out


@pytest.mark.parametrize("backend", ("cpu",) + SMALL)
def test_an_input_called_out_keeps_its_own_buffer(backend):
    x, o = np.array([3.0, 4.0], np.float32), np.array([2.0, 5.0], np.float32)
    for _ in range(2):                                  # the second call must not see the first call's results
        a, b = named_out.run(x, o, backend=backend)
        np.testing.assert_array_equal(a, x * o)
        np.testing.assert_array_equal(b, x + o)


def test_a_0d_tensor_widens_a_dimensioned_one_only_across_categories():
    @xb.tensor_op
    def mul(a: xb.Tensor, b: xb.Tensor):
        return a * b, b * a

    import torch
    for da, db in [(np.float32, np.float64), (np.int32, np.float64), (np.int8, np.int64), (np.bool_, np.int64),
                   (np.float16, np.float32), (np.float32, np.int64)]:
        a, b = np.ones(3, da), np.array(2, db)
        want = (torch.from_numpy(a) * torch.from_numpy(b)).numpy().dtype
        assert {o.dtype for o in mul(a, b)} == {want}, (da, db)


def test_float32_rsqrt_stays_float32_into_a_max_reduction():
    @xb.tensor_op
    def norm_relu_max(x: xb.Tensor, v: xb.Tensor):            # batch norm, ReLU, then a max pool's reduction
        return xb.maximum(x * xb.rsqrt(v + 1e-5), 0.0).max(axis=-1)

    x = rng.standard_normal((6, 10)).astype(np.float32)
    v = rng.random(10).astype(np.float32) + 0.1
    got = norm_relu_max(x, v)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.maximum(x / np.sqrt(v.astype(np.float64) + 1e-5), 0).max(-1), rtol=2e-6)


@xb.tensor_op
def two_softmaxes(a: xb.Tensor, w: xb.Tensor):
    h = xb.ops.softmax(a @ w, -1) @ w
    return xb.ops.softmax(h @ w, -1) @ w


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_a_kernel_that_is_an_earlier_one_run_as_tasks_compiles_on_cpu():
    # repeated layers give kernels with the same code: the second is an alias of the first, which runs as tasks
    a, w = (rng.standard_normal((256, 256)).astype(np.float32) / 16 for _ in range(2))
    rows = [k.name for k in two_softmaxes.compile("cpu", a, w).program.kernels if k.name.endswith("_row")]
    art = two_softmaxes.compile("cpu", a, w, schedule={r: {"parallel": True} for r in rows})
    assert "_part(" in art.source and f"{rows[1]} = {rows[0]}  # the same code as" in art.source
    w64 = w.astype(np.float64)
    expect = _softmax((_softmax(a @ w64) @ w64) @ w64) @ w64
    np.testing.assert_allclose(art.run(a, w)[0], expect, rtol=1e-4, atol=1e-4 * np.abs(expect).max())


@xb.tensor_op
def two_upsamplings(a: xb.Tensor, b: xb.Tensor):
    # the same code for both (a gather through a captured row table, in range, so the text never names the rows)
    # over inputs of 16 and 8 rows
    return xb.ops.upsample_bilinear2d(a, (32, 32), False), xb.ops.upsample_bilinear2d(b, (32, 32), False)


def test_kernels_with_the_same_code_over_buffers_of_other_shapes_stay_two_functions():
    a, b = (rng.standard_normal((2, 64, n, 32)).astype(np.float32) for n in (16, 8))
    art = two_upsamplings.compile("cpu", a, b)
    assert "# the same code as" not in art.source
    for x, got in zip((a, b), art.run(a, b)):
        want = torch.nn.functional.interpolate(torch.from_numpy(x), size=(32, 32), mode="bilinear").numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@xb.tensor_op
def upsampled_gradients(g: xb.Tensor, logp: xb.Tensor, s: xb.Tensor):
    # a log-softmax's gradient (an exponential an element) and a cheap one, each through an upsampling's gradient,
    # whose transposed taps read every element of a row 2.5 times
    expensive = g - xb.exp(logp) * s
    return tuple(xb.ops.upsample_bilinear2d_backward(d, (32, 32), (2, 3, 8, 8), False) for d in (expensive, g * 2.0))


def test_a_costly_value_read_by_a_larger_gather_is_computed_once_and_a_cheap_one_inline():
    g, logp = (rng.standard_normal((2, 3, 32, 32)).astype(np.float32) for _ in range(2))
    s = rng.standard_normal((2, 1, 32, 32)).astype(np.float32)
    art = upsampled_gradients.compile("cpu", g, logp, s)
    exp = [k for k in art.kernels if "_xb_exp" in k.source]
    assert [k.name.split("_", 1)[1] for k in exp] == ["elementwise"]        # once an element, not once a tap
    assert [k.name.split("_", 1)[1] for k in art.kernels if "_f32_2p0" in k.source] == ["reduce"]   # g * 2.0
    back = torch.ops.aten.upsample_bilinear2d_backward
    for d, got in zip((g - np.exp(logp) * s, g * 2.0), art.run(g, logp, s)):
        want = back(torch.from_numpy(d), [32, 32], [2, 3, 8, 8], False).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@xb.tensor_op
def batched_einsum(p: xb.Tensor, q: xb.Tensor):
    return xb.einsum("bij,bjk->bik", p, q)


@pytest.mark.parametrize("pb,qb", [(0, 0), (1, 0), (0, 1), (3, 1)])
def test_einsum_over_an_empty_or_broadcast_batch(pb, qb):
    # a size-1 batch broadcasts to the other operand's, an empty one included (numpy's and torch's rule)
    p, q = rng.random((pb, 2, 3)).astype(np.float32), rng.random((qb, 3, 4)).astype(np.float32)
    for backend in ("reference", "cpu"):
        got = batched_einsum(p, q, backend=backend)
        assert got.shape == np.einsum("bij,bjk->bik", p, q).shape
        np.testing.assert_allclose(got, np.einsum("bij,bjk->bik", p, q), rtol=1e-5)


@xb.tensor_op
def pooled(x: xb.Tensor):
    return xb.ops.max_pool2d_with_indices(x, 3, 2, 1)


@xb.tensor_op
def extremes(x: xb.Tensor):
    top, where = xb.ops.max(x, 1)
    low, at = xb.ops.min(x * 2.0, 1)
    return top, where, xb.ops.argmax(x * 2.0, 1), low, at


@pytest.mark.parametrize("backend", ("cpu",) + SMALL)
def test_a_max_and_an_arg_max_of_the_same_values_are_one_reduction(backend):
    # a max pool's values and offsets, torch.max's values and indices: the arg-max's running value is the max
    x = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    x[0, 1, 2, 2] = np.nan                                      # NaN propagates into the values and the offsets
    art = pooled.compile(backend, x)
    assert [k.kind for k in art.program.kernels] == ["reduce"]
    values, offsets = torch.ops.aten.max_pool2d_with_indices(torch.from_numpy(x), [3, 3], [2, 2], [1, 1])
    got = art.run(x)
    np.testing.assert_array_equal(got[0], values.numpy())
    np.testing.assert_array_equal(got[1], offsets.numpy())
    y = rng.standard_normal((4, 6, 5)).astype(np.float32)
    art = extremes.compile(backend, y)
    # max with its indices: one; the min of x * 2 and its indices: one; an arg-max of other values stays apart
    assert sum(k.kind == "reduce" for k in art.program.kernels) == 3
    t = torch.from_numpy(y)
    want = (*torch.max(t, 1), torch.argmax(t * 2.0, 1), *torch.min(t * 2.0, 1))
    for g, w in zip(art.run(y), want):
        np.testing.assert_array_equal(g, w.numpy())


@xb.tensor_op
def channel_statistics(x: xb.Tensor, running: xb.Tensor):
    mean = x.mean((0, 2, 3))
    return mean, running * 0.9 + mean * 0.1, xb.rsqrt(mean.reshape((1, -1, 1, 1)) + 2.0)


@pytest.mark.parametrize("backend", ("cpu",) + SMALL)
def test_elementwise_kernels_at_a_reductions_points_join_it(backend):
    # a batch norm's statistics: the running average and a [1, C, 1, 1] view of the mean, each a kernel of C
    # points otherwise, run at the reduction's points, reading what it wrote there
    x = rng.standard_normal((4, 6, 5, 5)).astype(np.float32)
    running = rng.standard_normal(6).astype(np.float32)
    art = channel_statistics.compile(backend, x, running)
    assert [k.kind for k in art.program.kernels] == ["reduce"]
    mean = x.astype(np.float64).mean((0, 2, 3))
    want = (mean, running * 0.9 + mean * 0.1, 1 / np.sqrt(mean.reshape(1, -1, 1, 1) + 2.0))
    for got, w in zip(art.run(x, running), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)


@xb.tensor_op
def norm_gradient_sums(g: xb.Tensor, x: xb.Tensor, m: xb.Tensor, dy: xb.Tensor, h: xb.Tensor):
    masked = xb.where(x <= 0.0, 0.0, g)
    per_channel = masked.sum((0, 2, 3)), (masked * (x - m.reshape((1, -1, 1, 1)))).sum((0, 2, 3))
    return *per_channel, dy.sum(0), (dy * h).sum(0)


@pytest.mark.parametrize("backend", ("cpu",) + SMALL)
def test_sums_over_each_points_own_slice_are_taken_together(backend):
    # a batch norm's gradient sums per channel of NCHW data: one kernel, on cpu one loop for both; the sums of
    # [rows, features] over rows (a bias's and a norm weight's gradient) read across their points: two kernels
    g, x = (rng.standard_normal((3, 4, 5, 5)).astype(np.float32) for _ in range(2))
    m = rng.standard_normal(4).astype(np.float32)
    dy, h = (rng.standard_normal((12, 7)).astype(np.float32) for _ in range(2))
    art = norm_gradient_sums.compile(backend, g, x, m, dy, h)
    assert [k.kind for k in art.program.kernels] == ["reduce"] * 3
    if backend == "cpu":
        fused = art.kernels[0].source
        assert fused.count("for r") == 2 and fused.count(" += ") == 2       # one loop nest, two accumulators
    masked = np.where(x <= 0, 0, g).astype(np.float64)
    want = (masked.sum((0, 2, 3)), (masked * (x - m.reshape(1, -1, 1, 1))).sum((0, 2, 3)), dy.sum(0),
            (dy.astype(np.float64) * h).sum(0))
    for got, w in zip(art.run(g, x, m, dy, h), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)

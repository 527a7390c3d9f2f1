"""The core operators on the cuda backend (numba's CUDA simulator when no GPU is present): against the float64
reference backend with the tolerance table, and against hand-written numpy (an independent oracle). Shapes
are small (the simulator runs every CUDA thread as a Python thread) and include sizes that are not multiples
of the block and tile sizes, and size-1 dims."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import xbench as xb
from xbench.backends import get as get_backend
from xbench.backends.cuda import device
from xbench.verify import compare, op_class, reduction_length

_spec = importlib.util.spec_from_file_location("numpy_ops_oracle", Path(__file__).parents[1] / "core" / "numpy_ops.py")
N = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(N)

rng = np.random.default_rng(4321)
ops = xb.ops


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check(op, *args, expect=None, rtol=2e-5, atol=2e-5, schedule=None, **kw):
    """cuda == reference (the tolerance table of `xb.verify`) and, if given, cuda ~= the numpy oracle. The
    kernels run once (the simulator is slow); `xb.verify` itself is exercised in test_verify_entry_point."""
    art = op.compile("cuda", *args, schedule=schedule, **kw)
    assert art.predicted == (device.mode() == "simulator")
    arrays = op.arrays(*args, **kw)
    outs = art.run(*arrays)
    graph = op.trace(*args, **kw)
    refs = get_backend("reference").compile(op.lower(*args, **kw)).run_exact(*arrays)
    k, klass = reduction_length(graph), op_class(graph)
    for o, r, v in zip(outs, refs, graph.outputs, strict=True):
        c = compare(o, r, v.dtype, k, klass)
        assert c.ok, c.message
        assert o.dtype == np.dtype(v.dtype) and o.shape == tuple(v.shape)
    out = outs[0] if len(outs) == 1 else outs
    if expect is not None:
        np.testing.assert_allclose(out, expect, rtol=rtol, atol=atol)
    return art, out


def test_verify_entry_point():
    x = f32(13, 50)
    results = xb.verify(ops.softmax, x, backend="cuda")
    assert len(results) == 1 and results[0].ok, results[0].message
    assert results[0].max_abs_error < 1e-6


def kinds(art):
    return [(k.kind, k.resources["template"]) for k in art.kernels]


@pytest.mark.parametrize("m,k,n", [(33, 17, 9), (1, 64, 1), (2, 1, 2), (70, 5, 65)])
def test_matmul(m, k, n):
    a, b = f32(m, k), f32(k, n)
    art, _ = check(ops.mm, a, b, expect=a.astype(np.float64) @ b, atol=1e-4)
    assert kinds(art) == [("contract", "tiled")]


@pytest.mark.parametrize("sa,sb", [((2, 1, 5, 7), (3, 7, 4)), ((1, 1, 2), (7, 2, 1))])
def test_batched_matmul_broadcasting(sa, sb):
    a, b = f32(*sa), f32(*sb)
    check(ops.matmul, a, b, expect=np.matmul(a.astype(np.float64), b), atol=1e-4)


def test_bmm():
    a, b = f32(3, 4, 5), f32(3, 5, 6)
    art, _ = check(ops.bmm, a, b, expect=a.astype(np.float64) @ b, atol=1e-4)
    assert art.kernels[0].resources["batch"] == 3            # batch axes on gridDim.z
    assert art.kernels[0].resources["grid"][2] == 3


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_with_gelu_epilogue(approximate):
    @xb.tensor_op
    def linear_gelu(x: xb.Tensor["B", "I"], w: xb.Tensor["O", "I"], b: xb.Tensor["O"]):
        return ops.gelu(ops.linear(x, w, b), approximate=approximate)

    x, w, b = f32(37, 24), f32(19, 24), f32(19)
    gelu = N.gelu_erf if approximate == "none" else N.gelu_tanh
    art, _ = check(linear_gelu, x, w, b, expect=gelu(x.astype(np.float64) @ w.T + b), atol=1e-4)
    assert kinds(art) == [("contract", "tiled")]             # bias and GELU run on the accumulators
    assert "math.erf" in art.source if approximate == "none" else "math.tanh" in art.source


@pytest.mark.parametrize("shape", [(37, 19), (1, 1), (3, 5, 7)])
def test_gelu_both_forms(shape):
    # (a lone value deep in the negative tail would be all cancellation: 0.5 x (1 + erf(x / sqrt 2)) is -0.0
    # in float32 where the float64 reference is -1e-12, and a 1-element tensor has no larger value to scale
    # the absolute tolerance)
    x = f32(*shape) * 3 if shape != (1, 1) else np.full(shape, 0.75, np.float32)
    check(ops.gelu, x, expect=N.gelu_erf(x.astype(np.float64)))
    check(ops.gelu, x, approximate="tanh", expect=N.gelu_tanh(x.astype(np.float64)))


@pytest.mark.parametrize("shape,dim", [((13, 50), -1), ((1, 7), -1), ((13, 50), 0)])
def test_softmax_and_log_softmax(shape, dim):
    x = f32(*shape) * 4
    check(ops.softmax, x, dim=dim, expect=N.softmax(x.astype(np.float64), dim), rtol=1e-5, atol=1e-6)
    check(ops.log_softmax, x, dim=dim, expect=N.log_softmax(x.astype(np.float64), dim), atol=1e-5)


@pytest.mark.parametrize("shape", [(7, 31), (1, 1), (3, 4, 129)])
def test_layernorm_and_rmsnorm(shape):
    x, w, b = f32(*shape) * 2 + 1, f32(shape[-1]), f32(shape[-1])
    check(ops.layer_norm, x, shape[-1], w, b, expect=N.layer_norm(x.astype(np.float64), w, b), atol=1e-4)
    check(ops.rms_norm, x, shape[-1], w, expect=N.rms_norm(x.astype(np.float64), w), atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(1, 2, 17, 8), (1, 1, 1, 4)])
def test_attention(shape, causal):
    q, k, v = f32(*shape), f32(*shape), f32(*shape)
    art, _ = check(ops.scaled_dot_product_attention, q, k, v, is_causal=causal,
                   expect=N.attention(q.astype(np.float64), k, v, causal), atol=1e-4)
    assert kinds(art)[0] == kinds(art)[-1] == ("contract", "tiled")      # Q K^T and P V as GEMMs


@pytest.mark.parametrize("stride,padding,dilation", [(1, 0, 1), (2, 1, 1), (1, 2, 2)])
def test_conv2d(stride, padding, dilation):
    x, w, b = f32(2, 3, 11, 13), f32(5, 3, 3, 3), f32(5)
    art, _ = check(ops.conv2d, x, w, b, stride=stride, padding=padding, dilation=dilation,
                   expect=N.conv2d(x.astype(np.float64), w, b, stride, padding, dilation), atol=1e-4)
    assert kinds(art) == [("contract", "tiled")]             # implicit GEMM: the window inlines into the loads
    assert art.kernels[0].resources["K"] == 27


def test_conv2d_groups_and_size_one():
    x, w = f32(1, 4, 1, 9), f32(6, 2, 1, 3)
    ref = np.concatenate([N.conv2d(x[:, :2].astype(np.float64), w[:3]), N.conv2d(x[:, 2:].astype(np.float64), w[3:])],
                         axis=1)
    check(ops.conv2d, x, w, None, groups=2, expect=ref, atol=1e-4)


@pytest.mark.parametrize("k,stride,padding", [(3, 2, 1), (1, 1, 0)])
def test_pooling(k, stride, padding):
    x = f32(2, 3, 11, 13)
    art, _ = check(ops.max_pool2d, x, k, stride, padding,
                   expect=N.pool2d(x.astype(np.float64), k, stride, padding, "max"))
    assert art.kernels[0].resources["template"] == "point"    # short windows: one thread per output
    check(ops.avg_pool2d, x, k, stride, padding, expect=N.pool2d(x.astype(np.float64), k, stride, padding, "avg"))


@pytest.mark.parametrize("shape,dim", [((5, 40), 1), ((3, 17, 2), 1), ((1, 1), 0)])
def test_cumsum(shape, dim):
    x = f32(*shape)
    check(ops.cumsum, x, dim, expect=np.cumsum(x.astype(np.float64), axis=dim), atol=1e-4)
    ints = rng.integers(-5, 5, shape).astype(np.int32)
    _, out = check(ops.cumsum, ints, dim, expect=np.cumsum(ints, axis=dim))
    assert out.dtype == np.int64


def test_cumsum_block_scan_matches_sequential():
    x = f32(3, 300)
    block, a = check(ops.cumsum, x, 1, schedule={"k0_scan": {"threads_per_point": 64, "points_per_block": 2}})
    seq, b = check(ops.cumsum, x, 1, schedule={"k0_scan": {"threads_per_point": 1}})
    assert block.kernels[0].resources["template"] == "row" and seq.kernels[0].resources["template"] == "point"
    np.testing.assert_allclose(a, np.cumsum(x.astype(np.float64), 1), atol=1e-4)
    np.testing.assert_allclose(b, np.cumsum(x.astype(np.float64), 1), atol=1e-4)
    ints = rng.integers(-9, 9, (2, 300)).astype(np.int32)      # the default for long rows: a block scan
    art, out = check(ops.cumsum, ints, 1, expect=np.cumsum(ints, axis=1))
    assert art.kernels[0].resources["template"] == "row" and out.dtype == np.int64


@pytest.mark.parametrize("ids_shape", [(4, 7), (3, 1, 5)])
def test_embedding_lookup(ids_shape):
    table = f32(20, 8)
    ids = rng.integers(0, 20, ids_shape)
    _, out = check(ops.embedding, ids, table, expect=table[ids])
    np.testing.assert_array_equal(out, table[ids])           # a gather is exact
    check(ops.embedding, ids.astype(np.int32), table[:, ::2], expect=table[:, ::2][ids])


# ---- float16 storage, float32 math ---------------------------------------------------------------------------

def test_float16_operators():
    x = (f32(8, 40) * 2).astype(np.float16)
    art, out = check(ops.softmax, x, expect=N.softmax(x.astype(np.float64)), rtol=2e-3, atol=2e-3)
    assert out.dtype == np.float16
    row = art.kernels[0].resources["shared_arrays"]["_sh_tmp1_row"]
    assert row["dtype"] == "float16" and row["bytes"] == 8 * 40 * 2
    wide, _ = check(ops.softmax, x, schedule={"k0_row": {"temp_dtype": "float32"}})
    assert wide.kernels[0].resources["shared_arrays"]["_sh_tmp1_row"]["bytes"] == 8 * 40 * 4
    check(ops.layer_norm, x, 40, None, None)
    a, b = x, (f32(40, 9) * 2).astype(np.float16)
    art, out = check(ops.mm, a, b, expect=a.astype(np.float64) @ b, rtol=1e-2, atol=1e-2)
    assert out.dtype == np.float16 and art.kernels[0].resources["tile_dtype"] == "float16"
    assert "np.float32(_As[_kk" in art.source                # float16 tiles widen to float32 accumulators


# ---- the other templates and stages ---------------------------------------------------------------------------

def test_sort_argsort_topk_with_ties_and_nan():
    @xb.tensor_op
    def sorts(x):
        return xb.sort(x, axis=-1, descending=True), xb.argsort(x, axis=0), xb.topk(x, 3)[1]

    x = np.round(f32(6, 9), 1)
    x[1, 3] = np.nan
    x[2, 2] = x[2, 5]
    art, outs = check(sorts, x)
    np.testing.assert_array_equal(outs[1], np.argsort(x, axis=0, kind="stable"))
    long = np.round(f32(3, 70), 1)                            # padded to 128: a block bitonic sort
    art, (vals, idx) = check(xb.tensor_op(lambda x: (xb.sort(x, axis=1), xb.argsort(x, axis=1, descending=True)),
                                          name="sort_long"), long)
    assert art.kernels[0].resources["template"] == "row"
    np.testing.assert_array_equal(vals, np.sort(long, axis=1))
    np.testing.assert_array_equal(idx, np.argsort(-long, axis=1, kind="stable"))


def test_scatter_add_uses_atomics():
    @xb.tensor_op
    def sc(x, i, u):
        return xb.scatter_add(x, i, u, axis=0)

    x, i, u = f32(6, 4), rng.integers(-6, 6, (9,)), f32(9, 4)
    art, out = check(sc, x, i, u)
    want = x.astype(np.float64).copy()
    np.add.at(want, np.where(i < 0, i + 6, i), u)
    np.testing.assert_allclose(out, want, atol=1e-5)
    assert len(art.kernels[0].resources["launches"]) == 2     # the copy, then the atomic updates
    assert "cuda.atomic.add(out, " in art.source
    # float16 has no cuda.atomic.add: one thread applies the updates in order
    art, out16 = check(sc, x.astype(np.float16), i, u.astype(np.float16))
    serial = art.kernels[0].resources["launches"]["k0_scatter_1"]
    assert serial["block"] == [1, 1, 1] and serial["grid"] == [1, 1, 1] and "serial" in serial
    np.testing.assert_allclose(out16, want, atol=1e-2)


def test_reductions_argmax_any_and_full():
    @xb.tensor_op
    def reds(x):
        return xb.argmax(x, axis=1), xb.any(x > 1, axis=1), xb.sum(x, axis=0), xb.max(x), xb.argmin(x, axis=1)

    x = f32(5, 300)
    x[1, 7] = np.nan
    x[3, 10] = x[3, 200] = 9.0                               # a tie: the first index wins
    _, outs = check(reds, x)
    assert outs[0][3] == 10 and outs[0][1] == 7 and outs[3].shape == ()


def test_row_kernel_paths_agree():
    """One softmax, four ways: warps per row in shared memory, global scratch, one thread per row, 1 row per
    block with 128 threads."""
    x = f32(9, 70)
    want = N.softmax(x.astype(np.float64))
    for sched, where in [({}, "shared"), ({"scratch": "global"}, "global"),
                         ({"threads_per_point": 1, "block": 32}, None),
                         ({"threads_per_point": 128, "points_per_block": 1}, "shared")]:
        art, out = check(ops.softmax, x, schedule={"k0_row": sched}, expect=want, rtol=1e-5, atol=1e-6)
        r = art.kernels[0].resources
        if where:
            assert r["row_scratch"] == {"tmp1_row": where}
        else:
            assert r["template"] == "point"
        if where == "global":
            assert "_gs_tmp1_row" in r["scratch_arrays"]


def test_contraction_as_dot_products():
    a, b = f32(9, 13), f32(13, 6)
    art, _ = check(ops.mm, a, b, schedule={"k0_contract": {"impl": "points"}}, expect=a.astype(np.float64) @ b,
                   atol=1e-4)
    assert art.kernels[0].resources["template"] == "point"


def test_buffer_names_that_shadow_module_names():
    @xb.tensor_op
    def shadow(np, cuda, b, grid):
        return np * cuda + b - grid

    a, c, d, e = f32(3, 4), f32(3, 4), f32(3, 4), f32(3, 4)
    _, out = check(shadow, a, c, d, e, expect=a.astype(np.float64) * c + d - e)


def test_device_args_launch_outputs():
    """The timing interface: buffers stay on the device between launches; outputs read back on demand."""
    x, w = f32(6, 33), f32(33)
    art = ops.rms_norm.compile("cuda", x, 33, w, ptx=False)
    bufs = art.device_args(*ops.rms_norm.arrays(x, 33, w))
    assert set(bufs) >= {"input", "weight", "out"}
    art.launch(bufs)
    art.launch(bufs)                                         # idempotent: inputs are not overwritten
    (out,) = art.outputs(bufs)
    np.testing.assert_allclose(out, N.rms_norm(x.astype(np.float64), w), rtol=1e-5, atol=1e-5)


def test_program_without_tensor_inputs():
    @xb.tensor_op
    def ramp(n):
        return xb.arange(n) * 3 + 1

    _, out = check(ramp, 7, expect=np.arange(7) * 3 + 1)
    assert out.dtype == np.int64


def test_math_outside_its_domain_gives_nan_and_inf():
    @xb.tensor_op
    def edges(x):
        return xb.atanh(x), xb.log(x), xb.sqrt(x), xb.rsqrt(x), xb.exp(x * 100)

    x = np.array([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 2.0, np.inf, np.nan], np.float32)
    _, outs = check(edges, x)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(outs[1], np.log(x))
        np.testing.assert_array_equal(np.isnan(outs[0]), np.isnan(np.arctanh(x)))
    assert outs[3][3] == np.inf and np.isnan(outs[2][0]) and outs[4][7] == np.inf

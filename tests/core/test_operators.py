"""The core issue's operators on the cpu backend: against the float64 reference backend, and against
hand-written numpy (an independent oracle), over awkward shapes and non-contiguous inputs."""
import re

import ml_dtypes
import numpy as np
import pytest

import xbench as xb
from xbench.backends.cpu import winograd
from xbench.ir import contraction

from . import numpy_ops as N

rng = np.random.default_rng(1234)
ops = xb.ops


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def check(op, *args, expect=None, rtol=2e-5, atol=2e-5, **kw):
    """cpu == reference (within the tolerance table) and, if given, cpu ~= the numpy oracle."""
    results = xb.verify(op, *args, backend="cpu", **kw)
    for r in results:
        assert r.ok, r.message
    out = op(*args, **kw)
    if expect is not None:
        np.testing.assert_allclose(out, expect, rtol=rtol, atol=atol)
    return out


@pytest.mark.parametrize("m,k,n", [(33, 17, 9), (1, 64, 1), (128, 3, 65), (2, 1, 2)])
def test_matmul(m, k, n):
    a, b = f32(m, k), f32(k, n)
    check(ops.mm, a, b, expect=a.astype(np.float64) @ b, atol=1e-4)


def test_matmul_non_contiguous_inputs():
    a = f32(40, 30)[::2, 1:]          # strided rows, offset columns
    b = f32(50, 29).T                 # transposed view
    assert not a.flags.c_contiguous and not b.flags.c_contiguous
    check(ops.mm, a, b, expect=a.astype(np.float64) @ b, atol=1e-4)


@pytest.mark.parametrize("sa,sb", [((3, 17, 9), (3, 9, 5)), ((2, 1, 5, 7), (3, 7, 4)), ((4, 6, 8), (8, 3)),
                                   ((6, 8), (5, 8, 3)), ((1, 1, 2), (7, 2, 1))])
def test_batched_matmul_broadcasting(sa, sb):
    a, b = f32(*sa), f32(*sb)
    check(ops.matmul, a, b, expect=np.matmul(a.astype(np.float64), b), atol=1e-4)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_with_gelu_epilogue(approximate):
    @xb.tensor_op
    def linear_gelu(x: xb.Tensor["B", "I"], w: xb.Tensor["O", "I"], b: xb.Tensor["O"]):
        return ops.gelu(ops.linear(x, w, b), approximate=approximate)

    x, w, b = f32(37, 24), f32(19, 24), f32(19)
    prog = linear_gelu.lower(x, w, b)
    assert [k.kind for k in prog.kernels] == ["contract"]          # the epilogue is fused
    gelu = N.gelu_erf if approximate == "none" else N.gelu_tanh
    check(linear_gelu, x, w, b, expect=gelu(x.astype(np.float64) @ w.T + b), atol=1e-4)


def test_a_sum_of_products_stays_one_gemm_per_term():
    @xb.tensor_op
    def two_steps(a: xb.Tensor["M", "K"], b: xb.Tensor["K", "N"], c: xb.Tensor["M", "J"], d: xb.Tensor["J", "N"]):
        return ops.mm(a, b) + ops.mm(c, d) + ops.mm(a, b) * 2

    a, b, c, d = f32(13, 5), f32(5, 11), f32(13, 7), f32(7, 11)
    prog = two_steps.lower(a, b, c, d)
    assert [k.kind for k in prog.kernels] == ["contract"] * 3        # each product its own GEMM, the sum in epilogues
    assert all(sum(type(s).__name__ == "Contract" for s in k.stages) == 1 for k in prog.kernels)
    sched = xb.backends.get("cpu").default_schedule(prog.kernels[-1])
    assert sched.get("impl") == "blas"
    a64, b64, c64, d64 = (x.astype(np.float64) for x in (a, b, c, d))
    check(two_steps, a, b, c, d, expect=3 * a64 @ b64 + c64 @ d64, atol=1e-4)


@pytest.mark.parametrize("shape", [(37, 19), (1, 1), (4096,), (3, 5, 7)])
def test_gelu_both_forms(shape):
    x = f32(*shape) * 3
    check(ops.gelu, x, expect=N.gelu_erf(x.astype(np.float64)))
    check(ops.gelu, x, approximate="tanh", expect=N.gelu_tanh(x.astype(np.float64)))


@pytest.mark.parametrize("shape,dim", [((13, 50), -1), ((1, 7), -1), ((13, 50), 0), ((2, 3, 33), -1), ((5, 1), -1)])
def test_softmax_and_log_softmax(shape, dim):
    x = f32(*shape) * 4
    check(ops.softmax, x, dim=dim, expect=N.softmax(x.astype(np.float64), dim), rtol=1e-5, atol=1e-6)
    check(ops.log_softmax, x, dim=dim, expect=N.log_softmax(x.astype(np.float64), dim), atol=1e-5)


def test_row_ops_fuse_to_one_kernel():
    x, w = f32(64, 96), f32(96)
    assert len(ops.softmax.lower(x).kernels) == 1
    assert len(ops.log_softmax.lower(x).kernels) == 1
    assert len(ops.layer_norm.lower(x, 96, w, w).kernels) == 1
    assert len(ops.rms_norm.lower(x, 96, w).kernels) == 1
    # the softmax row stays in a row-local scratch buffer: x is read, out is written, nothing else
    prog = ops.softmax.lower(x)
    assert set(prog.buffers) == {"input", "out"}
    assert prog.kernels[0].row_buffers


@pytest.mark.parametrize("shape", [(7, 31), (1, 1), (3, 4, 129)])
def test_layernorm_and_rmsnorm(shape):
    x, w, b = f32(*shape) * 2 + 1, f32(shape[-1]), f32(shape[-1])
    check(ops.layer_norm, x, shape[-1], w, b, expect=N.layer_norm(x.astype(np.float64), w, b), atol=1e-4)
    check(ops.rms_norm, x, shape[-1], w, expect=N.rms_norm(x.astype(np.float64), w), atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 17, 8), (1, 1, 1, 4), (2, 1, 33, 16)])
def test_attention(shape, causal):
    q, k, v = f32(*shape), f32(*shape), f32(*shape)
    check(ops.scaled_dot_product_attention, q, k, v, is_causal=causal,
          expect=N.attention(q.astype(np.float64), k, v, causal), atol=1e-4)


def test_attention_non_contiguous():
    q = f32(2, 17, 3, 8).transpose(0, 2, 1, 3)          # [B, H, S, D] view of [B, S, H, D]
    k = f32(2, 3, 8, 17).transpose(0, 1, 3, 2)
    v = f32(2, 3, 17, 8)
    check(ops.scaled_dot_product_attention, q, k, v, expect=N.attention(q.astype(np.float64), k, v), atol=1e-4)


@pytest.mark.parametrize("stride,padding,dilation", [(1, 0, 1), (2, 1, 1), (1, 2, 2), (3, 1, 2)])
def test_conv2d(stride, padding, dilation):
    x, w, b = f32(2, 3, 11, 13), f32(5, 3, 3, 3), f32(5)
    check(ops.conv2d, x, w, b, stride=stride, padding=padding, dilation=dilation,
          expect=N.conv2d(x.astype(np.float64), w, b, stride, padding, dilation), atol=1e-4)


@pytest.mark.parametrize("batch_parallel", [False, True])
def test_conv2d_in_panels(batch_parallel):
    """Every value of the `panel` knob (the packed window operand multiplied a few output rows at a time)."""
    x, w = f32(2, 3, 12, 7), f32(4, 3, 3, 3)
    prog = ops.conv2d.lower(x, w, None, padding=1)
    knob = xb.backends.get("cpu").knobs(prog.kernels[0])["panel"]
    assert knob.choices == (0, 1, 2, 3, 4, 6)
    expect = N.conv2d(x.astype(np.float64), w, None, 1, 1)
    for rows in knob.choices:
        sched = {prog.kernels[0].name: {"window": "pack", "panel": rows, "batch_parallel": batch_parallel}}
        assert all(r.ok for r in xb.verify(ops.conv2d, x, w, None, padding=1, schedule=sched))
        np.testing.assert_allclose(ops.conv2d.run(x, w, None, padding=1, schedule=sched), expect, atol=1e-4)


@pytest.mark.parametrize("window", ["shift", "pack", "winograd"])
@pytest.mark.parametrize("batch_parallel", [False, True])
@pytest.mark.parametrize("padding,dilation,kernel", [(1, 1, (3, 3)), (0, 1, (3, 3)), ((2, 0), 2, (3, 2)),
                                                     (3, (1, 2), (2, 3)), (0, 1, (1, 1)), ((2, 1), 1, (3, 3))])
def test_conv2d_as_shifted_gemms(window, batch_parallel, padding, dilation, kernel):
    """Stride-1 convolutions as one GEMM per tap over a zero-padded copy, packed (im2col), and for 3x3 windows
    without dilation by Winograd's F(2x2, 3x3) (the default there), with bias, asymmetric kernels, padding
    and dilation, odd output sizes (tiles past the edge), a non-contiguous input, float32 and float64."""
    winograd = kernel == (3, 3) and dilation == 1
    if window == "winograd" and not winograd:
        window = "shift"                                    # not a choice for this window
    for dtype, atol in ((np.float32, 1e-4), (np.float64, 1e-10)):
        x = rng.standard_normal((3, 9, 10, 4)).astype(dtype).transpose(0, 3, 1, 2)     # a strided NCHW view
        w, b = rng.standard_normal((5, 4, *kernel)).astype(dtype), rng.standard_normal(5).astype(dtype)
        prog = ops.conv2d.lower(x, w, b, padding=padding, dilation=dilation)
        k = prog.kernels[-1]
        knobs = xb.backends.get("cpu").knobs(k)
        assert knobs["window"].choices == ("shift", "pack") + (("winograd",) if winograd else ())
        merged = "merge_batch" in knobs and knobs["merge_batch"].default      # 7x8 maps and smaller: one GEMM
        assert knobs["window"].default == ("pack" if merged or kernel == (1, 1) else "winograd" if winograd
                                           else "shift")
        sched = {k.name: {"window": window, "batch_parallel": batch_parallel, "merge_batch": False}}
        art = ops.conv2d.compile("cpu", x, w, b, padding=padding, dilation=dilation, schedule=sched)
        assert ("_xb_tap_gemms(" in art.source) == (window == "shift")
        assert ("_xb_wino_tiles_" in art.source) == (window == "winograd")
        expect = N.conv2d(x.astype(np.float64), w, b, 1, padding, dilation)
        np.testing.assert_allclose(art.run(x, w, b)[0], expect, atol=atol)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("case", ["3x3 on 2x2", "1x1 stride 2 on 4x4", "5x5 on 3x3"])
def test_a_batch_of_small_maps_runs_as_one_gemm(case, dtype):
    """Convolutions over maps of fewer than 64 output points (ResNet's last stages): the weight is the same for
    every image, so every image's packed window goes side by side into one GEMM [Cout, K] x [K, batch x points]
    (`merge_batch`, the default there), the epilogue writing each image's output; the same values as a GEMM per
    image, and as float64."""
    shape, wshape, stride, padding = {"3x3 on 2x2": ((8, 16, 2, 2), (24, 16, 3, 3), 1, 1),
                                      "1x1 stride 2 on 4x4": ((8, 16, 4, 4), (32, 16, 1, 1), 2, 0),
                                      "5x5 on 3x3": ((4, 8, 3, 3), (8, 8, 5, 5), 1, 2)}[case]
    x, w = f32(*shape), f32(*wshape)
    if dtype == "bfloat16":
        x, w = x.astype(ml_dtypes.bfloat16), w.astype(ml_dtypes.bfloat16)
    k = ops.conv2d.lower(x, w, None, stride, padding).kernels[-1]
    c, batch, _, cols = contraction.roles(k)
    B, P, K = (int(np.prod([a.extent for a in axes])) for axes in (batch, cols, c.axes))
    assert P < 64 and xb.backends.get("cpu").knobs(k)["merge_batch"].default
    expect = N.conv2d(x.astype(np.float64), w.astype(np.float64), None, stride, padding)
    tol = 1e-4 if dtype == "float32" else 0.02 * np.abs(expect).max()
    outs = {}
    for merged in (True, False):
        art = ops.conv2d.compile("cpu", x, w, None, stride, padding, schedule={k.name: {"merge_batch": merged}})
        packed = re.search(rf"_B = _xb_\w+\(\(({K}, {B * P}|{B * P}, {K})\)", art.source)    # every image's columns
        assert bool(packed) == merged
        outs[merged] = np.asarray(art.run(x, w)[0], np.float64)
        np.testing.assert_allclose(outs[merged], expect, atol=tol)
    np.testing.assert_allclose(outs[True], outs[False], atol=tol / 10)


@pytest.mark.parametrize("batch_parallel", [False, True])
def test_winograd_convolution_in_blocks_of_tile_rows(batch_parallel):
    """A wide image: one row of tiles per block (`winograd.block_rows`), several blocks, the last output row in
    a tile past the edge; blocks in parallel within a batch point, or batch points in parallel."""
    x, w, b = f32(2, 3, 9, 401), f32(4, 3, 3, 3), f32(4)
    k = ops.conv2d.lower(x, w, b, padding=1).kernels[-1]
    assert winograd.block_rows(201) == 1
    sched = {k.name: {"window": "winograd", "batch_parallel": batch_parallel, "parallel": True}}
    art = ops.conv2d.compile("cpu", x, w, b, padding=1, schedule=sched)
    assert ("numba.prange(5)" in art.source) == (not batch_parallel)
    np.testing.assert_allclose(art.run(x, w, b)[0], N.conv2d(x.astype(np.float64), w, b, 1, 1, 1), atol=1e-4)


def test_only_stride_one_windows_are_shifted_gemms():
    """A strided window's output columns are not a run of the padded input: it keeps the packed GEMM."""
    x, w = f32(1, 3, 9, 9), f32(4, 3, 3, 3)
    k = ops.conv2d.lower(x, w, None, stride=2, padding=1).kernels[-1]
    assert xb.ir.contraction.shift_plan(k) is None and "window" not in xb.backends.get("cpu").knobs(k)
    plan = xb.ir.contraction.shift_plan(ops.conv2d.lower(x, w, None, padding=1, dilation=2).kernels[-1])
    assert (plan.dil, plan.off, plan.size, plan.out, plan.padded) == ((2, 2), (-1, -1), (9, 9), (7, 7), (11, 11))
    assert plan.offset(2, 1) == 2 * 2 * 11 + 2 and plan.row == 11 * 11 + 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_float_max_min_reductions_propagate_nan_and_order_signed_values(dtype):
    """Float max/min run as integer reductions over order keys: NaNs of either sign anywhere, infinities,
    and all-negative rows come out as numpy's; of the two zeros, max gives +0 and min -0 (IEEE maximum/minimum;
    numpy's answer depends on the order it visits them)."""
    for n in (1, 5, 47, 100):
        x = f32(7, n).astype(dtype)
        x[0, n // 2] = np.nan
        x[1, n - 1] = -np.nan
        x[2], x[3] = -np.inf, np.inf
        x[4] = -np.abs(x[4]) - 1
        x[5, :] = -0.0
        x[5, n - 1] = 0.0
        for op, ref in ((ops.amax, np.max), (ops.amin, np.min)):
            got, want = op(x, 1), ref(x, 1)
            np.testing.assert_array_equal(got, want)
            assert n == 1 or np.signbit(got[5]) == (op is ops.amin)
            np.testing.assert_array_equal(op(x, (0, 1)), ref(x))
            np.testing.assert_array_equal(op(x[1:], 0), ref(x[1:], 0))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_fmod_has_the_sign_of_the_dividend(dtype):
    """C's remainder, as numpy's fmod: every sign pair, 0-d operands, a zero divisor and INT_MIN % -1 give 0."""
    a = np.array([-7, 7, -7, 7, 9, np.iinfo(dtype).min, 5, -5], dtype)
    b = np.array([9, -9, -9, 9, 3, -1, 0, 0], dtype)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(ops.fmod.run(a, b, backend="cpu"), np.fmod(a, b))
    assert ops.fmod.run(np.asarray(dtype(-7)), np.asarray(dtype(9)), backend="cpu") == -7


def test_conv2d_is_one_contraction_with_bias_epilogue():
    x, w, b = f32(2, 3, 11, 13), f32(5, 3, 3, 3), f32(5)
    prog = ops.conv2d.lower(x, w, b, padding=1)
    assert [k.kind for k in prog.kernels] == ["contract"]


def test_conv2d_groups_and_size_one():
    x, w = f32(1, 4, 1, 9), f32(6, 2, 1, 3)
    ref = np.concatenate([N.conv2d(x[:, :2].astype(np.float64), w[:3]), N.conv2d(x[:, 2:].astype(np.float64), w[3:])],
                         axis=1)
    check(ops.conv2d, x, w, None, groups=2, expect=ref, atol=1e-4)


@pytest.mark.parametrize("k,stride,padding", [(3, 2, 1), (2, 2, 0), (3, 1, 1), (1, 1, 0)])
def test_pooling(k, stride, padding):
    x = f32(2, 3, 11, 13)
    check(ops.max_pool2d, x, k, stride, padding, expect=N.pool2d(x.astype(np.float64), k, stride, padding, "max"))
    check(ops.avg_pool2d, x, k, stride, padding, expect=N.pool2d(x.astype(np.float64), k, stride, padding, "avg"))


@pytest.mark.parametrize("shape,dim", [((5, 40), 1), ((40,), 0), ((3, 17, 2), 1), ((1, 1), 0)])
def test_cumsum(shape, dim):
    x = f32(*shape)
    check(ops.cumsum, x, dim, expect=np.cumsum(x.astype(np.float64), axis=dim), atol=1e-4)
    ints = rng.integers(-5, 5, shape).astype(np.int32)
    out = check(ops.cumsum, ints, dim, expect=np.cumsum(ints, axis=dim))
    assert out.dtype == np.int64                       # PyTorch's rule for int32 sums


@pytest.mark.parametrize("ids_shape", [(4, 7), (1,), (3, 1, 5)])
def test_embedding_lookup(ids_shape):
    table = f32(20, 8)
    ids = rng.integers(0, 20, ids_shape)
    out = check(ops.embedding, ids, table, expect=table[ids])
    np.testing.assert_array_equal(out, table[ids])     # a gather is exact
    check(ops.embedding, ids.astype(np.int32), table[:, ::2], expect=table[:, ::2][ids])


def test_torch_agrees_on_conv_and_pool_semantics():
    torch = pytest.importorskip("torch", reason="PyTorch cross-check runs where torch is installed")
    x, w, b = f32(2, 4, 10, 9), f32(6, 2, 3, 2), f32(6)
    tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
    want = torch.nn.functional.conv2d(tx, tw, tb, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2).numpy()
    got = ops.conv2d(x, w, b, stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    for ceil_mode in (False, True):
        want = torch.nn.functional.max_pool2d(tx, 3, 2, 1, ceil_mode=ceil_mode).numpy()
        np.testing.assert_allclose(ops.max_pool2d(x, 3, 2, 1, ceil_mode=ceil_mode), want)
        for cip in (False, True):
            want = torch.nn.functional.avg_pool2d(tx, 3, 2, 1, ceil_mode=ceil_mode, count_include_pad=cip).numpy()
            np.testing.assert_allclose(ops.avg_pool2d(x, 3, 2, 1, ceil_mode=ceil_mode, count_include_pad=cip), want,
                                       rtol=1e-5, atol=1e-6)

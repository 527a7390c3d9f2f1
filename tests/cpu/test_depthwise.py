"""A depthwise convolution (one small matrix-vector product per batch and channel) runs as loops, not one BLAS
call per channel: over a zero-padded copy of each input plane, one long unit-stride run per tap; a window read
only inside its bounds narrows its loops instead of testing each read."""

import numpy as np
import pytest
import torch

import xbench as xb
from xbench.ir import expr as E
from xbench.ir.contraction import bounds_checked


def _case(shape, channels, k, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, channels, *shape)).astype(np.float32)
    w = rng.standard_normal((channels, 1, *k)).astype(np.float32)
    return x, w


def _torch(fn, x, w, **kw):
    return fn(torch.from_numpy(x).double(), torch.from_numpy(w).double(), **kw).numpy()


@pytest.mark.parametrize("padding, dilation", [(1, 1), (2, 2), (0, 1)])
def test_a_depthwise_conv2d_sums_tap_runs_over_a_padded_plane(padding, dilation):
    x, w = _case((9, 7), 6, (3, 3))
    art = xb.ops.conv2d.compile("cpu", x, w, None, padding=padding, dilation=dilation, groups=6)
    assert "_acc[_j] += _a * _X[_j + _o]" in art.source             # the plane path, not a GEMM per channel
    assert "_xb_dot(" not in art.source
    want = _torch(torch.nn.functional.conv2d, x, w, padding=padding, dilation=dilation, groups=6)
    np.testing.assert_allclose(art.run(x, w)[0], want, rtol=1e-5, atol=1e-5)


def test_a_depthwise_conv1d_narrows_its_loops_to_the_window_inside_the_input():
    x, w = _case((13,), 5, (3,))
    art = xb.ops.conv1d.compile("cpu", x, w, None, padding=2, dilation=2, groups=5)
    body = art.source[art.source.index("_contract"):]
    assert "in range(max(0, " in body and " else " not in body.split("_acc[")[1]   # no test per read
    want = _torch(torch.nn.functional.conv1d, x, w, padding=2, dilation=2, groups=5)
    np.testing.assert_allclose(art.run(x, w)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("stride, padding, dilation", [(2, 1, 1), ((2, 3), (1, 2), (1, 2))])
def test_a_strided_depthwise_conv2d_runs_over_its_planes_phases(stride, padding, dilation, parallel):
    x, w = _case((11, 12), 4, (3, 3))
    art = xb.ops.conv2d.compile("cpu", x, w, None, stride=stride, padding=padding, dilation=dilation, groups=4,
                                schedule={"k0_contract": {"parallel": parallel}})
    assert "_acc[_j] += _a * _X[_j + _o]" in art.source and "_xb_dot(" not in art.source
    if parallel:        # each thread's padded plane is allocated once and reused for all its planes
        part = art.source[art.source.index("def k0_contract_part("):]
        assert part.index("_X = _xb_new_zeros(") < part.index("in range(_lo, _hi):")
    want = _torch(torch.nn.functional.conv2d, x, w, stride=stride, padding=padding, dilation=dilation, groups=4)
    np.testing.assert_allclose(art.run(x, w)[0], want, rtol=1e-5, atol=1e-5)


def test_a_strided_depthwise_conv1d_stays_a_blas_product():
    # its reads step two elements at a time: loops over them would not vectorise
    x, w = _case((14,), 4, (3,))
    art = xb.ops.conv1d.compile("cpu", x, w, None, stride=2, padding=1, groups=4)
    assert "_xb_dot(" in art.source
    want = _torch(torch.nn.functional.conv1d, x, w, stride=2, padding=1, groups=4)
    np.testing.assert_allclose(art.run(x, w)[0], want, rtol=1e-5, atol=1e-5)


def test_bounds_checks_become_affine_forms_meaning_at_least_zero():
    n, k = E.Idx("n"), E.Idx("k")
    y = E.add(E.add(n, k), E.const(-1))
    read = E.Load("x", (y,), "float32")
    cond = E.Call("logical_and", (E.Call("ge", (y, E.const(0)), "bool"), E.Call("lt", (y, E.const(8)), "bool")),
                  "bool")
    got = bounds_checked(E.Select(cond, read, E.Const(0.0, "float32"), "float32"))
    assert got == (read, [{"n": 1, "k": 1, "": -1}, {"n": -1, "k": -1, "": 8}])   # n + k - 1 >= 0, 8 - (n + k) >= 0
    assert bounds_checked(read) is None


@xb.tensor_op
def depthwise_relu6(x: xb.Tensor, w: xb.Tensor, shift: xb.Tensor):
    # the product is [N, C, 1, H, W] (one channel per group), what follows it [N, C, H, W]: still one kernel
    return xb.ops.clamp(xb.ops.conv2d(x, w, padding=1, groups=x.shape[1]) + shift, 0.0, 6.0)


def test_a_depthwise_conv2d_fuses_with_what_follows_it():
    x, w = _case((8, 8), 6, (3, 3))
    shift = np.linspace(-1, 1, 8, dtype=np.float32)
    art = depthwise_relu6.compile("cpu", x, w, shift)
    assert [k.kind for k in art.program.kernels] == ["contract"]
    want = np.clip(_torch(torch.nn.functional.conv2d, x, w, padding=1, groups=6) + shift, 0, 6)
    np.testing.assert_allclose(art.run(x, w, shift)[0], want, rtol=1e-5, atol=1e-5)


def test_a_strided_depthwise_conv1d_writes_its_output_from_blas_without_a_copy():
    x, w = _case((14,), 4, (3,))
    art = xb.ops.conv1d.compile("cpu", x, w, None, stride=2, padding=1, groups=4)
    assert len(art.program.kernels) == 1 and "_C = " not in art.source       # no accumulator to copy out of
    want = _torch(torch.nn.functional.conv1d, x, w, stride=2, padding=1, groups=4)
    np.testing.assert_allclose(art.run(x, w)[0], want, rtol=1e-5, atol=1e-5)


@xb.tensor_op
def relu6_depthwise(x: xb.Tensor, scale: xb.Tensor, w: xb.Tensor):
    # the normalised, activated input is evaluated once per element into the padded plane, not once per tap
    return xb.ops.conv2d(xb.ops.clamp(x * scale, 0.0, 6.0), w, stride=2, padding=1, groups=x.shape[1])


def test_a_depthwise_conv2d_of_an_activated_input_evaluates_it_into_the_plane():
    x, w = _case((9, 9), 6, (3, 3))
    scale = np.linspace(0.5, 4, 6, dtype=np.float32).reshape(6, 1, 1)              # per channel
    art = relu6_depthwise.compile("cpu", x, scale, w)
    assert [k.kind for k in art.program.kernels] == ["contract"] and "_acc[_j] += _a * _X[_j + _o]" in art.source
    want = _torch(torch.nn.functional.conv2d, np.clip(x * scale, 0, 6), w, stride=2, padding=1, groups=6)
    np.testing.assert_allclose(art.run(x, scale, w)[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_a_depthwise_weight_gradient_runs_as_loops_over_the_input_in_place(dtype):
    # per channel 1 x (N·H·W) by an (N·H·W) x 9 window: as BLAS a GEMV over a packed copy of the window
    import ml_dtypes
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    rng = np.random.default_rng(5)
    g, x = (rng.standard_normal((2, 6, 12, 12)).astype(dt) for _ in range(2))
    w = rng.standard_normal((6, 1, 3, 3)).astype(dt)
    args = (g, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 6, [False, True, False])
    art = xb.ops.convolution_backward.compile("cpu", *args)
    (k,) = [k for k in art.kernels if k.kind == "contract"]
    assert k.schedule["impl"] == "loops"
    (got,) = [o for o in art.run(g, x, w) if np.shape(o) == w.shape]         # the one gradient asked for
    t64 = [torch.from_numpy(np.asarray(a, np.float64)) for a in (g, x, w)]
    want = torch.ops.aten.convolution_backward(*t64, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 6,
                                               [False, True, False])[1].numpy()
    tol = 1e-4 if dtype == np.float32 else 0.02 * np.abs(want).max()
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4, atol=tol)


@pytest.mark.parametrize("size, k, stride, padding, dilation, plane", [
    ((12, 12), (3, 3), 1, 1, 1, True), ((9, 13), (3, 5), 1, (2, 1), (2, 1), True), ((12, 10), (3, 3), 1, 0, 1, True),
    ((12, 12), (3, 3), 2, 1, 1, False), ((4, 4), (3, 3), 1, 1, 1, False)])
@pytest.mark.parametrize("dtype", [np.float32, "bfloat16"])
def test_a_depthwise_weight_gradient_is_a_dot_product_per_tap_over_padded_planes(size, k, stride, padding, dilation,
                                                                                   plane, dtype):
    # stride 1, from 8 x 8 positions a plane: each tap one dot product of the gradient's plane with the padded
    # input's from the tap's offset; strided or 4 x 4 planes keep the loops
    import ml_dtypes
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    torch.manual_seed(6)
    x = torch.randn((2, 5, *size), dtype=torch.float64)
    w = torch.randn((5, 1, *k), dtype=torch.float64)
    g = torch.randn(torch.nn.functional.conv2d(x, w, stride=stride, padding=padding, dilation=dilation,
                                               groups=5).shape, dtype=torch.float64)
    g, x, w = (np.asarray(t.numpy(), dt) for t in (g, x, w))
    pair = lambda v: list(v) if isinstance(v, tuple) else [v, v]              # noqa: E731
    args = (g, x, w, None, pair(stride), pair(padding), pair(dilation), False, [0, 0], 5, [False, True, False])
    art = xb.ops.convolution_backward.compile("cpu", *args)
    assert ("_t += _G[_j] * _X[_j + _o]" in art.source) == plane
    (got,) = [o for o in art.run(g, x, w) if np.shape(o) == w.shape]
    t64 = [torch.from_numpy(np.asarray(a, np.float64)) for a in (g, x, w)]
    want = torch.ops.aten.convolution_backward(*t64, *args[3:])[1].numpy()
    tol = 1e-4 if dtype == np.float32 else 0.02 * np.abs(want).max()
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-4, atol=tol)

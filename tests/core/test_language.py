"""The operator language: tracing, dims, dtypes, control flow, and errors that point at the user's line."""
import inspect
import logging

import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench.errors import ArgumentError, DTypeError, ShapeError, TraceError

M, K, N = xb.dims("M K N")
rng = np.random.default_rng(7)


def f32(*s):
    return rng.standard_normal(s).astype(np.float32)


@xb.tensor_op
def matmul(a: Tensor[M, K], b: Tensor[K, N]) -> Tensor[M, N]:
    return a @ b


def line_of(fn, text: str) -> int:
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(src) if text in line)


def test_public_surface_runs_on_every_path():
    a, b = f32(4, 3), f32(3, 5)
    np.testing.assert_allclose(matmul(a, b), a @ b, rtol=1e-5)
    np.testing.assert_allclose(matmul.run(a, b, backend="reference"), a @ b, rtol=1e-5)
    art = matmul.compile("cpu", a, b)
    assert "def k0_contract" in art.source and isinstance(art.resources, dict)
    np.testing.assert_allclose(art.run(a, b)[0], a @ b, rtol=1e-5)
    assert matmul.ir.startswith("graph matmul(a: f32[4,3], b: f32[3,5]) -> f32[4,5]")
    assert "M=4 K=3 N=5" in matmul.ir and "contract" in matmul.ir


def test_string_dims_need_no_declaration():
    @xb.tensor_op
    def scale(x: Tensor["rows", "cols"], s: float = 2.0):
        return x * s

    x = f32(2, 3)
    np.testing.assert_allclose(scale(x), x * 2)
    np.testing.assert_allclose(scale(x, s=0.5), x * 0.5)
    assert len(scale.specializations) == 2          # the static argument is part of the key


def test_dim_conflict_names_the_dim_both_arguments_and_sizes():
    with pytest.raises(ShapeError) as e:
        matmul(f32(4, 64), f32(65, 3))
    msg = str(e.value)
    assert "dim K is 64 from argument 'a' (axis 1) but 65 from argument 'b' (axis 0)" in msg
    assert "test_language.py" in msg and "matmul(f32(4, 64), f32(65, 3))" in msg   # the caller's line


def test_wrong_rank_dtype_arity_and_non_arrays():
    with pytest.raises(ShapeError, match=r"argument 'a' must have 2 dims \(Tensor\[M, K\]\) but has shape \(3,\)"):
        matmul(f32(3), f32(3, 2))
    with pytest.raises(ArgumentError, match=r"matmul\(\): too many positional arguments"):
        matmul(f32(2, 2), f32(2, 2), f32(2, 2))
    with pytest.raises(ArgumentError, match="argument 'b' must be a numpy array, got str"):
        matmul(f32(2, 2), "b")
    with pytest.raises(DTypeError, match="complex128, which xbench does not support"):
        matmul(np.ones((2, 2), complex), f32(2, 2))

    @xb.tensor_op
    def typed(x: Tensor[N, xb.float32]):
        return x + 1

    with pytest.raises(DTypeError, match=r"argument 'x' is float64 but the operator declares Tensor\[N, float32\]"):
        typed(np.ones(3))


def test_branch_on_a_traced_value_is_a_clear_error_at_the_users_line():
    @xb.tensor_op
    def relu_if(x: Tensor[N]):
        if x.sum() > 0:
            return x
        return -x

    with pytest.raises(TraceError) as e:
        relu_if(f32(5))
    assert "if" in str(e.value) and "xb.where" in str(e.value)
    assert e.value.loc.lineno == line_of(relu_if.fn, "if x.sum() > 0")

    @xb.tensor_op
    def loop(x: Tensor[N]):
        while (x > 0).any():
            x = x - 1
        return x

    with pytest.raises(TraceError) as e:
        loop(f32(5))
    assert e.value.loc.lineno == line_of(loop.fn, "while (x > 0)")


def test_unsupported_constructs_point_at_the_line():
    @xb.tensor_op
    def to_float(x: Tensor[N]):
        return float(x[0]) * x

    with pytest.raises(TraceError, match="float\\(\\) of a traced tensor") as e:
        to_float(f32(3))
    assert e.value.loc.lineno == line_of(to_float.fn, "float(x[0])")

    @xb.tensor_op
    def masked(x: Tensor[N]):
        return x[x > 0]

    with pytest.raises(TraceError, match="data-dependent size") as e:
        masked(f32(3))
    assert "xb.where" in str(e.value)

    @xb.tensor_op
    def bad_shapes(x: Tensor[N], y: Tensor[M]):
        return x + y

    with pytest.raises(ShapeError, match=r"shapes \(3,\) and \(4,\) do not broadcast") as e:
        bad_shapes(f32(3), f32(4))
    assert e.value.loc.lineno == line_of(bad_shapes.fn, "return x + y")


def test_return_annotation_is_checked():
    @xb.tensor_op
    def wrong(a: Tensor[M, K]) -> Tensor[K, M]:
        return a

    with pytest.raises(ShapeError, match=r"returns shape \(2, 3\) but its annotation says Tensor\[K, M\] = \(3, 2\)"):
        wrong(f32(2, 3))


def test_static_control_flow_and_operator_calls():
    @xb.tensor_op
    def layer(x: Tensor["B", "D"], w: Tensor["D", "D"]):
        return xb.tanh(x @ w)

    @xb.tensor_op
    def mlp(x: Tensor["B", "D"], ws: Tensor["L", "D", "D"], residual: bool = True):
        for i in range(ws.shape[0]):          # a loop over layers: static
            h = layer(x, ws[i])               # an operator calling an operator
            x = x + h if residual else h
        if x.shape[0] > 1:                    # a branch on a shape: static
            x = x - x.mean(axis=0, keepdims=True)
        return x

    x, ws = f32(3, 8) * 0.3, f32(4, 8, 8) * 0.3
    want = x.astype(np.float64)
    for w in ws:
        want = want + np.tanh(want @ w)
    want = want - want.mean(axis=0, keepdims=True)
    np.testing.assert_allclose(mlp(x, ws), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mlp(x[:1], ws, residual=False).shape, (1, 8))


@pytest.mark.parametrize("shape", [(), (5,)])
def test_a_result_returned_twice_is_copied_after_it_is_computed(shape):
    @xb.tensor_op
    def twice(x: Tensor):
        y = x * 2.0 + 1.0
        return y, x, y, x

    x = np.asarray(f32(*shape))
    for backend in ("reference", "cpu"):
        got = twice.run(x, backend=backend)
        for g, want in zip(got, (x * 2 + 1, x, x * 2 + 1, x)):
            np.testing.assert_allclose(g, want, rtol=1e-6, err_msg=backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_dtypes(dtype):
    @xb.tensor_op
    def mix(x: Tensor[N], y: Tensor[N]):
        return (x + y) * 2, x > y, (x == y).sum(), xb.where(x > y, x, y)

    if dtype == np.bool_:
        @xb.tensor_op
        def mix(x: Tensor[N], y: Tensor[N]):
            return x & y, x | y, (x ^ y).sum(), ~x

    x = (rng.standard_normal(9) * 4).astype(dtype)
    y = (rng.standard_normal(9) * 4).astype(dtype)
    outs = mix(x, y)
    refs = mix.run(x, y, backend="reference")
    for o, r in zip(outs, refs):
        assert o.dtype == r.dtype
        np.testing.assert_allclose(o, r, rtol=1e-6)
    if dtype != np.bool_:
        np.testing.assert_allclose(outs[0], (x + y) * 2, rtol=1e-6)
        assert outs[0].dtype == np.dtype(dtype)


def test_promotion_follows_pytorch():
    @xb.tensor_op
    def promo(i: Tensor[N], f: Tensor[N]):
        return i + 1, i * 0.5, i / 2, f * 2.0, i + f, (i > 0).sum(), i.mean()

    outs = promo(np.arange(4, dtype=np.int32), np.ones(4, np.float32))
    assert [o.dtype for o in outs] == [np.int32, np.float32, np.float32, np.float32, np.float32, np.int64,
                                       np.float32]


def test_indexing_and_movement():
    @xb.tensor_op
    def move(x: Tensor["A", "B", "C"]):
        return (x[1:, ::2, -1], x[..., None, 0], x.transpose(2, 0, 1), x.T.reshape(-1, 2), x[:, [2, 0]],
                xb.concat([x, x[:, :1]], axis=1), xb.pad(x, ((0, 0), (1, 2), (2, 0)), mode="reflect"),
                xb.pad(x, 1, value=7.0), xb.flip(x, 1), x.swapaxes(0, 2)[::-1])

    x = f32(3, 4, 5)
    outs = move(x)
    want = (x[1:, ::2, -1], x[..., None, 0], x.transpose(2, 0, 1), x.T.reshape(-1, 2), x[:, [2, 0]],
            np.concatenate([x, x[:, :1]], axis=1), np.pad(x, ((0, 0), (1, 2), (2, 0)), mode="reflect"),
            np.pad(x, 1, constant_values=7.0), x[:, ::-1], x.swapaxes(0, 2)[::-1])
    for o, w in zip(outs, want):
        np.testing.assert_array_equal(o, w)


def test_reductions_einsum_gather_scan():
    @xb.tensor_op
    def red(x: Tensor["A", "B"], idx: Tensor["I"]):
        return (x.sum(0), x.mean(1, keepdims=True), x.max(), x.min(axis=0), x.prod(1), x.argmax(1), x.argmin(),
                xb.einsum("ab,cb->ac", x, x), xb.einsum("ab->b", x), xb.gather(x, idx, axis=1),
                xb.cumsum(x, 0), x.var(1), x.std(), xb.take_along_axis(x, xb.argsort(x, 1), 1), xb.sort(x, 0))

    x = f32(6, 5)
    idx = np.array([4, 0, -1, 2])
    outs = red(x, idx)
    x64 = x.astype(np.float64)
    want = (x64.sum(0), x64.mean(1, keepdims=True), x.max(), x.min(0), x64.prod(1), x.argmax(1), x.argmin(),
            x64 @ x64.T, x64.sum(0), x[:, [4, 0, 4, 2]], np.cumsum(x64, 0), x64.var(1), x64.std(),
            np.sort(x, 1), np.sort(x, 0))
    for o, w in zip(outs, want):
        np.testing.assert_allclose(o, w, rtol=2e-5, atol=1e-5)


def test_ir_is_readable_and_names_lines():
    @xb.tensor_op
    def softmax(x: Tensor["N", "D"]):
        e = xb.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    softmax(f32(4, 8))
    text = softmax.ir
    assert text.splitlines()[0] == "graph softmax(x: f32[4,8]) -> f32[4,8]   # N=4 D=8"
    assert "reduce[kind=max, axes=(1,)] x" in text and "unary[fn=exp]" in text
    assert f"# line {line_of(softmax.fn, 'xb.exp(')}" in text


def test_ir_before_any_call_says_what_to_do():
    @xb.tensor_op
    def f(x: Tensor[N]):
        return x

    with pytest.raises(xb.XbenchError, match=r"call f\(\.\.\.\) on arrays first"):
        _ = f.ir


def test_recompilation_is_logged(caplog):
    @xb.tensor_op
    def double(x: Tensor[N]):
        return x * 2

    with caplog.at_level(logging.DEBUG, logger="xbench"):
        double(f32(4))
        double(f32(5))
    messages = [r.getMessage() for r in caplog.records]
    assert any("traced double for N=5 (specialisation 2)" in m for m in messages)
    assert sum("compiled double for cpu" in m for m in messages) == 2

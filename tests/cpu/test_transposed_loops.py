"""Pointwise kernels that read along another axis than they write run their read axis innermost, in blocks
(`backends/cpu/order.py`): values unchanged, loops as planned."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.backends import get as get_backend
from xbench.backends.cpu.order import BLOCK, block_var, transposed_loops

B, T, C, H, W = xb.dims("B T C H W")


@xb.tensor_op
def gelu_grad_to_channels_first(g: Tensor[B, T, C], a: Tensor[B, T, C]) -> Tensor[B, C, T]:
    d = 0.5 * (1.0 + xb.erf(a * 0.7071067811865476)) + a * xb.exp(-0.5 * a * a) * 0.3989422804014327
    return (g * d).transpose((0, 2, 1))


@xb.tensor_op
def to_channels_last(x: Tensor[B, C, H, W]) -> Tensor[B, H, W, C]:
    return x.transpose((0, 2, 3, 1)) * 2.0


@xb.tensor_op
def scale(x: Tensor[B, C, H, W], s: Tensor[C]) -> Tensor[B, C, H, W]:
    return x * s.reshape((1, -1, 1, 1))


def _plan(op, *arrays):
    program = op.lower(*arrays)
    (k,) = program.kernels
    return k, transposed_loops(k, program)


def test_a_function_of_a_transpose_reads_along_its_input():
    rng = np.random.default_rng(3)
    g, a = (rng.standard_normal((2, 100, 36)).astype(np.float32) for _ in range(2))
    k, plan = _plan(gelu_grad_to_channels_first, g, a)
    loops, x = plan
    assert x.extent == 36 and loops[-1] is k.outer[-1] and loops[-2].name == block_var(x)
    assert loops[-2].extent == -(-36 // BLOCK)          # a last, partial block of 4
    got = gelu_grad_to_channels_first.run(g, a, backend="cpu")
    for check in xb.verify(gelu_grad_to_channels_first, g, a, backend="cpu"):
        assert check.ok, check.message
    assert got.shape == (2, 36, 100)


def test_a_plain_transpose_is_blocked_and_exact():
    x = np.arange(2 * 48 * 5 * 24, dtype=np.float32).reshape(2, 48, 5, 24)
    k, (loops, inner) = _plan(to_channels_last, x)
    assert inner.extent == 24 and [a.extent for a in loops] == [2, 5, 3, 48]
    np.testing.assert_array_equal(to_channels_last.run(x, backend="cpu"), x.transpose(0, 2, 3, 1) * 2)


def test_reads_along_the_store_keep_the_order():
    x = np.ones((2, 48, 5, 24), np.float32)
    assert _plan(scale, x, np.ones(48, np.float32))[1] is None     # a per-channel vector is not a stream
    assert _plan(to_channels_last, np.ones((2, 4, 5, 6), np.float32))[1] is None     # 6 is under two blocks
    assert "_blk_" not in get_backend("cpu").compile(scale.lower(x, np.ones(48, np.float32))).source

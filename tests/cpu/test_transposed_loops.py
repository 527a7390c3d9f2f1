"""Pointwise kernels that read along another axis than they write run their read axis innermost, in blocks
(`backends/cpu/order.py`): values unchanged, loops as planned."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.backends import get as get_backend
from xbench.backends.cpu.order import BLOCK, block_var, scatter_block, transposed_loops
from xbench.ir.kernel import ScatterAdd

B, T, C, H, W = xb.dims("B T C H W")


@xb.tensor_op
def gelu_grad_to_channels_first(g: Tensor[B, T, C], a: Tensor[B, T, C]) -> Tensor[B, C, T]:
    d = 0.5 * (1.0 + xb.erf(a * 0.7071067811865476)) + a * xb.exp(-0.5 * a * a) * 0.3989422804014327
    return (g * d).transpose((0, 2, 1))


@xb.tensor_op
def to_channels_last(x: Tensor[B, C, H, W]) -> Tensor[B, H, W, C]:
    return x.transpose((0, 2, 3, 1)) * 2.0


@xb.tensor_op
def to_tokens(x: Tensor[B, C, H, W]) -> Tensor[B, T, C]:
    return x.reshape((x.shape[0], x.shape[1], -1)).transpose((0, 2, 1))


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


def test_a_transpose_of_flattened_axes_reads_along_their_remainder():
    """[B, C, H, W] -> [B, H*W, C]: the read's last index is the token modulo W, contiguous in runs of W."""
    x = np.arange(2 * 40 * 3 * 16, dtype=np.float32).reshape(2, 40, 3, 16)
    k, (loops, inner) = _plan(to_tokens, x)
    assert inner.extent == 48 and loops[-1].extent == 40
    np.testing.assert_array_equal(to_tokens.run(x, backend="cpu"), x.reshape(2, 40, 48).transpose(0, 2, 1))


def test_reads_along_the_store_keep_the_order():
    x = np.ones((2, 48, 5, 24), np.float32)
    assert _plan(scale, x, np.ones(48, np.float32))[1] is None     # a per-channel vector is not a stream
    assert _plan(to_channels_last, np.ones((2, 4, 5, 6), np.float32))[1] is None     # 6 is under two blocks
    assert "_blk_" not in get_backend("cpu").compile(scale.lower(x, np.ones(48, np.float32))).source


Q, P = xb.dims("Q P")


@xb.tensor_op
def add_columns_into_rows(base: Tensor[Q, C], index: Tensor[P], src: Tensor[C, P]) -> Tensor[Q, C]:
    return xb.ops.index_add(base, 0, index, src.transpose((1, 0)))


def test_a_scatter_add_reading_across_its_target_rows_is_blocked_with_the_same_bits():
    """A bilinear upsampling's backward adds [channels, positions] into [positions, channels]: the positions run
    innermost in blocks, and each target element still gets its additions in the serial order."""
    rng = np.random.default_rng(5)
    base = np.zeros((7, 40), np.float32)
    index = rng.integers(0, 7, 300)
    src = rng.standard_normal((40, 300)).astype(np.float32)
    program = add_columns_into_rows.lower(base, index, src)
    scatters = [s for k in program.kernels for s in k.stages if isinstance(s, ScatterAdd)]
    assert [scatter_block(s, program).extent for s in scatters] == [300]
    got = add_columns_into_rows.run(base, index, src, backend="cpu")
    want = np.zeros((7, 40), np.float32)
    for p in range(300):                # the serial order, in float32
        want[index[p]] += src[:, p]
    np.testing.assert_array_equal(got, want)

"""Streaming stores and prefetches (`backends/cpu/memory.py`): the copy is exact at every alignment and length
and writes nothing outside its range; a prefetch past the end of an array does not fault."""
import itertools

import numba
import numpy as np
import pytest

from xbench.backends.cpu.memory import LINE, prefetch, stream

rng = np.random.default_rng(11)


@numba.njit
def _stream(dst, offset, src, n):
    stream(dst, offset, src, n)


@numba.njit
def _prefetch_sum(x, ahead):
    s = 0.0
    for i in range(x.size):
        prefetch(x, i + ahead)
        s += x[i]
    return s


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int16])
def test_stream_copies_every_alignment_and_length_and_nothing_else(dtype):
    size = np.dtype(dtype).itemsize
    for offset, n in itertools.product(range(0, 2 * LINE // size + 1, 3), (0, 1, 7, LINE // size, 100, 1000)):
        src = (rng.standard_normal(n) * 1000).astype(dtype)
        dst = np.full(offset + n + 40, 7, dtype)
        _stream(dst, offset, src, n)
        np.testing.assert_array_equal(dst[offset:offset + n], src)
        assert (dst[:offset] == 7).all() and (dst[offset + n:] == 7).all(), (offset, n)


def test_prefetch_past_the_end_is_harmless():
    x = rng.standard_normal(10_000)
    assert _prefetch_sum(x, 1 << 30) == pytest.approx(x.sum(), rel=1e-12)

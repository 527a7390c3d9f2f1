"""Samples for matrix products (blas.py): [M, K] x [K, N] problems from the shape set's matrix shapes."""
from __future__ import annotations

import numpy as np

from xbench.ops import Sample

from .core import _mats, _tiny, custom, noncontig


@custom
def mm_cases(T, shapes, dtype):
    """[M, K] @ [K, N] over the matrix shapes; a non-contiguous pair and an empty M."""
    for m, k, n in _mats(shapes):
        yield Sample((T((m, k), "a"), T((k, n), "b")), note=f"{m}x{k}x{n}")
    m, k, n = _mats(shapes)[-1]
    if shapes.noncontig:
        yield Sample((noncontig(T((m, k), "nc")), noncontig(T((k, n), "nc2"))), note="non-contiguous")
    if shapes.empty:
        yield Sample((T((0, k), "e"), T((k, n), "e2")), note="empty M")


@custom
def bmm_cases(T, shapes, dtype):
    """[B, M, K] @ [B, K, N]."""
    b = 2 if _tiny(shapes) else 3
    for m, k, n in _mats(shapes):
        yield Sample((T((b, m, k), "a"), T((b, k, n), "b")), note=f"{b}x{m}x{k}x{n}")


@custom
def mv_cases(T, shapes, dtype):
    """[M, K] @ [K]."""
    for m, k, _ in _mats(shapes):
        yield Sample((T((m, k), "a"), T((k,), "v")), note=f"{m}x{k}")


@custom
def dot_cases(T, shapes, dtype):
    """Two vectors of one length."""
    for _, k, _ in _mats(shapes):
        yield Sample((T((k,), "a"), T((k,), "b")), note=f"{k}")
    if shapes.noncontig:
        yield Sample((T((18,), "nc")[::2], T((27,), "nc2")[::3]), note="strided")


@custom
def outer_cases(T, shapes, dtype):
    """Two vectors."""
    for m, _, n in _mats(shapes):
        yield Sample((T((m,), "a"), T((n,), "b")), note=f"{m}x{n}")


def _beta_alpha(shapes):
    return ({},) if _tiny(shapes) else ({}, {"beta": 0.5, "alpha": -2.0}, {"beta": 0.0, "alpha": 1.5})


@custom
def addmm_cases(T, shapes, dtype):
    """beta * input + alpha * (mat1 @ mat2): a full input, a broadcast row, and beta/alpha variants."""
    for j, kw in enumerate(_beta_alpha(shapes)):
        for m, k, n in _mats(shapes):
            yield Sample((T((m, n), "i", j), T((m, k), "a", j), T((k, n), "b", j)), kw, note=f"{m}x{k}x{n} {kw}")
    m, k, n = _mats(shapes)[-1]
    yield Sample((T((n,), "row"), T((m, k), "a"), T((k, n), "b")), note="broadcast input row")


@custom
def addmv_cases(T, shapes, dtype):
    for j, kw in enumerate(_beta_alpha(shapes)):
        for m, k, _ in _mats(shapes):
            yield Sample((T((m,), "i", j), T((m, k), "a", j), T((k,), "v", j)), kw, note=f"{m}x{k} {kw}")


@custom
def addr_cases(T, shapes, dtype):
    for j, kw in enumerate(_beta_alpha(shapes)):
        for m, _, n in _mats(shapes):
            yield Sample((T((m, n), "i", j), T((m,), "a", j), T((n,), "b", j)), kw, note=f"{m}x{n} {kw}")


@custom
def baddbmm_cases(T, shapes, dtype):
    b = 2 if _tiny(shapes) else 3
    for j, kw in enumerate(_beta_alpha(shapes)):
        for m, k, n in _mats(shapes):
            yield Sample((T((b, m, n), "i", j), T((b, m, k), "a", j), T((b, k, n), "b", j)), kw,
                         note=f"{b}x{m}x{k}x{n} {kw}")


@custom
def addbmm_cases(T, shapes, dtype):
    b = 2 if _tiny(shapes) else 3
    for j, kw in enumerate(_beta_alpha(shapes)):
        for m, k, n in _mats(shapes):
            yield Sample((T((m, n), "i", j), T((b, m, k), "a", j), T((b, k, n), "b", j)), kw,
                         note=f"{b}x{m}x{k}x{n} {kw}")


@custom
def linear_cases(T, shapes, dtype):
    """input [..., in] with weight [out, in], with and without bias."""
    for m, k, n in _mats(shapes):
        yield Sample((T((m, k), "x"), T((n, k), "w"), T((n,), "b")), note=f"{m}x{k}->{n}")
    m, k, n = _mats(shapes)[-1]
    yield Sample((T((2, m, k), "x3"), T((n, k), "w3")), note="3-D input, no bias")


@custom
def bilinear_cases(T, shapes, dtype):
    sizes = ((3, 4, 5, 2),) if _tiny(shapes) else ((3, 4, 5, 2), (17, 8, 6, 5))
    for n, i, j, o in sizes:
        yield Sample((T((n, i), "a"), T((n, j), "b"), T((o, i, j), "w"), T((o,), "bias")), note=f"{n} {i}x{j}->{o}")
    yield Sample((T((2, 3, 4), "a3"), T((2, 3, 5), "b3"), T((2, 4, 5), "w3")), note="3-D inputs, no bias")


@custom
def kron_cases(T, shapes, dtype):
    yield Sample((T((2, 3), "a"), T((3, 2), "b")), note="2-D x 2-D")
    if not _tiny(shapes):
        yield Sample((T((4,), "a1"), T((2, 5), "b1")), note="1-D x 2-D")
        yield Sample((T((2, 1, 3), "a3"), T((3, 2, 2), "b3")), note="3-D x 3-D")


@custom
def grouped_mm_cases(T, shapes, dtype):
    """The four layouts of torch._grouped_mm; offs are cumulative group ends (int32)."""
    yield Sample((T((8, 4), "a"), T((3, 4, 6), "b"), np.array([3, 5, 8], np.int32)), note="2-D x 3-D")
    yield Sample((T((5, 12), "a2"), T((12, 6), "b2"), np.array([4, 8, 12], np.int32)), note="2-D x 2-D (split K)")
    yield Sample((T((3, 5, 4), "a3"), T((4, 9), "b3"), np.array([2, 6, 9], np.int32)), note="3-D x 2-D (split N)")
    if not _tiny(shapes):
        yield Sample((T((2, 5, 4), "a4"), T((2, 4, 6), "b4")), note="3-D x 3-D (batched)")
        yield Sample((T((8, 4), "a5"), T((2, 4, 6), "b5"), np.array([2, 5], np.int32)),
                     note="rows past the last offset")

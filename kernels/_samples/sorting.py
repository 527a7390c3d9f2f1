"""Samples for sorting, top-k, searching and unique values (sorting.py)."""
from __future__ import annotations

import numpy as np

from xbench.dtypes import is_float
from xbench.ops import Sample, ShapeSet

from .core import _tiny, cast, custom, distinct, special


def _sort_shapes(shapes: ShapeSet):
    return ((5,), (3, 17)) if _tiny(shapes) else ((17,), (4, 64), (2, 3, 33))


@custom
def sort_cases(T, shapes, dtype):
    """sort / argsort(self, dim, descending, stable=True) over distinct values; ties and special values."""
    for shape in _sort_shapes(shapes):
        for dim in (-1, 0) if len(shape) > 1 else (-1,):
            x = distinct(shapes, dtype, shape, dim, "sort")
            yield Sample((x, dim), note=f"{shape} dim={dim}")
            yield Sample((x, dim, True), note=f"{shape} dim={dim} descending")
    ties = T((4, 9), "ties", low=-2, high=2, ints=(-2, 2))
    ties = cast(np.round(ties.astype(np.float64)), dtype)
    yield Sample((ties, -1), dict(stable=True), note="ties, stable")
    yield Sample((ties, -1, True), dict(stable=True), note="ties, stable, descending")
    if is_float(dtype) and shapes.special:
        sv = special(dtype, (2, 14))
        yield Sample((sv, -1), dict(stable=True), note="special values", grad=False)
        yield Sample((sv, -1, True), dict(stable=True), note="special values, descending", grad=False)
    yield Sample((T((), "0d"), 0), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), -1, True), note="0-d, dim=-1, descending")


@custom
def topk_cases(T, shapes, dtype):
    """topk(self, k, dim, largest) over distinct values."""
    for shape in _sort_shapes(shapes):
        x = distinct(shapes, dtype, shape, -1, "topk")
        for k, largest in ((1, True), (min(3, shape[-1]), False), (shape[-1], True)):
            yield Sample((x, k, -1, largest), note=f"{shape} k={k} largest={largest}")
    x = distinct(shapes, dtype, (6, 4), 0, "topk0")
    yield Sample((x, 2, 0), note="dim 0")
    yield Sample((T((), "0d"), 1, 0), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), 1, -1, False), note="0-d, dim=-1, smallest")


@custom
def kthvalue_cases(T, shapes, dtype):
    for shape in _sort_shapes(shapes):
        x = distinct(shapes, dtype, shape, -1, "kth")
        yield Sample((x, 1), note=f"{shape} k=1")
        yield Sample((x, shape[-1] // 2 + 1, -1, True), note=f"{shape} middle, keepdim")
    x = distinct(shapes, dtype, (7, 3), 0, "kth0")
    yield Sample((x, 3, 0), note="dim 0")
    yield Sample((T((), "0d"), 1, 0), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), 1, -1, True), note="0-d, dim=-1, keepdim")


@custom
def median_cases(T, shapes, dtype):
    for shape in _sort_shapes(shapes):
        x = distinct(shapes, dtype, shape, -1, "median")
        yield Sample((x, -1), note=f"{shape} dim=-1")
    x = distinct(shapes, dtype, (6, 5), 0, "median0")
    yield Sample((x, 0, True), note="dim 0 keepdim")
    yield Sample((distinct(shapes, dtype, (24,), 0, "all").reshape(4, 6),), note="all elements")
    yield Sample((T((), "0d"), 0), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), -1, True), note="0-d, dim=-1, keepdim")


@custom
def mode_cases(T, shapes, dtype):
    """Values from a small pool (runs of repeats), ties between equally frequent values."""
    for shape in ((9,), (4, 12), (3, 5, 7)):
        x = T(shape, "m", ints=(-3, 3))
        if is_float(dtype):
            x = cast(np.round(x.astype(np.float64)), dtype)
        yield Sample((x, -1), note=f"{shape}")
    yield Sample((x, 1, True), note="dim 1 keepdim")
    yield Sample((T((), "0d", ints=(-3, 3)), 0), note="0-d, dim=0")
    yield Sample((T((), "0d-1", ints=(-3, 3)), -1, True), note="0-d, dim=-1, keepdim")


@custom
def quantile_cases(T, shapes, dtype):
    """quantile(input, q, dim, keepdim, interpolation): scalar and tensor q, every interpolation."""
    x = T((5, 17), "x")
    yield Sample((x, 0.3), note="all elements")
    yield Sample((x, 0.75, -1), note="dim -1")
    qs = cast(np.array([0.0, 0.2, 0.5, 1.0]), dtype)
    for mode in ("linear", "lower", "higher", "nearest", "midpoint"):
        yield Sample((x, qs, 0), dict(interpolation=mode), note=f"tensor q, {mode}")
    yield Sample((x, 0.5, 1, True), note="keepdim")
    yield Sample((T((), "0d"), qs, 0), note="0-d, dim=0, tensor q")
    yield Sample((T((), "0d-1"), 0.5, -1, True), note="0-d, dim=-1, keepdim")
    if shapes.special:
        with_nan = x.copy()
        with_nan[2, 3] = np.nan
        yield Sample((with_nan, 0.4, 1), note="a NaN row", grad=False)


@custom
def searchsorted_cases(T, shapes, dtype):
    """searchsorted(sorted_sequence, self, out_int32, right, side, sorter): 1-D and batched sequences."""
    seq = np.sort(T((12,), "seq", ints=(-10, 10)).astype(np.float64))
    seq = cast(seq, dtype)
    vals = T((3, 7), "v", ints=(-12, 12))
    yield Sample((seq, vals), note="1-D sequence, left")
    yield Sample((seq, vals), dict(right=True), note="right")
    yield Sample((seq, vals), dict(side="right", out_int32=True), note="side='right', int32")
    rows = cast(np.sort(T((3, 8), "rows", ints=(-10, 10)).astype(np.float64), axis=-1), dtype)
    yield Sample((rows, T((3, 5), "v2", ints=(-12, 12))), note="batched sequences")
    raw = T((10,), "raw", ints=(-10, 10))
    sorter = np.argsort(raw.astype(np.float64), kind="stable").astype(np.int64)
    yield Sample((raw, vals), dict(sorter=sorter), note="sorter")


@custom
def bucketize_cases(T, shapes, dtype):
    b = cast(np.sort(T((9,), "b", ints=(-10, 10)).astype(np.float64)), dtype)
    x = T((4, 6), "x", ints=(-12, 12))
    yield Sample((x, b), note="right=False")
    yield Sample((x, b, True, True), note="int32, right=True")


def _pool(T, shape, dtype, key):
    v = T(shape, key, ints=(-4, 4), low=-4, high=4)
    return cast(np.round(v.astype(np.float64)), dtype) if is_float(dtype) else v


@custom
def unique_cases(T, shapes, dtype):
    """_unique2(self, sorted, return_inverse, return_counts, size, fill_value) over values with repeats."""
    x = _pool(T, (4, 6), dtype, "u")
    yield Sample((x,), note="values only")
    yield Sample((x, True, True, True), note="inverse and counts")
    yield Sample((_pool(T, (17,), dtype, "u1"), True, False, True), dict(size=5, fill_value=-1),
                 note="size 5, fill -1")


@custom
def unique_consecutive_cases(T, shapes, dtype):
    x = np.repeat(_pool(T, (9,), dtype, "c"), 2)[:15]
    yield Sample((x,), note="runs")
    yield Sample((x, True, True), note="inverse and counts")
    yield Sample((_pool(T, (3, 5), dtype, "c2"), True, True), dict(size=4), note="2-D, size 4")


def _slices(T, dtype, key):
    """[5, 4] rows from a pool of three, with repeats (so distinct slices along dim 0 and dim 1 both repeat)."""
    pool = _pool(T, (3, 4), dtype, key)
    return pool[[1, 0, 1, 2, 0]]


@custom
def unique_dim_cases(T, shapes, dtype):
    """unique_dim(self, dim, sorted, return_inverse, return_counts, size, fill_value) over repeated slices."""
    x = _slices(T, dtype, "ud")
    yield Sample((x, 0), note="rows")
    yield Sample((x, 1, True, True, True), note="columns")
    yield Sample((x.reshape(5, 2, 2), -3), note="3-D, dim -3")
    yield Sample((x, 0, True, True, True), dict(size=2, fill_value=-1), note="size 2 (fewer than the distinct)")


@custom
def unique_front_cases(T, shapes, dtype):
    """torch.unique(self, sorted, return_inverse, return_counts, dim) with and without dim."""
    x = _slices(T, dtype, "uf")
    yield Sample((x,), note="elements")
    yield Sample((x, True, True, True), note="elements, inverse and counts")
    yield Sample((x,), dict(dim=0), note="dim=0")
    yield Sample((x, True, False, True, 1), note="dim=1, counts")
    yield Sample((x, True, True, False), dict(dim=0, size=6, fill_value=7), note="dim=0, inverse, size 6")

"""Samples for gathers, scatters, masks and advanced indexing (indexing.py)."""
from __future__ import annotations

import numpy as np

from xbench.dtypes import is_float
from xbench.ops import Sample

from .core import _tiny, custom, noncontig


def _fill_value(dtype: str, v: float = 2.5):
    return bool(v) if dtype == "bool" else (v if is_float(dtype) else int(v))


def _perm_index(rng, shape, dim: int, n: int) -> np.ndarray:
    """int64 indices of `shape` whose entries along `dim` are distinct values in [0, n) (one writer per target)."""
    shape = tuple(shape)
    moved = (shape[dim],) + shape[:dim] + shape[dim + 1:]
    lines = int(np.prod(moved[1:])) if len(moved) > 1 else 1
    cols = np.stack([rng.permutation(n)[: shape[dim]] for _ in range(lines)], 1).reshape(moved)
    return np.moveaxis(cols, 0, dim).astype(np.int64)


@custom
def index_select_cases(T, shapes, dtype):
    """index_select(self, dim, index) along each dim, with repeats."""
    x = T((6, 7, 5), "x")
    rng = shapes.rng("index_select")
    for dim in (0, 1, -1):
        n = x.shape[dim]
        yield Sample((x, dim, rng.integers(0, n, 9).astype(np.int64)), note=f"dim={dim}")
    if shapes.noncontig:
        yield Sample((noncontig(T((5, 4), "nc")), 1, np.array([3, 0, 3], np.int64)), note="non-contiguous")
    yield Sample((T((), "0d"), 0, np.array([0], np.int64)), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), -1, np.array(0, np.int64)), note="0-d, dim=-1, 0-d index")


@custom
def gather_cases(T, shapes, dtype):
    """torch.gather(self, dim, index): index as large as self, and smaller in every dim."""
    x = T((5, 6, 4), "x")
    rng = shapes.rng("gather")
    for dim in (0, 1, 2):
        yield Sample((x, dim, rng.integers(0, x.shape[dim], (5, 6, 4)).astype(np.int64)), note=f"dim={dim}")
    yield Sample((x, 1, rng.integers(0, 6, (3, 9, 2)).astype(np.int64)), note="index smaller in other dims")
    yield Sample((T((), "0d"), 0, np.array(0, np.int64)), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), -1, np.array(0, np.int64)), note="0-d, dim=-1")


@custom
def take_cases(T, shapes, dtype):
    x = T((4, 5), "x")
    yield Sample((x, shapes.rng("take").integers(-20, 20, (3, 4)).astype(np.int64)), note="2-D index")


@custom
def scatter_add_cases(T, shapes, dtype):
    """scatter_add(self, dim, index, src) with repeated targets, and src larger than index."""
    rng = shapes.rng("scatter_add")
    x = T((5, 6), "x")
    yield Sample((x, 0, rng.integers(0, 5, (7, 6)).astype(np.int64), T((7, 6), "s")), note="dim 0, repeats")
    yield Sample((x, 1, rng.integers(0, 6, (3, 4)).astype(np.int64), T((4, 9), "s2")), note="dim 1, small index")
    yield Sample((T((3, 4, 5), "x3"), -1, rng.integers(0, 5, (3, 4, 8)).astype(np.int64), T((3, 4, 8), "s3")),
                 note="3-D, dim -1")
    yield Sample((T((), "0d"), 0, np.array(0, np.int64), T((), "0ds")), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), -1, np.array(0, np.int64), T((), "0ds-1")), note="0-d, dim=-1")


@custom
def scatter_cases(T, shapes, dtype):
    """scatter(self, dim, index, src | value, reduce) with one writer per target."""
    rng = shapes.rng("scatter")
    x = T((6, 5), "x")
    yield Sample((x, 0, _perm_index(rng, (4, 5), 0, 6), T((4, 5), "s")), note="dim 0")
    yield Sample((x, 1, _perm_index(rng, (6, 3), 1, 5), T((7, 4), "s2")), note="dim 1, src larger")
    yield Sample((x, 1, _perm_index(rng, (3, 2), 1, 5)), dict(value=_fill_value(dtype)), note="value")
    yield Sample((T((), "0d"), 0, np.array(0, np.int64), T((), "0ds")), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), -1, np.array(0, np.int64)), dict(value=_fill_value(dtype)), note="0-d, dim=-1, value")
    if not _tiny(shapes):
        yield Sample((x, 0, rng.integers(0, 6, (8, 5)).astype(np.int64), T((8, 5), "s3")), dict(reduce="add"),
                     note="reduce=add")
        yield Sample((x, 0, rng.integers(0, 6, (8, 5)).astype(np.int64), T((8, 5), "s4", low=0.5, high=1.5)),
                     dict(reduce="multiply"), note="reduce=multiply")


@custom
def scatter_reduce_cases(T, shapes, dtype):
    """scatter_reduce(self, dim, index, src, reduce, include_self) for every reduction."""
    rng = shapes.rng("scatter_reduce")
    x = T((5, 4), "x", low=0.5, high=1.5)
    idx = rng.integers(0, 5, (7, 3)).astype(np.int64)
    src = T((7, 4), "s", low=0.5, high=1.5)
    reds = ("sum", "amax") if _tiny(shapes) else ("sum", "prod", "mean", "amax", "amin")
    for red in reds:
        for include_self in (True, False):
            yield Sample((x, 0, idx, src, red), dict(include_self=include_self), note=f"{red} self={include_self}",
                         grad=red not in ("amax", "amin"))
    if not _tiny(shapes):
        yield Sample((T((3, 6), "x2"), 1, rng.integers(0, 6, (3, 9)).astype(np.int64), T((3, 9), "s2"), "amin"),
                     note="dim 1", grad=False)
    yield Sample((T((), "0d", low=0.5, high=1.5), 0, np.array(0, np.int64), T((), "0ds", low=0.5, high=1.5), "sum"),
                 note="0-d, dim=0, sum")
    yield Sample((T((), "0d-1", low=0.5, high=1.5), -1, np.array(0, np.int64), T((), "0ds-1", low=0.5, high=1.5),
                  "amax"), dict(include_self=False), note="0-d, dim=-1, amax", grad=False)


@custom
def index_add_cases(T, shapes, dtype):
    """index_add / index_copy(self, dim, index, source): distinct indices (copy needs one writer each)."""
    rng = shapes.rng("index_add")
    x = T((6, 5), "x")
    yield Sample((x, 0, rng.permutation(6)[:4].astype(np.int64), T((4, 5), "s")), note="dim 0")
    yield Sample((T((3, 7, 2), "x3"), 1, rng.permutation(7)[:3].astype(np.int64), T((3, 3, 2), "s3")),
                 note="3-D, dim 1")
    yield Sample((T((2, 3, 5, 4), "x4"), 2, np.array([3], np.int64), T((2, 3, 1, 4), "s4")),
                 note="one slice, dim 2 (a decode step's KV cache row)")
    yield Sample((T((), "0d"), 0, np.array([0], np.int64), T((), "0ds")), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), -1, np.array(0, np.int64), T((), "0ds-1")), note="0-d, dim=-1, 0-d index")


@custom
def index_fill_cases(T, shapes, dtype):
    rng = shapes.rng("index_fill")
    x = T((6, 5), "x")
    yield Sample((x, 1, rng.integers(0, 5, 3).astype(np.int64), _fill_value(dtype)), note="dim 1")
    yield Sample((x, 0, np.array([0, 5, 5], np.int64), _fill_value(dtype, 1.0)), note="dim 0, repeats")
    yield Sample((T((), "0d"), 0, np.array([0], np.int64), _fill_value(dtype)), note="0-d, dim=0")
    yield Sample((T((), "0d-1"), -1, np.array(0, np.int64), _fill_value(dtype, 1.0)), note="0-d, dim=-1")


@custom
def select_scatter_cases(T, shapes, dtype):
    x = T((4, 5, 3), "x")
    yield Sample((x, T((5, 3), "s"), 0, 2), note="dim 0")
    yield Sample((x, T((4, 5), "s2"), 2, -1), note="dim 2, index -1")


@custom
def slice_scatter_cases(T, shapes, dtype):
    x = T((8, 5), "x")
    yield Sample((x, T((3, 5), "s"), 0, 2, 5), note="rows 2:5")
    yield Sample((x, T((8, 2), "s2"), 1, 1, None, 2), note="columns 1::2")
    yield Sample((x, T((8, 5), "s3")), note="everything")


@custom
def diagonal_scatter_cases(T, shapes, dtype):
    x = T((4, 5), "x")
    yield Sample((x, T((4,), "s")), note="main diagonal")
    yield Sample((x, T((3,), "s2"), 2), note="offset 2")
    yield Sample((T((3, 4, 2), "x3"), T((2, 2), "s3"), -1, 0, 1), note="3-D, offset -1")
    yield Sample((T((3, 4, 5), "x4"), T((4, 3), "s4"), 0, 2, 0), note="dim1=2, dim2=0")


@custom
def masked_fill_cases(T, shapes, dtype):
    rng = shapes.rng("masked_fill")
    for shape in shapes.pointwise:
        yield Sample((T(shape, "x"), np.asarray(rng.random(shape) < 0.4), _fill_value(dtype)), note=f"{shape}")
    s = shapes.pointwise[-1]
    if len(s) >= 1:
        yield Sample((T(s, "b"), rng.random(s[-1:]) < 0.5, _fill_value(dtype, -1.0)), note="broadcast mask")


@custom
def masked_scatter_cases(T, shapes, dtype):
    rng = shapes.rng("masked_scatter")
    x = T((5, 6), "x")
    yield Sample((x, rng.random((5, 6)) < 0.5, T((40,), "s")), note="same shape")
    yield Sample((x, rng.random((6,)) < 0.5, T((5, 6), "s2")), note="broadcast mask")


@custom
def nonzero_cases(T, shapes, dtype):
    """nonzero(self, size, fill_value) over inputs with zeros; a size too small to hold every index."""
    rng = shapes.rng("nonzero")
    for shape in ((17,), (4, 6), (2, 3, 4)):
        x = T(shape, "x")
        x = np.where(rng.random(shape) < 0.5, np.zeros_like(x), x)
        yield Sample((x,), note=f"{shape}")
    yield Sample((x, 5), note="size 5 (fewer than the non-zeros)")
    yield Sample((x, 30, 0), note="size 30, fill 0")
    yield Sample((x,), dict(as_tuple=True), note="as_tuple")
    yield Sample((x, 5), dict(as_tuple=True), note="as_tuple, size 5")
    yield Sample((T((5, 4), "nz1"),), dict(as_tuple=True), note="as_tuple, 2-D")
    yield Sample((T((), "nz0"),), dict(as_tuple=True), note="as_tuple, 0-d")


@custom
def masked_select_cases(T, shapes, dtype):
    rng = shapes.rng("masked_select")
    x = T((4, 6), "x")
    yield Sample((x, rng.random((4, 6)) < 0.5), note="same shape")
    yield Sample((x, rng.random((6,)) < 0.5), note="broadcast mask")
    yield Sample((x, rng.random((4, 6)) < 0.7, 5, _fill_value(dtype, -1.0)), note="size 5, fill -1")


@custom
def isin_cases(T, shapes, dtype):
    rng = shapes.rng("isin")
    pool = T((12,), "pool", ints=(-5, 5))
    yield Sample((pool[rng.integers(0, 12, (4, 5))], pool[:6]), note="half present")
    yield Sample((pool[rng.integers(0, 12, (7,))], pool[3:9]), dict(invert=True), note="invert")


def _idx(rng, n: int, shape) -> np.ndarray:
    """Indices into a dim of n, negative ones included."""
    return rng.integers(-n, n, shape).astype(np.int64)


@custom
def index_cases(T, shapes, dtype):
    """index(self, indices): one index tensor, broadcast pairs, a leading None, indices apart (result dims lead)."""
    rng = shapes.rng("index")
    x = T((5, 6, 4), "x")
    yield Sample((x, [_idx(rng, 5, (3,))]), note="dim 0")
    yield Sample((x, [_idx(rng, 5, (2, 1)), _idx(rng, 6, (3,))]), note="broadcast pair")
    yield Sample((x, [None, _idx(rng, 6, (2, 2))]), note="None then an index")
    yield Sample((x, [_idx(rng, 5, (3,)), None, _idx(rng, 4, (3,))]), note="indices apart")
    if shapes.noncontig:
        yield Sample((noncontig(T((5, 4), "nc")), [None, _idx(rng, 4, (3,))]), note="non-contiguous")


@custom
def index_put_cases(T, shapes, dtype):
    """index_put(self, indices, values, accumulate): unique targets (overwrite), repeated ones (accumulate),
    broadcast values, indices behind a None."""
    rng = shapes.rng("index_put")
    x = T((5, 6), "x")
    yield Sample((x, [rng.permutation(5)[:3].astype(np.int64)], T((3, 6), "v")), note="rows")
    yield Sample((x, [_idx(rng, 5, (7,))], T((7, 6), "w")), dict(accumulate=True), note="accumulate, repeats")
    yield Sample((x, [None, rng.permutation(6)[:2].astype(np.int64)], T((5, 1), "u")), note="None, broadcast")
    yield Sample((x, [rng.permutation(5)[:3].astype(np.int64), rng.permutation(6)[:3].astype(np.int64)],
                  T((), "s")), note="points, one value")

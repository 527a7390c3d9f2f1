"""The building blocks of the library's samples: `tensor`, `noncontig` and `special` (so every generator draws
its numbers the same, deterministic way), the factories most operators use (`unary`, `binary`, `reduction`,
`nary`, `custom`) and the helpers the category modules share.

    samples=unary(low=0.1, high=10.0)             # log: positive inputs
    samples=binary(scalar=2.5)                    # add: tensor-tensor, broadcast pairs, tensor-scalar
    samples=reduction(keepdim=True)               # sum: over dim=-1, dim=0, all dims
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np

from xbench.dtypes import is_float, is_int, to_numpy
from xbench.ops import Sample, ShapeSet

Gen = Callable[[str, ShapeSet], Iterable[Sample]]

SPECIAL_VALUES = (0.0, -0.0, np.inf, -np.inf, np.nan, 1e4, -1e4, 65000.0, -65000.0, 1e-3, -1e-3, 1.0, -1.0, 0.5)


def cast(values: np.ndarray, dtype: str) -> np.ndarray:
    """`values` as a numpy array of xbench dtype `dtype` (bfloat16 through ml_dtypes)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(np.asarray(values).astype(to_numpy(dtype)))


def tensor(shapes: ShapeSet, dtype: str, shape: Sequence[int], *key, low: float = -3.0, high: float = 3.0,
           ints: tuple[int, int] = (-20, 20), avoid: Sequence[float] = (), margin: float = 0.05) -> np.ndarray:
    """Deterministic random values of `dtype` and `shape`: uniform in [low, high) for floats, integers in
    [ints[0], ints[1]) for integer types, fair coins for bool. `avoid`: points (kinks, poles) kept at least
    `margin` away, so finite differences and low-precision rounding do not straddle them; for integers,
    avoiding 0 turns zeros into ones (divisors)."""
    rng = shapes.rng(*key, tuple(shape), dtype)
    shape = tuple(int(s) for s in shape)
    if dtype == "bool":
        return np.asarray(rng.random(shape) < 0.5)
    if is_int(dtype):
        v = np.asarray(rng.integers(ints[0], ints[1], size=shape))
        if 0.0 in avoid:
            v = np.where(v == 0, 1, v)
        return np.asarray(v.astype(to_numpy(dtype)))
    x = rng.uniform(low, high, size=shape)
    for p in avoid:
        near = np.abs(x - p) < margin
        x = np.where(near, p + np.where(x >= p, margin, -margin) * (1.0 + rng.random(shape)), x)
    return cast(x, dtype)


def noncontig(a: np.ndarray) -> np.ndarray:
    """The same values as a non-contiguous numpy view (transposed storage for rank >= 2, every other element
    of a twice-as-long buffer otherwise). Arrays of at most one element come back as they are."""
    if a.size <= 1:                     # numpy calls every array of one element contiguous
        return a
    if a.ndim >= 2:
        out = np.asfortranarray(a)
        if not out.flags.c_contiguous:  # (size-1 axes can make F order C-contiguous too)
            return out
    pairs = np.zeros(a.shape + (2,), dtype=a.dtype)
    pairs[..., 0] = a
    view = pairs[..., 0]
    assert not view.flags.c_contiguous and np.array_equal(view, a, equal_nan=True)
    return view


def special(dtype: str, shape: Sequence[int] = (len(SPECIAL_VALUES),), values: Sequence[float] = SPECIAL_VALUES
            ) -> np.ndarray:
    """An array of special values (+-0, +-inf, NaN, large and small magnitudes), tiled to `shape`."""
    n = int(np.prod(shape)) if len(shape) else 1
    v = np.resize(np.asarray(values, dtype=np.float64), n).reshape(tuple(shape))
    return cast(v, dtype)


def _noncontig_shape(shapes: ShapeSet) -> tuple[int, ...]:
    multi = [s for s in shapes.pointwise if len(s) >= 2 and min(s) > 1]
    return multi[0] if multi else (5, 3)


def unary(low: float = -3.0, high: float = 3.0, *, special_values: bool = True, avoid: Sequence[float] = (),
          ints: tuple[int, int] = (-20, 20), kwargs: Sequence[dict] = ({},),
          values: Sequence[float] = SPECIAL_VALUES) -> Gen:
    """One tensor argument `input` over every pointwise shape, a non-contiguous view, an empty tensor and an
    array of special values; each `kwargs` entry adds its static arguments (one sample per shape)."""
    def gen(dtype: str, shapes: ShapeSet) -> Iterable[Sample]:
        def t(shape, *key):
            return tensor(shapes, dtype, shape, "unary", *key, low=low, high=high, ints=ints, avoid=avoid)
        for j, kw in enumerate(kwargs):
            pts = shapes.pointwise if j == 0 else shapes.pointwise[-2:]
            for shape in pts:
                yield Sample((t(shape, j),), dict(kw), note=f"{shape}")
        kw = dict(kwargs[0])
        if shapes.noncontig:
            yield Sample((noncontig(t(_noncontig_shape(shapes), "nc")),), kw, note="non-contiguous")
        if shapes.empty:
            yield Sample((t((0, 3)),), kw, note="empty")
        if shapes.special and special_values and is_float(dtype):
            yield Sample((special(dtype, values=values),), kw, note="special values", grad=False)
    return gen


BROADCAST_PAIRS = (((16, 17), (17,)), ((4, 1, 9), (1, 3, 1)), ((5, 1), (1, 6)), ((), (7,)))


def binary(low: float = -3.0, high: float = 3.0, *, other: tuple[float, float] | None = None,
           scalar: float | int | None = None, special_values: bool = True, avoid: Sequence[float] = (),
           ints: tuple[int, int] = (-20, 20), other_ints: tuple[int, int] | None = None,
           kwargs: Sequence[dict] = ({},), names: tuple[str, str] = ("input", "other")) -> Gen:
    """Two tensor arguments: equal shapes, broadcast pairs, a non-contiguous pair, empty tensors, special
    values against finite ones (and the reverse), and tensor-with-Python-scalar if `scalar` is given.
    `other`: the (low, high) range of the second operand (default: the first's); `avoid` applies to it
    (divisors away from 0)."""
    olow, ohigh = other if other is not None else (low, high)
    oints = other_ints or ints

    def gen(dtype: str, shapes: ShapeSet) -> Iterable[Sample]:
        def a(shape, *key):
            return tensor(shapes, dtype, shape, "a", *key, low=low, high=high, ints=ints)

        def b(shape, *key):
            return tensor(shapes, dtype, shape, "b", *key, low=olow, high=ohigh, ints=oints, avoid=avoid)
        for j, kw in enumerate(kwargs):
            pts = shapes.pointwise if j == 0 else shapes.pointwise[-2:]
            for shape in pts:
                yield Sample((a(shape, j), b(shape, j)), dict(kw), note=f"{shape}")
        kw = dict(kwargs[0])
        for sa, sb in BROADCAST_PAIRS[: 2 if shapes.name == "tiny" else None]:
            yield Sample((a(sa), b(sb)), kw, note=f"broadcast {sa} {sb}")
        if shapes.noncontig:
            s = _noncontig_shape(shapes)
            yield Sample((noncontig(a(s, "nc")), noncontig(b(s, "nc"))), kw, note="non-contiguous")
        if shapes.empty:
            yield Sample((a((0, 3)), b((0, 3))), kw, note="empty")
        if scalar is not None:
            s = shapes.pointwise[-1]
            yield Sample((a(s, "s"), scalar), kw, note=f"tensor, scalar {scalar!r}")
        if shapes.special and special_values and is_float(dtype):
            sv = special(dtype)
            fin = tensor(shapes, dtype, sv.shape, "fin", low=olow, high=ohigh, avoid=avoid)
            yield Sample((sv, fin), kw, note="special values, finite", grad=False)
            yield Sample((fin, sv), kw, note="finite, special values", grad=False)
    return gen


def reduction(low: float = -3.0, high: float = 3.0, *, keepdim: bool = True, full: bool = True,
              multi_dim: bool = True, dim_name: str = "dim", ints: tuple[int, int] = (-20, 20),
              special_values: bool = True, empty: bool = True, scalar: bool = True,
              kwargs: Sequence[dict] = ({},)) -> Gen:
    """One tensor `input` reduced along `dim_name`: the last dim and the first, with and without `keepdim`,
    a tuple of dims (`multi_dim`), all dims (`full`: the argument left out), a non-contiguous input, rows
    holding special values, (`empty`) an empty non-reduced axis and (`scalar`) a 0-d input along dim 0 and -1
    (PyTorch treats it as one of shape (1,) there and returns 0-d results)."""
    def gen(dtype: str, shapes: ShapeSet) -> Iterable[Sample]:
        def t(shape, *key):
            return tensor(shapes, dtype, shape, "red", *key, low=low, high=high, ints=ints)
        for j, kw in enumerate(kwargs):
            for shape in shapes.reduction:
                yield Sample((t(shape, j),), {dim_name: -1, **kw}, note=f"{shape} dim=-1")
                if len(shape) >= 2:
                    yield Sample((t(shape, j, 0),), {dim_name: 0, **kw}, note=f"{shape} dim=0")
        kw = dict(kwargs[0])
        shape = shapes.reduction[-1]
        if keepdim:
            yield Sample((t(shape, "k"),), {dim_name: -1, "keepdim": True, **kw}, note=f"{shape} keepdim")
        if multi_dim and len(shape) >= 3:
            yield Sample((t(shape, "m"),), {dim_name: (0, 2), **kw}, note=f"{shape} dims (0, 2)")
        if full:
            yield Sample((t(shape, "f"),), dict(kw), note=f"{shape} all dims")
        if shapes.noncontig:
            s = next((r for r in shapes.reduction if len(r) >= 2 and min(r) > 1), (5, 3))
            yield Sample((noncontig(t(s, "nc")),), {dim_name: -1, **kw}, note="non-contiguous")
        if shapes.empty and empty:
            yield Sample((t((0, 5)),), {dim_name: -1, **kw}, note="empty batch")
        if scalar:
            yield Sample((t((), "0d"),), {dim_name: 0, **kw}, note="0-d, dim=0")
            yield Sample((t((), "0d-1"),), {dim_name: -1, **kw, **({"keepdim": True} if keepdim else {})},
                         note="0-d, dim=-1" + (", keepdim" if keepdim else ""))
        if shapes.special and special_values and is_float(dtype):
            rows = special(dtype, (3, 5), (1.0, 2.0, np.inf, -1.0, 0.5, 1.0, np.nan, 2.0, 3.0, -2.0,
                                           -0.0, 0.0, 1e4, -1e4, 0.25))
            yield Sample((rows,), {dim_name: -1, **kw}, note="special values", grad=False)
    return gen


def chain(*gens: Gen) -> Gen:
    """All samples of several generators."""
    def gen(dtype: str, shapes: ShapeSet) -> Iterable[Sample]:
        for g in gens:
            yield from g(dtype, shapes)
    return gen


def only_float(g: Gen) -> Gen:
    """`g` for float dtypes; nothing otherwise (for operators whose integer inputs make no sense)."""
    def gen(dtype: str, shapes: ShapeSet) -> Iterable[Sample]:
        if is_float(dtype):
            yield from g(dtype, shapes)
    return gen


def pointwise_backward(low: float = -3.0, high: float = 3.0, *, avoid: Sequence[float] = (),
                       of: Callable[[np.ndarray], np.ndarray] | None = None, kwargs: Sequence[dict] = ({},),
                       special_values: bool = True, values: Sequence[float] = SPECIAL_VALUES) -> Gen:
    """(grad_output, x) for the backward of an elementwise function: x uniform in [low, high) away from `avoid`,
    or `of(x)` computed in float64 and rounded to the dtype for backwards that take the forward's output
    (tanh_backward's `output`); over the pointwise shapes, a non-contiguous pair, an empty pair and special
    values of x."""
    def gen(dtype: str, shapes: ShapeSet) -> Iterable[Sample]:
        def pair(shape, *key):
            g = tensor(shapes, dtype, shape, "bwd-g", *key, low=-2.0, high=2.0)
            x = tensor(shapes, "float64", shape, "bwd-x", *key, low=low, high=high, avoid=avoid)
            return g, cast(of(x) if of is not None else x, dtype)
        for j, kw in enumerate(kwargs):
            for shape in shapes.pointwise if j == 0 else shapes.pointwise[-1:]:
                yield Sample(pair(shape, j), dict(kw), note=f"{shape}")
        kw = dict(kwargs[0])
        if shapes.noncontig:
            g, x = pair(_noncontig_shape(shapes), "nc")
            yield Sample((noncontig(g), noncontig(x)), kw, note="non-contiguous")
        if shapes.empty:
            yield Sample(pair((0, 3)), kw, note="empty")
        if shapes.special and special_values and is_float(dtype):
            x = special(dtype, values=values)
            if of is not None:
                with np.errstate(all="ignore"):
                    x = cast(of(x.astype(np.float64)), dtype)
            yield Sample((tensor(shapes, dtype, x.shape, "bwd-gs", low=-2.0, high=2.0), x), kw,
                         note="special values", grad=False)
    return gen


def custom(build: Callable) -> Gen:
    """A generator from `build(T, shapes, dtype)`, where `T(shape, *key, low=, high=, ints=)` draws a tensor of
    the dtype under test, deterministically (keyed by the builder's name and `key`)."""
    def gen(dtype: str, shapes: ShapeSet) -> Iterable[Sample]:
        def T(shape, *key, **kw):
            return tensor(shapes, dtype, shape, build.__name__, *key, **kw)
        yield from build(T, shapes, dtype)
    gen.__name__ = gen.__qualname__ = build.__name__
    gen.__doc__ = build.__doc__
    return gen


def _tiny(shapes: ShapeSet) -> bool:
    return shapes.name == "tiny"


def _images(shapes: ShapeSet):
    return shapes.image


def _spatial(shapes: ShapeSet, nd: int):
    """(N, C, spatial...) shapes from the image set: 1-D rows, 2-D planes, 3-D volumes of depth 3."""
    for n, c, h, w in _images(shapes):
        yield (n, c) + ((w,), (h, w), (3, h, w))[nd - 1]


def builtins_list(it) -> list:
    return [*it]


def nary(*ranges: tuple[float, float], kwargs: Sequence[dict] = ({},), avoid: Sequence[Sequence[float]] = (),
         ints: Sequence[tuple[int, int]] = (), special_values: bool = False,
         broadcast: Sequence[Sequence[tuple[int, ...]]] = (((4, 1, 9), (1, 3, 9), (9,)), ((5, 1), (1, 6), ())),
         ) -> Gen:
    """len(ranges) tensor arguments, the i-th uniform in ranges[i] (integers in ints[i]; `avoid[i]` as in
    `tensor`): every pointwise shape for all, broadcast triples (cut to the arity), a non-contiguous set,
    empty tensors, and (`special_values`) special values in the first argument."""
    k = len(ranges)

    def gen(dtype: str, shapes: ShapeSet) -> Iterable[Sample]:
        def t(i, shape, *key):
            lo, hi = ranges[i]
            return tensor(shapes, dtype, shape, "nary", i, *key, low=lo, high=hi,
                          ints=ints[i] if i < len(ints) else (-20, 20), avoid=avoid[i] if i < len(avoid) else ())
        for j, kw in enumerate(kwargs):
            pts = shapes.pointwise if j == 0 else shapes.pointwise[-2:]
            for shape in pts:
                yield Sample(tuple(t(i, shape, j) for i in range(k)), dict(kw), note=f"{shape}")
        kw = dict(kwargs[0])
        for triple in broadcast[: 1 if shapes.name == "tiny" else None]:
            yield Sample(tuple(t(i, triple[i], "b") for i in range(k)), kw,
                         note="broadcast " + " ".join(str(s) for s in triple[:k]))
        if shapes.noncontig:
            s = _noncontig_shape(shapes)
            yield Sample(tuple(noncontig(t(i, s, "nc")) for i in range(k)), kw, note="non-contiguous")
        if shapes.empty:
            yield Sample(tuple(t(i, (0, 3)) for i in range(k)), kw, note="empty")
        if shapes.special and special_values and is_float(dtype):
            sv = special(dtype)
            yield Sample((sv,) + tuple(t(i, sv.shape, "sv") for i in range(1, k)), kw, note="special values",
                         grad=False)
    return gen


def _mats(shapes: ShapeSet):
    return shapes.matrix


def distinct(shapes: ShapeSet, dtype: str, shape, dim: int, *key) -> np.ndarray:
    """Values distinct along `dim` (a shuffled arange centred on 0, exact in every dtype for lengths up to
    256): sorts and top-k have one right answer, whatever the tie-breaking."""
    rng = shapes.rng("distinct", *key, tuple(shape), dtype)
    shape = tuple(shape)
    dim %= len(shape)
    n = shape[dim]
    moved = (n,) + shape[:dim] + shape[dim + 1:]
    lines = int(np.prod(moved[1:])) if len(moved) > 1 else 1
    cols = np.stack([rng.permutation(n) - n // 2 for _ in range(lines)], 1).reshape(moved)
    return cast(np.moveaxis(cols, 0, dim), dtype)

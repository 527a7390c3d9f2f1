"""Input generators for the library's operators: `samples=` of `xb.ops.register`.

A generator is a function `(dtype, shapes) -> Iterable[Sample]` (see `xbench/ops/__init__.py`). The factories
below build the common ones; operators with unusual arguments write their own, using `tensor`, `noncontig`
and `special` so every generator draws its numbers the same, deterministic way.

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
              special_values: bool = True, empty: bool = True, kwargs: Sequence[dict] = ({},)) -> Gen:
    """One tensor `input` reduced along `dim_name`: the last dim and the first, with and without `keepdim`,
    a tuple of dims (`multi_dim`), all dims (`full`: the argument left out), a non-contiguous input, rows
    holding special values and (`empty`) an empty non-reduced axis."""
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


# ---- generators for matmul, convolution, pooling, resampling, padding, indexing, embedding, attention,
# sorting, shape and fused operators -----------------------------------------------------------------------

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


def _mats(shapes: ShapeSet):
    return shapes.matrix


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


# convolution --------------------------------------------------------------------------------------------

def _images(shapes: ShapeSet):
    return shapes.image


def conv_cases(nd: int) -> Gen:
    """conv{nd}d(input, weight, bias, stride=, padding=, dilation=, groups=) over the image shapes (their last
    nd dims), with strided, padded, dilated and grouped variants."""
    @custom
    def conv(T, shapes, dtype):
        for n, c, h, w in _images(shapes):
            spatial = ((w,), (h, w), (3, h, w))[nd - 1]
            k = 3 if min(spatial) >= 3 else 2
            yield Sample((T((n, c) + spatial, "x"), T((4, c) + (k,) * nd, "w"), T((4,), "b")),
                         note=f"{(n, c) + spatial} k{k}")
        n, c, h, w = _images(shapes)[-1]
        spatial = ((w,), (h, w), (3, h, w))[nd - 1]
        x = T((n, 4) + spatial, "xv")
        variants = [dict(stride=2, padding=1), dict(padding=2, dilation=2), dict(groups=2, padding="same")]
        for j, kw in enumerate(variants[:1] if _tiny(shapes) else variants):
            cg = 4 // kw.get("groups", 1)
            yield Sample((x, T((6, cg) + (2,) * nd, "wv", j)), kw, note=str(kw))
    conv.__name__ = f"conv{nd}d_cases"
    return conv


def conv_transpose_cases(nd: int) -> Gen:
    """conv_transpose{nd}d(input, weight [in, out / groups, k...], bias, stride, padding, output_padding, groups,
    dilation)."""
    @custom
    def convt(T, shapes, dtype):
        for n, c, h, w in _images(shapes):
            spatial = ((w,), (h, w), (2, h, w))[nd - 1]
            yield Sample((T((n, c) + spatial, "x"), T((c, 3) + (3,) * nd, "w"), T((3,), "b")),
                         note=f"{(n, c) + spatial}")
        n, c, h, w = _images(shapes)[-1]
        spatial = ((w,), (h, w), (2, h, w))[nd - 1]
        x = T((n, 4) + spatial, "xv")
        variants = [dict(stride=2, padding=1, output_padding=1), dict(groups=2, dilation=2),
                    dict(stride=3, padding=2)]
        for j, kw in enumerate(variants[:1] if _tiny(shapes) else variants):
            yield Sample((x, T((4, 2) + (3,) * nd, "wv", j)), kw, note=str(kw))
    convt.__name__ = f"conv_transpose{nd}d_cases"
    return convt


@custom
def depthwise_cases(T, shapes, dtype):
    """_conv_depthwise2d(self, weight [C * m, 1, kH, kW], kernel_size, bias, stride, padding, dilation)."""
    for n, c, h, w in _images(shapes):
        yield Sample((T((n, c, h, w), "x"), T((2 * c, 1, 3, 3), "w"), (3, 3), T((2 * c,), "b"), (1, 1), (1, 1),
                      (1, 1)), note=f"{(n, c, h, w)}")
    n, c, h, w = _images(shapes)[-1]
    yield Sample((T((n, c, h, w), "x2"), T((c, 1, 2, 3), "w2"), (2, 3), None, (2, 1), (1, 0), (1, 2)),
                 note="strided, dilated, no bias")


@custom
def im2col_cases(T, shapes, dtype):
    """im2col(input, kernel_size, dilation, padding, stride)."""
    for n, c, h, w in _images(shapes):
        yield Sample((T((n, c, h, w), "x"), (2, 3), 1, 0, 1), note=f"{(n, c, h, w)}")
    n, c, h, w = _images(shapes)[-1]
    yield Sample((T((n, c, h, w), "x2"), 3, 2, 1, 2), note="dilated, padded, strided")


@custom
def col2im_cases(T, shapes, dtype):
    """col2im(input [N, C * kH * kW, L], output_size, kernel_size, dilation, padding, stride)."""
    for n, c, h, w in _images(shapes):
        blocks = (h - 1) * (w - 2)
        yield Sample((T((n, c * 6, blocks), "x"), (h, w), (2, 3), 1, 0, 1), note=f"{(n, c, h, w)}")
    n, c, h, w = _images(shapes)[-1]
    oh, ow = (h + 2 - 4 - 1) // 2 + 1, (w + 2 - 4 - 1) // 2 + 1
    yield Sample((T((n, c * 9, oh * ow), "x2"), (h, w), 3, 2, 1, 2), note="dilated, padded, strided")


# pooling ------------------------------------------------------------------------------------------------

def pool_cases(nd: int, kind: str) -> Gen:
    """Pooling over the image shapes' last nd dims: kind "max" (kernel, stride, padding, dilation, ceil_mode)
    or "avg" (kernel, stride, padding, ceil_mode, count_include_pad[, divisor_override])."""
    @custom
    def pool(T, shapes, dtype):
        for n, c, h, w in _images(shapes):
            spatial = ((w,), (h, w), (3, h, w))[nd - 1]
            yield Sample((T((n, c) + spatial, "x"), 2), note=f"{(n, c) + spatial} k2")
        n, c, h, w = _images(shapes)[-1]
        spatial = ((w,), (h, w), (3, h, w))[nd - 1]
        x = T((n, c) + spatial, "xv")
        if kind == "max":
            variants = [dict(stride=2, padding=1, ceil_mode=True), dict(stride=1, padding=1, dilation=2),
                        dict(stride=2, padding=1)]
        else:
            variants = [dict(stride=2, padding=1, ceil_mode=True), dict(stride=2, padding=1, count_include_pad=False),
                        dict(stride=1, padding=1, ceil_mode=True, count_include_pad=False)]
            if nd >= 2:
                variants.append(dict(stride=2, divisor_override=3))
        for kw in variants[:1] if _tiny(shapes) else variants:
            yield Sample((x, 3), kw, note=str(kw))
    pool.__name__ = f"{kind}_pool{nd}d_cases"
    return pool


def adaptive_cases(nd: int) -> Gen:
    """Adaptive pooling to sizes that divide the input, that do not, and that are larger than it."""
    @custom
    def adaptive(T, shapes, dtype):
        for n, c, h, w in _images(shapes):
            spatial = ((w,), (h, w), (3, h, w))[nd - 1]
            for out in ((1,) * nd, tuple(max(1, (s + 1) // 2) for s in spatial), tuple(s + 1 for s in spatial)):
                yield Sample((T((n, c) + spatial, "x", out), out), note=f"{(n, c) + spatial} -> {out}")
    adaptive.__name__ = f"adaptive_pool{nd}d_cases"
    return adaptive


@custom
def max_unpool2d_cases(T, shapes, dtype):
    """max_unpool2d(self, indices, output_size) with the indices of a 2x2 max pool over distinct values."""
    for n, c, h, w in _images(shapes):
        oh, ow = h // 2, w // 2
        rng = shapes.rng("max_unpool2d", n, c, h, w)
        r, s = rng.integers(0, 2, (n, c, oh, ow)), rng.integers(0, 2, (n, c, oh, ow))
        idx = ((np.arange(oh)[:, None] * 2 + r) * w + (np.arange(ow)[None, :] * 2 + s)).astype(np.int64)
        yield Sample((T((n, c, oh, ow), "v"), idx, (h, w)), note=f"{(n, c, h, w)}")


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


# resampling ---------------------------------------------------------------------------------------------

def _spatial(shapes: ShapeSet, nd: int):
    """(N, C, spatial...) shapes from the image set: 1-D rows, 2-D planes, 3-D volumes of depth 3."""
    for n, c, h, w in _images(shapes):
        yield (n, c) + ((w,), (h, w), (3, h, w))[nd - 1]


def upsample_cases(nd: int, kind: str) -> Gen:
    """ATen upsample_*: (self, output_size[, align_corners], scales...) — enlarging, shrinking, and sizes
    given with their scale factors; kind "nearest" or "linear" (linear, bilinear, bicubic, trilinear)."""
    @custom
    def up(T, shapes, dtype):
        for shape in _spatial(shapes, nd):
            spatial = shape[2:]
            for out in (tuple(2 * s + 1 for s in spatial), tuple(max(1, s // 2 + 1) for s in spatial)):
                x = T(shape, "x", out)
                if kind == "nearest":
                    yield Sample((x, out), note=f"{shape} -> {out}")
                else:
                    for ac in (False, True):
                        yield Sample((x, out, ac), note=f"{shape} -> {out} align_corners={ac}")
        shape = builtins_list(_spatial(shapes, nd))[-1]
        out = tuple(int(s * 1.5) for s in shape[2:])
        scales = (1.5,) * nd
        extra = (False,) if kind != "nearest" else ()
        yield Sample((T(shape, "s"), out) + extra + scales, note=f"{shape} scales 1.5")
    up.__name__ = f"upsample_{kind}{nd}d_cases"
    return up


def builtins_list(it) -> list:
    return [*it]


@custom
def interpolate_cases(T, shapes, dtype):
    """F.interpolate with size or scale_factor over every mode."""
    n, c, h, w = _images(shapes)[-1]
    x1, x2, x3 = T((n, c, w), "x1"), T((n, c, h, w), "x2"), T((n, c, 3, h, w), "x3")
    yield Sample((x2,), dict(size=(2 * h, w + 3)), note="nearest, size")
    yield Sample((x2,), dict(scale_factor=1.7), note="nearest, scale_factor")
    yield Sample((x2,), dict(scale_factor=2, mode="bilinear", align_corners=False), note="bilinear x2")
    if _tiny(shapes):
        return
    yield Sample((x2,), dict(size=(h + 3, w - 2), mode="bilinear", align_corners=True), note="bilinear corners")
    yield Sample((x2,), dict(size=(h + 3, w + 2), mode="bicubic", align_corners=False), note="bicubic")
    yield Sample((x2,), dict(scale_factor=1.5, mode="nearest-exact"), note="nearest-exact")
    yield Sample((x2,), dict(size=(3, 4), mode="area"), note="area")
    yield Sample((x1,), dict(scale_factor=2.5, mode="linear", recompute_scale_factor=True), note="linear, recompute")
    yield Sample((x3,), dict(size=(4, h + 1, w - 1), mode="trilinear", align_corners=False), note="trilinear")


@custom
def grid_sample_cases(T, shapes, dtype):
    """grid_sample(input, grid, mode, padding_mode, align_corners) with grid points partly outside [-1, 1]."""
    n, c, h, w = _images(shapes)[-1]
    x = T((n, c, h, w), "x")
    grid = T((n, 5, 4, 2), "g", low=-1.3, high=1.3)
    combos = [("bilinear", "zeros", False), ("nearest", "border", True), ("bicubic", "reflection", False)]
    if not _tiny(shapes):
        combos += [("bilinear", "border", True), ("bilinear", "reflection", True), ("nearest", "zeros", False),
                   ("nearest", "reflection", False), ("bicubic", "zeros", True), ("bicubic", "border", False),
                   ("bilinear", "reflection", False)]
    for mode, pad, ac in combos:
        yield Sample((x, grid), dict(mode=mode, padding_mode=pad, align_corners=ac), note=f"{mode} {pad} {ac}",
                     grad=mode != "nearest")


@custom
def affine_grid_cases(T, shapes, dtype):
    """affine_grid_generator(theta, size, align_corners) for 2-D and 3-D sizes."""
    n, c, h, w = _images(shapes)[-1]
    for ac in (False, True):
        yield Sample((T((n, 2, 3), "t2", ac), (n, c, h, w), ac), note=f"2-D align_corners={ac}")
    yield Sample((T((n, 3, 4), "t3"), (n, c, 3, h, w), False), note="3-D")
    yield Sample((T((n, 2, 3), "t1"), (n, c, 1, w), True), note="height 1")


@custom
def pixel_shuffle_cases(T, shapes, dtype):
    for n, c, h, w in _images(shapes):
        yield Sample((T((n, 4 * c, h, w), "x"), 2), note=f"{(n, 4 * c, h, w)} r=2")
    yield Sample((T((2, 9, 2, 3), "x3"), 3), note="r=3")
    yield Sample((T((2, 2, 8, 3, 2), "x5"), 2), note="two leading dims")


@custom
def pixel_unshuffle_cases(T, shapes, dtype):
    for n, c, h, w in _images(shapes):
        yield Sample((T((n, c, 2 * h, 2 * w), "x"), 2), note=f"{(n, c, 2 * h, 2 * w)} r=2")
    yield Sample((T((2, 1, 6, 9), "x3"), 3), note="r=3")


# padding ------------------------------------------------------------------------------------------------

@custom
def constant_pad_cases(T, shapes, dtype):
    """constant_pad_nd(self, pad, value): one, two and three padded dims, a crop, a fill value."""
    n, c, h, w = _images(shapes)[-1]
    x = T((n, c, h, w), "x")
    yield Sample((x, (1, 2)), note="last dim")
    yield Sample((x, (2, 0, 1, 3), 1), note="two dims, value 1")
    if not _tiny(shapes):
        yield Sample((x, (1, 1, -1, 2, 0, 1)), note="three dims, a crop")
        yield Sample((T((17,), "v"), (3, 4)), note="1-D")
    if shapes.noncontig:
        yield Sample((noncontig(T((5, 7), "nc")), (1, 2, 2, 1)), note="non-contiguous")


@custom
def pad_cases(T, shapes, dtype):
    """F.pad in every mode."""
    n, c, h, w = _images(shapes)[-1]
    x = T((n, c, h, w), "x")
    yield Sample((x, (1, 2, 2, 1)), note="constant")
    yield Sample((x, (2, 1, 1, 3)), dict(mode="reflect"), note="reflect")
    yield Sample((x, (3, 1, 0, 2)), dict(mode="replicate"), note="replicate")
    if not _tiny(shapes):
        yield Sample((x, (1, 3, 2, 2)), dict(mode="circular"), note="circular")
        yield Sample((x, (1, 1)), dict(mode="constant", value=-2.0 if is_float(dtype) else -2), note="value")
        yield Sample((T((n, c, w), "x1"), (2, 3)), dict(mode="reflect"), note="reflect 1-D")


def fixed_pad_cases(nd: int, mode: str) -> Gen:
    """reflection_pad{nd}d / replication_pad{nd}d(self, padding) over batched and unbatched inputs."""
    @custom
    def fixed(T, shapes, dtype):
        for shape in _spatial(shapes, nd):
            lim = min(shape[2:]) - 1
            padding = tuple(min(lim, p) for p in (2, 1, 1, 2, 1, 0)[:2 * nd])
            yield Sample((T(shape, "x"), padding), note=f"{shape} {padding}")
        shape = builtins_list(_spatial(shapes, nd))[-1]
        yield Sample((T(shape[1:], "u"), (1,) * (2 * nd)), note="unbatched")
    fixed.__name__ = f"{mode}_pad{nd}d_cases"
    return fixed


# indexing -----------------------------------------------------------------------------------------------

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


@custom
def gather_cases(T, shapes, dtype):
    """torch.gather(self, dim, index): index as large as self, and smaller in every dim."""
    x = T((5, 6, 4), "x")
    rng = shapes.rng("gather")
    for dim in (0, 1, 2):
        yield Sample((x, dim, rng.integers(0, x.shape[dim], (5, 6, 4)).astype(np.int64)), note=f"dim={dim}")
    yield Sample((x, 1, rng.integers(0, 6, (3, 9, 2)).astype(np.int64)), note="index smaller in other dims")


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


@custom
def scatter_cases(T, shapes, dtype):
    """scatter(self, dim, index, src | value, reduce) with one writer per target."""
    rng = shapes.rng("scatter")
    x = T((6, 5), "x")
    yield Sample((x, 0, _perm_index(rng, (4, 5), 0, 6), T((4, 5), "s")), note="dim 0")
    yield Sample((x, 1, _perm_index(rng, (6, 3), 1, 5), T((7, 4), "s2")), note="dim 1, src larger")
    yield Sample((x, 1, _perm_index(rng, (3, 2), 1, 5)), dict(value=_fill_value(dtype)), note="value")
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


@custom
def index_add_cases(T, shapes, dtype):
    """index_add / index_copy(self, dim, index, source): distinct indices (copy needs one writer each)."""
    rng = shapes.rng("index_add")
    x = T((6, 5), "x")
    yield Sample((x, 0, rng.permutation(6)[:4].astype(np.int64), T((4, 5), "s")), note="dim 0")
    yield Sample((T((3, 7, 2), "x3"), 1, rng.permutation(7)[:3].astype(np.int64), T((3, 3, 2), "s3")),
                 note="3-D, dim 1")


@custom
def index_fill_cases(T, shapes, dtype):
    rng = shapes.rng("index_fill")
    x = T((6, 5), "x")
    yield Sample((x, 1, rng.integers(0, 5, 3).astype(np.int64), _fill_value(dtype)), note="dim 1")
    yield Sample((x, 0, np.array([0, 5, 5], np.int64), _fill_value(dtype, 1.0)), note="dim 0, repeats")


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


# embedding ----------------------------------------------------------------------------------------------

@custom
def embedding_cases(T, shapes, dtype):
    """embedding(input, weight, padding_idx, max_norm, norm_type): index tensors of rank 1-3, max_norm."""
    rng = shapes.rng("embedding")
    vocab, dim = (7, 4) if _tiny(shapes) else (50, 16)
    w = T((vocab, dim), "w")
    for shape in ((5,), (3, 4)) if _tiny(shapes) else ((5,), (3, 4), (2, 3, 17)):
        yield Sample((rng.integers(0, vocab, shape).astype(np.int64), w), note=f"indices {shape}")
    idx = rng.integers(0, vocab, (4, 3)).astype(np.int64)
    # PyTorch's gradient skips the padding row; xbench's autodiff of the lookup does not (no stop_gradient)
    yield Sample((idx, w), dict(padding_idx=1), note="padding_idx", grad=False)
    big = T((vocab, dim), "wb", low=-2.0, high=2.0)
    for p in (2.0, 1.0, float("inf")):
        yield Sample((idx, big), dict(max_norm=1.5, norm_type=p), note=f"max_norm 1.5, norm {p}", grad=False)


@custom
def embedding_backward_cases(T, shapes, dtype):
    """embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)."""
    rng = shapes.rng("embedding_backward")
    vocab, dim = (6, 3) if _tiny(shapes) else (20, 8)
    idx = rng.integers(0, vocab, (4, 5)).astype(np.int64)
    g = T((4, 5, dim), "g")
    yield Sample((g, idx, vocab, -1, False), note="plain")
    yield Sample((g, idx, vocab, int(idx[0, 0]), False), note="padding_idx")
    # PyTorch's double backward of this operator ignores scale_grad_by_freq, so torch.autograd is no oracle here
    yield Sample((g, idx, vocab, -1, True), note="scale_grad_by_freq", grad=False)


@custom
def one_hot_cases(T, shapes, dtype):
    for shape in ((7,), (3, 4)):
        yield Sample((T(shape, "i", ints=(0, 5)), 5), note=f"{shape}")
    yield Sample((T((2, 3), "j", ints=(0, 3)), 8), note="more classes than values")


# attention ----------------------------------------------------------------------------------------------

def _qkv_shapes(shapes: ShapeSet):
    """(B, H, L, S, E) attention problems: a tiny one for the slow backends, then longer and unaligned ones."""
    if _tiny(shapes):
        return ((1, 2, 5, 5, 4),)
    return ((1, 1, 1, 1, 4), (2, 3, 17, 17, 8), (2, 2, 9, 33, 16))


@custom
def sdpa_cases(T, shapes, dtype):
    """scaled_dot_product_attention: plain, causal, boolean and additive masks, scale, grouped-query heads,
    unbatched 3-D inputs."""
    rng = shapes.rng("sdpa")
    for b, h, lq, lk, e in _qkv_shapes(shapes):
        q, k, v = T((b, h, lq, e), "q"), T((b, h, lk, e), "k"), T((b, h, lk, e), "v")
        yield Sample((q, k, v), note=f"{(b, h, lq, lk, e)}")
        yield Sample((q, k, v), dict(is_causal=True), note=f"{(b, h, lq, lk, e)} causal")
    b, h, lq, lk, e = _qkv_shapes(shapes)[-1]
    q, k, v = T((b, h, lq, e), "q2"), T((b, h, lk, e), "k2"), T((b, h, lk, e), "v2")
    mask = rng.random((lq, lk)) < 0.7
    mask[:, 0] = True
    yield Sample((q, k, v, mask), note="boolean mask")
    yield Sample((q, k, v, T((b, 1, lq, lk), "bias")), dict(scale=0.3), note="additive mask, scale 0.3")
    if not _tiny(shapes):
        yield Sample((q, T((b, 1, lk, e), "k1"), T((b, 1, lk, e), "v1")), dict(enable_gqa=True), note="GQA")
        yield Sample((T((7, 8), "q3"), T((5, 8), "k3"), T((5, 6), "v3")), note="2-D, value width 6")
        dead = mask.copy()
        dead[1] = False
        yield Sample((q, k, v, dead), note="a row with no key (gives 0)", grad=False)


@custom
def flash_sdpa_cases(T, shapes, dtype):
    """_scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, return_debug_mask, scale)."""
    for b, h, lq, lk, e in _qkv_shapes(shapes):
        q, k, v = T((b, h, lq, e), "q"), T((b, h, lk, e), "k"), T((b, h, lk, e), "v")
        yield Sample((q, k, v), note=f"{(b, h, lq, lk, e)}")
        yield Sample((q, k, v, 0.0, True), dict(scale=0.25), note=f"{(b, h, lq, lk, e)} causal, scale")


@custom
def efficient_sdpa_cases(T, shapes, dtype):
    """_scaled_dot_product_efficient_attention(query, key, value, attn_bias, compute_log_sumexp, dropout_p,
    is_causal, scale)."""
    for b, h, lq, lk, e in _qkv_shapes(shapes):
        q, k, v = T((b, h, lq, e), "q"), T((b, h, lk, e), "k"), T((b, h, lk, e), "v")
        yield Sample((q, k, v, T((b, h, lq, lk), "bias"), True), note=f"{(b, h, lq, lk, e)} bias")
        yield Sample((q, k, v, None, True, 0.0, True), note=f"{(b, h, lq, lk, e)} causal")
    yield Sample((q, k, v, None, False), note="no log-sum-exp")


@custom
def flash_forward_cases(T, shapes, dtype):
    """_flash_attention_forward: dense [B, L, H, E] with causal, sliding window, ALiBi and grouped-query heads;
    varlen packed sequences (cum_seq int32)."""
    b, h, lq, lk, e = (1, 2, 4, 5, 4) if _tiny(shapes) else (2, 4, 9, 12, 8)
    q, k, v = T((b, lq, h, e), "q"), T((b, lk, h, e), "k"), T((b, lk, h, e), "v")
    yield Sample((q, k, v, None, None, lq, lk, 0.0, False, False), note="dense")
    yield Sample((q, k, v, None, None, lq, lk, 0.0, True, False), note="dense causal (bottom-right)")
    yield Sample((q, k, v, None, None, lq, lk, 0.0, False, False),
                 dict(window_size_left=2, window_size_right=1), note="sliding window 2/1")
    if not _tiny(shapes):
        slopes = np.asarray(2.0 ** -np.arange(1, h + 1), np.float32)
        yield Sample((q, k, v, None, None, lq, lk, 0.0, True, False), dict(alibi_slopes=slopes), note="ALiBi")
        yield Sample((q, T((b, lk, 2, e), "k2"), T((b, lk, 2, e), "v2"), None, None, lq, lk, 0.0, False, False),
                     note="GQA (2 kv heads)")
    cq = np.array([0, 3, 5, 9], np.int32) if not _tiny(shapes) else np.array([0, 2, 4], np.int32)
    ck = np.array([0, 4, 9, 12], np.int32) if not _tiny(shapes) else np.array([0, 3, 5], np.int32)
    tq, tk = int(cq[-1]), int(ck[-1])
    qp, kp, vp = T((tq, h, e), "qp"), T((tk, h, e), "kp"), T((tk, h, e), "vp")
    mq, mk = int(np.diff(cq).max()), int(np.diff(ck).max())
    yield Sample((qp, kp, vp, cq, ck, mq, mk, 0.0, False, False), note="varlen")
    yield Sample((qp, kp, vp, cq, ck, mq, mk, 0.0, True, False), note="varlen causal")


# sorting ------------------------------------------------------------------------------------------------

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


@custom
def topk_cases(T, shapes, dtype):
    """topk(self, k, dim, largest) over distinct values."""
    for shape in _sort_shapes(shapes):
        x = distinct(shapes, dtype, shape, -1, "topk")
        for k, largest in ((1, True), (min(3, shape[-1]), False), (shape[-1], True)):
            yield Sample((x, k, -1, largest), note=f"{shape} k={k} largest={largest}")
    x = distinct(shapes, dtype, (6, 4), 0, "topk0")
    yield Sample((x, 2, 0), note="dim 0")


@custom
def kthvalue_cases(T, shapes, dtype):
    for shape in _sort_shapes(shapes):
        x = distinct(shapes, dtype, shape, -1, "kth")
        yield Sample((x, 1), note=f"{shape} k=1")
        yield Sample((x, shape[-1] // 2 + 1, -1, True), note=f"{shape} middle, keepdim")
    x = distinct(shapes, dtype, (7, 3), 0, "kth0")
    yield Sample((x, 3, 0), note="dim 0")


@custom
def median_cases(T, shapes, dtype):
    for shape in _sort_shapes(shapes):
        x = distinct(shapes, dtype, shape, -1, "median")
        yield Sample((x, -1), note=f"{shape} dim=-1")
    x = distinct(shapes, dtype, (6, 5), 0, "median0")
    yield Sample((x, 0, True), note="dim 0 keepdim")
    yield Sample((distinct(shapes, dtype, (24,), 0, "all").reshape(4, 6),), note="all elements")


@custom
def mode_cases(T, shapes, dtype):
    """Values from a small pool (runs of repeats), ties between equally frequent values."""
    for shape in ((9,), (4, 12), (3, 5, 7)):
        x = T(shape, "m", ints=(-3, 3))
        if is_float(dtype):
            x = cast(np.round(x.astype(np.float64)), dtype)
        yield Sample((x, -1), note=f"{shape}")
    yield Sample((x, 1, True), note="dim 1 keepdim")


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


# shape --------------------------------------------------------------------------------------------------

def _shape_x(T, shapes, key="x"):
    return T((3, 4, 5) if _tiny(shapes) else (4, 6, 17), key)


@custom
def chunk_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, 3, 1), note="3 chunks of dim 1")
    yield Sample((x, 4, -1), note="4 chunks of the last dim")
    yield Sample((x, 2), note="dim 0")


@custom
def tensor_split_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, 3, 1), note="3 sections")
    yield Sample((x, (1, 3), -1), note="indices (1, 3)")
    yield Sample((x, (2, 9, 1), 2), note="indices past the end and decreasing")


@custom
def unbind_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x,), note="dim 0")
    yield Sample((x, 1), note="dim 1")


@custom
def flip_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, (0,)), note="dim 0")
    yield Sample((x, (0, 2)), note="dims 0, 2")
    if shapes.noncontig:
        yield Sample((noncontig(T((5, 3), "nc")), (1,)), note="non-contiguous")


@custom
def roll_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, 2), note="flattened")
    yield Sample((x, 3, 1), note="dim 1")
    yield Sample((x, (1, -7), (0, 2)), note="two dims, negative shift")


@custom
def rot90_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    for k in (1, 2, 3, -1):
        yield Sample((x, k), note=f"k={k}")
    yield Sample((x, 1, (2, 0)), note="dims (2, 0)")


@custom
def repeat_cases(T, shapes, dtype):
    x = T((3, 4), "x")
    yield Sample((x, (2, 3)), note="(2, 3)")
    yield Sample((x, (2, 1, 2)), note="a new leading dim")
    yield Sample((T((5,), "v"), (1, 3)), note="1-D")


@custom
def tile_cases(T, shapes, dtype):
    x = T((3, 4), "x")
    yield Sample((x, (2,)), note="fewer reps than dims")
    yield Sample((x, (2, 1, 3)), note="more reps than dims")


@custom
def repeat_interleave_cases(T, shapes, dtype):
    x = T((3, 4), "x")
    yield Sample((x, 2), note="int, flattened")
    yield Sample((x, 3, 1), note="int, dim 1")
    reps = np.array([1, 0, 3], np.int64)
    yield Sample((x, reps, 0), dict(output_size=4), note="tensor repeats, dim 0")


@custom
def expand_cases(T, shapes, dtype):
    yield Sample((T((3, 1), "x"), (3, 5)), note="(3, 1) -> (3, 5)")
    yield Sample((T((1, 4), "y"), (2, -1, 4)), note="new dim, -1")


@custom
def permute_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, (2, 0, 1)), note="(2, 0, 1)")
    yield Sample((x, (1, 0, -1)), note="(1, 0, -1)")


@custom
def transpose_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, 0, 2), note="0, 2")
    yield Sample((T((5, 7), "m"), -1, 0), note="matrix")


@custom
def movedim_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, 0, -1), note="0 -> -1")
    yield Sample((x, (0, 1), (2, 0)), note="two dims")


@custom
def copy_cases(T, shapes, dtype):
    for shape in shapes.pointwise[:3]:
        yield Sample((T(shape, "x"),), note=f"{shape}")
    if shapes.noncontig:
        yield Sample((noncontig(T((5, 3), "nc")),), note="non-contiguous")


@custom
def to_copy_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x,), note="same dtype")
    for target in ("float32", "float16", "int32", "bool"):
        if target != dtype:
            yield Sample((x,), dict(dtype=target), note=f"to {target}", grad=False)


@custom
def copy__cases(T, shapes, dtype):
    x = T((4, 5), "x")
    yield Sample((x, T((4, 5), "s")), note="same shape")
    yield Sample((x, T((5,), "s2")), note="broadcast src")


@custom
def flatten_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x,), note="all")
    yield Sample((x, 1), note="from dim 1")
    yield Sample((T((2, 3, 4, 5), "x4"), 1, 2), note="dims 1..2")


@custom
def unflatten_cases(T, shapes, dtype):
    yield Sample((T((4, 12), "x"), 1, (3, 4)), note="12 -> 3 x 4")
    yield Sample((T((6, 5), "y"), 0, (2, -1)), note="-1")


@custom
def reshape_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, (-1,)), note="flat")
    yield Sample((x, (x.shape[0] * x.shape[1], -1)), note="2-D")
    if shapes.noncontig:
        yield Sample((noncontig(T((5, 3), "nc")), (3, 5)), note="non-contiguous")


@custom
def unsqueeze_cases(T, shapes, dtype):
    x = T((3, 4), "x")
    for d in (0, 1, 2, -1):
        yield Sample((x, d), note=f"dim {d}")


@custom
def squeeze_cases(T, shapes, dtype):
    x = T((3, 1, 4, 1), "x")
    yield Sample((x,), note="all size-1 dims")
    yield Sample((x, 1), note="dim 1")
    yield Sample((x, 0), note="dim 0 (size 3: unchanged)")
    yield Sample((x, (1, 3)), note="dims (1, 3)")


@custom
def narrow_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, 1, 1, 2), note="dim 1")
    yield Sample((x, -1, -3, 2), note="negative start")


@custom
def select_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, 1, 2), note="dim 1")
    yield Sample((x, -1, -1), note="last")


@custom
def unfold_cases(T, shapes, dtype):
    x = _shape_x(T, shapes)
    yield Sample((x, 2, 3, 1), note="size 3 step 1")
    yield Sample((x, 1, 2, 2), note="size 2 step 2")


@custom
def tri_cases(T, shapes, dtype):
    for shape in ((5, 5), (4, 7), (2, 6, 3)):
        x = T(shape, "x")
        yield Sample((x,), note=f"{shape}")
        yield Sample((x, 1), note=f"{shape} diagonal 1")
        yield Sample((x, -2), note=f"{shape} diagonal -2")


@custom
def diag_cases(T, shapes, dtype):
    yield Sample((T((5,), "v"),), note="vector")
    yield Sample((T((4,), "v2"), -2), note="vector, diagonal -2")
    x = T((4, 6), "m")
    for k in (0, 2, -3):
        yield Sample((x, k), note=f"matrix, diagonal {k}")


@custom
def diag_embed_cases(T, shapes, dtype):
    x = T((2, 4), "x")
    yield Sample((x,), note="default")
    yield Sample((x, 1), note="offset 1")
    yield Sample((x, -1, 0, 2), note="dims 0, 2")


# fused --------------------------------------------------------------------------------------------------

def _rows(shapes: ShapeSet):
    """(tokens, hidden) problems."""
    return ((3, 8),) if _tiny(shapes) else ((1, 16), (17, 64), (2, 5, 128))


@custom
def gated_pair_cases(T, shapes, dtype):
    """Two same-shaped activations, and a broadcast gate."""
    for shape in _rows(shapes):
        yield Sample((T(shape, "a"), T(shape, "b")), note=f"{shape}")
    shape = _rows(shapes)[-1]
    yield Sample((T(shape, "a2"), T(shape[-1:], "b2")), note="broadcast B")


@custom
def gelu_and_mul_cases(T, shapes, dtype):
    for shape in _rows(shapes):
        yield Sample((T(shape, "a"), T(shape, "b")), note=f"{shape}")
        yield Sample((T(shape, "a"), T(shape, "b")), dict(approximate="tanh"), note=f"{shape} tanh")


@custom
def swiglu_cases(T, shapes, dtype):
    for shape in _rows(shapes):
        yield Sample((T(shape[:-1] + (2 * shape[-1],), "x"),), note=f"{shape[:-1] + (2 * shape[-1],)}")


@custom
def fused_add_rms_norm_cases(T, shapes, dtype):
    for shape in _rows(shapes):
        n = shape[-1]
        yield Sample((T(shape, "x"), T(shape, "r"), (n,), T((n,), "w")), note=f"{shape}")
    shape = _rows(shapes)[-1]
    yield Sample((T(shape, "x2"), T(shape, "r2"), (shape[-1],), T((shape[-1],), "w2"), 1e-3), note="eps 1e-3")


@custom
def skip_layer_norm_cases(T, shapes, dtype):
    for shape in _rows(shapes):
        n = shape[-1]
        yield Sample((T(shape, "x"), T(shape, "r"), (n,), T((n,), "w"), T((n,), "b")), note=f"{shape}")


@custom
def rope_cases(T, shapes, dtype):
    """apply_rotary_pos_emb(q, k, cos, sin, position_ids, rotary_interleaved): [batch, seq, heads, dim] without
    position ids, packed tokens with them, grouped-query k heads, both rotation styles."""
    b, s, hq, hk, d = (1, 3, 2, 1, 4) if _tiny(shapes) else (2, 7, 4, 2, 16)
    ang = np.arange(16)[:, None] * (1.0 / 10000.0 ** (np.arange(d // 2) / (d // 2)))[None, :]
    cos, sin = cast(np.cos(ang), dtype), cast(np.sin(ang), dtype)
    q, k = T((b, s, hq, d), "q"), T((b, s, hk, d), "k")
    for inter in (False, True):
        yield Sample((q, k, cos, sin), dict(rotary_interleaved=inter), note=f"4-D, interleaved={inter}")
    pos = shapes.rng("rope").integers(0, 16, (5,)).astype(np.int64)
    yield Sample((T((5, hq, d), "qt"), T((5, hk, d), "kt"), cos, sin, pos), note="tokens with position ids")
    yield Sample((T((5, hq, d), "qt"), T((5, hk, d), "kt"), cos, sin, pos, True), note="tokens, interleaved")


@custom
def cross_entropy_cases(T, shapes, dtype):
    """cross_entropy_loss(inp, target, weight, reduction, ignore_index, label_smoothing)."""
    rng = shapes.rng("cross_entropy")
    n, c = (4, 5) if _tiny(shapes) else (17, 10)
    x = T((n, c), "x")
    tgt = rng.integers(0, c, n).astype(np.int64)
    tgt_ign = tgt.copy()
    tgt_ign[::3] = -100
    w = T((c,), "w", low=0.5, high=2.0)
    for red in ("mean", "sum", "none"):
        yield Sample((x, tgt), dict(reduction=red), note=f"indices, {red}")
    yield Sample((x, tgt_ign, w), note="weights, ignore_index")
    yield Sample((x, tgt_ign), dict(label_smoothing=0.1), note="label smoothing, ignore_index")
    if not _tiny(shapes):
        yield Sample((x, tgt, w), dict(label_smoothing=0.2, reduction="sum"), note="weights, smoothing, sum")
        probs = rng.random((n, c))
        probs = cast(probs / probs.sum(1, keepdims=True), dtype)
        yield Sample((x, probs), note="probabilities")
        yield Sample((x, probs, w), dict(label_smoothing=0.1, reduction="none"), note="probabilities, weights")
        yield Sample((T((3, c, 4, 5), "img"), rng.integers(0, c, (3, 4, 5)).astype(np.int64)),
                     note="per-pixel targets")
        yield Sample((T((c,), "one"), np.asarray(np.int64(2))), note="unbatched")


@custom
def instance_norm_cases(T, shapes, dtype):
    """instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps)."""
    for n, c, h, w in _images(shapes):
        if h * w < 2:
            continue
        yield Sample((T((n, c, h, w), "x"), T((c,), "w"), T((c,), "b")), note=f"{(n, c, h, w)}")
    n, c, h, w = _images(shapes)[-1]
    yield Sample((T((n, c, w), "x1"),), note="1-D, no affine")
    yield Sample((T((n, c, h, w), "x2"), T((c,), "w2"), T((c,), "b2"), T((c,), "rm"),
                  T((c,), "rv", low=0.5, high=2.0), False), note="running statistics")


@custom
def matmul_bias_activation_cases(T, shapes, dtype):
    for m, k, n in _mats(shapes):
        yield Sample((T((m, k), "a"), T((k, n), "b"), T((n,), "bias")), note=f"{m}x{k}x{n} relu")
    m, k, n = _mats(shapes)[-1]
    for act in ("gelu", "silu", "none") if not _tiny(shapes) else ("gelu",):
        yield Sample((T((m, k), "a2"), T((k, n), "b2"), T((n,), "bias2")), dict(activation=act), note=act,
                     grad=act != "relu")


@custom
def topk_softmax_cases(T, shapes, dtype):
    tokens, experts = (3, 8) if _tiny(shapes) else (17, 64)
    g = cast(distinct(shapes, dtype, (tokens, experts), -1, "gate").astype(np.float64) * 0.125, dtype)
    yield Sample((g, 2), note="top 2")
    yield Sample((g, 4, True), note="top 4, renormalised")


@custom
def moe_align_cases(T, shapes, dtype):
    """moe_align_block_size(topk_ids, block_size, num_experts, expert_map, pad_sorted_ids)."""
    rng = shapes.rng("moe_align")
    tokens, k, experts = (5, 2, 4) if _tiny(shapes) else (33, 2, 8)
    ids = np.stack([rng.permutation(experts)[:k] for _ in range(tokens)]).astype(to_numpy(dtype))
    yield Sample((ids, 4, experts), note=f"{tokens} tokens, top {k}, {experts} experts, block 4")
    yield Sample((ids, 3, experts), dict(pad_sorted_ids=True), note="block 3, padded")
    if not _tiny(shapes):
        few = np.where(ids >= 6, 0, ids).astype(to_numpy(dtype))         # experts 6, 7 receive nothing
        yield Sample((few, 16, experts), note="unused experts, block 16")
        emap = rng.permutation(experts).astype(to_numpy(dtype))
        yield Sample((ids, 4, experts, emap), note="expert_map")


@custom
def reshape_and_cache_cases(T, shapes, dtype):
    """reshape_and_cache(key, value, key_cache, value_cache, slot_mapping): distinct slots, one skipped (-1)."""
    tokens, heads, d, x, blocks, bs = (3, 2, 4, 2, 2, 4) if _tiny(shapes) else (7, 3, 8, 4, 4, 4)
    slots = shapes.rng("cache").permutation(blocks * bs)[:tokens].astype(np.int64)
    slots[1] = -1
    yield Sample((T((tokens, heads, d), "k"), T((tokens, heads, d), "v"), T((blocks, heads, d // x, bs, x), "kc"),
                  T((blocks, heads, d, bs), "vc"), slots), note=f"{tokens} tokens into {blocks}x{bs} slots")


@custom
def flash_mla_cases(T, shapes, dtype):
    """flash_mla(q, block_table, blocked_k, max_seqlen_pad, block_size, b, s_q, cache_seqlens, h_q, h_kv, d, dv,
    causal) over a shuffled page table."""
    b, h_q, h_kv, d, dv, bs, pages_per = (2, 2, 1, 6, 4, 4, 3) if _tiny(shapes) else (2, 4, 2, 12, 8, 4, 4)
    rng = shapes.rng("flash_mla")
    table = rng.permutation(b * pages_per).reshape(b, pages_per).astype(np.int32)
    k = T((b * pages_per, bs, h_kv, d), "k")
    pad = pages_per * bs
    lens = np.array([pad - 3, pad - 1], np.int32)
    for s_q in (1, 2):
        yield Sample((T((b, s_q, h_q, d), "q", s_q), table, k, pad, bs, b, s_q, lens, h_q, h_kv, d, dv, True),
                     note=f"s_q={s_q}")


# ---- joining lists of tensors, advanced indexing --------------------------------------------------------------

@custom
def cat_cases(T, shapes, dtype):
    """cat(tensors, dim): along each dim, unequal lengths, a 1-D empty tensor (skipped), non-contiguous parts."""
    yield Sample(([T((2, 5), "a"), T((3, 5), "b"), T((1, 5), "c")],), note="dim 0")
    yield Sample(([T((4, 2), "d"), T((4, 3), "e")], -1), note="dim -1")
    yield Sample(([T((2, 3, 4), "f"), T((2, 1, 4), "g")], 1), note="3-D, dim 1")
    if shapes.empty:
        yield Sample(([T((3, 4), "h"), T((0,), "i")], 0), note="1-D empty skipped")
    if shapes.noncontig:
        yield Sample(([noncontig(T((3, 4), "j")), T((2, 4), "k")], 0), note="non-contiguous")


@custom
def stack_cases(T, shapes, dtype):
    """stack(tensors, dim) at every position, including the new last dim."""
    xs = [T((3, 4), "a"), T((3, 4), "b"), T((3, 4), "c")]
    for dim in (0, 1, -1):
        yield Sample((xs, dim), note=f"dim {dim}")
    if shapes.noncontig:
        yield Sample(([noncontig(T((3, 4), "d")), T((3, 4), "e")], 1), note="non-contiguous")


@custom
def hstack_cases(T, shapes, dtype):
    """hstack: 1-D tensors along dim 0, 2-D along dim 1."""
    yield Sample(([T((3,), "a"), T((5,), "b")],), note="1-D")
    yield Sample(([T((4, 2), "c"), T((4, 3), "d")],), note="2-D")


@custom
def vstack_cases(T, shapes, dtype):
    """vstack: 1-D tensors become rows, 2-D join along dim 0."""
    yield Sample(([T((3,), "a"), T((3,), "b")],), note="1-D rows")
    yield Sample(([T((2, 3), "c"), T((1, 3), "d")],), note="2-D")


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

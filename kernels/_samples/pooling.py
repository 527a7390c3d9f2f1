"""Samples for pooling and unpooling (pooling.py) over the shape set's images."""
from __future__ import annotations

import itertools
import math

import numpy as np

from xbench.ops import Sample

from .core import Gen, _images, _tiny, custom


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
        if not _tiny(shapes):
            yield Sample((x, 2, []), note="stride [] (ATen's default: the kernel size)")
            yield Sample((x, (2,) * nd, ()), note="stride ()")
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


def _pool_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    span = n + 2 * p - d * (k - 1) - 1
    out = (math.ceil(span / s) if ceil_mode else span // s) + 1
    return out - 1 if ceil_mode and (out - 1) * s >= n + p else out


def _np_max_pool(x: np.ndarray, nd: int, k, s, p, d, ceil_mode: bool) -> np.ndarray:
    """The int64 indices (flat in each plane) of a max pool's maxima, the first of equal ones, in numpy."""
    spatial = x.shape[-nd:]
    outs = [_pool_size(n, *a, ceil_mode) for n, *a in zip(spatial, k, s, p, d)]
    best = np.full(x.shape[:-nd] + tuple(outs), -np.inf)
    idx = np.zeros(best.shape, np.int64)
    v = x.astype(np.float64)
    for o in itertools.product(*(range(m) for m in outs)):
        for t in itertools.product(*(range(m) for m in k)):
            pos = [oi * si - pi + ti * di for oi, si, pi, ti, di in zip(o, s, p, t, d)]
            if not all(0 <= q < n for q, n in zip(pos, spatial)):
                continue
            val = v[(Ellipsis,) + tuple(pos)]
            at = (Ellipsis,) + o
            better = val > best[at]
            best[at] = np.where(better, val, best[at])
            idx[at] = np.where(better, np.ravel_multi_index(pos, spatial), idx[at])
    return idx


def max_pool_backward_cases(nd: int) -> Gen:
    """max_pool{nd}d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode,
    indices) with the indices of the forward's maxima: overlapping windows send several gradients to one input."""
    @custom
    def pool_backward(T, shapes, dtype):
        n, c, h, w = _images(shapes)[-1]
        spatial = ((w,), (h, w), (3, h, w))[nd - 1]
        x = T((n, c) + spatial, "x")
        variants = [(2, 2, 0, 1, False), (3, 1, 1, 1, False), (3, 2, 1, 1, True), (2, 1, 0, 2, False)]
        for k, st, pad, dil, ceil_mode in variants[:1] if _tiny(shapes) else variants:
            args = [(v,) * nd for v in (k, st, pad, dil)]
            idx = _np_max_pool(x, nd, *args, ceil_mode)
            g = T(idx.shape, "g", k, st, pad, dil)
            yield Sample((g, x, *args, ceil_mode, idx), note=f"k{k} s{st} p{pad} d{dil} ceil={ceil_mode}")
    pool_backward.__name__ = f"max_pool{nd}d_backward_cases"
    return pool_backward


def offsets_cases(nd: int) -> Gen:
    """max_pool{nd}d_offsets_to_indices(offsets, kernel_size, input_size, stride, padding, dilation) with every
    window position drawn, padded and dilated windows among them."""
    @custom
    def offsets(T, shapes, dtype):
        n, c, h, w = _images(shapes)[-1]
        spatial = ((w,), (h, w), (3, h, w))[nd - 1]
        variants = [(2, 2, 0, 1, False), (3, 2, 1, 1, True), (3, 1, 1, 2, False)]
        for k, st, pad, dil, ceil_mode in variants[:1] if _tiny(shapes) else variants:
            args = [(v,) * nd for v in (k, st, pad, dil)]
            outs = tuple(_pool_size(m, k, st, pad, dil, ceil_mode) for m in spatial)
            rng = shapes.rng("offsets", n, c, *spatial, k, st, pad, dil)
            o = rng.integers(0, k ** nd, (n, c) + outs).astype(np.int8)
            yield Sample((o, args[0], spatial, *args[1:]), note=f"k{k} s{st} p{pad} d{dil}")
    offsets.__name__ = f"max_pool{nd}d_offsets_cases"
    return offsets

"""Samples for pooling and unpooling (pooling.py) over the shape set's images."""
from __future__ import annotations

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

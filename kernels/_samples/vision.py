"""Samples for resampling (vision.py): upsampling, interpolation, grid sampling, pixel shuffles."""
from __future__ import annotations

from xbench.ops import Sample

from .core import Gen, _images, _spatial, _tiny, builtins_list, custom


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


def upsample_backward_cases(nd: int, kind: str) -> Gen:
    """ATen upsample_*_backward: (grad_output, output_size, input_size[, align_corners], scales...) for the
    forward cases of `upsample_cases`."""
    forward = upsample_cases(nd, kind)

    @custom
    def back(T, shapes, dtype):
        for s in forward(dtype, shapes):
            x, out, *rest = s.args
            g = T(tuple(x.shape[:2]) + tuple(out), "g", out, *rest)
            yield Sample((g, out, tuple(x.shape), *rest), note=s.note)
    back.__name__ = f"upsample_{kind}{nd}d_backward_cases"
    return back


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

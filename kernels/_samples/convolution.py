"""Samples for convolutions (convolution.py) over the shape set's images."""
from __future__ import annotations

from xbench.ops import Sample

from .core import Gen, _images, _tiny, custom


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


def _conv_out(i: int, k: int, s: int, p: int, d: int, transposed: bool, op: int) -> int:
    return (i - 1) * s - 2 * p + d * (k - 1) + 1 + op if transposed else (i + 2 * p - d * (k - 1) - 1) // s + 1


def _aten_conv_problems(shapes):
    """(input shape, weight shape, stride, padding, dilation, transposed, output_padding, groups): 2-D plain,
    strided with a remainder, dilated and grouped, transposed with output_padding; 1-D and 3-D."""
    n, c, h, w = _images(shapes)[-1]
    yield (n, c, h, w), (4, c, 3, 3), 1, 1, 1, False, 0, 1
    yield (n, 4, h, w), (4, 2, 3, 3), 2, 1, 1, True, 1, 2
    if _tiny(shapes):
        return
    yield (n, c, h, w), (5, c, 3, 2), 2, 1, 1, False, 0, 1
    yield (n, 4, h, w), (6, 2, 3, 3), 1, 2, 2, False, 0, 2
    yield (n, c, w), (4, c, 3), 2, 0, 1, False, 0, 1
    yield (1, 2, 3, 5, 4), (3, 2, 2, 2, 2), 1, 1, 1, False, 0, 1
    yield (n, c, h, w), (c, 2, 2, 3), 3, 0, 2, True, 1, 1


@custom
def aten_conv_cases(T, shapes, dtype):
    """convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    for j, (xs, ws, st, pad, dil, tr, op, g) in enumerate(_aten_conv_problems(shapes)):
        nd = len(xs) - 2
        bias = T((ws[1] * g if tr else ws[0],), "b", j) if j % 2 == 0 else None
        yield Sample((T(xs, "x", j), T(ws, "w", j), bias, (st,) * nd, (pad,) * nd, (dil,) * nd, tr, (op,) * nd, g),
                     note=f"{'transposed ' if tr else ''}{xs} * {ws} s{st} p{pad} d{dil} op{op} g{g}")


@custom
def conv_backward_cases(T, shapes, dtype):
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask) over the convolution problems, with partial masks."""
    masks = ([True, True, True], [True, True, False], [False, True, True])
    for j, (xs, ws, st, pad, dil, tr, op, g) in enumerate(_aten_conv_problems(shapes)):
        nd = len(xs) - 2
        cout = ws[1] * g if tr else ws[0]
        outs = tuple(_conv_out(i, k, st, pad, dil, tr, op) for i, k in zip(xs[2:], ws[2:]))
        mask = masks[j % len(masks)]
        yield Sample((T((xs[0], cout) + outs, "g", j), T(xs, "x", j), T(ws, "w", j), [cout] if mask[2] else None,
                      (st,) * nd, (pad,) * nd, (dil,) * nd, tr, (op,) * nd, g, mask),
                     note=f"{'transposed ' if tr else ''}{xs} * {ws} s{st} p{pad} d{dil} op{op} g{g} mask {mask}")

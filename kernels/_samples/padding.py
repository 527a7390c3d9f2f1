"""Samples for padding (padding.py)."""
from __future__ import annotations

from xbench.dtypes import is_float
from xbench.ops import Sample

from .core import Gen, _images, _spatial, _tiny, builtins_list, custom, noncontig


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
        yield Sample((x, (-2, 3, 1, -4)), note="crops and pads on opposite sides")
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
    # negative widths crop; PyTorch's reflect and replicate still read the original edges on the other side
    yield Sample((x, (-2, 3, 1, -4)), note="constant, negative")
    yield Sample((x, (-3, 3, -1, 2)), dict(mode="reflect"), note="reflect, negative")
    yield Sample((x, (4, -w + 2, 0, 0)), dict(mode="reflect"), note="reflect, crop past the padded side")
    yield Sample((x, (-w + 1, 2, 3, -h + 1)), dict(mode="replicate"), note="replicate, crop all but one")
    yield Sample((x, (-2, 1, 1, -3)), dict(mode="circular"), note="circular, negative")
    if shapes.empty:
        yield Sample((T((0, c, h, w), "e"), (1, 1, 2, 2)), dict(mode="reflect"), note="reflect, empty batch")
        yield Sample((T((0, c, h, w), "e2"), (-1, 2, 0, 1)), dict(mode="replicate"), note="replicate, empty batch")


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
        negative = (-2, 3, 1, -2, 0, 1)[:2 * nd]
        yield Sample((T(shape, "neg"), negative), note=f"negative widths {negative}")
        if shapes.empty:
            yield Sample((T((0,) + shape[1:], "e"), (1,) * (2 * nd)), note="empty batch")
    fixed.__name__ = f"{mode}_pad{nd}d_cases"
    return fixed

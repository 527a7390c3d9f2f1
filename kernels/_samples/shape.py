"""Samples for shape, layout and copy operators and for joining lists of tensors (shape_ops.py)."""
from __future__ import annotations

import numpy as np

from xbench.ops import Sample

from .core import _tiny, custom, noncontig


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
    yield Sample((x, np.int64(2), -1), note="numpy integer sections")
    yield Sample((x, [np.int64(1), np.int64(4)], 2), note="numpy integer indices")


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
    yield Sample((x, 2, np.array(1, np.int64), 3), note="0-d tensor start")
    yield Sample((x, 0, np.array(-2, np.int64), 2), note="negative 0-d tensor start")
    yield Sample((x, -1, np.int64(1), 2), note="numpy integer start")


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


@custom
def select_backward_cases(T, shapes, dtype):
    """select_backward(grad_output, input_sizes, dim, index): the gradients of select_cases' selects."""
    sizes = (3, 4, 5) if _tiny(shapes) else (4, 6, 17)
    yield Sample((T(sizes[1:], "g0"), sizes, 0, 1), note="dim 0")
    yield Sample((T(sizes[:2], "g2"), sizes, -1, -2), note="dim -1, index -2")
    yield Sample((T((), "g1"), (7,), 0, 6), note="to 1-D")


@custom
def slice_backward_cases(T, shapes, dtype):
    """slice_backward(grad_output, input_sizes, dim, start, end, step), end ATen's INT64_MAX for open slices."""
    sizes = (3, 4, 5) if _tiny(shapes) else (4, 6, 17)
    yield Sample((T((sizes[0], 2, sizes[2]), "g1"), sizes, 1, 1, 3, 1), note="dim 1, 1:3")
    yield Sample((T(sizes[:2] + (len(range(1, sizes[2], 3)),), "g2"), sizes, -1, 1, 2 ** 63 - 1, 3),
                 note="dim -1, 1::3")
    yield Sample((T((1,) + sizes[1:], "g3"), sizes, 0, -1, 2 ** 63 - 1, 1), note="negative start")

"""A nest of short inner loops as one loop, where every access walks them in memory order.

LLVM vectorises a long innermost loop and not a nest of short ones: packing a [8, 576, 6, 6] bfloat16 activation
for a GEMM took 460 us as loops of 8 x 6 x 6 and 57 us as loops of 8 x 36; a per-channel sum over [8, 256, 16, 16]
425 us nested and 49 us flat. A run of inner axes a_1..a_d (extents e_1..e_d) becomes one axis q over their product
when, in every read and write that moves along them, the offset they add is c * (linear index of a_1..a_d): that
is, the coefficient of a_t is e_{t+1} times that of a_{t+1}. The access then reads the same element at
`q = linear(a_1..a_d)`, with a_1..a_{d-1} set to 0 and a_d to q, through a view of the buffer whose dimensions
from the first one the run moves along are one (`buf.reshape(...)`, free for the C-contiguous arrays kernels get).
Any other use of the run's axes (a bounds check, an iota, a broadcast along part of the run) keeps the nest. The
iterations come in the same order, so a flattened sum adds its terms in the same order.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from ...ir import expr as E
from ...ir.contraction import affine
from ...ir.expr import Expr, Idx, Load
from ...ir.kernel import Axis


@dataclass
class Flat:
    exprs: list[Expr]                   # the expressions, reading (and writing) along the flat axis
    axes: tuple[Axis, ...]              # the loops left: those outside the run, then the flat axis
    views: dict[str, tuple[str, tuple[int, ...]]]    # view name -> (its buffer, its shape), to define first

    def definitions(self) -> list[str]:
        return [f"{name} = {buf}.reshape({shape!r})" for name, (buf, shape) in self.views.items()]


def flatten(exprs: list[Expr], axes: tuple[Axis, ...], shape_of: Callable[[str], tuple[int, ...] | None],
            extents: dict[str, int], keep: int = 0) -> Flat | None:
    """The longest run of at least two innermost `axes` (leaving `keep` outside it) that `exprs` walk in memory
    order, as one axis (axes of extent 1 in it are 0); None where there is none. `shape_of(buf)` is a buffer's shape, or None for one that must
    be read as it is (a row buffer, a 0-d value); `extents` holds the kernel's axes (one of extent 1 is 0)."""
    if any(a.extent == 0 for a in axes):          # no iterations: nothing to gain
        return None
    for j in range(keep, len(axes) - 1):
        run = tuple(a for a in axes[j:] if a.extent > 1)
        if not run:
            return None
        flat = Axis(f"{axes[j].name}_f", prod(a.extent for a in run))
        ones = {a.name: E.ZERO for a in axes[j:] if a.extent == 1}
        found = _walked(exprs if not ones else [E.substitute(e, ones) for e in exprs], run, flat, shape_of, extents)
        if found is not None:
            return Flat(found[0], (*axes[:j], flat), found[1])
    return None


def _walked(exprs, run, flat, shape_of, extents):
    names = {a.name for a in run}
    views: dict[str, tuple[str, tuple[int, ...]]] = {}

    def view(n: Expr) -> Expr | None:
        if not isinstance(n, Load):
            return None
        moving = [k for k, i in enumerate(n.index) if names & E.free_indices(i)]
        if not moving:
            return None
        shape = shape_of(n.buf)
        if shape is None or len(shape) != len(n.index):
            return n
        first = moving[0]
        offset = _offset(n.index[first:], shape[first:], extents)
        if offset is None or not _in_order(offset, run):
            return n
        step = offset.pop(run[-1].name)
        for a in run[:-1]:
            del offset[a.name]
        offset[flat.name] = step
        name = n.buf
        if first < len(shape) - 1:
            name = f"_{flat.name}_{n.buf}"
            views[name] = (n.buf, (*shape[:first], prod(shape[first:])))
        return Load(name, (*n.index[:first], _spell(offset)), n.dtype)

    out = [e.map(view) for e in exprs]
    if any(names & E.free_indices(e) for e in out):
        return None
    return out, views


def _offset(index, shape, extents) -> dict[str, int] | None:
    """The row-major offset of `index` within `shape` as an affine form, less the terms of axes of extent 1."""
    total: dict[str, int] = {}
    stride = 1
    for i, n in zip(reversed(index), reversed(shape)):
        form = affine(i)
        if form is None:
            return None
        for v, c in form.items():
            if c and extents.get(v) != 1:
                total[v] = total.get(v, 0) + c * stride
        stride *= n
    return total


def _in_order(offset: dict[str, int], run: tuple[Axis, ...]) -> bool:
    c = [offset.get(a.name, 0) for a in run]
    return c[-1] != 0 and all(c[t] == c[t + 1] * run[t + 1].extent for t in range(len(run) - 1))


def _spell(form: dict[str, int]) -> Expr:
    out = E.const(form.get("", 0))
    for v, c in form.items():
        if v:
            out = E.add(out, E.mul(Idx(v), E.const(c)))
    return out

"""The order of a pointwise kernel's outer loops, and of a scatter-add's loops.

A loop nest keeps its write's order (the innermost loop walks the written buffer's last dimension) unless as many
of its large reads walk their last dimension along another axis X: a function of a transpose, such as GELU's
backward written from [tokens, channels] into [channels, height, width], or a bilinear upsampling's backward
adding [channels, height, width] into [height, width, channels]. Then X runs innermost in blocks of BLOCK, inside
the write's last axis: each step reads BLOCK contiguous elements (a vector) and writes one element of BLOCK lines,
which stay in L1 until the write's axis has filled them. All of X innermost would keep one line per element of X
open, a row apart: at a power-of-two row (32 x 32 floats, 4 KiB) they share one L1 set and evict each other at
every access (5x slower than the blocks here).
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ...ir import contraction
from ...ir import expr as E
from ...ir.expr import Call, Const, Idx
from ...ir.kernel import Axis, Kernel, Program, ScatterAdd, Store

BLOCK = 8                  # lines written at once: within any L1's associativity


def block_var(x: Axis) -> str:
    return f"_blk_{x.name}"


def _unit_axis(index: tuple, names: set[str]) -> str | None:
    """The axis that walks the last dimension of an access one element a step (in runs of at least two blocks
    where the dimension is the remainder of a flattened axis), if exactly one does."""
    if not index:
        return None
    last = index[-1]
    if (isinstance(last, Call) and last.fn == "mod" and isinstance(last.args[1], Const)
            and last.args[1].value >= 2 * BLOCK):
        last = last.args[0]
    unit = [n for n, c in (contraction.affine(last) or {}).items() if c == 1 and n in names]
    return unit[0] if len(unit) == 1 else None


def _reading_axis(axes: tuple[Axis, ...], writes: list[tuple], reads, program: Program, points: int) -> Axis | None:
    """The axis, other than the last of `axes`, along which at least as many accesses stream as along the last:
    each write's index, and each distinct read (of a buffer of at least half `points` elements) in `reads`."""
    names = {a.name for a in axes}
    votes: Counter[str | None] = Counter(_unit_axis(index, names) for index in writes)
    seen = set()
    for ld in reads:
        b = program.buffers.get(ld.buf)
        key = (ld.buf, repr(ld.index))
        if b is None or key in seen or int(np.prod(b.shape, dtype=np.int64)) < points // 2:
            continue
        seen.add(key)
        votes[_unit_axis(ld.index, names)] += 1
    last = axes[-1].name
    others = [(n, name) for name, n in votes.items() if name not in (None, last)]
    if not others:
        return None
    n, best = max(others)
    x = next(a for a in axes if a.name == best)
    return x if n >= votes[last] and x.extent >= 2 * BLOCK else None


def transposes(k: Kernel) -> bool:
    """Whether a kernel of plain stores reads a buffer across all its outer axes along another axis than it
    writes along (a transpose: a GELU backward from [tokens, channels] into [channels, H, W]). Known from the
    kernel alone, for the cost model: the loops `transposed_loops` gives it write BLOCK lines at a time."""
    names = {a.name for a in k.outer}
    if len(names) < 2 or not all(isinstance(s, Store) and not s.axes for s in k.stages):
        return False
    written = {_unit_axis(s.index, names) for s in k.stages}
    return any(E.free_indices(ld) >= names and _unit_axis(ld.index, names) not in written | {None}
               for s in k.stages for ld in E.loads(s.value))


def transposed_loops(k: Kernel, program: Program) -> tuple[tuple[Axis, ...], Axis] | None:
    """(outer loops, X) for a kernel of plain stores that reads along X and writes along another axis, or None:
    the loops are the other axes, then X's blocks (an axis named `block_var(X)`), then the store's last axis; X
    runs inside them over its block."""
    outer = k.outer
    if len(outer) < 2 or k.row_buffers or not all(isinstance(s, Store) and s.scope == "global" and not s.axes
                                                  for s in k.stages):
        return None
    reads = [ld for s in k.stages for ld in E.loads(s.value)]
    if any(ld.buf in k.writes() for ld in reads):
        return None                              # reads what it writes: the order is the store's
    x = _reading_axis(outer, [s.index for s in k.stages], reads, program, k.points())
    if x is None:
        return None
    rest = tuple(a for a in outer[:-1] if a is not x)
    return rest + (Axis(block_var(x), -(-x.extent // BLOCK)), outer[-1]), x


def scatter_block(s: ScatterAdd, program: Program) -> Axis | None:
    """The axis X of a scatter-add to run in blocks innermost, or None. Only where every axis after X indexes a
    dimension of the target alone, so that points reordered past each other add into different elements and
    every element still receives its additions in the original order (the same bits)."""
    if len(s.axes) < 2 or s.buf in {ld.buf for ld in E.loads(s.value)}:
        return None
    points = int(np.prod([a.extent for a in s.axes], dtype=np.int64))
    x = _reading_axis(s.axes, [s.index], list(E.loads(s.value)), program, points)
    if x is None:
        return None
    after = s.axes[s.axes.index(x) + 1:]
    direct = [i.name for i in s.index if isinstance(i, Idx)]
    uses = Counter(n for i in s.index for n in E.free_indices(i))
    return x if all(a.name in direct and uses[a.name] == 1 for a in after) else None

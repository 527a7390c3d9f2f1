"""The order of a pointwise kernel's outer loops.

A kernel keeps its store's order (the last outer axis walks the output's last dimension) unless more of its large
reads walk their last dimension along another axis X: a function of a transpose, such as GELU's backward written
from [tokens, channels] into [channels, height, width]. Then X runs innermost in blocks of BLOCK, inside the store's
last axis: each step reads BLOCK contiguous elements (a vector) and writes one element of BLOCK output lines, which
stay in L1 until the store's axis has filled them. All of X innermost would keep one line per element of X open, a
row of the output apart: at a power-of-two row (32 x 32 floats, 4 KiB) they share one L1 set and evict each other
at every write (5x slower than the blocks here). A plain transpose (one read, one write) is blocked the same way.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from ...ir import contraction
from ...ir import expr as E
from ...ir.kernel import Axis, Kernel, Program, Store

BLOCK = 8                  # output lines open at once: within any L1's associativity


def _unit_axis(index: tuple, names: set[str]) -> str | None:
    """The outer axis that walks the last dimension of an access one element a step, if exactly one does."""
    form = contraction.affine(index[-1]) if index else None
    unit = [n for n, c in (form or {}).items() if c == 1 and n in names]
    return unit[0] if len(unit) == 1 else None


def transposed_loops(k: Kernel, program: Program) -> tuple[tuple[Axis, ...], Axis] | None:
    """(outer loops, X) for a kernel that reads along X and writes along another axis, or None: the loops are the
    other axes, then X's blocks (an axis named `block_var(X)`), then the store's last axis; X runs inside them over
    its block."""
    outer = k.outer
    if len(outer) < 2 or k.row_buffers or not all(isinstance(s, Store) and s.scope == "global" and not s.axes
                                                  for s in k.stages):
        return None
    names = {a.name for a in outer}
    written = set(k.writes())
    large = k.points() // 2
    votes: Counter[str] = Counter()
    seen = set()
    for s in k.stages:
        votes[_unit_axis(s.index, names)] += 1
        for ld in E.loads(s.value):
            if ld.buf in written:
                return None                   # reads what it writes: the order is the store's
            b = program.buffers.get(ld.buf)
            key = (ld.buf, repr(ld.index))
            if b is None or key in seen or int(np.prod(b.shape, dtype=np.int64)) < large:
                continue
            seen.add(key)
            votes[_unit_axis(ld.index, names)] += 1
    votes.pop(None, None)
    last = outer[-1].name
    others = [(n, name) for name, n in votes.items() if name != last]
    if not others:
        return None
    n, best = max(others)
    x = next(a for a in outer if a.name == best)
    if n < votes[last] or x.extent < 2 * BLOCK:
        return None
    rest = tuple(a for a in outer[:-1] if a.name != best)
    return rest + (Axis(block_var(x), -(-x.extent // BLOCK)), outer[-1]), x


def block_var(x: Axis) -> str:
    return f"_blk_{x.name}"

"""How a load's element offset moves along the axes a vector instruction covers.

A vector tile covers a *domain*: one or more loop axes flattened row-major (the last varies fastest). A load
from a buffer is

- *invariant* when its offset does not move along the domain: one scalar per tile (a `GetValue`, used through
  the scalar forms `Adds`/`Muls`/... or `Duplicate`);
- *contiguous* when its offset is `base + flat(domain)` with `base` free of domain axes: one `DataCopy`
  (`DataCopyPad` for tails) per tile;
- *gathered* otherwise (strides, data-dependent or clamped indices): read element by element on the scalar
  unit into a UB tile — the "scalar path".
"""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import expr as E
from ...ir.expr import Call, Const, Expr, Idx, Load
from ...ir.kernel import Axis
from .cpp import interval


def strides(axes: tuple[Axis, ...] | list[Axis]) -> dict[str, int]:
    """Row-major strides of the flattened axes."""
    out, s = {}, 1
    for a in reversed(list(axes)):
        out[a.name] = s
        s *= a.extent
    return out


def split(e: Expr, dom: set[str]) -> tuple[dict[str, int], Expr] | None:
    """`e` as `sum(coeff[a] * a for a in dom) + rest` with `rest` free of domain axes; None when `e` depends on
    a domain axis in any other way."""
    if not (E.free_indices(e) & dom):
        return {}, e
    if isinstance(e, Idx):
        return {e.name: 1}, E.ZERO
    if isinstance(e, Call) and e.fn in ("add", "sub") and len(e.args) == 2:
        a, b = split(e.args[0], dom), split(e.args[1], dom)
        if a is None or b is None:
            return None
        sign = 1 if e.fn == "add" else -1
        coeffs = dict(a[0])
        for k, v in b[0].items():
            coeffs[k] = coeffs.get(k, 0) + sign * v
        rest = E.add(a[1], b[1]) if sign > 0 else E.sub(a[1], b[1])
        return {k: v for k, v in coeffs.items() if v}, rest
    if isinstance(e, Call) and e.fn == "mul" and len(e.args) == 2:
        x, y = e.args
        if isinstance(x, Const):
            x, y = y, x
        if isinstance(y, Const) and isinstance(y.value, int):
            s = split(x, dom)
            if s is None:
                return None
            return {k: v * y.value for k, v in s[0].items() if v * y.value}, E.mul(s[1], y)
        return None
    if isinstance(e, Call) and e.fn == "neg":
        s = split(e.args[0], dom)
        if s is None:
            return None
        return {k: -v for k, v in s[0].items()}, E.sub(E.ZERO, s[1])
    return None


@dataclass(frozen=True)
class Access:
    """How one load moves along a domain."""
    kind: str                 # invariant | contiguous | gather
    base: Expr | None = None  # element offset of the domain's first point (contiguous)


def classify(load: Load, shape: tuple[int, ...], domain: tuple[Axis, ...], guarded: bool = False,
             ranges: dict[str, tuple[int, int]] | None = None, size: int | None = None) -> Access:
    """Classify `load` (from a buffer of `shape`) against `domain`. A `guarded` load sits in a Select branch
    and may be out of bounds where the branch is not taken: it is only read as a whole tile when the offsets
    of every point provably lie inside the buffer."""
    dom = {a.name for a in domain if a.extent > 1}
    ones = {a.name: E.ZERO for a in domain if a.extent == 1}
    if ones:
        load = Load(load.buf, tuple(E.substitute(i, ones) for i in load.index), load.dtype)
    idx_free = set()
    for i in load.index:
        idx_free |= E.free_indices(i)
    if not (idx_free & dom):
        return Access("invariant")
    # data-dependent parts of the index (nested loads) must not move along the domain
    for i in load.index:
        for n in i.walk():
            if isinstance(n, Load) and E.free_indices(n) & dom:
                return Access("gather")
    flat = E.linear(tuple(load.index), shape)
    s = split(flat, dom)
    if s is None:
        return Access("gather")
    coeffs, rest = s
    st = strides(domain)
    for a in domain:
        if a.extent > 1 and coeffs.get(a.name, 0) != st[a.name]:
            return Access("gather")
    if guarded:
        if ranges is None or size is None:
            return Access("gather")
        r = interval(flat, ranges)
        if r is None or r[0] < 0 or r[1] >= size:
            return Access("gather")
    return Access("contiguous", rest)


def clamped_loads(e: Expr, shapes: dict, ranges: dict[str, tuple[int, int]] | None = None) -> Expr:
    """`e` with every load's index clamped into its buffer (nested loads too), but for indices `ranges` prove
    inside it. A Select branch evaluated where it is not taken thus reads some element of the buffer."""
    def clamp(n: Expr):
        if not (isinstance(n, Load) and n.buf in shapes):
            return None
        index = []
        for i, d in zip(n.index, shapes[n.buf]):
            r = interval(i, ranges) if ranges is not None else None
            index.append(i if r is not None and r[0] >= 0 and r[1] < d else E.clamp(i, 0, d - 1))
        return Load(n.buf, tuple(index), n.dtype)
    return e.map(clamp)


def affine_in(e: Expr, domain: tuple[Axis, ...]) -> tuple[int, Expr] | None:
    """`e` as `a * flat(domain) + rest` (rest free of the domain), or None."""
    dom = {x.name for x in domain if x.extent > 1}
    ones = {x.name: E.ZERO for x in domain if x.extent == 1}
    s = split(E.substitute(e, ones), dom)
    if s is None:
        return None
    coeffs, rest = s
    if not coeffs:
        return 0, rest
    st = strides(domain)
    last = [x for x in domain if x.extent > 1][-1]
    a = coeffs.get(last.name, 0)
    if a == 0:
        return None
    for x in domain:
        if x.extent > 1 and coeffs.get(x.name, 0) != a * st[x.name]:
            return None
    return a, rest

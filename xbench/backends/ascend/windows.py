"""Shifted windows: loads that move along a tile's vector axis like a contiguous run except near the edges of
the axis they index -- the taps of a stencil over a padded tensor (`xb.pad` + slices, `sliding_window`).

A tile covers one axis `t` (positions k = 0 .. len-1, t = v0 + k). A window load reads one row of its buffer
(every index component but the last is the same for the whole tile) at column `t + shift` wherever that column
lies in [lo, hi] -- where the pad's index transform is the identity -- and one `DataCopy` (`DataCopyPad` when the
column range starts or ends inside a 32-byte block) brings the whole run into the UB. At the other positions:

- constant padding, `Select(t in range, x[..., t + shift], value)`: `value` (DataCopyPad's padding, or
  `Duplicate` of whole blocks);
- edge, reflect and circular padding (the column is clamped, mirrored or wrapped): the load's own index, read on
  the scalar unit for those few positions (at most the pad width per row);
- a plain load in a Select branch (only read where it is in range): 0.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ...ir import expr as E
from ...ir.expr import Call, Const, Expr, Load, Local, Select
from ...ir.kernel import Axis
from .affine import split
from .cpp import interval

WINDOW_TYPES = ("float32", "float16", "int32", "bfloat16")
_CMP = ("lt", "le", "gt", "ge")


@dataclass(frozen=True)
class Window:
    """One shifted window along axis `axis` of the tile (see the module docstring)."""
    buf: str
    dtype: str
    axis: str                         # the tile's axis t
    index: tuple[Expr, ...]           # the load's exact index (extent-1 tile axes replaced by 0)
    rows: tuple[Expr, ...]            # the uniform components (all but the last)
    shift: Expr                       # column = t + shift where the transform is the identity
    lo: int                           # columns [lo, hi] are read from GM (within [0, n - 1])
    hi: int
    transform: str                    # identity | clamp | wrap | reflect (of the last component)
    fill: Expr | None = None          # constant padding: the value outside the condition
    t_lo: tuple[Expr, ...] = ()       # the padding condition's bounds on t: t >= each of t_lo,
    t_hi: tuple[Expr, ...] = ()       # t <= each of t_hi
    cond: tuple[Expr, ...] = ()       # and its parts that are the same for the whole tile

    @property
    def exact(self) -> bool:
        """Positions outside [lo, hi] take the load's own (clamped, mirrored, wrapped) index."""
        return self.transform != "identity"

    def describe(self) -> str:
        s = self.shift
        col = f"{self.axis} {'-' if s.value < 0 else '+'} {abs(s.value)}" if isinstance(s, Const) and s.value \
            else self.axis if isinstance(s, Const) else f"{self.axis} + {s}"
        where = {"identity": "0 elsewhere" if self.fill is None else f"{self.fill} elsewhere",
                 "clamp": "edge columns replicated on the scalar unit", "wrap": "wrapped columns on the scalar unit",
                 "reflect": "mirrored columns on the scalar unit"}[self.transform]
        row = "row, " if self.rows else ""
        return f"{self.buf}[{row}{col}]: columns {self.lo}..{self.hi} from GM, {where}"


def _plain(e: Expr) -> bool:
    """No vector locals inside (index and condition code must be scalar code of loop variables)."""
    return not any(isinstance(n, Local) for n in e.walk())


def _unwrap(c: Expr, n: int, ranges: dict[str, tuple[int, int]]) -> tuple[Expr, int, int, str] | None:
    """`c` as (inner, lo, hi, transform): c == inner wherever inner lies in [lo, hi] (a sub-range of [0, n-1])."""
    if isinstance(c, Call) and c.fn == "minimum" and isinstance(c.args[1], Const):
        m = c.args[0]
        if isinstance(m, Call) and m.fn == "maximum" and isinstance(m.args[1], Const):
            return m.args[0], max(int(m.args[1].value), 0), min(int(c.args[1].value), n - 1), "clamp"
    if isinstance(c, Call) and c.fn == "mod" and isinstance(c.args[1], Const) and int(c.args[1].value) > 0:
        m = int(c.args[1].value)
        a = c.args[0]
        r = interval(a, ranges)
        k = ((r[0] + r[1]) // 2) // m if r is not None else 0   # the period most of the tile falls in
        return E.add(a, E.const(-k * m)), 0, min(m, n) - 1, "wrap"
    if isinstance(c, Select) and isinstance(c.cond, Call) and c.cond.fn == "ge" and isinstance(c.cond.args[1], Const):
        # reflect about the edge elements: Select(neg >= m, 2(m-1) - neg, neg), neg = Select(j < 0, 0 - j, j)
        m = int(c.cond.args[1].value)
        neg = c.cond.args[0]
        if c.b == neg and c.a == Call("sub", (E.const(2 * (m - 1)), neg), c.a.dtype) and isinstance(neg, Select):
            j = neg.b
            if neg.cond == Call("lt", (j, E.ZERO), "bool") and neg.a == Call("sub", (E.ZERO, j), neg.a.dtype):
                return j, 0, min(m, n) - 1, "reflect"
        return None
    return c, 0, n - 1, "identity"


def load_window(ld: Load, domain: tuple[Axis, ...], shapes: dict[str, tuple[int, ...]],
                ranges: dict[str, tuple[int, int]]) -> Window | None:
    """The window `ld` reads along `domain` (a single axis longer than 1), or None."""
    moving = [a for a in domain if a.extent > 1]
    if len(moving) != 1 or ld.dtype not in WINDOW_TYPES or ld.buf not in shapes:
        return None
    t = moving[0].name
    ones = {a.name: E.ZERO for a in domain if a.extent == 1}
    index = tuple(E.substitute(i, ones) for i in ld.index)
    if not index or not all(_plain(i) for i in index):
        return None
    if any(t in E.free_indices(i) for i in index[:-1]) or t not in E.free_indices(index[-1]):
        return None
    u = _unwrap(index[-1], shapes[ld.buf][-1], ranges)
    if u is None:
        return None
    inner, lo, hi, transform = u
    s = split(inner, {t})
    if s is None or s[0] != {t: 1} or lo > hi:
        return None
    return Window(ld.buf, ld.dtype, t, index, index[:-1], s[1], lo, hi, transform)


def _conjuncts(c: Expr) -> list[Expr]:
    if isinstance(c, Call) and c.fn == "logical_and":
        return _conjuncts(c.args[0]) + _conjuncts(c.args[1])
    return [c]


def select_window(e: Select, domain: tuple[Axis, ...], shapes: dict[str, tuple[int, ...]],
                  ranges: dict[str, tuple[int, int]]) -> Window | None:
    """Constant padding: `Select(cond, x[...], value)` with `cond` a conjunction of bounds on the tile's axis
    (and of conditions the same for the whole tile), `x[...]` a window without an index transform."""
    if not isinstance(e.a, Load) or e.a.dtype != e.dtype:
        return None
    w = load_window(e.a, domain, shapes, ranges)
    if w is None or w.exact:
        return None
    t = w.axis
    if t in E.free_indices(e.b) or any(isinstance(n, Load) for n in e.b.walk()) or not _plain(e.b):
        return None
    ones = {a.name: E.ZERO for a in domain if a.extent == 1}
    t_lo, t_hi, cond = [], [], []
    for part in _conjuncts(E.substitute(e.cond, ones)):
        if not _plain(part):
            return None
        if t not in E.free_indices(part):
            cond.append(part)
            continue
        if not (isinstance(part, Call) and part.fn in _CMP and all(a.dtype == E.INDEX for a in part.args)):
            return None
        s = split(E.sub(part.args[0], part.args[1]), {t})   # part: d OP 0 with d = c t + r
        if s is None or set(s[0]) != {t} or abs(s[0][t]) != 1:
            return None
        r = s[1]
        if s[0][t] == 1:    # t OP -r
            bound = E.sub(E.ZERO, r)
            fn = part.fn
        else:               # r OP t
            bound = r
            fn = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}[part.fn]
        if fn == "ge":
            t_lo.append(bound)
        elif fn == "gt":
            t_lo.append(E.add(bound, E.const(1)))
        elif fn == "le":
            t_hi.append(bound)
        else:
            t_hi.append(E.add(bound, E.const(-1)))
    return replace(w, fill=e.b, t_lo=tuple(t_lo), t_hi=tuple(t_hi), cond=tuple(cond))


def window_of(e: Expr, domain: tuple[Axis, ...], shapes: dict[str, tuple[int, ...]],
              ranges: dict[str, tuple[int, int]]) -> Window | None:
    if isinstance(e, Select):
        return select_window(e, domain, shapes, ranges)
    if isinstance(e, Load):
        return load_window(e, domain, shapes, ranges)
    return None


def in_range(r: Expr, n: int, ranges: dict[str, tuple[int, int]]) -> bool:
    """Whether index `r` provably lies in [0, n - 1] (a mirrored index: when what it mirrors lies within one
    reflection of the axis)."""
    b = interval(r, ranges)
    if b is not None:
        return b[0] >= 0 and b[1] < n
    u = _unwrap(r, n, ranges)
    if u is not None and u[3] == "reflect":
        m = int(r.cond.args[1].value)
        b = interval(u[0], ranges)
        return m <= n and b is not None and -(m - 1) <= b[0] and b[1] <= 2 * (m - 1)
    return False


def rows_in_range(w: Window, shape: tuple[int, ...], ranges: dict[str, tuple[int, int]]) -> list[Expr]:
    """The row components not provably inside the buffer (checked per tile before the copy)."""
    return [r for r, n in zip(w.rows, shape) if not in_range(r, n, ranges)]


__all__ = ["Window", "WINDOW_TYPES", "in_range", "load_window", "rows_in_range", "select_window", "window_of"]

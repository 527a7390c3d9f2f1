"""Loop-IR stages as the vector forms read them: locals inlined, stores forwarded to later reads, loads
walked, where a store's contiguous run starts, row buffers recomputed where read."""
from __future__ import annotations

from ...ir import expr as E
from ...ir.expr import Expr, Load, Local, Select
from ...ir.kernel import Assign, Axis, Kernel, Store
from .affine import classify
from .cpp import Unsupported
from .plan import prod


def inline_assigns(stages: list) -> tuple[list, dict[str, Expr]]:
    """Replace Assign locals by their values in later stages (CSE in the emitter shares them again)."""
    env: dict[str, Expr] = {}

    def sub(e: Expr) -> Expr:
        return e.map(lambda n: env.get(n.name) if isinstance(n, Local) and n.name in env else None)
    out = []
    for s in stages:
        s2 = s.replace(sub)
        if isinstance(s2, Assign):
            env[s2.local] = s2.value
        else:
            out.append(s2)
    return out, env


def tile_store_base(s: Store, shapes: dict, domain: tuple[Axis, ...]) -> Expr | None:
    """Where a per-point store's run starts along `domain` (None when it does not move contiguously)."""
    if prod(a.extent for a in domain) == 1:
        zero = {a.name: E.ZERO for a in domain}
        return E.substitute(E.linear(tuple(s.index), shapes[s.buf]), zero)
    acc = classify(Load(s.buf, s.index, "float32"), shapes[s.buf], domain)
    return acc.base if acc.kind == "contiguous" else None


def forward_stores(stages: list) -> list:
    """Per-point stages read back what an earlier stage of the same point stored: use the stored value.
    Raises Unsupported when a stage reads another point of a buffer this kernel writes."""
    stored: dict[str, tuple[tuple[Expr, ...], Expr]] = {}
    out = []
    for st in stages:
        def sub(e: Expr) -> Expr:
            def f(n):
                if isinstance(n, Load) and n.buf in stored:
                    idx, val = stored[n.buf]
                    if tuple(n.index) != idx:
                        raise Unsupported(f"a stage reads {n.buf} at another point than the one stored")
                    return val
                return None
            return e.map(f)
        st2 = st.replace(sub)
        if isinstance(st2, Store):
            stored[st2.buf] = (tuple(st2.index), st2.value)
        out.append(st2)
    return out


def walk_loads(e: Expr, guarded: bool = False):
    """(load, under a Select branch) for every load in `e`, outside other loads' indices too."""
    if isinstance(e, Load):
        yield e, guarded
        for i in e.index:
            yield from walk_loads(i, guarded)
        return
    if isinstance(e, Select):
        yield from walk_loads(e.cond, guarded)
        yield from walk_loads(e.a, True)
        yield from walk_loads(e.b, True)
        return
    for c in e.children():
        yield from walk_loads(c, guarded)


def store_base(s: Store, shapes: dict) -> Expr | None:
    """The element offset where a store's contiguous run starts (its whole offset when it has no loops)."""
    if not s.axes:
        return E.linear(tuple(s.index), shapes[s.buf])
    acc = classify(Load(s.buf, s.index, "float32"), shapes[s.buf], s.axes)
    return acc.base if acc.kind == "contiguous" else None


def inline_row_buffers(k: Kernel) -> list:
    """Stages with every row-scratch buffer replaced by the value stored into it (recomputed where read), for
    the streaming form. Raises Unsupported when a row buffer is not written as `buf[axes] = value`."""
    defs: dict[str, tuple[list[str], Expr]] = {}

    def sub(e: Expr) -> Expr:
        def f(n):
            if isinstance(n, Load) and n.buf in defs:
                names, val = defs[n.buf]
                return E.substitute(val, dict(zip(names, n.index)))
            return None
        return e.map(f)
    out = []
    for s in k.stages:
        s2 = s.replace(sub)
        if isinstance(s2, Store) and s2.scope == "row":
            names = [a.name for a in s2.axes]
            if tuple(s2.index) != tuple(a.var for a in s2.axes) or \
                    tuple(a.extent for a in s2.axes) != tuple(k.row_buffers[s2.buf][0]):
                raise Unsupported(f"row buffer {s2.buf} is not stored as {s2.buf}[axes]")
            defs[s2.buf] = (names, s2.value)
        else:
            out.append(s2)
    return out

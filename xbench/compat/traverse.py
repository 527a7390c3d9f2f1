"""Traversals of expressions: substitution (memoised, rebuilding through the simplifying constructors),
walking a DAG once per node, and a short readable form for messages."""
from __future__ import annotations

from .expr import (
    Bin,
    Cast,
    Const,
    Dim,
    FloorDiv,
    Lin,
    Load,
    Mod,
    Node,
    Param,
    Reduce,
    Select,
    Sym,
    Un,
    Unwritten,
    reduce_,
)


def subst(n: Node, m: dict[Node, Node], memo: dict | None = None) -> Node:
    """n with each key of m replaced by its value (keys: Syms, or any node)."""
    if not m:
        return n
    keys = frozenset(k for k in m if isinstance(k, Sym))
    memo = {} if memo is None else memo
    return _subst(n, m, keys, memo)


def _subst(n: Node, m, keys, memo) -> Node:
    if n in m:
        return m[n]
    if keys and not (n.free & keys) and all(not isinstance(k, Node) or isinstance(k, Sym) for k in m):
        return n
    got = memo.get(n)
    if got is not None:
        return got
    if isinstance(n, Reduce):
        inner = {k: v for k, v in m.items() if k is not n.var}
        out = reduce_(n.rkind, n.var, subst(n.body, inner)) if inner else n
    else:
        kids = n.children()
        if not kids:
            out = n
        else:
            new = [_subst(k, m, keys, memo) for k in kids]
            out = n if all(a is b for a, b in zip(new, kids)) else n.rebuild(new)
    memo[n] = out
    return out


def walk(n: Node, seen: set | None = None):
    seen = set() if seen is None else seen
    stack = [n]
    while stack:
        x = stack.pop()
        if x in seen:
            continue
        seen.add(x)
        yield x
        stack.extend(x.children())


def contains(n: Node, pred) -> bool:
    return any(pred(x) for x in walk(n))


def show(n: Node, depth: int = 0) -> str:
    """A short readable form (for messages and debugging)."""
    if depth > 12:
        return "..."
    d = depth + 1
    if isinstance(n, Const):
        return repr(n.value)
    if isinstance(n, Dim):
        return f"{n.param}.shape[{n.axis}]"
    if isinstance(n, Sym):
        return n.name
    if isinstance(n, Param):
        return n.name
    if isinstance(n, Lin):
        parts = [(show(t, d) if k == 1 else f"{k}*{show(t, d)}") for t, k in n.terms]
        if n.const:
            parts.append(str(n.const))
        return "(" + " + ".join(parts) + ")"
    if isinstance(n, FloorDiv):
        return f"({show(n.a, d)} // {n.c})"
    if isinstance(n, Mod):
        return f"({show(n.a, d)} % {n.c})"
    if isinstance(n, Load):
        return f"{n.src!r}[{', '.join(show(i, d) for i in n.idx)}]"
    if isinstance(n, Bin):
        return f"{n.op}({show(n.a, d)}, {show(n.b, d)})"
    if isinstance(n, Un):
        return f"{n.op}({show(n.a, d)})"
    if isinstance(n, Select):
        return f"where({show(n.c, d)}, {show(n.a, d)}, {show(n.b, d)})"
    if isinstance(n, Cast):
        return f"{n.dtype}({show(n.a, d)})"
    if isinstance(n, Reduce):
        return f"{n.rkind}[{n.var.name}<{n.var.extent}]({show(n.body, d)})"
    if isinstance(n, Unwritten):
        return f"<unwritten {n.what}>"
    return type(n).__name__

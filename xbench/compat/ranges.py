"""Interval reasoning about index expressions: bounds of an integer expression, ranges narrowed by a condition
known to hold, and deciding a condition over its variables' ranges (by intervals, then point by point when the
index space is small)."""
from __future__ import annotations

import numpy as np

from .expr import (
    _NP_BIN,
    COMPARE,
    Bin,
    Cast,
    Const,
    Dim,
    FloorDiv,
    Lin,
    Mod,
    Node,
    Select,
    Sym,
    Un,
    _lin_parts,
    as_bool,
    is_int,
    sub,
)


def concrete(n) -> int:
    """The value of an integer expression of dims and constants."""
    if isinstance(n, (int, np.integer)):
        return int(n)
    if isinstance(n, Const):
        return n.value
    if isinstance(n, Dim):
        return n.value
    if isinstance(n, Lin) and all(isinstance(t, Dim) for t, _ in n.terms):
        return n.const + sum(t.value * k for t, k in n.terms)
    raise ValueError(f"not a known integer: {n!r}")


def try_concrete(n) -> int | None:
    try:
        return concrete(n)
    except ValueError:
        return None


def bounds(n: Node, ranges: dict | None = None) -> tuple[int | None, int | None]:
    """Inclusive integer bounds of n (None: unbounded) given variables' ranges (default: their extents)."""
    if isinstance(n, Const):
        v = n.value
        return (int(v), int(v)) if not isinstance(v, float) else (None, None)
    if isinstance(n, Dim):
        return n.value, n.value
    if isinstance(n, Sym):
        if ranges and n in ranges:
            return ranges[n]
        if n.sym_kind == "carry":
            return None, None
        return 0, n.extent - 1
    if isinstance(n, Lin):
        lo, hi = n.const, n.const
        for t, k in n.terms:
            a, b = bounds(t, ranges)
            if k < 0:
                a, b = b, a
            lo = None if lo is None or a is None else lo + k * a
            hi = None if hi is None or b is None else hi + k * b
        return lo, hi
    if isinstance(n, FloorDiv):
        a, b = bounds(n.a, ranges)
        return (None if a is None else a // n.c), (None if b is None else b // n.c)
    if isinstance(n, Mod):
        a, b = bounds(n.a, ranges)
        if a is not None and b is not None and a >= 0 and b < n.c:
            return a, b
        return 0, n.c - 1
    if isinstance(n, Select) and is_int(n.dtype):
        a, b = bounds(n.a, ranges), bounds(n.b, ranges)
        return (None if a[0] is None or b[0] is None else min(a[0], b[0]),
                None if a[1] is None or b[1] is None else max(a[1], b[1]))
    if isinstance(n, Cast) and n.dtype == "bool" or n.dtype == "bool":
        return 0, 1
    return None, None


def decide_cmp(op: str, a: Node, b: Node, ranges: dict | None = None) -> bool | None:
    lo, hi = bounds(sub(a, b) if is_int(a.dtype) and is_int(b.dtype) else a, ranges) \
        if is_int(a.dtype) and is_int(b.dtype) else (None, None)
    if lo is None and hi is None:
        return None
    if op == "lt":
        return True if hi is not None and hi < 0 else False if lo is not None and lo >= 0 else None
    if op == "le":
        return True if hi is not None and hi <= 0 else False if lo is not None and lo > 0 else None
    if op == "gt":
        return True if lo is not None and lo > 0 else False if hi is not None and hi <= 0 else None
    if op == "ge":
        return True if lo is not None and lo >= 0 else False if hi is not None and hi < 0 else None
    if op == "eq":
        if lo == hi == 0:
            return True
        return False if (lo is not None and lo > 0) or (hi is not None and hi < 0) else None
    if op == "ne":
        r = decide_cmp("eq", a, b, ranges)
        return None if r is None else not r
    return None


def conjuncts(c: Node) -> list[Node]:
    if isinstance(c, Bin) and c.op == "and":
        return conjuncts(c.a) + conjuncts(c.b)
    return [c]


def refine(ranges: dict, cond: Node, truth: bool = True) -> dict:
    """ranges narrowed by knowing `cond` is `truth`: single-variable comparisons of a conjunction known true or
    of a disjunction known false."""
    out = dict(ranges)
    parts = conjuncts(cond) if truth else disjuncts(cond)
    for _ in range(2):
        for p in parts:
            _refine_one(out, p, truth)
    return out


def disjuncts(c: Node) -> list[Node]:
    if isinstance(c, Bin) and c.op == "or":
        return disjuncts(c.a) + disjuncts(c.b)
    return [c]


_FLIP = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}
_MIRROR = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _refine_one(out: dict, p: Node, truth: bool) -> None:
    if isinstance(p, Un) and p.op == "not":
        _refine_one(out, p.a, not truth)
        return
    if not (isinstance(p, Bin) and p.op in COMPARE and is_int(p.a.dtype) and is_int(p.b.dtype)):
        return
    op = p.op if truth else _FLIP[p.op]
    terms, c0 = _lin_parts(sub(p.a, p.b))
    syms = [t for t in terms if not isinstance(t, Dim)]
    if len(syms) != 1 or not isinstance(syms[0], Sym):
        return
    v = syms[0]
    k = terms[v]
    r = -(c0 + sum(t.value * kk for t, kk in terms.items() if isinstance(t, Dim)))      # k*v op r
    if k < 0:
        k, r, op = -k, -r, _MIRROR[op]
    lo, hi = out.get(v, bounds(v))
    if lo is None or hi is None:
        return
    if op == "lt":
        hi = min(hi, (r - 1) // k)
    elif op == "le":
        hi = min(hi, r // k)
    elif op == "gt":
        lo = max(lo, r // k + 1)
    elif op == "ge":
        lo = max(lo, -((-r) // k))
    elif op == "eq":
        if r % k:
            lo, hi = 1, 0
        else:
            lo, hi = max(lo, r // k), min(hi, r // k)
    elif op == "ne" and r % k == 0:
        if lo == r // k:
            lo += 1
        elif hi == r // k:
            hi -= 1
    out[v] = (lo, hi)


def decide(c: Node, ranges: dict | None = None, numeric_limit: int = 1 << 20) -> bool | None:
    """True / False when `c` has that value at every point of its variables' ranges; None when it varies or
    cannot be told (it reads data). Intervals first, then, for small index spaces, every point."""
    c = as_bool(c)
    if isinstance(c, Const):
        return bool(c.value)
    r = _decide_intervals(c, ranges or {})
    if r is not None or c.data:
        return r
    vars_ = sorted(c.free, key=lambda s: s.order)
    rng = [(ranges or {}).get(v, bounds(v)) for v in vars_]
    if any(lo is None or hi is None for lo, hi in rng):
        return None
    if any(hi < lo for lo, hi in rng):
        return True          # an empty range: vacuous
    size = 1
    for lo, hi in rng:
        size *= hi - lo + 1
    if size > numeric_limit:
        return None
    env = {}
    for i, (v, (lo, hi)) in enumerate(zip(vars_, rng)):
        shape = [1] * len(vars_)
        shape[i] = hi - lo + 1
        env[v] = np.arange(lo, hi + 1, dtype=np.int64).reshape(shape)
    try:
        vals = np.broadcast_to(evaluate(c, env), tuple(hi - lo + 1 for lo, hi in rng))
    except NotEvaluable:
        return None
    if vals.all():
        return True
    if not vals.any():
        return False
    return None


def _decide_intervals(c: Node, ranges: dict) -> bool | None:
    if isinstance(c, Const):
        return bool(c.value)
    if isinstance(c, Bin) and c.op in COMPARE and is_int(c.a.dtype) and is_int(c.b.dtype):
        return decide_cmp(c.op, c.a, c.b, ranges)
    if isinstance(c, Bin) and c.op == "and":
        a = _decide_intervals(c.a, ranges)
        if a is False:
            return False
        b = _decide_intervals(c.b, refine(ranges, c.a) if a is None else ranges)
        if b is False:
            return False
        return True if a and b else None
    if isinstance(c, Bin) and c.op == "or":
        a = _decide_intervals(c.a, ranges)
        if a is True:
            return True
        b = _decide_intervals(c.b, refine(ranges, c.a, False) if a is None else ranges)
        if b is True:
            return True
        return False if a is False and b is False else None
    if isinstance(c, Un) and c.op == "not":
        a = _decide_intervals(c.a, ranges)
        return None if a is None else not a
    return None


class NotEvaluable(Exception):
    pass


def evaluate(n: Node, env: dict[Sym, np.ndarray]):
    """n's value at the points of env (index-only expressions; anything reading data is NotEvaluable)."""
    memo: dict[Node, object] = {}

    def ev(x: Node):
        got = memo.get(x)
        if got is not None:
            return got
        if isinstance(x, Const):
            r = np.array(x.value, dtype=x.dtype)
        elif isinstance(x, Dim):
            r = np.array(x.value, dtype=np.int64)
        elif isinstance(x, Sym):
            if x not in env:
                raise NotEvaluable()
            r = env[x]
        elif isinstance(x, Lin):
            r = np.array(x.const, dtype=np.int64)
            for t, k in x.terms:
                r = r + k * ev(t)
        elif isinstance(x, FloorDiv):
            r = np.floor_divide(ev(x.a), x.c)
        elif isinstance(x, Mod):
            r = np.mod(ev(x.a), x.c)
        elif isinstance(x, Bin) and x.op in _NP_BIN:
            with np.errstate(all="ignore"):
                r = _NP_BIN[x.op](ev(x.a), ev(x.b))
        elif isinstance(x, Un) and x.op in ("not", "neg"):
            r = np.logical_not(ev(x.a)) if x.op == "not" else -ev(x.a)
        elif isinstance(x, Select):
            r = np.where(ev(x.c), ev(x.a), ev(x.b))
        elif isinstance(x, Cast):
            r = ev(x.a).astype(x.dtype)
        else:
            raise NotEvaluable()
        memo[x] = r
        return r

    return ev(n)

"""Clean-up of a lifted output before it becomes xbench code: conditions decided over the element positions and
reduction ranges (bounds checks vanish), nested reductions whose indices only appear as `i * TPB + j` merged
into one (the tiles of a shared-memory matmul become one contraction), and a reduction over a range cut to where
its terms are not masked to zero (`k < K`)."""
from __future__ import annotations

from . import expr as E


def simplify(n: E.Node, ranges: dict | None = None) -> E.Node:
    return _Simp().run(n, ranges or {})


class _Simp:
    def __init__(self):
        self.memo: dict = {}

    def run(self, n: E.Node, ranges: dict) -> E.Node:
        key = (n, tuple(sorted(((v.uid, r) for v, r in ranges.items() if v in n.free), key=lambda t: t[0])))
        got = self.memo.get(key)
        if got is not None:
            return got
        out = self._run(n, {v: r for v, r in ranges.items() if v in n.free})
        self.memo[key] = out
        return out

    def _run(self, n: E.Node, ranges: dict) -> E.Node:
        if isinstance(n, E.Select):
            c = self.run(n.c, ranges)
            d = E.decide(c, ranges)
            if d is True:
                return self.run(n.a, ranges)
            if d is False:
                return self.run(n.b, ranges)
            a = self.run(n.a, E.refine(ranges, c))
            b = self.run(n.b, E.refine(ranges, c, False))
            return E.select(c, a, b)
        if isinstance(n, E.Bin) and n.op in E.COMPARE:
            a, b = self.run(n.a, ranges), self.run(n.b, ranges)
            c = E.compare(n.op, a, b)
            d = E.decide(c, ranges, numeric_limit=1 << 16)
            return c if d is None else E.const(d)
        if isinstance(n, E.Bin) and n.op in ("and", "or"):
            a = self.run(n.a, ranges)
            b = self.run(n.b, E.refine(ranges, a, n.op == "and"))
            return E.logical(n.op, a, b)
        if isinstance(n, E.Reduce):
            return self.reduce(n, ranges)
        kids = n.children()
        if not kids:
            return n
        new = [self.run(k, ranges) for k in kids]
        return n if all(a is b for a, b in zip(new, kids)) else n.rebuild(new)

    def reduce(self, n: E.Reduce, ranges: dict) -> E.Node:
        v = n.var
        inner = dict(ranges)
        inner[v] = (0, v.extent - 1)
        body = self.run(n.body, inner)
        merged = _merge(n.rkind, v, body)
        if merged is not None:
            v, body = merged
            inner = dict(ranges)
            inner[v] = (0, v.extent - 1)
            body = self.run(body, inner)
        cut = _restrict(n.rkind, v, body, ranges)
        if cut is not None:
            if cut == "empty":
                return E.identity(n.rkind, n.dtype)
            v, body = cut
            inner = dict(ranges)
            inner[v] = (0, v.extent - 1)
            body = self.run(body, inner)
        return E.reduce_(n.rkind, v, body)


def _merge(kind: str, i: E.Sym, body: E.Node):
    """reduce_i reduce_j f(i * ext_j + j) -> reduce_k f(k), when i and j appear only that way."""
    if not (isinstance(body, E.Reduce) and body.rkind == kind):
        return None
    j = body.var
    inner = body.body
    k = E.Sym(f"{i.name}{j.name}", "red", i.extent * j.extent)
    for outer, fast in ((i, j), (j, i)):
        cand = E.subst(inner, {outer: E.floordiv_c(k, fast.extent), fast: E.mod_c(k, fast.extent)})
        if not any(isinstance(x, (E.FloorDiv, E.Mod)) and k in x.a.free for x in E.walk(cand)):
            return k, cand
    return None


def _factors(n: E.Node) -> list[E.Node]:
    if isinstance(n, E.Bin) and n.op == "mul":
        return _factors(n.a) + _factors(n.b)
    return [n]


def _restrict(kind: str, v: E.Sym, body: E.Node, ranges: dict):
    """Cut v's range to where a mask on v keeps the terms: select(cond(v), e, identity) as the body, or (for
    sums) as a factor of it."""
    ident = E.identity(kind, body.dtype)
    cands = [body] if kind != "sum" else [body] + _factors(body)
    for f in cands:
        g = f.a if isinstance(f, E.Cast) else f
        if not isinstance(g, E.Select) or v not in g.c.free or g.c.data:
            continue
        zero = g.b
        if not (isinstance(zero, E.Const) and zero.value == ident.value):
            continue
        r = E.refine(dict(ranges, **{}) | {v: (0, v.extent - 1)}, g.c).get(v)
        if r is None:
            continue
        lo, hi = r
        if lo > hi:
            return "empty"
        if (lo, hi) == (0, v.extent - 1):
            continue
        sub_ranges = dict(ranges)
        sub_ranges[v] = (lo, hi)
        if E.decide(g.c, sub_ranges) is not True:
            continue
        expr = _extent_expr(g.c, v, lo, hi)
        w = E.Sym(v.name, "red", hi - lo + 1, expr)
        return w, E.subst(body, {v: E.add(w, E.const(lo))})
    return None


def _extent_expr(c: E.Node, v: E.Sym, lo: int, hi: int) -> E.Node | None:
    """The new extent as the kernel names it: `k < A.shape[1]` gives A.shape[1]."""
    if lo != 0:
        return None
    for p in E.conjuncts(c):
        if isinstance(p, E.Bin) and p.op in ("lt", "gt"):
            a, b = (p.a, p.b) if p.op == "lt" else (p.b, p.a)
            if a is v and not b.free and E.try_concrete(b) == hi + 1:
                return b
    return None


def unwritten_paths(n: E.Node):
    """(what, condition) for each way an output reaches memory nobody wrote."""
    out = []

    def go(x: E.Node, cond: E.Node, seen: set):
        if (x, cond) in seen or len(out) > 4:
            return
        seen.add((x, cond))
        if isinstance(x, E.Unwritten):
            out.append((x, cond))
            return
        if not x.data:
            return
        if isinstance(x, E.Select):
            go(x.a, E.land(cond, x.c), seen)
            go(x.b, E.land(cond, E.lnot(x.c)), seen)
            return
        for k in x.children():
            go(k, cond, seen)

    go(n, E.TRUE, set())
    return out

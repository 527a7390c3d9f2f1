"""Clean-up of a lifted output before it becomes xbench code: conditions decided over the element positions and
reduction ranges (bounds checks vanish), nested reductions whose indices only appear as `i * TPB + j` merged
into one (the tiles of a shared-memory matmul become one contraction), and a reduction over a range cut to where
its terms are not masked to zero (`k < K`)."""
from __future__ import annotations

from . import expr as E

REROLL_MIN = 4              # a sum of this many loads at evenly spaced offsets is written as a reduction


def simplify(n: E.Node, ranges: dict | None = None) -> E.Node:
    return _Simp().run(n, ranges or {})


class _Simp:
    def __init__(self):
        self.memo: dict = {}
        self.path: list[E.Node] = []          # the conditions of the selects around the node being simplified
        self.unwritten: dict[E.Node, bool] = {}

    def has_unwritten(self, n: E.Node) -> bool:
        got = self.unwritten.get(n)
        if got is None:
            got = isinstance(n, E.Unwritten) or n.data and any(self.has_unwritten(k) for k in n.children())
            self.unwritten[n] = got
        return got

    def run(self, n: E.Node, ranges: dict) -> E.Node:
        if self.has_unwritten(n):             # what is reachable depends on the path: not memoised
            return self._run(n, {v: r for v, r in ranges.items() if v in n.free})
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
            if d is None and (self.has_unwritten(n.a) or self.has_unwritten(n.b)):
                d = self.under_path(c)
            if d is True:
                return self.run(n.a, ranges)
            if d is False:
                return self.run(n.b, ranges)
            ra = E.refine(ranges, c)
            self.path.append(c)
            a = self.run(_pinned(n.a, ra), ra)
            self.path[-1] = E.lnot(c)
            b = self.run(n.b, E.refine(ranges, c, False))
            self.path.pop()
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
        if isinstance(n, E.Bin) and n.op == "add":
            terms = [self.run(t, ranges) for t in _add_terms(n, n.dtype)]
            if len(terms) >= REROLL_MIN:
                terms = _reroll(terms)
            terms = _inclusive(terms, "sum")
            out = terms[0]
            for t in terms[1:]:
                out = E.add(out, t)
            return out
        if isinstance(n, E.Bin) and n.op in ("max", "min"):
            terms = _inclusive([self.run(n.a, ranges), self.run(n.b, ranges)], n.op)
            return terms[0] if len(terms) == 1 else E.binary(n.op, terms[0], terms[1])
        if isinstance(n, E.Lin) and len(n.terms) >= REROLL_MIN:
            by_coef: dict[int, list] = {}
            for t, k in n.terms:
                by_coef.setdefault(k, []).append(self.run(t, ranges))
            out = E.const(n.const, n.dtype)
            for k, ts in by_coef.items():
                for t in _reroll(ts) if len(ts) >= REROLL_MIN else ts:
                    out = E.add(out, E.mul(t, E.const(k)))
            return out
        kids = n.children()
        if not kids:
            return n
        new = [self.run(k, ranges) for k in kids]
        return n if all(a is b for a, b in zip(new, kids)) else n.rebuild(new)

    def under_path(self, c: E.Node) -> bool | None:
        """c's value wherever the selects around it lead here (point by point over small index spaces): how
        interleaved stores (out[2 * i], out[2 * i + 1]) are seen to cover every element."""
        if c.data or any(p.data for p in self.path):
            return None
        path = E.land(*self.path)
        if E.decide(E.lor(E.lnot(path), c), numeric_limit=1 << 18) is True:
            return True
        if E.decide(E.lor(E.lnot(path), E.lnot(c)), numeric_limit=1 << 18) is True:
            return False
        return None

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


def _add_terms(n: E.Node, dtype: str) -> list[E.Node]:
    if isinstance(n, E.Bin) and n.op == "add" and n.dtype == dtype:
        return _add_terms(n.a, dtype) + _add_terms(n.b, dtype)
    return [n]


def _pattern(t: E.Node):
    cast = None
    x = t
    if isinstance(x, E.Cast):
        cast, x = (x.dtype, x.weak), x.a
    if not isinstance(x, E.Load):
        return None
    bases, consts = [], []
    for c in x.idx:
        terms, c0 = E._lin_parts(c)
        bases.append(E.lin(terms, 0))
        consts.append(c0)
    return (cast, id(x.src), tuple(b.uid for b in bases)), tuple(consts), x, bases, cast


def _reroll(terms: list[E.Node]) -> list[E.Node]:
    """Loads of one array at evenly spaced offsets along one index, summed (an unrolled loop, a reduction tree
    written out), as one reduction over that index."""
    groups: dict = {}
    for i, t in enumerate(terms):
        p = _pattern(t)
        if p is not None:
            groups.setdefault(p[0], []).append((i, p))
    drop: set[int] = set()
    extra = []
    for members in groups.values():
        if len(members) < REROLL_MIN:
            continue
        consts = [m[1][1] for m in members]
        vary = [d for d in range(len(consts[0])) if len({c[d] for c in consts}) > 1]
        if len(vary) != 1:
            continue
        d = vary[0]
        offs = sorted(c[d] for c in consts)
        step = offs[1] - offs[0]
        if step <= 0 or any(b - a != step for a, b in zip(offs, offs[1:])):
            continue
        _, _, load, bases, cast = members[0][1]
        r = E.Sym("r", "red", len(offs))
        idx = list(load.idx)
        idx[d] = E.add(bases[d], E.add(E.const(offs[0]), E.mul(r, E.const(step))))
        for dd in range(len(idx)):
            if dd != d:
                idx[dd] = E.add(bases[dd], E.const(consts[0][dd]))
        body = E.load(load.src, tuple(idx), load.line)
        if cast is not None:
            body = E.cast(body, *cast)
        extra.append(E.reduce_("sum", r, body))
        drop |= {m[0] for m in members}
    if not extra:
        return terms
    return [t for i, t in enumerate(terms) if i not in drop] + extra


def _pinned(n: E.Node, ranges: dict) -> E.Node:
    """n with each variable the ranges fix to one value replaced by it (where(i == 0, f(i), ...) -> f(0))."""
    m = {v: E.const(lo) for v, (lo, hi) in ranges.items() if lo is not None and lo == hi and v in n.free}
    return E.subst(n, m) if m else n


def _inclusive(terms: list[E.Node], kind: str) -> list[E.Node]:
    """An exclusive prefix reduction (over r < p) combined with its own term at p is the inclusive one (r <= p):
    `s` after `s += x[i, j]` inside the loop."""
    for i, t in enumerate(terms):
        core = t.a if isinstance(t, E.Cast) else t
        if not (isinstance(core, E.Reduce) and core.rkind == kind and isinstance(core.body, E.Select)):
            continue
        c = core.body.c
        if not (isinstance(c, E.Bin) and c.op == "lt" and c.a is core.var and isinstance(c.b, E.Sym)):
            continue
        at = E.subst(core.body.a, {core.var: c.b})
        for j, u in enumerate(terms):
            if j != i and (u is at or isinstance(u, E.Cast) and u.a is at or E.cast(at, u.dtype) is u):
                body = E.select(E.compare("le", core.var, c.b), core.body.a, core.body.b)
                new = E.reduce_(kind, core.var, body)
                new = E.cast(new, t.dtype) if isinstance(t, E.Cast) else new
                return [x for k, x in enumerate(terms) if k not in (i, j)] + [new]
    return terms

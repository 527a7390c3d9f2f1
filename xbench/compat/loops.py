"""Loops in a kernel: `for ... in range(...)` interpreted once for all iterations when it is a reduction (+=, -=,
*=, max, min) or a grid-stride loop, unrolled otherwise (and when it synchronises the grid); `while` loops whose
condition is the same for every thread, unrolled."""
from __future__ import annotations

import ast

import numpy as np

from . import expr as E
from .errors import NotSymbolic
from .memory import Write
from .values import LoopCtx, Poison, _same

UNROLL_MAX = 256          # iterations a loop may be unrolled into
WHILE_MAX = 1024


class Loops:
    """The loop statements of `interp.Interp` (a mixin: `self` is the interpreter)."""

    def s_While(self, s: ast.While) -> None:
        if s.orelse:
            raise self.err("while ... else is not supported", s, construct="while-else")
        lc = LoopCtx(None)
        self.frame.loops.append(lc)
        live_in = self.live
        for _ in range(WHILE_MAX):
            c = self.cond(s.test)
            d = self.decide(c)
            if d is False or self.live is E.FALSE:
                break
            if d is None:
                raise self.err(f"the condition of this while loop ({ast.unparse(s.test)}) differs between threads "
                               "or depends on the data", s, construct="data-dependent while loop",
                               hint="write the loop as for ... in range(...) with a bound the same for every thread")
            self.block(s.body)
            self.live = E.lor(self.live, lc.cont)
            lc.cont = E.FALSE
        else:
            raise self.err(f"this while loop runs more than {WHILE_MAX} iterations", s, construct="long while loop")
        self.frame.loops.pop()
        self.live = E.land(live_in, E.lor(self.live, lc.brk)) if lc.brk is not E.FALSE else self.live

    # ---- for loops -----------------------------------------------------------------------------------------
    def s_For(self, s: ast.For) -> None:
        if s.orelse:
            raise self.err("for ... else is not supported", s, construct="for-else")
        it = s.iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range" and \
                it.func.id not in self.frame.env:
            args = [self.ev(a) for a in it.args]
            if not 1 <= len(args) <= 3 or it.keywords:
                raise self.err("range() takes 1 to 3 positional arguments", s, construct="range")
            args = [self.num(a, s) for a in args]
            start, stop, step = (E.ZERO, args[0], E.ONE) if len(args) == 1 else \
                (args[0], args[1], E.ONE) if len(args) == 2 else tuple(args)
            self.range_loop(s, start, stop, step)
            return
        v = self.ev(it)
        if isinstance(v, tuple):
            self.unroll_items(s, v)
            return
        raise self.err(f"a loop over {ast.unparse(it)} is not supported: loop over range(...)", s,
                       construct="for loop over a non-range")

    def unroll_items(self, s: ast.For, items: tuple) -> None:
        lc = LoopCtx(None)
        self.frame.loops.append(lc)
        for item in items:
            self.assign(s.target, item, s)
            self.block(s.body)
            self.live = E.lor(self.live, lc.cont)
            lc.cont = E.FALSE
        self.frame.loops.pop()
        self.live = E.lor(self.live, lc.brk)

    def range_loop(self, s: ast.For, start: E.Node, stop: E.Node, step: E.Node) -> None:
        st = E.try_concrete(step)
        if st is None or st == 0:
            raise self.err(f"the step of this loop ({ast.unparse(s.iter)}) must be a nonzero constant", s,
                           construct="loop step")
        a, b = E.try_concrete(start), E.try_concrete(stop)
        if a is not None and b is not None:
            trips = len(range(a, b, st))
            uniform = True
        else:
            lo_a, hi_a = E.bounds(start, self.ranges())
            lo_b, hi_b = E.bounds(stop, self.ranges())
            if st > 0:
                if lo_a is None or hi_b is None:
                    raise self.err(f"the bounds of this loop ({ast.unparse(s.iter)}) depend on the data", s,
                                   construct="data-dependent loop bound")
                trips = max(0, -((lo_a - hi_b) // st))
            else:
                if hi_a is None or lo_b is None:
                    raise self.err(f"the bounds of this loop ({ast.unparse(s.iter)}) depend on the data", s,
                                   construct="data-dependent loop bound")
                trips = max(0, -((hi_a - lo_b) // -st))
            uniform = False

        def guard(t):
            if uniform:
                return E.TRUE
            return E.compare("lt", t, stop) if st > 0 else E.compare("gt", t, stop)

        if trips == 0:
            return
        extent_expr = E.sub(stop, start) if uniform and st == 1 else None
        target = s.target
        if not isinstance(target, ast.Name):
            raise self.err("the loop variable must be a name", s, construct="loop target")
        if trips > 1 and not _has_grid_sync(s) and not _has_return(s):
            saved = self.st.clone()
            try:
                self.symbolic_loop(s, target.id, start, st, trips, guard, uniform, extent_expr)
                return
            except NotSymbolic as ns:
                self.st = saved
                why = ns.reason
        else:
            why = ("it synchronises the whole grid" if _has_grid_sync(s) else "it returns from inside the loop") \
                if trips > 1 else ""
        if trips > UNROLL_MAX:
            raise self.err(f"this loop ({trips} iterations) cannot be lifted as a whole ({why}) and is too long to "
                           "unroll", s, construct="loop", hint="accumulate with +=, *=, max or min in the loop, or "
                           "make the loop a grid-stride loop over elements")
        self.unrolled_loop(s, target.id, start, st, trips, guard, uniform)

    def unrolled_loop(self, s, name, start, st, trips, guard, uniform) -> None:
        lc = LoopCtx(None)
        self.frame.loops.append(lc)
        for n in range(trips):
            t = E.add(start, E.const(n * st))
            g = guard(t)
            if not uniform:
                lc.brk = E.lor(lc.brk, E.land(self.live, E.lnot(g)))
                self.live = E.land(self.live, g)
            self.set_name(name, t)
            self.block(s.body)
            self.live = E.lor(self.live, lc.cont)
            lc.cont = E.FALSE
            if self.live is E.FALSE:
                break
        self.frame.loops.pop()
        self.live = E.lor(self.live, lc.brk)

    def symbolic_loop(self, s, name, start, st, trips, guard, uniform, extent_expr) -> None:
        """Interpret the body once with the iteration `k` a variable; loop-carried locals must be reductions
        (+=, -=, *=, max, min) or values of the last iteration."""
        env0 = self.frame.env
        assigned = _assigned_names(s.body) | {name}
        carried = [n for n in sorted(assigned) if n in env0 and n != name]
        dt = {n: (E.wrap(env0[n]).dtype, E.wrap(env0[n]).weak) for n in carried
              if isinstance(env0[n], (E.Node, int, float, bool, np.generic))}
        base = self.st.clone()
        k = E.Sym(name, "loop", trips, extent_expr)
        t = E.add(start, E.mul(k, E.const(st)))
        for _attempt in range(3):
            self.st = base.clone()
            env = self.frame.env
            holders = {}
            for n in carried:
                if n in dt:
                    h = E.Sym(n, "carry", 0, dtype=dt[n][0])
                    h.weak = dt[n][1]
                    holders[n] = h
                    env[n] = h
            lc = LoopCtx(k, shared_marks={nm: len(sh.writes) for nm, sh in self.st.shared.items()},
                         carries=frozenset(holders.values()))
            self.frame.loops.append(lc)
            live0 = self.live
            g = guard(t)
            self.live = E.land(live0, g)
            n_writes = {nm: len(a.pending) for nm, a in self.st.arrays.items()}
            self.set_name(name, t)
            self.block(s.body)
            self.frame.loops.pop()
            new_env = self.frame.env
            changed = {n: (new_env[n].dtype, new_env[n].weak) for n, h in holders.items()
                       if isinstance(new_env.get(n), E.Node) and new_env[n].dtype != h.dtype}
            if not changed:
                break
            dt.update(changed)
        else:
            raise NotSymbolic("the type of a loop-carried value does not settle")
        after_live = E.lor(self.live, lc.cont)
        carry_syms = set(holders.values())
        if after_live.free & carry_syms:
            raise NotSymbolic("which threads run on depends on a loop-carried value")
        # a running value stored inside the loop (`s += x[i, j]; out[i, j] = s`): at iteration k the carried
        # value is the reduction over the iterations before it (written as a scan where it can be)
        running = {}
        for n, h in holders.items():
            nv = new_env.get(n)
            if isinstance(nv, E.Node):
                got = _accum_form(nv if uniform else E.select(g, nv, h), h)
                if got is not None and got[1] is not None and not (got[1].free & carry_syms):
                    running[h] = _prefix(got[0], got[1], k, E.cast(E.wrap(env0[n]), h.dtype), h.dtype)
        for nm, a in self.st.arrays.items():
            for i, w in enumerate(a.pending[n_writes.get(nm, 0):], n_writes.get(nm, 0)):
                used = (w.value.free | w.cond.free | _free_idx(w.idx)) & carry_syms
                if not used:
                    continue
                if not used <= set(running) or _free_idx(w.idx) & carry_syms:
                    raise NotSymbolic("it stores a running value it does not accumulate")
                a.pending[i] = Write(w.idx, E.subst(w.value, running), E.subst(w.cond, running), w.line, w.op,
                                     w.coords, w.phase)
        for nm, sh in self.st.shared.items():
            mark = lc.shared_marks.get(nm, 0)
            if len(sh.writes) > mark and nm in lc.stale_reads:
                raise NotSymbolic(f"it reads shared memory {nm} written in an earlier iteration")
            for w in sh.writes[mark:]:
                if (w.value.free | w.cond.free) & carry_syms:
                    raise NotSymbolic("it stores a running value in shared memory")
        out_env = dict(env0)
        last = {k: E.const(trips - 1)} if uniform else None
        for n in assigned:
            v = new_env.get(n)
            h = holders.get(n)
            if h is not None:
                init = E.wrap(env0[n])
                nv = E.wrap(v) if not isinstance(v, Poison) else None
                if nv is None:
                    out_env[n] = v
                    continue
                if not uniform:
                    nv = E.select(g, nv, h)
                res = _accumulate(nv, h, k, init, carry_syms)
                if res is None:
                    if h not in nv.free and not (nv.free & carry_syms) and last is not None:
                        res = E.subst(nv, last)
                    else:
                        raise NotSymbolic(f"`{n}` depends on its previous value in a way xbench does not lift "
                                          "(only +=, -=, *=, max and min)")
                out_env[n] = res
            elif isinstance(v, E.Node):
                if v.free & carry_syms:
                    raise NotSymbolic(f"`{n}` depends on a loop-carried value")
                out_env[n] = E.subst(v, last) if last is not None else \
                    Poison(f"`{n}` after the loop at line {self.frame.src.lineno(s.lineno)}: its last iteration "
                           "differs between threads", s.lineno)
            elif v is not None and n not in env0:
                out_env[n] = v
            elif n in env0 and not _same(v, env0[n]):
                raise NotSymbolic(f"`{n}` changes kind inside the loop")
        self.frame.env = out_env
        self.live = live0 if lc.brk is E.FALSE else E.lor(after_live, lc.brk)
        # shared writes made in the loop are, after it, those of its last iteration
        for nm, sh in self.st.shared.items():
            mark = lc.shared_marks.get(nm, len(sh.writes))
            if len(sh.writes) > mark:
                if last is None:
                    raise NotSymbolic("shared memory written in a loop whose last iteration differs between threads")
                sh.writes[mark:] = [Write(tuple(E.subst(i, last) for i in w.idx), E.subst(w.value, last),
                                          E.subst(w.cond, last), w.line, w.op, w.coords, w.phase)
                                    for w in sh.writes[mark:]]


def _free_idx(idx) -> frozenset:
    out: frozenset = frozenset()
    for i in idx:
        out |= i.free
    return out


def _assigned_names(body) -> set[str]:
    out = set()
    for n in ast.walk(ast.Module(body=list(body), type_ignores=[])):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
    return out


def _has_return(s: ast.For) -> bool:
    return any(isinstance(n, ast.Return) for n in ast.walk(s))


def _has_grid_sync(s: ast.For) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr in ("sync",) for n in ast.walk(s))


def _accumulate(nv: E.Node, h: E.Sym, k: E.Sym, init: E.Node, carries: set) -> E.Node | None:
    """nv as `h (op) f(k)`: the loop's result `init (op) reduce_k f`, or None."""
    got = _accum_form(nv, h)
    if got is None:
        return None
    kind, f = got
    if f is None:
        return init
    if f.free & carries:
        return None
    r = E.reduce_(kind, k, f)
    dt = nv.dtype
    init = E.cast(init, dt)
    if kind == "sum":
        return E.add(init, r) if not _is_ident(init, "sum") else E.cast(r, dt)
    if kind == "prod":
        return E.mul(init, r) if not _is_ident(init, "prod") else E.cast(r, dt)
    return E.binary(kind, init, r) if not _is_ident(init, kind) else E.cast(r, dt)


def _prefix(kind: str, f: E.Node, k: E.Sym, init: E.Node, dtype: str) -> E.Node:
    """init (op) the reduction of f over the iterations before k."""
    r = E.Sym(f"{k.name}_", "loop", k.extent, k.extent_expr)
    body = E.select(E.compare("lt", r, k), E.subst(f, {k: r}), E.identity(kind, f.dtype))
    red = E.cast(E.reduce_(kind, r, body), dtype)
    if _is_ident(init, kind):
        return red
    return E.add(init, red) if kind == "sum" else E.mul(init, red) if kind == "prod" else E.binary(kind, init, red)


def _is_ident(n: E.Node, kind: str) -> bool:
    if not isinstance(n, E.Const):
        return False
    v = n.value
    return {"sum": v == 0, "prod": v == 1, "max": v == -np.inf, "min": v == np.inf}[kind]


def _accum_form(n: E.Node, h: E.Sym):
    """(kind, f) with n == h op f, f free of h; (kind, None) when n is h itself."""
    if n is h:
        return ("sum", None)
    if h not in n.free:
        return None
    if isinstance(n, E.Cast) and n.a is h:
        return ("sum", None)
    if isinstance(n, E.Lin):
        terms = dict(n.terms)
        if terms.get(h) == 1:
            rest = E.lin({t: c for t, c in terms.items() if t is not h}, n.const, n.dtype)
            return None if h in rest.free else ("sum", rest)
        return None
    if isinstance(n, E.Bin):
        a, b = _strip(n.a, h), _strip(n.b, h)
        if n.op in ("add", "mul", "max", "min"):
            kind = {"add": "sum", "mul": "prod"}.get(n.op, n.op)
            if a is h and h not in n.b.free:
                return kind, n.b
            if b is h and h not in n.a.free:
                return kind, n.a
        if n.op == "sub" and a is h and h not in n.b.free:
            return "sum", E.neg(n.b)
        return None
    if isinstance(n, E.Select):
        if h in n.c.free:
            c = n.c
            if isinstance(c, E.Bin) and c.op in ("gt", "ge", "lt", "le"):
                x, y = _strip(c.a, h), _strip(c.b, h)
                other = n.a if _strip(n.b, h) is h else n.b if _strip(n.a, h) is h else None
                if other is not None and h not in other.free:
                    picks_other = _strip(n.b, h) is h      # where(c, other, h)
                    if (x is other or c.a is other) and y is h:        # other > h
                        big = c.op in ("gt", "ge")
                        return ("max" if big == picks_other else "min"), other
                    if x is h and (y is other or c.b is other):        # h < other
                        big = c.op in ("lt", "le")
                        return ("max" if big == picks_other else "min"), other
            return None
        fa, fb = _accum_form(n.a, h), _accum_form(n.b, h)
        if fa is None or fb is None:
            return None
        ka, kb = fa[0], fb[0]
        if fa[1] is None:
            ka = kb
        if fb[1] is None:
            kb = ka
        if ka != kb:
            return None
        ident = E.identity(ka, n.dtype)
        return ka, E.select(n.c, fa[1] if fa[1] is not None else ident, fb[1] if fb[1] is not None else ident)
    return None


def _strip(n: E.Node, h: E.Sym) -> E.Node:
    while isinstance(n, E.Cast) and n.a.free == frozenset((h,)):
        n = n.a
    return n

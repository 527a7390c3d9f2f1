"""Shrinking a failing operator to a minimal one that fails the same way.

Greedy, to a fixed point within a time budget: keep one output, drop outputs, replace a statement by an
input holding the value it computed, route a statement's uses to an operand of the same type, halve input
sizes, simplify input values. Each candidate must still trace, and `fails(candidate)` must still hold.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import numpy as np

from ..errors import XbenchError
from .program import Program
from .values import Recipe, literal

MAX_LITERAL = 4096


def statement_value(prog: Program, name: str) -> np.ndarray | None:
    """What statement `name` evaluates to (the reference's value, in the statement's dtype)."""
    from ..backends.reference import evaluate
    from ..dtypes import to_numpy
    sub = prog.copy(outputs=[name]).dead_code()
    try:
        op = sub.operator()
        arrays = sub.arrays()
        graph = op.trace(*arrays)
        with np.errstate(all="ignore"):
            v = evaluate(graph, *arrays)[0]
            dt = next(s.dtype for s in prog.stmts if s.name == name)
            return np.asarray(v).astype(to_numpy(dt) if dt != "bool" else np.bool_)
    except (XbenchError, Exception):
        return None


def candidates(prog: Program) -> Iterator[Program]:
    if len(prog.outputs) > 1:
        for o in prog.outputs:
            yield prog.copy(outputs=[o]).dead_code()
        for o in prog.outputs:
            yield prog.copy(outputs=[x for x in prog.outputs if x != o]).dead_code()
    types = prog.types()
    for s in reversed(prog.stmts):
        for u in s.uses:
            if u in types and types[u] == (s.shape, s.dtype):
                yield prog.bypass(s.name, u)
    for s in prog.stmts:
        if s.name in prog.outputs and len(prog.stmts) == 1:
            continue
        v = statement_value(prog, s.name)
        if v is not None and v.size <= 8 * MAX_LITERAL:
            yield prog.as_input(s.name, v)
    for inp in prog.inputs:
        yield from _smaller_inputs(prog, inp)
    for inp in prog.inputs:
        yield from _simpler_values(prog, inp)


def _smaller_inputs(prog: Program, inp) -> Iterator[Program]:
    a = inp.recipe.make()
    for axis, n in enumerate(inp.shape):
        if n <= 1:
            continue
        for m in sorted({1, n // 2}):
            idx = [slice(None)] * a.ndim
            idx[axis] = slice(0, m)
            b = a[tuple(idx)]
            if b.size <= MAX_LITERAL:
                r = literal(b)
            else:
                r = Recipe(b.shape, inp.dtype, inp.recipe.kind, inp.recipe.seed, inp.recipe.params,
                           tuple((i, v) for i, v in inp.recipe.specials if i < b.size), inp.recipe.data
                           if inp.recipe.kind != "literal" else b)
            yield prog.with_input(inp.name, shape=b.shape, recipe=r)


def _simpler_values(prog: Program, inp) -> Iterator[Program]:
    r = inp.recipe
    if r.specials:
        yield prog.with_input(inp.name, recipe=Recipe(r.shape, r.dtype, r.kind, r.seed, r.params, (), r.data))
    a = r.make()
    if 1 < a.size <= 64:
        flat = a.reshape(-1)
        zero = np.zeros((), a.dtype)
        for lo, hi in ((0, a.size // 2), (a.size // 2, a.size)):
            b = flat.copy()
            b[lo:hi] = zero
            if not np.array_equal(b, flat, equal_nan=a.dtype.kind == "f"):
                yield prog.with_input(inp.name, recipe=literal(b.reshape(a.shape)))


def shrink(prog: Program, fails: Callable[[Program], bool], budget_s: float = 120.0,
           log: Callable[[str], None] | None = None) -> tuple[Program, int]:
    """The smallest program found that still `fails`, and the number of candidates tried."""
    t_end = time.monotonic() + budget_s
    best, tried = prog, 0
    improved = True
    while improved and time.monotonic() < t_end:
        improved = False
        for cand in candidates(best):
            if time.monotonic() >= t_end:
                break
            if cand.size() >= best.size() or not cand.outputs:
                continue
            tried += 1
            try:
                ok = fails(cand)
            except Exception:            # a candidate the language refuses, or one that breaks elsewhere
                ok = False
            if ok:
                best = cand
                improved = True
                if log:
                    log(f"    shrunk to {len(best.stmts)} statement(s), {sum(i.recipe.size for i in best.inputs)} "
                        "input elements")
                break
    return best, tried

"""Pieces of generated source that the module writer (`codegen`) and the contraction writer (`contract`) share."""
from __future__ import annotations

import numpy as np

from ...ir.expr import Cast, Expr
from ..pyemit import Indent, Source
from . import lowp

__all__ = ["SCRATCH", "Indent", "blas_serial", "cast", "prod", "unravel", "unrounded"]

SCRATCH = "  # per thread"          # marks a parallel loop body's scratch allocation: hoisted out of a task's loops


def prod(axes) -> int:
    return int(np.prod([a.extent for a in axes], dtype=np.int64)) if axes else 1


def unravel(src: Source, flat: str, axes, tmp: str) -> None:
    """Assign each axis variable its coordinate in the row-major flat index `flat` (temporaries `tmp<i>`)."""
    rem = flat
    for i, a in enumerate(axes):
        if i == len(axes) - 1:
            src(f"{a.name} = {rem}")
        else:
            inner = prod(axes[i + 1:])
            src(f"{a.name} = {rem} // {inner}")
            src(f"{tmp}{i} = {rem} % {inner}")
            rem = f"{tmp}{i}"


def cast(e: Expr, dtype: str) -> Expr:
    """`e` as `dtype` (itself when it already is)."""
    return e if e.dtype == dtype else Cast(e, dtype)


def unrounded(value: str, dtype: str) -> str:
    """`value` without an outer cast to the 16-bit `dtype` it is about to be stored as (the store rounds once)."""
    rounded = f"{lowp.LOAD[dtype]}({lowp.STORE[dtype]}("
    if value.startswith(rounded) and value.endswith("))") and _balanced(value[len(rounded):-2]):
        return value[len(rounded):-2]
    return value


def _balanced(text: str) -> bool:
    """Whether every parenthesis in `text` closes within it (so it is one argument, not the end of another)."""
    depth = 0
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


def blas_serial(sched) -> bool:
    """Kernels that call BLAS from their own parallel loops, or for GEMMs too small to share, on one BLAS
    thread."""
    return bool(sched.get("batch_parallel", False)) or sched.get("window") == "winograd" or \
        sched.get("blas_threads") == 1

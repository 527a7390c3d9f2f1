"""The closed set of graph primitives. Each is one object carrying its rules:

- `abstract(*in_types, **params) -> [(shape, dtype), ...]` — shape and dtype inference;
- `reference(*arrays, **params) -> array | tuple` — numpy meaning (float64 for floats): the ground truth;
- `flops(eqn) -> int` — arithmetic cost, for rooflines and the predictor;
- `lower(eqn, index, ctx) -> Expr` — the value at one output index, for primitives fused into consumers;
- `build(eqn, ctx) -> Kernel` — for *root* primitives (reductions, contractions, scans, sorts, scatters), which
  end a kernel and take fused epilogues;
- `vjp(eqn, cotangents, ...)` — the reverse-mode rule (installed by `xbench.ir.autodiff`).

Adding a primitive means adding one object in one of the family modules here; library operators in
`kernels/` never touch the compiler.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

REGISTRY: dict[str, Primitive] = {}


class Primitive:
    def __init__(self, name: str, *, root: bool = False, multiple_results: bool = False):
        self.name = name
        self.root = root
        self.multiple_results = multiple_results
        self.abstract: Callable[..., list[tuple[tuple[int, ...], str]]] | None = None
        self.reference: Callable[..., Any] | None = None
        self.flops: Callable[..., int] = lambda eqn: 0
        self.lower: Callable[..., Any] | None = None
        self.build: Callable[..., Any] | None = None
        self.vjp: Callable[..., Any] | None = None
        if name in REGISTRY:
            raise ValueError(f"primitive {name!r} defined twice")
        REGISTRY[name] = self

    def def_abstract(self, f):
        self.abstract = f
        return f

    def def_reference(self, f):
        self.reference = f
        return f

    def def_flops(self, f):
        self.flops = f
        return f

    def def_lower(self, f):
        self.lower = f
        return f

    def def_build(self, f):
        self.build = f
        return f

    def def_vjp(self, f):
        self.vjp = f
        return f

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


from . import contract, creation, elementwise, indexing, movement, reduce, scan_sort  # noqa: E402,F401

__all__ = ["Primitive", "REGISTRY"]

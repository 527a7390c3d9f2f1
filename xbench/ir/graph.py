"""The graph IR: SSA values (`Var`), equations applying a primitive (`Eqn`), and the `Graph` holding them.

Shapes are concrete: a graph is one specialisation of an operator for the sizes its dims were bound to.
"""
from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import SHORT
from ..errors import Location

_ids = itertools.count()


class Var:
    """One value of the graph: a tensor with a static shape and an element type."""

    __slots__ = ("id", "shape", "dtype", "hint")

    def __init__(self, shape: tuple[int, ...], dtype: str, hint: str = ""):
        self.id = next(_ids)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.hint = hint

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def type_str(self) -> str:
        return f"{SHORT[self.dtype]}[{','.join(map(str, self.shape))}]"

    def __repr__(self) -> str:
        return f"Var({self.hint or self.id}: {self.type_str})"


@dataclass
class Eqn:
    """`outputs = prim[params](*inputs)`."""

    prim: Any                       # ir.prims.Primitive
    inputs: tuple[Var, ...]
    params: dict[str, Any]
    outputs: tuple[Var, ...]
    loc: Location | None = None

    @property
    def out(self) -> Var:
        return self.outputs[0]


@dataclass
class Graph:
    name: str
    inputs: list[Var]
    outputs: list[Var]
    eqns: list[Eqn]
    input_names: list[str] = field(default_factory=list)
    dims: dict[str, int] = field(default_factory=dict)
    static_args: dict[str, Any] = field(default_factory=dict)

    def producers(self) -> dict[int, Eqn]:
        return {v.id: e for e in self.eqns for v in e.outputs}

    def consumers(self) -> dict[int, list[Eqn]]:
        out: dict[int, list[Eqn]] = {}
        for e in self.eqns:
            for v in e.inputs:
                out.setdefault(v.id, []).append(e)
        return out

    def vars(self) -> Iterator[Var]:
        yield from self.inputs
        for e in self.eqns:
            yield from e.outputs

    def text(self) -> str:
        return print_graph(self)

    def __str__(self) -> str:
        return self.text()

    def signature_key(self) -> str:
        """A canonical text of the graph without source locations or var ids: the compile-cache key."""
        return print_graph(self, with_loc=False, with_header=False)


def _fmt_param(value: Any) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 4:
            return np.array2string(value, separator=",")
        return f"<{value.dtype}{list(value.shape)} #{hashlib.sha1(value.tobytes()).hexdigest()[:8]}>"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ",".join(_fmt_param(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def print_graph(g: Graph, *, with_loc: bool = True, with_header: bool = True) -> str:
    names: dict[int, str] = {}
    for v, n in zip(g.inputs, g.input_names or [f"in{i}" for i in range(len(g.inputs))]):
        names[v.id] = n
    counter = itertools.count()

    def name(v: Var) -> str:
        if v.id not in names:
            names[v.id] = f"%{next(counter)}"
        return names[v.id]

    lines = []
    if with_header:
        dims = " ".join(f"{k}={v}" for k, v in g.dims.items())
        statics = " ".join(f"{k}={v!r}" for k, v in g.static_args.items())
        args = ", ".join(f"{name(v)}: {v.type_str}" for v in g.inputs)
        outs = ", ".join(v.type_str for v in g.outputs)
        tail = "   # " + "  ".join(x for x in (dims, statics) if x) if (dims or statics) else ""
        lines.append(f"graph {g.name}({args}) -> {outs}{tail}")
    else:
        lines.append("(" + ", ".join(f"{name(v)}: {v.type_str}" for v in g.inputs) + ")")
    for e in g.eqns:
        outs = ", ".join(f"{name(v)}: {v.type_str}" for v in e.outputs)
        params = ", ".join(f"{k}={_fmt_param(v)}" for k, v in e.params.items())
        args = " ".join(name(v) for v in e.inputs)
        text = f"  {outs} = {e.prim.name}{'[' + params + ']' if params else ''} {args}".rstrip()
        if with_loc and e.loc is not None:
            text = f"{text:<72}  # line {e.loc.lineno}"
        lines.append(text)
    lines.append("  return " + ", ".join(name(v) for v in g.outputs))
    return "\n".join(lines)

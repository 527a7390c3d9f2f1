"""The loop IR: kernels as loop nests over an output index space, with stages computed per point.

A `Kernel` iterates over its `outer` axes (the parallel, spatial part). At each outer point it runs its
`stages` in order:

- `Reduce`  — a scalar per point, reduced over its own axes (sum, prod, max, min, argmax, argmin, any, all);
- `Contract`— a scalar per point, sum over its axes of lhs * rhs (matmul, einsum, convolution);
- `Assign`  — a scalar per point from earlier locals (a fused epilogue value);
- `Store`   — writes a value for every point of its own axes into a buffer (global, or a row-local scratch
              shared by later stages of the same point);
- `Scan`, `Sort`, `ScatterAdd` — the templates that need their own loop shapes.

Elementwise kernels have a single `Store` with no axes; softmax fused by rows has outer = rows and stages
[Reduce max, Reduce sum, Store]; a matmul with a GELU epilogue has [Contract, Store]. Each backend maps this
one structure to its own code and reads the kernel's `Schedule`.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import SHORT
from .expr import Expr, Idx, Load, Local


@dataclass(frozen=True)
class Axis:
    name: str
    extent: int

    @property
    def var(self) -> Idx:
        return Idx(self.name)

    def __str__(self) -> str:
        return f"{self.name}<{self.extent}"


def _axes(axes: tuple[Axis, ...]) -> str:
    return ", ".join(map(str, axes))


@dataclass
class Reduce:
    local: str
    kind: str                 # sum prod max min argmax argmin any all
    axes: tuple[Axis, ...]
    body: Expr
    dtype: str                # accumulator type (argmax/argmin: the value type; the index is int64)
    index_local: str | None = None

    def exprs(self) -> tuple[Expr, ...]:
        return (self.body,)

    def replace(self, f) -> Reduce:
        return Reduce(self.local, self.kind, self.axes, f(self.body), self.dtype, self.index_local)

    def text(self) -> str:
        tgt = f"{self.local}, {self.index_local}" if self.index_local else self.local
        return f"{tgt} = {self.kind}[{_axes(self.axes)}] {self.body}"


@dataclass
class Contract:
    local: str
    axes: tuple[Axis, ...]    # contracted (k) axes
    lhs: Expr
    rhs: Expr
    dtype: str                # accumulator type
    roles: tuple[int, int, int] = (0, 0, 0)   # how many outer axes are batch, lhs-free (m), rhs-free (n)

    def exprs(self) -> tuple[Expr, ...]:
        return (self.lhs, self.rhs)

    def replace(self, f) -> Contract:
        return Contract(self.local, self.axes, f(self.lhs), f(self.rhs), self.dtype, self.roles)

    def text(self) -> str:
        return f"{self.local} = contract[{_axes(self.axes)}] {self.lhs} * {self.rhs}"


@dataclass
class Assign:
    local: str
    value: Expr

    def exprs(self) -> tuple[Expr, ...]:
        return (self.value,)

    def replace(self, f) -> Assign:
        return Assign(self.local, f(self.value))

    def text(self) -> str:
        return f"{self.local} = {self.value}"


@dataclass
class Store:
    buf: str
    axes: tuple[Axis, ...]
    index: tuple[Expr, ...]
    value: Expr
    scope: str = "global"     # global | row

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.index, self.value)

    def replace(self, f) -> Store:
        return Store(self.buf, self.axes, tuple(f(i) for i in self.index), f(self.value), self.scope)

    def text(self) -> str:
        loop = f" for {_axes(self.axes)}" if self.axes else ""
        where = " (row)" if self.scope == "row" else ""
        return f"{self.buf}{where}[{', '.join(map(str, self.index))}] = {self.value}{loop}"


@dataclass
class Scan:
    """Running `kind` (sum, prod, max, min) along `axis`, stored at `index` for every step."""
    buf: str
    axis: Axis
    index: tuple[Expr, ...]
    body: Expr
    kind: str
    dtype: str
    reverse: bool = False

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.index, self.body)

    def replace(self, f) -> Scan:
        return Scan(self.buf, self.axis, tuple(f(i) for i in self.index), f(self.body), self.kind, self.dtype,
                    self.reverse)

    def text(self) -> str:
        rev = " reverse" if self.reverse else ""
        return f"{self.buf}[{', '.join(map(str, self.index))}] = scan.{self.kind}{rev}[{self.axis}] {self.body}"


@dataclass
class Sort:
    """Sort the values `body` along `axis` (stable); write values and/or source positions at `index`."""
    values_buf: str | None
    indices_buf: str | None
    axis: Axis
    index: tuple[Expr, ...]
    body: Expr
    descending: bool = False

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.index, self.body)

    def replace(self, f) -> Sort:
        return Sort(self.values_buf, self.indices_buf, self.axis, tuple(f(i) for i in self.index), f(self.body),
                    self.descending)

    def text(self) -> str:
        outs = ", ".join(b for b in (self.values_buf, self.indices_buf) if b)
        order = "descending" if self.descending else "ascending"
        return f"{outs}[{', '.join(map(str, self.index))}] = sort.{order}[{self.axis}] {self.body}"


@dataclass
class ScatterAdd:
    """`buf[index] += value` for every point of `axes` (index may depend on loaded data)."""
    buf: str
    axes: tuple[Axis, ...]
    index: tuple[Expr, ...]
    value: Expr

    def exprs(self) -> tuple[Expr, ...]:
        return (*self.index, self.value)

    def replace(self, f) -> ScatterAdd:
        return ScatterAdd(self.buf, self.axes, tuple(f(i) for i in self.index), f(self.value))

    def text(self) -> str:
        return f"{self.buf}[{', '.join(map(str, self.index))}] += {self.value} for {_axes(self.axes)}"

    def disjoint_axis(self) -> Axis | None:
        """An axis that alone indexes one dimension of the target, so that points differing in it add into
        different elements (whatever the other dimensions' indices, which may depend on it too: a max pool's
        gradient per plane): the points can be split along it with no two parts adding into one element, each
        element still receiving its additions in the same order. The longest such axis."""
        found = [a for a in self.axes if any(isinstance(i, Idx) and i.name == a.name for i in self.index)]
        return max(found, key=lambda a: a.extent, default=None)


Stage = Reduce | Contract | Assign | Store | Scan | Sort | ScatterAdd


@dataclass
class Kernel:
    name: str
    kind: str                           # elementwise | reduce | row | contract | scan | sort | scatter
    outer: tuple[Axis, ...]
    stages: list[Stage]
    row_buffers: dict[str, tuple[tuple[int, ...], str]] = field(default_factory=dict)
    locals: dict[str, str] = field(default_factory=dict)     # local name -> dtype
    origin: list[str] = field(default_factory=list)          # graph primitives fused in, for display

    def exprs(self) -> Iterator[Expr]:
        for s in self.stages:
            yield from s.exprs()

    def _memo(self, what: str, compute):
        """`compute()` once per content of the kernel (its stages and row buffers): fusion asks every kernel
        for its reads again and again, and walking large index expressions is the cost of lowering big graphs."""
        key = (what, tuple(map(id, self.stages)), tuple(self.row_buffers))
        memo = self.__dict__.setdefault("_memo_cache", {})
        hit = memo.get(what)
        if hit is not None and hit[0] == key:
            return hit[1]
        value = compute()
        memo[what] = (key, value)
        return value

    def reads(self) -> list[str]:
        def compute():
            seen: dict[str, None] = {}
            for e in self.exprs():
                for n in e.walk():
                    if isinstance(n, Load) and n.buf not in self.row_buffers:
                        seen.setdefault(n.buf)
            return tuple(seen)
        return list(self._memo("reads", compute))

    def writes(self) -> list[str]:
        def compute():
            out = []
            for s in self.stages:
                for b in (getattr(s, "buf", None), getattr(s, "values_buf", None), getattr(s, "indices_buf", None)):
                    if b and b not in self.row_buffers and b not in out:
                        out.append(b)
            return tuple(out)
        return list(self._memo("writes", compute))

    def points(self) -> int:
        return int(np.prod([a.extent for a in self.outer], dtype=np.int64))

    def text(self) -> str:
        head = f"kernel {self.name} ({self.kind})"
        if self.outer:
            head += f" for {_axes(self.outer)}"
        lines = [head + ":"]
        for name, (shape, dtype) in self.row_buffers.items():
            lines.append(f"    {name}: {SHORT[dtype]}[{','.join(map(str, shape))}] (row scratch)")
        lines += [f"    {s.text()}" for s in self.stages]
        return "\n".join(lines)

    def signature(self) -> str:
        """Everything that defines the kernel's code, independent of its name."""
        return self.text().split(":", 1)[1] + repr(sorted(self.row_buffers.items()))


@dataclass
class Buffer:
    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str                      # input | output | temp | const
    value: Any = None              # the data of a const buffer

    @property
    def nbytes(self) -> int:
        from ..dtypes import itemsize
        return int(np.prod(self.shape, dtype=np.int64)) * itemsize(self.dtype)

    def type_str(self) -> str:
        return f"{SHORT[self.dtype]}[{','.join(map(str, self.shape))}]"


@dataclass
class Program:
    """The kernels of one operator specialisation and the buffers they pass between them."""
    name: str
    buffers: dict[str, Buffer]
    inputs: list[str]
    outputs: list[str]
    kernels: list[Kernel]
    aliases: dict[str, str] = field(default_factory=dict)   # output buffer -> input buffer it equals
    graph: Any = None                                         # the graph IR it was lowered from

    def text(self) -> str:
        ins = ", ".join(f"{n}: {self.buffers[n].type_str()}" for n in self.inputs)
        outs = ", ".join(f"{n}: {self.buffers[n].type_str()}" for n in self.outputs)
        lines = [f"program {self.name}({ins}) -> ({outs})"]
        temps = [b for b in self.buffers.values() if b.role in ("temp", "const")]
        for b in temps:
            lines.append(f"  {b.role} {b.name}: {b.type_str()}")
        for k in self.kernels:
            lines.append("  " + k.text().replace("\n", "\n  "))
        for o, i in self.aliases.items():
            lines.append(f"  {o} = {i}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def key(self) -> str:
        """Canonical text for cache keys (const buffer contents included by digest)."""
        import hashlib
        parts = [self.text()]
        for b in self.buffers.values():
            if b.role == "const":
                parts.append(hashlib.sha1(np.ascontiguousarray(b.value).tobytes()).hexdigest())
        return "\n".join(parts)


def locals_used(e: Expr) -> set[str]:
    return {n.name for n in e.walk() if isinstance(n, Local)}

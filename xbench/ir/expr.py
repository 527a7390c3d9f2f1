"""Scalar expressions of the loop IR: what a kernel computes at one point of its iteration space.

Expressions are immutable and hashable, so backends can share common subexpressions. Index arithmetic is
built through `add`, `mul`, `floordiv`, `mod`, `clamp` that fold constants as they go, keeping indices
affine wherever the movement ops allow (broadcast, permute, slice, window, most reshapes).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

INDEX = "int64"


class Expr:
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return ()

    def walk(self) -> Iterator[Expr]:
        yield self
        for c in self.children():
            yield from c.walk()

    def map(self, f: Callable[[Expr], Expr | None]) -> Expr:
        """Rebuild bottom-up, replacing each node `n` by `f(n)` when that is not None."""
        new = self._rebuild(tuple(c.map(f) for c in self.children()))
        out = f(new)
        return new if out is None else out

    def _rebuild(self, kids: tuple[Expr, ...]) -> Expr:
        return self


@dataclass(frozen=True)
class Const(Expr):
    value: float | int | bool
    dtype: str

    def __str__(self) -> str:
        if self.dtype == "bool":
            return "True" if self.value else "False"
        return repr(self.value)


@dataclass(frozen=True)
class Idx(Expr):
    """A loop variable."""
    name: str
    dtype: str = INDEX

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Local(Expr):
    """A per-point scalar computed by an earlier stage of the same kernel (a reduction result, a let)."""
    name: str
    dtype: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Load(Expr):
    buf: str
    index: tuple[Expr, ...]
    dtype: str

    def children(self):
        return self.index

    def _rebuild(self, kids):
        return Load(self.buf, kids, self.dtype)

    def __str__(self) -> str:
        return f"{self.buf}[{', '.join(map(str, self.index))}]"


@dataclass(frozen=True)
class Call(Expr):
    """A scalar function from `ir.scalar` (unary or binary), or index arithmetic."""
    fn: str
    args: tuple[Expr, ...]
    dtype: str

    def children(self):
        return self.args

    def _rebuild(self, kids):
        return Call(self.fn, kids, self.dtype)

    def __str__(self) -> str:
        from .scalar import BINARY
        if len(self.args) == 2 and self.fn in BINARY and BINARY[self.fn].symbol and \
                BINARY[self.fn].symbol.isascii() and not BINARY[self.fn].symbol.isalpha():
            return f"({self.args[0]} {BINARY[self.fn].symbol} {self.args[1]})"
        if self.fn == "neg":
            return f"-{self.args[0]}"
        return f"{self.fn}({', '.join(map(str, self.args))})"


@dataclass(frozen=True)
class Select(Expr):
    """`a if cond else b`; only the chosen side is evaluated (backends must keep it lazy: the other side
    may index out of bounds, e.g. the padding of a window), unless every read in both sides is known to stay
    inside its buffer, which a backend may then evaluate first and choose without a branch."""
    cond: Expr
    a: Expr
    b: Expr
    dtype: str

    def children(self):
        return (self.cond, self.a, self.b)

    def _rebuild(self, kids):
        return Select(*kids, self.dtype)

    def __str__(self) -> str:
        return f"({self.a} if {self.cond} else {self.b})"


@dataclass(frozen=True)
class Cast(Expr):
    x: Expr
    dtype: str

    def children(self):
        return (self.x,)

    def _rebuild(self, kids):
        return Cast(kids[0], self.dtype)

    def __str__(self) -> str:
        return f"{self.dtype}({self.x})"


# ---- index arithmetic with folding -----------------------------------------------------------------------

def const(v: int) -> Const:
    return Const(int(v), INDEX)


ZERO = const(0)


def _is(e: Expr, v: int) -> bool:
    return isinstance(e, Const) and e.value == v


def add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return const(a.value + b.value)
    if _is(a, 0):
        return b
    if _is(b, 0):
        return a
    if isinstance(a, Const):
        a, b = b, a
    # (x + c1) + c2 -> x + (c1 + c2)
    if isinstance(b, Const) and isinstance(a, Call) and a.fn == "add" and isinstance(a.args[1], Const):
        return add(a.args[0], const(a.args[1].value + b.value))
    return Call("add", (a, b), INDEX)


def sub(a: Expr, b: Expr) -> Expr:
    if isinstance(b, Const):
        return add(a, const(-b.value))
    return Call("sub", (a, b), INDEX)


def mul(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return const(a.value * b.value)
    if isinstance(a, Const):
        a, b = b, a
    if _is(b, 0):
        return ZERO
    if _is(b, 1):
        return a
    return Call("mul", (a, b), INDEX)


def floordiv(a: Expr, b: int) -> Expr:
    if b == 1:
        return a
    if isinstance(a, Const):
        return const(a.value // b)
    return Call("floordiv", (a, const(b)), INDEX)


def mod(a: Expr, b: int) -> Expr:
    if b == 1:
        return ZERO
    if isinstance(a, Const):
        return const(a.value % b)
    return Call("mod", (a, const(b)), INDEX)


def clamp(a: Expr, lo: int, hi: int) -> Expr:
    if isinstance(a, Const):
        return const(min(max(a.value, lo), hi))
    return Call("minimum", (Call("maximum", (a, const(lo)), INDEX), const(hi)), INDEX)


def lt(a: Expr, b: Expr) -> Expr:
    return Call("lt", (a, b), "bool")


def ge(a: Expr, b: Expr) -> Expr:
    return Call("ge", (a, b), "bool")


def logical_and(a: Expr | None, b: Expr) -> Expr:
    return b if a is None else Call("logical_and", (a, b), "bool")


def linear(index: tuple[Expr, ...], shape: tuple[int, ...]) -> Expr:
    """Row-major linear offset of `index` in `shape`."""
    out: Expr = ZERO
    for i, n in zip(index, shape):
        out = add(mul(out, const(n)), i)
    return out


def unravel(flat: Expr, shape: tuple[int, ...]) -> tuple[Expr, ...]:
    """Inverse of `linear`."""
    out = []
    stride = 1
    for n in reversed(shape):
        out.append(ZERO if n == 1 else mod(floordiv(flat, stride), n) if stride * n != 0 else ZERO)
        stride *= n
    out.reverse()
    # the outermost coordinate needs no modulo
    if shape and shape[0] != 1:
        out[0] = floordiv(flat, int(_prod(shape[1:])))
    return tuple(out)


def _prod(xs) -> int:
    p = 1
    for x in xs:
        p *= int(x)
    return p


def free_indices(e: Expr) -> set[str]:
    return {n.name for n in e.walk() if isinstance(n, Idx)}


def loads(e: Expr) -> Iterator[Load]:
    return (n for n in e.walk() if isinstance(n, Load))


def substitute(e: Expr, mapping: dict[str, Expr]) -> Expr:
    """Replace loop variables (by name) with expressions."""
    if not mapping:
        return e
    return e.map(lambda n: mapping.get(n.name) if isinstance(n, Idx) else None)

"""Symbolic dims: names for the sizes of operator arguments, bound at call time."""
from __future__ import annotations


class Dim:
    """A named size, e.g. `N` in `Tensor[N, D]`. Two Dims with the same name are the same dim."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        if not name.isidentifier():
            raise ValueError(f"dim name {name!r} is not an identifier; use letters, digits and underscores")
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other) -> bool:
        return isinstance(other, Dim) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("Dim", self.name))


def dims(spec: str) -> tuple[Dim, ...]:
    """`M, K, N = xb.dims("M K N")` (commas also separate)."""
    names = spec.replace(",", " ").split()
    if not names:
        raise ValueError("xb.dims needs at least one name, e.g. xb.dims(\"M K N\")")
    return tuple(Dim(n) for n in names)

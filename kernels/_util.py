"""Small helpers shared by library modules (argument normalisation only; no compiler internals)."""
from __future__ import annotations


def pair(v, n: int = 2) -> tuple[int, ...]:
    """PyTorch's `_pair`: an int or a sequence of n ints."""
    if isinstance(v, int):
        return (v,) * n
    v = tuple(int(x) for x in v)
    if len(v) != n:
        raise ValueError(f"expected {n} values, got {v}")
    return v

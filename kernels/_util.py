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


def wrap_dim(dim: int, ndim: int, name: str) -> int:
    """PyTorch's `maybe_wrap_dim`: a dim in [-ndim, ndim) counted from 0; a 0-d tensor takes 0 and -1, as if it
    had one dim of size 1."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise ValueError(f"{name}: dim {dim} is out of range for a tensor with {ndim} dims (use a dim in "
                         f"[{-n}, {n - 1}])")
    return dim % n


def wrap_dims(dims, ndim: int, name: str) -> tuple[int, ...]:
    """An int or a sequence of dims, each wrapped by `wrap_dim`."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return tuple(wrap_dim(int(d), ndim, name) for d in dims)


def vector(x):
    """A 0-d tensor as one of shape (1,), anything else as it is: PyTorch reduces, scans, sorts and indexes a 0-d
    tensor along dim 0 (or -1) as if it had that one dim, and gives 0-d results (see `scalar`)."""
    return x.reshape((1,)) if x is not None and getattr(x, "ndim", None) == 0 else x


def scalar(out):
    """The result(s) of an operator computed on `vector`-ed inputs, back to 0-d."""
    if isinstance(out, tuple):
        return tuple(o.reshape(()) for o in out)
    return out.reshape(())

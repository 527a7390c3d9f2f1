"""`Tensor`: the annotation users write (`Tensor[M, K]`) and the value their operator bodies compute with.

Inside an operator every argument is a `Tensor` with a static shape and dtype; operations on it record
equations of the graph IR. Python control flow over static values (shapes, loops over layers) just runs;
branching on a tensor's *value* cannot be traced and raises a clear error pointing at the line.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import DTYPES, DType, canonical
from ..errors import TraceError, user_location
from ..ir.graph import Var
from .dims import Dim
from .trace import untraceable


@dataclass(frozen=True)
class TensorSpec:
    """What an annotation `Tensor[M, K]`, `Tensor[..., D]`, `Tensor[N, 3, xb.float32]` asks of an argument."""

    dims: tuple[Any, ...] | None   # Dim | int | Ellipsis entries; None: any shape
    dtype: str | None = None

    def __repr__(self) -> str:
        if self.dims is None:
            inner = "..."
        else:
            inner = ", ".join("..." if d is Ellipsis else repr(d) for d in self.dims)
        if self.dtype:
            inner += f", {self.dtype}"
        return f"Tensor[{inner}]"


_DTYPE_NAMES = (*DTYPES, "half", "float", "double", "bf16", "fp16", "fp32", "fp64", "f16", "f32", "f64", "i32",
                "i64")


def _name_entry(name: str, e):
    """A string (or an undeclared name in a string annotation) in Tensor[...]: a dtype when it names one, else a
    dim, unless it looks like a misspelt dtype ("flaot32"), which is refused rather than read as a dim."""
    if name in DTYPES:
        return canonical(name)
    close = difflib.get_close_matches(name, _DTYPE_NAMES, n=1, cutoff=0.8) if len(name) > 2 else []
    if close:
        raise TraceError(f"Tensor[...] entry {name!r} looks like a misspelt dtype; did you mean {close[0]!r}?",
                         hint=f"dtypes are {', '.join(DTYPES)} (xb.float32, or the string); a dim's name must "
                              "not look like one", loc=user_location())
    if isinstance(e, Dim):
        return e
    try:
        return Dim(name)
    except ValueError as exc:
        raise TraceError(f"Tensor[...] entry {name!r}: {exc}", hint="dims are names such as 'N' or xb.dims('N D')",
                         loc=user_location()) from None


def _spec_entry(e):
    if e is Ellipsis:
        return e
    if isinstance(e, DType):
        return e
    if isinstance(e, Dim):
        return _name_entry(e.name, e)
    if isinstance(e, str):
        return _name_entry(e, e)
    if isinstance(e, (int, np.integer)) and not isinstance(e, bool):
        if e < 0:
            raise TraceError(f"a fixed size in Tensor[...] must be >= 0, got {e}", loc=user_location())
        return int(e)
    try:
        return canonical(e)
    except ValueError:
        raise TraceError(f"Tensor[...] entries are dims (xb.dims(...) or strings), sizes (ints), `...` "
                         f"or one dtype (xb.float32); got {e!r}", loc=user_location()) from None


class _NumpyOnTensor(TraceError):
    """numpy asked a traced tensor for its values."""


class _TensorMeta(type):
    def __getitem__(cls, item) -> TensorSpec:
        items = item if isinstance(item, tuple) else (item,)
        entries = [_spec_entry(e) for e in items]
        dtypes = [e for e in entries if isinstance(e, DType)]
        dims = tuple(e for e in entries if not isinstance(e, DType))
        if len(dtypes) > 1:
            raise TraceError("Tensor[...] takes at most one dtype")
        if sum(d is Ellipsis for d in dims) > 1:
            raise TraceError("Tensor[...] takes at most one `...`")
        return TensorSpec(dims, dtypes[0] if dtypes else None)


class Tensor(metaclass=_TensorMeta):
    """A traced tensor value (only exists while an operator body runs)."""

    __slots__ = ("_var",)
    __array_priority__ = 1000

    def __init__(self, var: Var):
        self._var = var

    # ---- static facts --------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._var.shape

    @property
    def dtype(self) -> DType:
        return DType(self._var.dtype)

    @property
    def ndim(self) -> int:
        return len(self._var.shape)

    @property
    def size(self) -> int:
        return self._var.size

    def __len__(self) -> int:
        if not self.shape:
            raise TraceError("len() of a 0-d tensor", loc=user_location())
        return self.shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"Tensor({self._var.type_str})"

    __hash__ = object.__hash__

    # ---- what cannot be traced -----------------------------------------------------------------------
    def __bool__(self):
        raise untraceable(TraceError(
            "the value of a traced tensor is not known while tracing, so `if`, `while`, `and`, `or`, `not` "
            "and `assert` cannot branch on it",
            hint="choose values with xb.where(cond, a, b); branch only on static facts such as x.shape[0] > 1",
            loc=user_location()))

    def _no_scalar(self, what: str):
        raise untraceable(TraceError(f"{what} of a traced tensor is not known while tracing",
                                     hint="keep the value as a tensor (use xb.where, xb.maximum, ...), or pass the "
                                          "number as a plain Python argument of the operator", loc=user_location()))

    def __int__(self):
        self._no_scalar("int()")

    def __float__(self):
        self._no_scalar("float()")

    def __index__(self):
        self._no_scalar("using it as a Python index")

    def __array__(self, *a, **k):
        raise untraceable(_NumpyOnTensor("numpy cannot compute on a traced tensor",
                                         hint="use the xb.* function of the same name (xb.exp, xb.where, xb.einsum, "
                                              "...) or a Tensor method", loc=user_location()))

    def __array_function__(self, func, types, args, kwargs):
        """numpy's functions run as numpy would run them (np.sum on a Tensor calls Tensor.sum); one that needs
        the values fails at the user's line, named, with what to write instead."""
        impl = getattr(func, "_implementation", None)
        try:
            if impl is None:
                raise _NumpyOnTensor("", loc=user_location())
            return impl(*args, **kwargs)
        except (_NumpyOnTensor, TypeError) as exc:   # TypeError: numpy called a Tensor method numpy's way
            import xbench
            where = (func.__module__ or "numpy").split("._")[0]
            name = f"{where.replace('numpy', 'np', 1)}.{func.__name__}"
            alike = getattr(xbench, func.__name__, None)
            hint = (f"use xb.{func.__name__}(...), the xbench function (traced)" if callable(alike) and
                    not isinstance(alike, type) else "write it with xb.* functions (np.linalg.norm(x), for "
                    "instance, is xb.sqrt((x * x).sum()))")
            raise untraceable(TraceError(f"{name} cannot compute on a traced tensor: numpy needs values, which "
                                         "are not known while tracing", hint=hint,
                                         loc=getattr(exc, "loc", None) or user_location())) from None

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from . import functions as F
        fn = F.UFUNCS.get(ufunc.__name__) if method == "__call__" and not kwargs else None
        if fn is None:
            raise untraceable(TraceError(f"numpy's {ufunc.__name__} is not available on traced tensors",
                                         hint="use an xb.* function instead", loc=user_location()))
        return fn(*inputs)

    # ---- arithmetic ----------------------------------------------------------------------------------
    def _bin(self, other, fn, reverse=False):
        from .functions import binary
        return binary(fn, other, self) if reverse else binary(fn, self, other)

    def __add__(self, o):
        return self._bin(o, "add")

    def __radd__(self, o):
        return self._bin(o, "add", True)

    def __sub__(self, o):
        return self._bin(o, "sub")

    def __rsub__(self, o):
        return self._bin(o, "sub", True)

    def __mul__(self, o):
        return self._bin(o, "mul")

    def __rmul__(self, o):
        return self._bin(o, "mul", True)

    def __truediv__(self, o):
        return self._bin(o, "div")

    def __rtruediv__(self, o):
        return self._bin(o, "div", True)

    def __floordiv__(self, o):
        return self._bin(o, "floordiv")

    def __rfloordiv__(self, o):
        return self._bin(o, "floordiv", True)

    def __mod__(self, o):
        return self._bin(o, "mod")

    def __rmod__(self, o):
        return self._bin(o, "mod", True)

    def __pow__(self, o):
        from .functions import power
        return power(self, o)

    def __rpow__(self, o):
        from .functions import power
        return power(o, self)

    def __matmul__(self, o):
        from .functions import matmul
        return matmul(self, o)

    def __rmatmul__(self, o):
        from .functions import matmul
        return matmul(o, self)

    def __neg__(self):
        from .functions import negative
        return negative(self)

    def __pos__(self):
        return self

    def __abs__(self):
        from .functions import abs as abs_
        return abs_(self)

    def __invert__(self):
        from .functions import invert
        return invert(self)

    def __and__(self, o):
        return self._bin(o, "and")

    def __rand__(self, o):
        return self._bin(o, "and", True)

    def __or__(self, o):
        return self._bin(o, "or")

    def __ror__(self, o):
        return self._bin(o, "or", True)

    def __xor__(self, o):
        return self._bin(o, "xor")

    def __rxor__(self, o):
        return self._bin(o, "xor", True)

    def __lshift__(self, o):
        return self._bin(o, "shl")

    def __rshift__(self, o):
        return self._bin(o, "shr")

    def __rlshift__(self, o):
        return self._bin(o, "shl", True)

    def __rrshift__(self, o):
        return self._bin(o, "shr", True)

    def __lt__(self, o):
        return self._bin(o, "lt")

    def __le__(self, o):
        return self._bin(o, "le")

    def __gt__(self, o):
        return self._bin(o, "gt")

    def __ge__(self, o):
        return self._bin(o, "ge")

    def __eq__(self, o):  # type: ignore[override]
        return self._bin(o, "eq")

    def __ne__(self, o):  # type: ignore[override]
        return self._bin(o, "ne")

    # ---- indexing and shape --------------------------------------------------------------------------
    def __getitem__(self, key):
        from .indexing import getitem
        return getitem(self, key)

    @property
    def T(self) -> Tensor:
        return self.transpose()

    @property
    def mT(self) -> Tensor:
        return self.swapaxes(-1, -2)

    def reshape(self, *shape):
        from .functions import reshape
        return reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    view = reshape

    def transpose(self, *axes):
        from .functions import transpose
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        if len(axes) == 2 and self.ndim != 2:
            return self.swapaxes(*axes)
        return transpose(self, axes or None)

    def permute(self, *axes):
        from .functions import transpose
        return transpose(self, tuple(axes[0]) if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else axes)

    def swapaxes(self, a: int, b: int):
        from .functions import swapaxes
        return swapaxes(self, a, b)

    def astype(self, dtype):
        from .functions import cast
        return cast(self, dtype)

    def flatten(self):
        return self.reshape(-1)

    def squeeze(self, axis=None):
        from .functions import squeeze
        return squeeze(self, axis)

    def unsqueeze(self, axis: int):
        from .functions import expand_dims
        return expand_dims(self, axis)

    def broadcast_to(self, shape):
        from .functions import broadcast_to
        return broadcast_to(self, shape)

    expand = broadcast_to

    def clip(self, lo=None, hi=None):
        from .functions import clip
        return clip(self, lo, hi)

    # ---- reductions ----------------------------------------------------------------------------------
    def sum(self, axis=None, keepdims=False, dtype=None):
        from .functions import sum as f
        return f(self, axis, keepdims, dtype)

    def mean(self, axis=None, keepdims=False):
        from .functions import mean
        return mean(self, axis, keepdims)

    def max(self, axis=None, keepdims=False):
        from .functions import max as f
        return f(self, axis, keepdims)

    def min(self, axis=None, keepdims=False):
        from .functions import min as f
        return f(self, axis, keepdims)

    def prod(self, axis=None, keepdims=False):
        from .functions import prod
        return prod(self, axis, keepdims)

    def argmax(self, axis=None, keepdims=False):
        from .functions import argmax
        return argmax(self, axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        from .functions import argmin
        return argmin(self, axis, keepdims)

    def any(self, axis=None, keepdims=False):
        from .functions import any as f
        return f(self, axis, keepdims)

    def all(self, axis=None, keepdims=False):
        from .functions import all as f
        return f(self, axis, keepdims)

    def var(self, axis=None, keepdims=False, ddof=0):
        from .functions import var
        return var(self, axis, keepdims, ddof)

    def std(self, axis=None, keepdims=False, ddof=0):
        from .functions import std
        return std(self, axis, keepdims, ddof)

    def cumsum(self, axis=-1):
        from .functions import cumsum
        return cumsum(self, axis)

    # ---- unary math as methods -----------------------------------------------------------------------
    def exp(self):
        from .functions import exp
        return exp(self)

    def log(self):
        from .functions import log
        return log(self)

    def sqrt(self):
        from .functions import sqrt
        return sqrt(self)

    def tanh(self):
        from .functions import tanh
        return tanh(self)

    def abs(self):
        return self.__abs__()

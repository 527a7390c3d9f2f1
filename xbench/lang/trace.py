"""Tracing: running an operator's Python body on `Tensor` values records equations into a `Trace`."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..dtypes import canonical, is_float
from ..errors import TraceError, XbenchError, user_location
from ..ir.graph import Eqn, Var
from ..ir.prims import REGISTRY, Primitive

_state = threading.local()


class Trace:
    def __init__(self, name: str):
        self.name = name
        self.eqns: list[Eqn] = []
        # errors from asking a traced value for what only a run knows (`if x.sum() > 0`, float(x), np.* on it):
        # an operator body that catches one and goes on would silently trace the other branch, so the operator
        # raises the first of them once its body returns (see `Operator.trace_binding`)
        self.untraceable: list[TraceError] = []

    def __enter__(self) -> Trace:
        stack = getattr(_state, "stack", None)
        if stack is None:
            stack = _state.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc) -> None:
        _state.stack.pop()

    def bind(self, prim: Primitive | str, inputs: tuple[Var, ...], **params: Any) -> list[Var]:
        if isinstance(prim, str):
            prim = REGISTRY[prim]
        try:
            types = prim.abstract(*inputs, **params)
        except XbenchError:
            raise
        except (TypeError, ValueError) as exc:
            raise TraceError(f"{prim.name}: {exc}", loc=user_location()) from None
        outs = tuple(Var(shape, dtype) for shape, dtype in types)
        self.eqns.append(Eqn(prim, tuple(inputs), params, outs, user_location()))
        return list(outs)


def current() -> Trace:
    stack = getattr(_state, "stack", None)
    if not stack:
        raise TraceError("xbench functions on tensors only work inside an operator body",
                         hint="decorate the function with @xb.tensor_op and call it with numpy arrays",
                         loc=user_location())
    return stack[-1]


def tracing() -> bool:
    return bool(getattr(_state, "stack", None))


def untraceable(err: TraceError) -> TraceError:
    """`err`, noted in the current trace (an error the body must not be able to catch and go on from)."""
    stack = getattr(_state, "stack", None)
    if stack:
        stack[-1].untraceable.append(err)
    return err


def bind(prim: str, *inputs, **params):
    """Apply a primitive to Tensors (or Vars); returns a Tensor (or a tuple for multi-result primitives)."""
    from .tensor import Tensor

    vars_ = tuple(x._var if isinstance(x, Tensor) else x for x in inputs)
    outs = current().bind(prim, vars_, **params)
    if REGISTRY[prim].multiple_results:
        return tuple(Tensor(v) for v in outs)
    return Tensor(outs[0])


def wrap_int(v: int, dtype: str) -> int:
    """A Python int as an integer of `dtype` holds it: modulo 2**bits, two's complement (PyTorch's answer for
    `uint8_tensor + 300`: 300 becomes 44)."""
    info = np.iinfo(dtype)
    span = int(info.max) - int(info.min) + 1
    return (v - int(info.min)) % span + int(info.min)


def constant(value, dtype: str | None = None, shape: tuple[int, ...] | None = None):
    """A Tensor holding a Python scalar or a numpy array captured by the operator body."""
    arr = np.asarray(value)
    if dtype is None:
        if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
            dtype = "float32"
        else:
            try:
                dtype = canonical(arr.dtype)
            except ValueError as exc:
                raise TraceError(str(exc), loc=user_location()) from None
    if shape is None:
        shape = arr.shape
    if arr.ndim == 0:
        v = arr.item()
        v = float(v) if is_float(dtype) else bool(v) if dtype == "bool" else wrap_int(int(v), dtype)
        return bind("const", value=v, shape=tuple(shape), dtype=dtype)
    arr = np.broadcast_to(arr, shape)
    return bind("const", value=np.array(arr), shape=tuple(shape), dtype=dtype)

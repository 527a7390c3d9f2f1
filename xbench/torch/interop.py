"""Tensors across the boundary: torch CPU tensors and numpy arrays share memory wherever the layout allows.

`to_numpy` views a contiguous CPU tensor's storage as a numpy array (bfloat16 through its 16-bit pattern as
`ml_dtypes.bfloat16`); a non-contiguous one is copied once, as the backends take C-contiguous arrays.
`from_numpy` wraps an array's memory in a tensor without a copy (the tensor keeps the array alive).
`shared_array` is `to_numpy` for tensors passed again and again (a model's parameters, a static KV cache): the
array made the first time is handed out again while the tensor still has the same memory, dtype and shape and is
contiguous: 1-2 us a tensor instead of 5-9 (GPT-2's decode passes some 60 such tensors a token)."""
from __future__ import annotations

import weakref

import numpy as np
import torch

from .. import dtypes as D

TO_XB: dict[torch.dtype, str] = {
    torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64",
    torch.int8: "int8", torch.uint8: "uint8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
    torch.bool: "bool",
}
TO_TORCH: dict[str, torch.dtype] = {v: k for k, v in TO_XB.items()}


def xb_dtype(dtype: torch.dtype) -> str:
    try:
        return TO_XB[dtype]
    except KeyError:
        raise TypeError(f"xbench has no dtype for {dtype}") from None


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """The tensor's data as a C-contiguous numpy array, sharing memory when it already is one."""
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.detach()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.dtype is torch.bfloat16:
        return t.view(torch.int16).numpy().view(D.to_numpy("bfloat16"))
    return t.numpy()


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """A tensor over the array's memory (copied only where numpy's layout cannot be shared)."""
    if not a.flags.c_contiguous or not a.flags.writeable:
        a = np.array(a, order="C")             # torch wants writeable memory; np.array keeps 0-d arrays 0-d
    if a.dtype == D.to_numpy("bfloat16"):
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


_shared: dict[int, tuple] = {}       # id(tensor) -> (weak reference, data pointer, dtype, shape, array)


def shared_array(t: torch.Tensor) -> np.ndarray:
    """`to_numpy(t)`, the same array as the last call for this tensor where nothing about its memory changed."""
    hit = _shared.get(id(t))
    if hit is not None and hit[0]() is t and hit[1] == t.data_ptr() and hit[2] is t.dtype and hit[3] == t.shape \
            and t.is_contiguous():
        return hit[4]
    a = to_numpy(t)
    if t.device.type == "cpu" and t.is_contiguous():       # an array over the tensor's own memory
        key = id(t)
        _shared[key] = (weakref.ref(t, lambda _, key=key: _shared.pop(key, None)), t.data_ptr(), t.dtype, t.shape, a)
    return a

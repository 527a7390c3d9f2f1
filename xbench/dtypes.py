"""Element types: names, numpy counterparts, categories and promotion.

A dtype is named by a short string everywhere in the IR ("float32", "int64", "bool", ...). Promotion follows
PyTorch: tensors of the same category keep the wider type, a higher category wins, and Python scalars are
"weak" (they never widen a tensor of their own category: `x_f32 * 2.0` stays float32).
"""
from __future__ import annotations

import numpy as np

try:
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes is a dependency
    _BF16 = None

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("int8", "uint8", "int16", "int32", "int64")
DTYPES = FLOATS + INTS + ("bool",)

SHORT = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64", "int8": "i8", "uint8": "u8",
    "int16": "i16", "int32": "i32", "int64": "i64", "bool": "bool",
}
_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "int": "int64", "long": "int64",
            "bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64", "f16": "float16",
            "f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "bool_": "bool"}
_RANK = {name: i for i, name in enumerate(("bool",) + INTS + FLOATS)}
_BITS = {"bool": 8, "int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64,
         "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64}


class DType(str):
    """A dtype name that also reads as an attribute: `xb.float32`."""

    @property
    def itemsize(self) -> int:
        return _BITS[self] // 8


float16, bfloat16, float32, float64 = (DType(n) for n in FLOATS)
int8, uint8, int16, int32, int64 = (DType(n) for n in INTS)
bool_ = DType("bool")


def canonical(dtype) -> DType:
    """Any spelling (numpy dtype, type, string, alias) to the canonical name; ValueError if unsupported."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype, dtype)
        if name in _RANK:
            return DType(name)
        raise ValueError(f"unsupported dtype {dtype!r}; use one of {', '.join(DTYPES)}")
    if dtype is bool:
        return bool_
    if dtype is float:
        return float32
    if dtype is int:
        return int64
    try:
        npd = np.dtype(dtype)
    except TypeError:
        raise ValueError(f"unsupported dtype {dtype!r}; use one of {', '.join(DTYPES)}") from None
    if _BF16 is not None and npd == _BF16:
        return bfloat16
    name = "bool" if npd == np.bool_ else npd.name
    if name in _RANK:
        return DType(name)
    raise ValueError(f"unsupported dtype {npd.name!r}; use one of {', '.join(DTYPES)}")


def to_numpy(dtype: str) -> np.dtype:
    if dtype == "bfloat16":
        return _BF16
    return np.dtype(dtype)


def itemsize(dtype: str) -> int:
    return _BITS[dtype] // 8


def is_float(dtype: str) -> bool:
    return dtype in FLOATS


def is_int(dtype: str) -> bool:
    return dtype in INTS


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def category(dtype: str) -> int:
    return 2 if dtype in FLOATS else 1 if dtype in INTS else 0


def promote(a: str, b: str) -> DType:
    """Promotion of two tensor dtypes."""
    if a == b:
        return DType(a)
    ca, cb = category(a), category(b)
    if ca != cb:
        return DType(a if ca > cb else b)
    if {a, b} == {"float16", "bfloat16"}:
        return float32
    if {a, b} == {"int8", "uint8"}:
        return int16
    return DType(a if _RANK[a] > _RANK[b] else b)


def scalar_dtype(value) -> DType:
    """The dtype a Python scalar takes on its own (a 'weak' type)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return float32
    raise TypeError(f"not a scalar: {value!r}")


def promote_weak(tensor: str, scalar) -> DType:
    """Promotion of a tensor dtype with a Python scalar: the scalar never widens its own category."""
    sd = scalar_dtype(scalar)
    if category(sd) <= category(tensor):
        return DType(tensor)
    return sd


def accumulator(dtype: str) -> DType:
    """The type reductions and contractions accumulate in: float32 for 16-bit floats, int64 for ints."""
    if dtype in ("float16", "bfloat16"):
        return float32
    if dtype in INTS or dtype == "bool":
        return int64
    return DType(dtype)


def default_float(dtype: str) -> DType:
    """The float type an operation that must produce a float (mean, sqrt of an int) gives."""
    return DType(dtype) if dtype in FLOATS else float32

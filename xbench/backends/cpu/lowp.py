"""16-bit float storage for the cpu backend (numba has no float16 and numpy no bfloat16).

Buffers of float16 / bfloat16 reach the generated code as uint16 views of their bits; loads widen the bits
to float32, arithmetic runs in float32, and stores round back to 16 bits (round to nearest, ties to even; NaN
stays NaN, overflow becomes inf, float16 subnormals are exact). The helpers use only integer and float
arithmetic with bit casts, so loops that use them still vectorise. `SOURCE` is pasted into generated modules;
`compiled()` builds the same text for tests.
"""
from __future__ import annotations

SOURCE = '''
from xbench.backends.cpu.mathlib import (
    bf16_bits as _lp_f2bf, f32_as_i32 as _lp_f2i, i32_as_f32 as _lp_i2f, rint as _lp_rint)


@numba.njit(inline="always", error_model="numpy", cache=True)
def _xb_f16_load(h):
    """float16 bits -> float32 (normals, subnormals, inf, NaN)."""
    b = np.int32(h)
    sign = (b & np.int32(0x8000)) << np.int32(16)
    em = b & np.int32(0x7FFF)
    # normal and subnormal halves: shift into a float32 and rescale by 2**112 (exact)
    f = _lp_i2f(np.int32(em << np.int32(13))) * np.float32(5.192296858534828e33)
    special = _lp_i2f(np.int32((em << np.int32(13)) | np.int32(0x7F800000)))
    f = special if em >= np.int32(0x7C00) else f
    return _lp_i2f(np.int32(_lp_f2i(f) | sign))


@numba.njit(inline="always", error_model="numpy", cache=True)
def _xb_f16_store(x):
    """float32 -> float16 bits, round to nearest even."""
    u = _lp_f2i(np.float32(x))
    sign = np.int32((u >> np.int32(16)) & np.int32(0x8000))
    a = np.int32(u & np.int32(0x7FFFFFFF))
    # normal range: rebias the exponent (127 -> 15) and round the 13 dropped bits to nearest even
    normal = (a - np.int32(0x38000000) + np.int32(0xFFF) + ((a >> np.int32(13)) & np.int32(1))) >> np.int32(13)
    # subnormal range: scale so the half's unit in the last place is 1.0 and round
    sub = np.int32(_lp_rint(_lp_i2f(a) * np.float32(16777216.0)))
    h = normal if a >= np.int32(0x38800000) else sub
    h = np.int32(0x7C00) if a >= np.int32(0x477FF000) else h             # rounds past 65504: inf
    h = (np.int32(0x7E00) if a > np.int32(0x7F800000) else np.int32(0x7C00)) if a >= np.int32(0x7F800000) else h
    return np.uint16(h | sign)


@numba.njit(inline="always", error_model="numpy", cache=True)
def _xb_bf16_load(h):
    """bfloat16 bits -> float32 (exact: the high half of a float32)."""
    return _lp_i2f(np.int32(np.int32(h) << np.int32(16)))


@numba.njit(inline="always", error_model="numpy", cache=True)
def _xb_bf16_store(x):
    """float32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN."""
    return _lp_f2bf(np.float32(x))
'''

LOAD = {"float16": "_xb_f16_load", "bfloat16": "_xb_bf16_load"}
STORE = {"float16": "_xb_f16_store", "bfloat16": "_xb_bf16_store"}


def compiled():
    """The helpers as numba functions built from `SOURCE` (for tests)."""
    import sys

    from ...cache import digest, import_source, write_once
    from ...config import cache_dir
    text = "import numba\nimport numpy as np\n" + SOURCE
    path = cache_dir("cpu") / f"lowp_{digest(text)}.py"
    write_once(path, text)
    name = f"xbench_lowp_{digest(text)}"
    if name not in sys.modules:
        import_source(name, path)
    return sys.modules[name]

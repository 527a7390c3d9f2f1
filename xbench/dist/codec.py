"""Gradient codecs as xbench operators: block quantisation to int8 and int4, float16 and bfloat16 casts, and
the fused dequantise-and-sum a reduce-scatter receiver runs. Written only in the public language, so they
compile for every backend (cpu, cuda, ascend) and are verified against the float64 reference like any
library operator.

They live here rather than in `kernels/` because the library's category list (docs/library.md) has no place
for a communication codec, and the registry asks a PyTorch counterpart of every operator, which these have
none of.

Quantisation is block floating point: a block of `block` values (256) shares a power-of-two scale 2**e (the
E8M0 shared exponent of the OCP Microscaling formats), stored as one int8 per block, and each value becomes
an integer code q = round(x / 2**e) in [-L, L] (L = 127 for int8, 7 for int4) with e the smallest exponent
such that max|x| <= L * 2**e. A power-of-two scale makes x / 2**e exact in every precision, so every backend
produces the same codes as the float64 reference -- an fp16 scale would round differently at ties between
float32 and float64. int4 codes are packed two per byte (low nibble first, stored as q + 8).

    codes, exps = quantize_int8.run(x.reshape(-1, 256), backend="cpu")
    y = dequantize_int8.run(codes, exps)
"""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor

BLOCK = 256
E_MIN, E_MAX = -80, 47          # the exponents a block scale can take (int8 storage); |x| < 2**-81: code 0
LEVELS = {8: 127, 4: 7}
_EXPS = np.arange(E_MIN, E_MAX + 1)
_POW2 = np.ldexp(np.float32(1.0), _EXPS).astype(np.float32)        # 2**e, exact in float32
NB, B, H, P, N = xb.dims("NB B H P N")


def _exponent(amax, levels: int):
    """The smallest e in [E_MIN, E_MAX] with amax <= levels * 2**e, by exact comparisons (no log2)."""
    thresholds = xb.asarray((_POW2[:-1] * np.float32(levels)).astype(np.float32))       # levels * 2**e
    above = (amax > thresholds).astype("int32")                                      # [NB, K]
    return xb.sum(above, axis=-1, keepdims=True) + E_MIN                              # int32 [NB, 1]


def _pow2(e):
    return xb.gather(xb.asarray(_POW2), e - E_MIN, axis=0)


def _codes(x, levels: int):
    amax = xb.amax(xb.abs(x), axis=-1, keepdims=True)
    e = _exponent(amax, levels)
    q = xb.clip(xb.round(x / _pow2(e)), -levels, levels)
    return q, e


@xb.tensor_op
def quantize_int8(x: Tensor[NB, B]):
    """int8 codes [NB, B] and int8 block exponents [NB, 1] of float32 blocks x."""
    q, e = _codes(x, LEVELS[8])
    return q.astype("int8"), e.astype("int8")


@xb.tensor_op
def dequantize_int8(q: Tensor[NB, B], e: Tensor[NB, 1]):
    """float32 values q * 2**e."""
    return q.astype("float32") * _pow2(e.astype("int32"))


@xb.tensor_op
def quantize_int4(x: Tensor[NB, B]):
    """Packed int4 codes [NB, B/2] (uint8, low nibble = even element, each stored as q + 8) and int8 block
    exponents [NB, 1]."""
    q, e = _codes(x, LEVELS[4])
    nb, b = x.shape
    u = (q.astype("int32") + 8).reshape((nb, b // 2, 2))
    return (u[:, :, 0] + u[:, :, 1] * 16).astype("uint8"), e.astype("int8")


def _unpack4(p):
    v = p.astype("int32")
    nb, h = p.shape[-2], p.shape[-1]
    both = xb.stack([(v & 15) - 8, (v >> 4) - 8], axis=-1)
    return both.reshape(tuple(p.shape[:-2]) + (nb, h * 2))


@xb.tensor_op
def dequantize_int4(p: Tensor[NB, H], e: Tensor[NB, 1]):
    """float32 values of packed int4 codes."""
    return _unpack4(p).astype("float32") * _pow2(e.astype("int32"))


@xb.tensor_op
def dequantize_sum_int8(q: Tensor[P, NB, B], e: Tensor[P, NB, 1]):
    """sum over P senders of their dequantised int8 blocks (the receiving end of a compressed
    reduce-scatter), in float32, senders in order."""
    return xb.sum(q.astype("float32") * _pow2(e.astype("int32")), axis=0)


@xb.tensor_op
def dequantize_sum_int4(p: Tensor[P, NB, H], e: Tensor[P, NB, 1]):
    """sum over P senders of their dequantised packed-int4 blocks, in float32."""
    return xb.sum(_unpack4(p).astype("float32") * _pow2(e.astype("int32")), axis=0)


@xb.tensor_op
def to_float16(x: Tensor[N]):
    return x.astype("float16")


@xb.tensor_op
def to_bfloat16(x: Tensor[N]):
    return x.astype("bfloat16")


@xb.tensor_op
def sum_low(x: Tensor[P, N]):
    """sum over P senders of float16 / bfloat16 values, accumulated in float32."""
    return xb.sum(x.astype("float32"), axis=0)


QUANTIZE = {8: quantize_int8, 4: quantize_int4}
DEQUANTIZE = {8: dequantize_int8, 4: dequantize_int4}
DEQUANTIZE_SUM = {8: dequantize_sum_int8, 4: dequantize_sum_int4}
CAST = {"float16": to_float16, "bfloat16": to_bfloat16}
OPERATORS = (quantize_int8, dequantize_int8, quantize_int4, dequantize_int4, dequantize_sum_int8,
             dequantize_sum_int4, to_float16, to_bfloat16, sum_low)


def code_bytes(n: int, bits: int, block: int = BLOCK) -> int:
    """Bytes of n values quantised with `bits` (codes + one int8 exponent per block)."""
    return n * bits // 8 + -(-n // block)

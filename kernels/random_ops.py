"""Random numbers and dropout (category 20) from a counter-based generator written in the language.

Every element draws its bits from a hash of (its flat index, the draw number, the seed): no state, so the
same seed gives the same tensor on every backend, in any order of evaluation, and every backend is verified
against the reference like any other operator. A seed is a static argument (a plain Python int: a new seed is a
new specialisation) or a 0-d integer tensor (a run-time input: one compiled operator serves every seed, as the
torch bridge passes it).

The hash is PCG's output permutation ("PCG hash", Jarzynski & Olano, "Hash Functions for GPU Rendering",
JCGT 2020) applied twice, on 32-bit values held in int64 lanes: every product stays below 2**63, so the
integer arithmetic is exact on every backend. The seed enters through two 32-bit keys computed in Python.
Uniform floats take the top bits of a hash (8 for bfloat16, 11 for float16, 24 for float32; 53 from two
hashes for float64), so they are exact multiples of 2**-bits in [0, 1); normal numbers use Box-Muller.
The streams are not PyTorch's (Philox / MT19937): values differ, the distributions are the same (tested in
tests/library/test_random.py).
"""
from __future__ import annotations

import math

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import INTS, NoTorch, Sample

from ._samples import noncontig, tensor

register = xb.ops.register

M32 = 0xFFFFFFFF
_MUL, _INC, _MUL2 = 747796405, 2891336453, 277803737
_BITS = {"bfloat16": 8, "float16": 11, "float32": 24}
NO_TORCH = NoTorch("a counter-based generator (PCG hash of index and seed): PyTorch's Philox/MT19937 streams "
                   "differ by design; the distributions are tested in tests/library/test_random.py")


def pcg(x: int) -> int:
    """The PCG hash of a 32-bit Python int (the same function as `_pcg` on tensors)."""
    state = (x * _MUL + _INC) & M32
    word = (((state >> ((state >> 28) + 4)) ^ state) * _MUL2) & M32
    return ((word >> 22) ^ word) & M32


def _pcg(x):
    state = (x * _MUL + _INC) & M32
    word = (((state >> ((state >> 28) + 4)) ^ state) * _MUL2) & M32
    return ((word >> 22) ^ word) & M32


def _keys(seed):
    """Two 32-bit keys from a seed: a Python int (static), or a 0-d integer tensor in [0, 2**63) (a run-time
    input, so a new seed does not retrace: the same keys as the int)."""
    if isinstance(seed, xb.Tensor):
        if seed.ndim != 0 or seed.dtype not in INTS:
            raise TypeError(f"a tensor seed must be a 0-d int32/int64 tensor, got {seed.dtype}{list(seed.shape)}")
        s = seed.astype("int64")
        return _pcg((s & M32) ^ _pcg((s >> 32) & M32)), _pcg(((s >> 32) ^ 0x9E3779B9) & M32)
    if not isinstance(seed, int):
        raise TypeError(f"seed must be a Python int or a 0-d integer tensor, got {type(seed).__name__}")
    s = seed & 0xFFFFFFFFFFFFFFFF
    return pcg((s & M32) ^ pcg(s >> 32)), pcg(((s >> 32) ^ 0x9E3779B9) & M32)


def bits(shape, seed: int, draw: int = 0, draws: int = 1):
    """32 random bits per element (int64 values in [0, 2**32)): draw `draw` of `draws` per element."""
    k1, k2 = _keys(seed)
    n = 1
    for d in shape:
        n *= d
    counter = xb.iota((n,), 0) * draws + draw
    h = _pcg((_pcg(counter ^ k1) + k2) & M32)
    return h.reshape(tuple(shape))


def uniform01(shape, seed: int, dtype: str, draw: int = 0, draws: int = 1):
    """Uniform values in [0, 1) of `dtype`, exact multiples of 2**-bits."""
    if dtype == "float64":
        hi = bits(shape, seed, 2 * draw, 2 * draws) >> 6
        lo = bits(shape, seed, 2 * draw + 1, 2 * draws) >> 5
        return ((hi << 27) + lo).astype("float64") * 2.0 ** -53
    if dtype not in _BITS:
        raise ValueError(f"random floats need a float dtype, got {dtype}")
    m = _BITS[dtype]
    return ((bits(shape, seed, draw, draws) >> (32 - m)).astype("float32") * 2.0 ** -m).astype(dtype)


def uniform_open(shape, seed: int, dtype: str, draw: int = 0, draws: int = 1):
    """Uniform values in the open interval (0, 1) of float32 or float64: (k + 1/2) * 2**-bits, exact."""
    if dtype == "float64":
        hi = bits(shape, seed, 2 * draw, 2 * draws) >> 6
        lo = bits(shape, seed, 2 * draw + 1, 2 * draws) >> 6
        return (((hi << 26) + lo).astype("float64") + 0.5) * 2.0 ** -52
    if dtype != "float32":
        raise ValueError(f"uniform_open computes in float32 or float64, got {dtype}")
    return ((bits(shape, seed, draw, draws) >> 9).astype("float32") + 0.5) * 2.0 ** -23


def _compute(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def standard_normal(shape, seed: int, dtype: str, draw: int = 0, draws: int = 1):
    """Normal(0, 1) values by Box-Muller (one of each pair), computed in float32 (float64 for float64)."""
    c = _compute(dtype)
    u1 = 1.0 - uniform01(shape, seed, c, 2 * draw, 2 * draws)          # (0, 1]
    u2 = uniform01(shape, seed, c, 2 * draw + 1, 2 * draws)
    return (xb.sqrt(-2.0 * xb.log(u1)) * xb.cos((2.0 * math.pi) * u2)).astype(dtype)


def _size(size) -> tuple[int, ...]:
    return (size,) if isinstance(size, int) else tuple(int(s) for s in size)


def _size_samples(dtype, shapes):
    for shape in shapes.pointwise:
        yield Sample((shape,), {"seed": 1234, "dtype": dtype}, note=f"{shape}", grad=False)
    yield Sample(((64,),), {"seed": 0, "dtype": dtype}, note="seed 0", grad=False)
    if shapes.empty:
        yield Sample(((0, 3),), {"seed": 5, "dtype": dtype}, note="empty", grad=False)


@register("random", samples=_size_samples, torch=NO_TORCH)
def rand(size, seed: int = 0, dtype=None):
    """Uniform [0, 1) values of `size` (float32 unless `dtype`)."""
    return uniform01(_size(size), seed, dtype or "float32")


@register("random", samples=_size_samples, torch=NO_TORCH)
def randn(size, seed: int = 0, dtype=None):
    """Standard normal values of `size` (float32 unless `dtype`)."""
    return standard_normal(_size(size), seed, dtype or "float32")


def _randint_samples(dtype, shapes):
    for shape in shapes.pointwise:
        yield Sample((-5, 17, shape), {"seed": 7, "dtype": dtype}, note=f"{shape}")
    yield Sample((0, 2, (1000,)), {"seed": 1, "dtype": dtype}, note="coin flips")
    yield Sample((0, 10, (4, 9)), {"seed": 2}, note="int64 by default")


@register("random", samples=_randint_samples, torch=NO_TORCH, dtypes=INTS)
def randint(low: int, high: int, size, seed: int = 0, dtype=None):
    """Uniform integers in [low, high) of `size` (int64 unless `dtype`); all three bounds are required."""
    if high <= low:
        raise ValueError(f"randint: high ({high}) must exceed low ({low})")
    span = high - low
    if span >= 2 ** 31:
        raise ValueError("randint: the range must be below 2**31")
    return (((bits(_size(size), seed) * span) >> 32) + low).astype(dtype or "int64")


def _like_samples(extra: dict):
    def gen(dtype, shapes):
        for shape in shapes.pointwise:
            yield Sample((tensor(shapes, dtype, shape, "rl"),), {"seed": 11, **extra}, note=f"{shape}", grad=False)
        if shapes.noncontig:
            yield Sample((noncontig(tensor(shapes, dtype, (6, 5), "rlnc")),), {"seed": 3, **extra},
                         note="non-contiguous", grad=False)
    return gen


@register("random", samples=_like_samples({"from_": -2.0, "to": 3.0}), torch=NO_TORCH)
def uniform_(input: Tensor, from_: float = 0.0, to: float = 1.0, seed: int = 0):
    """Uniform [from_, to) values in input's shape and dtype (functional form of Tensor.uniform_)."""
    u = uniform01(input.shape, seed, _compute(input.dtype))
    return (from_ + (to - from_) * u).astype(input.dtype)


@register("random", samples=_like_samples({"lambd": 2.0}), torch=NO_TORCH)
def exponential_(input: Tensor, lambd: float = 1.0, seed: int = 0):
    """Exponential(lambd) values in input's shape and dtype: -log(1 - u) / lambd."""
    u = uniform01(input.shape, seed, _compute(input.dtype))
    return (-xb.log1p(-u) * (1.0 / lambd)).astype(input.dtype)


def _normal_samples(dtype, shapes):
    for shape in shapes.pointwise:
        m = tensor(shapes, dtype, shape, "nm")
        s = tensor(shapes, dtype, shape, "ns", low=0.5, high=2.0)
        yield Sample((m, s), {"seed": 21}, note=f"{shape} tensor mean and std")
    m = tensor(shapes, dtype, (4, 9), "nm2")
    yield Sample((m, 0.5), {"seed": 22}, note="tensor mean, float std")
    yield Sample((1.5, 2.0), {"size": (5, 7), "seed": 23, "dtype": dtype}, note="float mean and std, size")


@register("random", samples=_normal_samples, torch=NO_TORCH, grad=True)
def normal(mean, std=1.0, size=None, seed: int = 0, dtype=None):
    """mean + std * N(0, 1): mean and std are tensors (broadcast) or numbers (then `size` gives the shape)."""
    tensors = [v for v in (mean, std) if isinstance(v, Tensor)]
    if tensors:
        shape, out_dtype = (mean + std).shape, tensors[0].dtype
    else:
        if size is None:
            raise ValueError("normal with a float mean and std needs `size`")
        shape, out_dtype = _size(size), dtype or "float32"
    z = standard_normal(shape, seed, out_dtype)
    return mean + std * z


def _bern_samples(dtype, shapes):
    for shape in shapes.pointwise:
        p = tensor(shapes, dtype, shape, "bp", low=0.0, high=1.0)
        yield Sample((p,), {"seed": 31}, note=f"{shape} probabilities", grad=False)
    x = tensor(shapes, dtype, (8, 16), "bx")
    yield Sample((x,), {"p": 0.3, "seed": 32}, note="p=0.3", grad=False)


@register("random", samples=_bern_samples, torch=NO_TORCH)
def bernoulli(input: Tensor, p: float | None = None, seed: int = 0):
    """1 with probability `input` (or `p`), else 0, in input's dtype and shape."""
    u = uniform01(input.shape, seed, _compute(input.dtype))
    probs = input if p is None else p
    return (u < probs).astype(input.dtype)


def _dropout(input, p: float, train: bool, seed: int):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not train:
        return input, xb.ones(input.shape, "bool")
    if p == 1.0:
        return xb.zeros_like(input), xb.zeros(input.shape, "bool")
    keep = uniform01(input.shape, seed, _compute(input.dtype)) < (1.0 - p)
    return xb.where(keep, input * (1.0 / (1.0 - p)), 0.0), keep


def _dropout_samples(aten: bool):
    def gen(dtype, shapes):
        for shape in shapes.pointwise:
            x = tensor(shapes, dtype, shape, "do")
            yield Sample((x, 0.3, True), {"seed": 41}, note=f"{shape} p=0.3")
        x = tensor(shapes, dtype, (16, 17), "do2")
        yield Sample((x, 0.5, False), {"seed": 42}, note="inference")
        yield Sample((x, 1.0, True), {"seed": 43}, note="p=1")
        yield Sample((x, 0.0, True), {"seed": 44}, note="p=0")
        if shapes.noncontig:
            yield Sample((noncontig(x), 0.25, True), {"seed": 45}, note="non-contiguous")
    return gen


@register("random", samples=_dropout_samples(True), torch=NO_TORCH, grad=("input",))
def native_dropout(input: Tensor, p: float, train: bool, seed: int = 0):
    """ATen's native_dropout: (output, mask); each element kept with probability 1 - p and scaled by
    1 / (1 - p); `seed` picks the mask."""
    return _dropout(input, p, train, seed)


def _dropout_backward_samples(dtype, shapes):
    """(grad_output, mask, scale): masks of kept elements (bool, as native_dropout returns them) at the forward's
    scale 1 / (1 - p)."""
    rng = shapes.rng("native_dropout_backward")
    for shape in shapes.pointwise:
        g = tensor(shapes, dtype, shape, "dob")
        yield Sample((g, np.asarray(rng.random(shape) < 0.7), 1.0 / 0.7), note=f"{shape} p=0.3")
    g = tensor(shapes, dtype, (16, 17), "dob2")
    yield Sample((g, np.ones((16, 17), bool), 1.0), note="inference (every element kept, scale 1)")
    if shapes.noncontig:
        yield Sample((noncontig(g), noncontig(np.asarray(rng.random((16, 17)) < 0.5)), 2.0), note="non-contiguous")
    if shapes.empty:
        yield Sample((tensor(shapes, dtype, (0, 3), "doe"), np.zeros((0, 3), bool), 2.0), note="empty")


@register("random", samples=_dropout_backward_samples, torch="torch.ops.aten.native_dropout_backward")
def native_dropout_backward(grad_output: Tensor, mask: Tensor, scale: float):
    """The gradient of native_dropout: grad_output * mask * scale (scale = 1 / (1 - p))."""
    return (grad_output * mask.astype(grad_output.dtype) * scale).astype(grad_output.dtype)


@register("random", samples=_dropout_samples(False), torch=NO_TORCH, grad=("input",))
def dropout(input: Tensor, p: float = 0.5, training: bool = True, seed: int = 0):
    """Dropout: each element zeroed with probability p, the rest scaled by 1 / (1 - p)."""
    return _dropout(input, p, training, seed)[0]


def _randperm_samples(dtype, shapes):
    for n in (1, 17, 64, 1000):
        yield Sample((n,), {"seed": 51, "dtype": dtype}, note=f"n={n}")


@register("random", samples=_randperm_samples, torch=NO_TORCH, dtypes=INTS)
def randperm(n: int, seed: int = 0, dtype=None):
    """A random permutation of 0 .. n-1 (int64 unless `dtype`): the order of n random 53-bit keys."""
    keys = (bits((n,), seed, 0, 2) << 21) + (bits((n,), seed, 1, 2) >> 11)
    return xb.argsort(keys).astype(dtype or "int64")


def _multinomial_samples(dtype, shapes):
    w = tensor(shapes, dtype, (6,), "mw", low=0.1, high=2.0)
    yield Sample((w, 4), {"seed": 61}, note="4 of 6 without replacement", grad=False)
    yield Sample((w, 50), {"replacement": True, "seed": 62}, note="50 with replacement", grad=False)
    w2 = tensor(shapes, dtype, (3, 9), "mw2", low=0.0, high=1.0)
    yield Sample((w2, 9), {"seed": 63}, note="all 9 of each row", grad=False)
    yield Sample((w2, 20), {"replacement": True, "seed": 64}, note="rows, with replacement", grad=False)


@register("random", samples=_multinomial_samples, torch=NO_TORCH)
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, seed: int = 0):
    """Category indices drawn with probabilities proportional to the (last-dim) weights in `input`: with
    replacement by the inverse CDF, without by the Gumbel-top-k trick."""
    c = input.shape[-1]
    lead = input.shape[:-1]
    x = input.astype(_compute(input.dtype))
    if replacement:
        cdf = xb.cumsum(x, -1)
        cdf = cdf / cdf[..., -1:]
        u = uniform01(lead + (num_samples,), seed, x.dtype)
        below = (cdf[..., None, :] <= u[..., :, None]).astype("int64").sum(axis=-1)
        return xb.minimum(below, c - 1)
    if num_samples > c:
        raise ValueError(f"multinomial without replacement: {num_samples} samples from {c} categories")
    gumbel = -xb.log(-xb.log(uniform_open(lead + (c,), seed, x.dtype)))
    keys = xb.log(x) + gumbel
    return xb.topk(keys, num_samples, axis=-1)[1]


"""Operators of the example package, registered as the library's are (`@xb.ops.register`): written in the xbench
language, with deterministic samples (plain shapes, a strided view, special values) and PyTorch counterparts."""
import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import Sample, register

DTYPES = ("float32", "float16", "float64")


def _arrays(name: str, dtype: str, shapes, count: int):
    for shape in shapes.pointwise:
        rng = shapes.rng(name, dtype, shape)
        yield tuple(rng.standard_normal(shape).astype(dtype) for _ in range(count)), ""
    if shapes.noncontig:
        rng = shapes.rng(name, dtype, "strided")
        yield tuple(rng.standard_normal((6, 10)).astype(dtype)[:, ::3] for _ in range(count)), "strided"


def squareplus_samples(dtype: str, shapes):
    for (x,), note in _arrays("squareplus", dtype, shapes, 1):
        yield Sample((x,), note=note)
        yield Sample((x,), {"b": 0.5}, note=note)
    if shapes.special:
        x = np.array([0.0, -0.0, 100.0, -100.0, np.inf, np.nan], dtype=dtype)   # x * x stays finite in float16
        yield Sample((x,), note="special values", grad=False)


def axpby_samples(dtype: str, shapes):
    for (x, y), note in _arrays("axpby", dtype, shapes, 2):
        yield Sample((x, y), {"alpha": 0.5, "beta": -2.0}, note=note)
        if x.ndim:
            yield Sample((x, y[..., :1]), note="y broadcast")


@register("activation", samples=squareplus_samples, dtypes=DTYPES, grad=("input",),
          torch=lambda torch, input, b=4.0: (input + torch.sqrt(input * input + b)) / 2,
          notes="(x + sqrt(x^2 + b)) / 2, a smooth ReLU (Barron 2021); torch has no squareplus, so the formula "
                "itself is the PyTorch counterpart")
def squareplus(input: Tensor, b: float = 4.0):
    return (input + xb.sqrt(input * input + b)) / 2


@register("binary", samples=axpby_samples, dtypes=DTYPES, grad=("x", "y"),
          torch=lambda torch, x, y, alpha=1.0, beta=1.0: alpha * x + beta * y)
def axpby(x: Tensor, y: Tensor, alpha: float = 1.0, beta: float = 1.0):
    """alpha * x + beta * y (BLAS axpby)."""
    return alpha * x + beta * y


__all__ = ["axpby", "squareplus"]

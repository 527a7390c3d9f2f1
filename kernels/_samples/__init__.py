"""Input generators for the library's operators: `samples=` of `xb.ops.register`.

A generator is a function `(dtype, shapes) -> Iterable[Sample]` (see `xbench/ops/__init__.py`). `core` holds the
building blocks every generator uses (`tensor`, `noncontig`, `special`, so all draw their numbers the same,
deterministic way) and the factories shared by many operators; the other modules hold the generators of one
library module each (`blas` for kernels/blas.py, `convolution`, `pooling`, `vision`, `padding`, `indexing`,
`embedding`, `attention`, `sorting`, `shape`, `fused`).

    samples=unary(low=0.1, high=10.0)             # log: positive inputs
    samples=binary(scalar=2.5)                    # add: tensor-tensor, broadcast pairs, tensor-scalar
    samples=reduction(keepdim=True)               # sum: over dim=-1, dim=0, all dims
"""
from .core import (
    BROADCAST_PAIRS,
    SPECIAL_VALUES,
    Gen,
    binary,
    cast,
    chain,
    custom,
    nary,
    noncontig,
    only_float,
    pointwise_backward,
    reduction,
    special,
    tensor,
    unary,
)

__all__ = ["BROADCAST_PAIRS", "SPECIAL_VALUES", "Gen", "binary", "cast", "chain", "custom", "nary", "noncontig",
           "only_float", "pointwise_backward", "reduction", "special", "tensor", "unary"]

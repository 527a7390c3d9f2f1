"""The operator language: `Tensor[...]` annotations, dims, `@tensor_op`, and the `xb.*` functions."""
from .dims import Dim, dims
from .operator import Operator, tensor_op
from .tensor import Tensor, TensorSpec

__all__ = ["Dim", "dims", "Operator", "tensor_op", "Tensor", "TensorSpec"]

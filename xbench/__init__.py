"""xbench: write a tensor operator once; compile, verify, profile and tune it on CPU, CUDA and Ascend.

    import xbench as xb
    from xbench import Tensor
    M, K, N = xb.dims("M K N")

    @xb.tensor_op
    def matmul(a: Tensor[M, K], b: Tensor[K, N]) -> Tensor[M, N]:
        return a @ b
"""
from . import ops
from .config import set_log_level
from .dtypes import bfloat16, bool_, float16, float32, float64, int8, int16, int32, int64, uint8
from .errors import XbenchError
from .lang import Dim, Operator, Tensor, dims, tensor_op
from .lang.functions import (
    abs,
    acos,
    acosh,
    add,
    all,
    amax,
    amin,
    any,
    arange,
    argmax,
    argmin,
    argsort,
    asarray,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    broadcast_to,
    cast,
    ceil,
    clamp,
    clip,
    concat,
    concatenate,
    copysign,
    cos,
    cosh,
    cummax,
    cummin,
    cumprod,
    cumsum,
    divide,
    dot,
    einsum,
    equal,
    erf,
    erfc,
    erfinv,
    exp,
    exp2,
    expand_dims,
    expm1,
    flip,
    floor,
    floor_divide,
    fmax,
    fmin,
    fmod,
    full,
    full_like,
    gather,
    greater,
    greater_equal,
    hypot,
    iota,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    log2,
    log10,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    moveaxis,
    multiply,
    negative,
    not_equal,
    ones,
    ones_like,
    pad,
    power,
    prod,
    reciprocal,
    remainder,
    reshape,
    round,
    rsqrt,
    scatter_add,
    scatter_add_along_axis,
    sigmoid,
    sign,
    signbit,
    sin,
    sinh,
    sliding_window,
    sort,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    subtract,
    sum,
    swapaxes,
    take,
    take_along_axis,
    tan,
    tanh,
    tensordot,
    topk,
    transpose,
    trunc,
    var,
    where,
    zeros,
    zeros_like,
)
from .runtime import default_backend, set_default_backend
from .verify import compare, tolerance, verify

__version__ = "0.1.0"
from . import profile
from .lang.amp import LossScaler, autocast
from .lang.autodiff import grad, value_and_grad, vjp
from .library.coverage import coverage
from .notebook import explore, load_ipython_extension, unload_ipython_extension
from .profile import Report, calibrate
from .tune import tune, tuning_db
from .viz.roofline import roofline

# the layers that import torch load on first use, so `import xbench` stays torch-free
_LAZY = ("torch", "dist", "compat")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'xbench' has no attribute {name!r}")

"""Activation functions (category 3), as `torch.nn.functional` defines them (NaN handling included)."""
from __future__ import annotations

import math

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import FLOATS, INTS, Sample

from ._samples import SPECIAL_VALUES, noncontig, pointwise_backward, tensor, unary

register = xb.ops.register
F = "torch.nn.functional."

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2 = 1.0 / math.sqrt(2.0)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946

SMOOTH = unary(-4.0, 4.0)
KINK0 = unary(-4.0, 4.0, avoid=(0.0,))


def _gelu(x, approximate: str):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + xb.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return 0.5 * x * (1.0 + xb.erf(x * _INV_SQRT_2))


def _torch_gelu(torch, input, approximate="none"):
    """F.gelu; at +inf, the value of its float64 kernel: the vectorised float32 and bfloat16 CPU kernels of the
    exact form give NaN there (0.5 * inf * (1 + erf(inf)) is inf, as the float64 and float16 kernels give)."""
    out = torch.nn.functional.gelu(input, approximate=approximate)
    if input.dtype.is_floating_point:
        at_inf = input == float("inf")
        out = torch.where(at_inf, torch.nn.functional.gelu(input.double(), approximate=approximate).to(out.dtype),
                          out)
    return out


@register("activation", samples=unary(-4.0, 4.0, kwargs=({}, {"approximate": "tanh"})), torch=_torch_gelu,
          grad=True)
def gelu(input: Tensor, approximate: str = "none"):
    """Gaussian error linear unit; `approximate="tanh"` for the tanh form."""
    return _gelu(input, approximate)


def _wide(x):
    return x.astype("float32") if x.dtype in ("float16", "bfloat16") else x


@register("activation", samples=pointwise_backward(-4.0, 4.0, kwargs=({}, {"approximate": "tanh"})),
          torch="torch.ops.aten.gelu_backward")
def gelu_backward(grad_output: Tensor, self: Tensor, approximate: str = "none"):
    """grad_output * gelu'(self), in float32 for 16-bit inputs (PyTorch's formulas, both forms)."""
    g, x = _wide(grad_output), _wide(self)
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
        t = xb.tanh(inner)
        d = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044715 * x * x)
    elif approximate == "none":
        cdf = 0.5 * (1.0 + xb.erf(x * _INV_SQRT_2))
        d = cdf + x * xb.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    else:
        raise ValueError(f"gelu_backward: approximate must be 'none' or 'tanh', got {approximate!r}")
    return (g * d).astype(self.dtype)


def _bias_samples(dtype, shapes):
    for shape in shapes.pointwise:
        if len(shape) >= 1:
            x = tensor(shapes, dtype, shape, "bg", low=-4.0, high=4.0)
            yield Sample((x, tensor(shapes, dtype, shape[-1:], "bgb")), note=f"{shape}")
    x = tensor(shapes, dtype, (16, 17), "bgn", low=-4.0, high=4.0)
    yield Sample((x, tensor(shapes, dtype, (17,), "bgnb")), {"approximate": "tanh"}, note="tanh")
    if shapes.noncontig:
        yield Sample((noncontig(x), tensor(shapes, dtype, (17,), "bgnb")), note="non-contiguous")


@register("fused", samples=_bias_samples, grad=True,
          torch=lambda torch, input, bias, approximate="none": torch.nn.functional.gelu(input + bias,
                                                                                          approximate=approximate))
def bias_gelu(input: Tensor, bias: Tensor, approximate: str = "none"):
    """gelu(input + bias), fused."""
    return _gelu(input + bias, approximate)


@register("activation", samples=KINK0, torch="torch.relu", grad=True, dtypes=FLOATS + INTS)
def relu(input: Tensor):
    """max(input, 0); NaN propagates."""
    return xb.maximum(input, 0)


@register("activation", samples=unary(-8.0, 8.0, avoid=(0.0, 6.0)), torch=F + "relu6", grad=True)
def relu6(input: Tensor):
    """min(max(input, 0), 6)."""
    return xb.minimum(xb.maximum(input, 0.0), 6.0)


@register("activation", samples=unary(-4.0, 4.0, avoid=(0.0,), kwargs=({}, {"negative_slope": 0.2})),
          torch=F + "leaky_relu", grad=True)
def leaky_relu(input: Tensor, negative_slope: float = 0.01):
    """input where input > 0, else negative_slope * input."""
    return xb.where(input > 0, input, input * negative_slope)


def _prelu_samples(dtype, shapes):
    for shape in shapes.pointwise:
        if len(shape) >= 2:
            x = tensor(shapes, dtype, shape, "pr", low=-4.0, high=4.0, avoid=(0.0,))
            yield Sample((x, tensor(shapes, dtype, (shape[1],), "prw", low=0.0, high=0.5)), note=f"{shape}")
    for shape in shapes.image[:2]:
        x = tensor(shapes, dtype, shape, "pri", low=-4.0, high=4.0, avoid=(0.0,))
        yield Sample((x, tensor(shapes, dtype, (shape[1],), "priw", low=0.0, high=0.5)), note=f"image {shape}")
        yield Sample((x, tensor(shapes, dtype, (1,), "pri1", low=0.0, high=0.5)), note=f"image {shape}, one weight")
    x = tensor(shapes, dtype, (17,), "pr1", low=-4.0, high=4.0, avoid=(0.0,))
    yield Sample((x, tensor(shapes, dtype, (1,), "pr1w", low=0.0, high=0.5)), note="1-d input")
    if shapes.noncontig:
        x = tensor(shapes, dtype, (6, 5), "prnc", low=-4.0, high=4.0, avoid=(0.0,))
        yield Sample((noncontig(x), tensor(shapes, dtype, (5,), "prncw")), note="non-contiguous")


@register("activation", aliases=("_prelu_kernel",), samples=_prelu_samples, torch=F + "prelu", grad=True)
def prelu(input: Tensor, weight: Tensor):
    """input where input > 0, else weight * input; `weight` has one value or one per channel (dim 1)."""
    if weight.size != 1:
        if input.ndim < 2 or input.shape[1] != weight.size:
            raise ValueError(f"prelu: weight has {weight.size} values but input {input.shape} has "
                             f"{input.shape[1] if input.ndim >= 2 else 1} channels (dim 1)")
        weight = weight.reshape((weight.size,) + (1,) * (input.ndim - 2))
    elif input.ndim:
        weight = weight.reshape((1,) * input.ndim)
    else:
        weight = weight.reshape(())
    return xb.where(input > 0, input, weight * input)


@register("activation", samples=unary(-4.0, 4.0, avoid=(0.0,), kwargs=({}, {"alpha": 0.5})), torch=F + "elu",
          grad=True)
def elu(input: Tensor, alpha: float = 1.0):
    """input where input > 0, else alpha * (exp(input) - 1)."""
    return xb.where(input > 0, input, alpha * xb.expm1(xb.minimum(input, 0.0)))


@register("activation", samples=unary(-4.0, 4.0, avoid=(0.0,), kwargs=({}, {"alpha": 0.5})), torch=F + "celu",
          grad=True)
def celu(input: Tensor, alpha: float = 1.0):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    return xb.where(input > 0, input, alpha * xb.expm1(xb.minimum(input, 0.0) * (1.0 / alpha)))


@register("activation", samples=unary(-4.0, 4.0, avoid=(0.0,)), torch=F + "selu", grad=True)
def selu(input: Tensor):
    """scale * (max(0, x) + min(0, alpha * (exp(x) - 1))) with the self-normalising constants."""
    return _SELU_SCALE * xb.where(input > 0, input, _SELU_ALPHA * xb.expm1(xb.minimum(input, 0.0)))


@register("activation", samples=SMOOTH, torch="torch.sigmoid", grad=True, dtypes=FLOATS + INTS)
def sigmoid(input: Tensor):
    """1 / (1 + exp(-input))."""
    return xb.sigmoid(input)


@register("activation", samples=pointwise_backward(-4.0, 4.0, of=lambda x: 1.0 / (1.0 + np.exp(-x))),
          torch="torch.ops.aten.sigmoid_backward")
def sigmoid_backward(grad_output: Tensor, output: Tensor):
    """grad_output * output * (1 - output), from sigmoid's output."""
    return (_wide(grad_output) * _wide(output) * (1.0 - _wide(output))).astype(output.dtype)


@register("activation", samples=SMOOTH, torch=F + "silu", grad=True)
def silu(input: Tensor):
    """input * sigmoid(input) (swish)."""
    return input * xb.sigmoid(input)


@register("activation", samples=pointwise_backward(-4.0, 4.0), torch="torch.ops.aten.silu_backward")
def silu_backward(grad_output: Tensor, self: Tensor):
    """grad_output * sigmoid(self) * (1 + self * (1 - sigmoid(self)))."""
    x = _wide(self)
    sg = xb.sigmoid(x)
    return (_wide(grad_output) * sg * (1.0 + x * (1.0 - sg))).astype(self.dtype)


def _softplus(x, beta: float, threshold: float):
    bx = x * beta if beta != 1 else x
    soft = xb.log1p(xb.exp(xb.minimum(bx, threshold)))
    return xb.where(bx > threshold, x, soft if beta == 1 else soft * (1.0 / beta))


@register("activation", samples=unary(-4.0, 4.0, avoid=(10.0 / 3,),
                                      kwargs=({}, {"beta": 3.0, "threshold": 10.0})),
          torch=F + "softplus", grad=True)
def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold."""
    return _softplus(input, beta, threshold)


@register("activation", samples=SMOOTH, torch=F + "mish", grad=True)
def mish(input: Tensor):
    """input * tanh(softplus(input))."""
    return input * xb.tanh(_softplus(input, 1.0, 20.0))


@register("activation", samples=unary(-5.0, 5.0, avoid=(-3.0, 3.0)), torch=F + "hardsigmoid", grad=True)
def hardsigmoid(input: Tensor):
    """0 below -3, 1 above 3, input / 6 + 1/2 between."""
    return xb.minimum(xb.maximum(input * (1.0 / 6.0) + 0.5, 0.0), 1.0)


@register("activation", samples=pointwise_backward(-5.0, 5.0, avoid=(-3.0, 3.0)),
          torch="torch.ops.aten.hardsigmoid_backward")
def hardsigmoid_backward(grad_output: Tensor, self: Tensor):
    """grad_output / 6 strictly inside (-3, 3), 0 outside."""
    inside = (self > -3.0) & (self < 3.0)
    return xb.where(inside, _wide(grad_output) * (1.0 / 6.0), 0.0).astype(grad_output.dtype)


_NO_NAN = tuple(v for v in SPECIAL_VALUES if v == v)


@register("activation", samples=unary(-5.0, 5.0, avoid=(-3.0, 3.0)), torch=F + "hardswish", grad=True)
def hardswish(input: Tensor):
    """input * hardsigmoid(input)."""
    return input * xb.minimum(xb.maximum(input + 3.0, 0.0), 6.0) * (1.0 / 6.0)


@register("activation", samples=pointwise_backward(-5.0, 5.0, avoid=(-3.0, 3.0), values=_NO_NAN),
          torch="torch.ops.aten.hardswish_backward",
          notes="grad_output where self is NaN (PyTorch's float64 kernel gives NaN there on AVX2 CPUs and "
                "grad_output on AVX-512 ones)")
def hardswish_backward(grad_output: Tensor, self: Tensor):
    """0 below -3, grad_output * (self / 3 + 1/2) up to 3, grad_output above (PyTorch's branches)."""
    g, x = _wide(grad_output), _wide(self)
    out = xb.where(x < -3.0, 0.0, xb.where(x <= 3.0, g * (x * (1.0 / 3.0) + 0.5), g))
    return out.astype(grad_output.dtype)


@register("activation", aliases=("hardtanh_",),
          samples=unary(-3.0, 3.0, avoid=(-1.0, 1.0, -0.5, 2.0), kwargs=({}, {"min_val": -0.5, "max_val": 2.0})),
          torch=F + "hardtanh", grad=True)
def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0):
    """clamp(input, min_val, max_val)."""
    return xb.minimum(xb.maximum(input, min_val), max_val)



@register("activation", samples=pointwise_backward(-3.0, 3.0, avoid=(-1.0, 1.0, -0.5, 2.0),
                                                   kwargs=({"min_val": -1.0, "max_val": 1.0},
                                                           {"min_val": -0.5, "max_val": 2.0}), values=_NO_NAN),
          torch="torch.ops.aten.hardtanh_backward",
          notes="0 where self is NaN (PyTorch's CPU kernels disagree there: float64 gives 0, the vectorised "
                "float32 and 16-bit ones pass grad_output)")
def hardtanh_backward(grad_output: Tensor, self: Tensor, min_val: float, max_val: float):
    """grad_output strictly between min_val and max_val, 0 elsewhere and at NaN (relu6 is hardtanh(0, 6))."""
    return xb.where((self > min_val) & (self < max_val), grad_output, 0).astype(grad_output.dtype)


@register("activation", samples=unary(-3.0, 3.0, avoid=(0.5,), kwargs=({"threshold": 0.5, "value": -1.0},)),
          torch=F + "threshold", grad=True)
def threshold(input: Tensor, threshold: float, value: float):
    """value where input <= threshold, else input (NaN stays NaN)."""
    return xb.where(input <= threshold, value, input)


@register("activation", samples=pointwise_backward(-3.0, 3.0, avoid=(0.5,), kwargs=({"threshold": 0.5},)),
          torch="torch.ops.aten.threshold_backward")
def threshold_backward(grad_output: Tensor, self: Tensor, threshold: float):
    """0 where self <= threshold, else grad_output (NaN in self passes the gradient); relu's backward is
    threshold_backward(grad, output, 0)."""
    return xb.where(self <= threshold, 0, grad_output).astype(grad_output.dtype)


@register("activation", samples=unary(-3.0, 3.0, avoid=(-0.5, 0.5), kwargs=({}, {"lambd": 1.0})),
          torch=F + "softshrink", grad=True)
def softshrink(input: Tensor, lambd: float = 0.5):
    """input - lambd above lambd, input + lambd below -lambd, 0 between (NaN stays NaN)."""
    return xb.where(input > lambd, input - lambd, xb.where(input < -lambd, input + lambd, input * 0.0))


@register("activation", samples=unary(-3.0, 3.0, avoid=(-0.5, 0.5), kwargs=({}, {"lambd": 1.0})),
          torch=F + "hardshrink", grad=True)
def hardshrink(input: Tensor, lambd: float = 0.5):
    """0 where -lambd <= input <= lambd, else input."""
    return xb.where((input >= -lambd) & (input <= lambd), 0.0, input)


@register("activation", aliases=("log_sigmoid",), samples=unary(-6.0, 6.0), torch=F + "logsigmoid",
          grad=True)
def logsigmoid(input: Tensor):
    """log(sigmoid(input)) = min(input, 0) - log1p(exp(-|input|))."""
    return xb.minimum(input, 0.0) - xb.log1p(xb.exp(-xb.abs(input)))


@register("activation", samples=unary(0.05, 0.95, kwargs=({}, {"eps": 0.1})), torch="torch.logit", grad=True)
def logit(input: Tensor, eps: float | None = None):
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    p = input if eps is None else xb.minimum(xb.maximum(input, eps), 1.0 - eps)
    return xb.log(p / (1.0 - p))


def _glu_samples(dtype, shapes):
    for shape in shapes.pointwise:
        if len(shape) >= 1 and shape[-1] % 2 == 0 and shape[-1]:
            yield Sample((tensor(shapes, dtype, shape, "glu"),), note=f"{shape}")
    for shape in ((6, 5), (4, 6, 3)):
        yield Sample((tensor(shapes, dtype, shape, "glu0"),), {"dim": 0}, note=f"{shape} dim=0")
    if shapes.noncontig:
        yield Sample((noncontig(tensor(shapes, dtype, (6, 8), "glunc")),), note="non-contiguous")


@register("activation", samples=_glu_samples, torch=F + "glu", grad=True)
def glu(input: Tensor, dim: int = -1):
    """a * sigmoid(b) where a, b are the halves of input along `dim`."""
    d = dim % input.ndim
    n = input.shape[d]
    if n % 2:
        raise ValueError(f"glu: dim {dim} has odd size {n}; it must split into two halves")
    lead = (slice(None),) * d
    return input[lead + (slice(0, n // 2),)] * xb.sigmoid(input[lead + (slice(n // 2, n),)])

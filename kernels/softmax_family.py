"""Softmax and log-softmax (category 4), numerically stable: the row maximum is subtracted first."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import Sample

from ._samples import cast, reduction, special, tensor
from ._util import scalar, vector, wrap_dim

register = xb.ops.register

_SAMPLES = reduction(-5.0, 5.0, keepdim=False, full=False, multi_dim=False)


def _with_dtype(gen):
    def samples(dtype, shapes):
        yield from gen(dtype, shapes)
        if dtype == "float16":
            s = next(iter(gen(dtype, shapes)))
            yield Sample(s.args, {**s.kwargs, "dtype": "float32"}, note="dtype=float32")
    return samples


def _along(fn, x, dim: int, name: str):
    """fn(x, d) along the wrapped dim d; a 0-d x as a vector of one (PyTorch's dims 0 and -1 there)."""
    d = wrap_dim(dim, x.ndim, name)
    return scalar(fn(vector(x), 0)) if x.ndim == 0 else fn(x, d)


def _softmax_rows(x, dim: int):
    e = xb.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _log_softmax_rows(x, dim: int):
    shifted = x - x.max(axis=dim, keepdims=True)
    return shifted - xb.log(xb.exp(shifted).sum(axis=dim, keepdims=True))


def _softmax(x, dim: int):
    return _along(_softmax_rows, x, dim, "softmax")


def _log_softmax(x, dim: int):
    return _along(_log_softmax_rows, x, dim, "log_softmax")


def _cast(x, dtype):
    return x if dtype is None else x.astype(dtype)


def _torch_dtype(name: str):
    """torch.softmax / log_softmax with `dtype` named as a string, as the library takes it."""
    return lambda torch, input, dim=-1, dtype=None: getattr(torch, name)(
        input, dim, dtype=None if dtype is None else getattr(torch, dtype))


@register("softmax", samples=_with_dtype(_SAMPLES), torch=_torch_dtype("softmax"), grad=True,
          notes="dim defaults to -1 (PyTorch requires it)")
def softmax(input: Tensor, dim: int = -1, dtype=None):
    """exp(input) / sum(exp(input)) along `dim` (input cast to `dtype` first, if given)."""
    return _softmax(_cast(input, dtype), dim)


@register("softmax", samples=_with_dtype(_SAMPLES), torch=_torch_dtype("log_softmax"), grad=True,
          notes="dim defaults to -1 (PyTorch requires it)")
def log_softmax(input: Tensor, dim: int = -1, dtype=None):
    """log(softmax(input)) along `dim`, computed as shifted - log(sum(exp(shifted)))."""
    return _log_softmax(_cast(input, dtype), dim)


def _aten_samples(dtype, shapes):
    for s in _SAMPLES(dtype, shapes):
        yield Sample(s.args, {"dim": s.kwargs["dim"], "half_to_float": False}, s.note, s.grad)


@register("softmax", name="_softmax", samples=_aten_samples, torch="torch.ops.aten._softmax", grad=True,
          notes="half_to_float=True gives float32 from float16 input (PyTorch supports it on CUDA only)")
def _softmax_op(self: Tensor, dim: int, half_to_float: bool):
    """ATen's _softmax(self, dim, half_to_float)."""
    x = self.astype("float32") if half_to_float and self.dtype == "float16" else self
    return _softmax(x, dim)


@register("softmax", name="_log_softmax", samples=_aten_samples, torch="torch.ops.aten._log_softmax", grad=True,
          notes="half_to_float=True gives float32 from float16 input (PyTorch supports it on CUDA only)")
def _log_softmax_op(self: Tensor, dim: int, half_to_float: bool):
    """ATen's _log_softmax(self, dim, half_to_float)."""
    x = self.astype("float32") if half_to_float and self.dtype == "float16" else self
    return _log_softmax(x, dim)


def _np_softmax(x: np.ndarray, dim: int, log: bool) -> np.ndarray:
    """softmax / log_softmax in float64 (a 0-d x counts as one element)."""
    v = np.asarray(x, np.float64).reshape(x.shape or (1,))
    with np.errstate(all="ignore"):
        shifted = v - v.max(axis=dim, keepdims=True)
        lse = np.log(np.exp(shifted).sum(axis=dim, keepdims=True))
        out = shifted - lse if log else np.exp(shifted - lse)
    return out.reshape(x.shape)


def _backward_samples(log: bool):
    """(grad_output, output, dim, input_dtype): the forward's samples with their (log-)softmax as output."""
    def gen(dtype, shapes):
        for s in _SAMPLES(dtype, shapes):
            x, dim = s.args[0], s.kwargs["dim"]
            g = tensor(shapes, dtype, x.shape, "smb", low=-2.0, high=2.0)
            yield Sample((g, cast(_np_softmax(x, dim, log), dtype), dim, dtype), note=s.note, grad=s.grad)
    return gen


def _torch_backward_data(name: str):
    def fn(torch, grad_output, output, dim, input_dtype):
        return getattr(torch.ops.aten, name)(grad_output, output, dim, getattr(torch, input_dtype))
    fn.__name__ = fn.__qualname__ = f"torch.ops.aten.{name}"
    return fn


def _opmath(x):
    return x.astype("float32") if x.dtype in ("float16", "bfloat16") else x


@register("softmax", samples=_backward_samples(False), torch=_torch_backward_data("_softmax_backward_data"))
def _softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int, input_dtype):
    """softmax's backward from its output y: y * (grad_output - sum(grad_output * y, dim)), in input_dtype."""
    def rows(g, d):
        y = _opmath(output if output.ndim else output.reshape((1,)))
        return y * (g - (g * y).sum(axis=d, keepdims=True))
    return _along(rows, _opmath(grad_output), dim, "_softmax_backward_data").astype(input_dtype)


@register("softmax", samples=_backward_samples(True), torch=_torch_backward_data("_log_softmax_backward_data"))
def _log_softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int, input_dtype):
    """log_softmax's backward from its output y: grad_output - exp(y) * sum(grad_output, dim), in input_dtype."""
    def rows(g, d):
        y = _opmath(output if output.ndim else output.reshape((1,)))
        return g - xb.exp(y) * g.sum(axis=d, keepdims=True)
    return _along(rows, _opmath(grad_output), dim, "_log_softmax_backward_data").astype(input_dtype)


def _safe_samples(dtype, shapes):
    yield from _SAMPLES(dtype, shapes)
    rows = special(dtype, (3, 4), (float("-inf"),) * 4 + (1.0, float("-inf"), 2.0, 0.5) + (-1.0, 0.0, 1.0, 2.0))
    yield Sample((rows,), {"dim": -1}, note="a fully masked row (all -inf)", grad=False)


@register("softmax", samples=_safe_samples, torch="torch.ops.aten._safe_softmax", grad=True)
def _safe_softmax(self: Tensor, dim: int, dtype=None):
    """softmax, but 0 (not NaN) on rows that are entirely -inf (fully masked attention rows)."""
    def rows(x, d):
        m = x.max(axis=d, keepdims=True)
        masked = m == float("-inf")
        e = xb.exp(x - xb.where(masked, 0.0, m))
        return xb.where(masked, 0.0, e / e.sum(axis=d, keepdims=True))
    return _along(rows, _cast(self, dtype), dim, "_safe_softmax")

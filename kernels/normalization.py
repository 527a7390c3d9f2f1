"""Normalisation layers (category 6): layer, batch, group and RMS normalisation, in their
`torch.nn.functional` form and as ATen's `native_*` operators that also return the statistics."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import Sample

from ._samples import cast, noncontig, special, tensor

register = xb.ops.register

_EPS = {"float16": 0.0009765625, "bfloat16": 0.0078125, "float32": 1.1920928955078125e-07,
        "float64": 2.220446049250313e-16}


def _torch_masked(name: str, weight_at: int, bias_at: int | None):
    """An ATen backward with output_mask: the outputs it leaves undefined (None) as empty tensors, of the dtype of
    the input (grad_input), the weight argument (at `weight_at`) and the bias (at `bias_at`, else the weight's)."""
    def fn(torch, *args):
        res = getattr(torch.ops.aten, name)(*args)
        like = [args[1], args[weight_at], args[bias_at] if bias_at is not None else args[weight_at]]
        return tuple(r if r is not None else torch.zeros(0, dtype=(l if l is not None else args[1]).dtype)
                     for r, l in zip(res, like))
    fn.__name__ = fn.__qualname__ = f"torch.ops.aten.{name} (undefined outputs empty)"
    return fn


def _norm_axes(input, normalized_shape) -> tuple[int, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise ValueError(f"normalized_shape {shape} does not match the trailing dims of {input.shape}")
    return tuple(range(input.ndim - len(shape), input.ndim))


def _layer_norm(input, normalized_shape, weight, bias, eps):
    """(out, mean, rstd), computed in float32 for 16-bit inputs, as PyTorch's CPU kernel does: out in the input's
    dtype, the statistics in `_stats_dtype`'s."""
    axes = _norm_axes(input, normalized_shape)
    x = _wide(input)
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    rstd = xb.rsqrt(var + eps)
    out = centered * rstd
    if weight is not None:
        out = out * _wide(weight)
    if bias is not None:
        out = out + _wide(bias)
    sdt = _stats_dtype(input, weight)
    return _narrow(out, input), mean.astype(sdt), rstd.astype(sdt)


def _ln_samples(affine: bool = True, last_two: bool = True):
    def gen(dtype, shapes):
        for shape in shapes.reduction:
            x = tensor(shapes, dtype, shape, "ln")
            n = shape[-1:]
            args = (x, n) + ((tensor(shapes, dtype, n, "lnw", low=0.5, high=1.5), tensor(shapes, dtype, n, "lnb"))
                             if affine else (None, None))
            yield Sample(args, note=f"{shape}")
        shape = shapes.reduction[-1]
        if last_two and len(shape) >= 3:
            n = shape[-2:]
            x = tensor(shapes, dtype, shape, "ln2")
            yield Sample((x, n, tensor(shapes, dtype, n, "ln2w", low=0.5, high=1.5), None), {"eps": 1e-3},
                         note=f"{shape} over the last two dims, no bias, eps=1e-3")
        if affine:
            x = tensor(shapes, dtype, (5, 17), "lnn")
            yield Sample((x, (17,), None, None), note="no weight, no bias")
        if shapes.noncontig:
            x = noncontig(tensor(shapes, dtype, (9, 8), "lnnc"))
            yield Sample((x, (8,), tensor(shapes, dtype, (8,), "lnncw"), tensor(shapes, dtype, (8,), "lnncb")),
                         note="non-contiguous")
    return gen


@register("normalization", samples=_ln_samples(), torch="torch.nn.functional.layer_norm", grad=True)
def layer_norm(input: Tensor, normalized_shape, weight: Tensor = None, bias: Tensor = None, eps: float = 1e-5):
    """(input - mean) / sqrt(var + eps) * weight + bias over the trailing `normalized_shape` dims."""
    return _layer_norm(input, normalized_shape, weight, bias, eps)[0]


def _native_ln_samples(dtype, shapes):
    for s in _ln_samples()(dtype, shapes):
        yield Sample(s.args + (s.kwargs.get("eps", 1e-5),), {}, s.note, s.grad)


@register("normalization", samples=_native_ln_samples, torch="torch.ops.aten.native_layer_norm",
          grad=("input", "weight", "bias"))
def native_layer_norm(input: Tensor, normalized_shape, weight: Tensor | None, bias: Tensor | None, eps: float):
    """(out, mean, rstd) of layer_norm; the statistics keep the normalised dims as size 1."""
    return _layer_norm(input, normalized_shape, weight, bias, eps)


def _empty(dtype):
    """An output that output_mask did not ask for (ATen leaves it undefined): an empty tensor."""
    return xb.zeros((0,), dtype)


def _masked(outputs, output_mask):
    """Each gradient where its output_mask entry is set (and it exists: None for a missing weight or bias),
    else an empty tensor."""
    return tuple(g if m and g is not None else _empty(dt) for (g, dt), m in zip(outputs, output_mask))


def _np_stats(x: np.ndarray, axes: tuple[int, ...], eps: float):
    """mean and 1 / sqrt(var + eps) over `axes` in float64, kept as size-1 dims."""
    v = x.astype(np.float64)
    mean = v.mean(axis=axes, keepdims=True)
    return mean, 1.0 / np.sqrt(((v - mean) ** 2).mean(axis=axes, keepdims=True) + eps)


def _ln_backward_samples(dtype, shapes):
    """(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask): native_layer_norm's samples
    with their statistics, each output_mask that its weight and bias allow, and one without grad_input."""
    for s in _native_ln_samples(dtype, shapes):
        x, shape, w, b, eps = s.args
        k = 1 if isinstance(shape, int) else len(shape)
        if int(np.prod(x.shape[x.ndim - k:])) <= 2 or not x.size:
            continue            # over 1 or 2 elements grad_input is exactly 0: only rounding noise to compare
        mean, rstd = _np_stats(x, tuple(range(x.ndim - k, x.ndim)), eps)
        g = tensor(shapes, dtype, x.shape, "lnbg", low=-2.0, high=2.0)
        mask = [True, w is not None, b is not None]
        yield Sample((g, x, shape, cast(mean, dtype), cast(rstd, dtype), w, b, mask), {}, s.note, s.grad)
    if w is not None:
        yield Sample((g, x, shape, cast(mean, dtype), cast(rstd, dtype), w, b, [False, True, b is not None]), {},
                     "no grad_input")


def _ln_grads(grad_out, input, normalized_shape, mean, rstd, weight):
    """(grad_input, grad_weight, grad_bias) of layer_norm, in float32 for 16-bit inputs."""
    axes = _norm_axes(input, normalized_shape)
    batch = tuple(range(input.ndim - len(axes)))
    x, g = _wide(input), _wide(grad_out)
    x_hat = (x - _wide(mean)) * _wide(rstd)
    gw = g if weight is None else g * _wide(weight)
    dx = _wide(rstd) * (gw - gw.mean(axis=axes, keepdims=True) - x_hat * (gw * x_hat).mean(axis=axes, keepdims=True))
    return dx, (g * x_hat).sum(axis=batch) if batch else g * x_hat, g.sum(axis=batch) if batch else g


@register("normalization", samples=_ln_backward_samples, torch=_torch_masked("native_layer_norm_backward", 5, 6))
def native_layer_norm_backward(grad_out: Tensor, input: Tensor, normalized_shape, mean: Tensor, rstd: Tensor,
                               weight: Tensor | None, bias: Tensor | None, output_mask):
    """ATen's native_layer_norm_backward: (grad_input, grad_weight, grad_bias) from native_layer_norm's mean and
    rstd; an output that output_mask leaves out, or whose weight / bias is None, is an empty tensor."""
    dx, dw, db = _ln_grads(grad_out, input, normalized_shape, mean, rstd, weight)
    return _masked(((dx.astype(input.dtype), input.dtype),
                    (None if weight is None else dw.astype(weight.dtype), input.dtype if weight is None else weight.dtype),
                    (None if bias is None else db.astype(bias.dtype), input.dtype if bias is None else bias.dtype)),
                   output_mask)


def _wide(x):
    """16-bit floats computed in float32, as PyTorch's kernels do (their opmath type)."""
    return x.astype("float32") if x.dtype in ("float16", "bfloat16") else x


def _narrow(out, input):
    """A result computed in float32 for a 16-bit input, rounded back to the input's dtype."""
    return out.astype(input.dtype) if input.dtype in ("float16", "bfloat16") else out


def _rms(input, normalized_shape, eps):
    """(input / rms, 1 / rms) in float32 for 16-bit inputs (eps=None: float32's epsilon then), the first
    rounded back to the input dtype: PyTorch's rms_norm."""
    axes = _norm_axes(input, normalized_shape)
    x = _wide(input)
    rstd = xb.rsqrt((x * x).mean(axis=axes, keepdims=True) + (_EPS[x.dtype] if eps is None else eps))
    return (x * rstd).astype(input.dtype), rstd


def _rms_samples(dtype, shapes):
    for s in _ln_samples()(dtype, shapes):
        x, n, w = s.args[:3]
        yield Sample((x, n, w), {"eps": 1e-6} if s.kwargs.get("eps") is None else s.kwargs, s.note, s.grad)
    x = tensor(shapes, dtype, (4, 33), "rmsdef")
    yield Sample((x, (33,)), note="eps from the dtype (None)")


@register("normalization", samples=_rms_samples, torch="torch.nn.functional.rms_norm", grad=True)
def rms_norm(input: Tensor, normalized_shape, weight: Tensor = None, eps: float | None = None):
    """input / sqrt(mean(input**2) + eps) * weight over the trailing dims (eps=None: the epsilon of the dtype
    computed in, float32 for 16-bit inputs)."""
    out = _rms(input, normalized_shape, eps)[0]
    return out if weight is None else out * weight


def _fused_rms_samples(dtype, shapes):
    for s in _rms_samples(dtype, shapes):
        args = s.args + (None,) * (3 - len(s.args))
        yield Sample(args + (s.kwargs.get("eps"),), {}, s.note, s.grad)


@register("normalization", samples=_fused_rms_samples, torch="torch.ops.aten._fused_rms_norm",
          grad=("input", "weight"))
def _fused_rms_norm(input: Tensor, normalized_shape, weight: Tensor | None, eps: float | None):
    """(out, rstd) of rms_norm; rstd is float32 for 16-bit inputs."""
    out, rstd = _rms(input, normalized_shape, eps)
    return (out if weight is None else out * weight), rstd


# ---- batch norm -----------------------------------------------------------------------------------------

def _channel(v, ndim: int):
    return v.reshape((v.shape[0],) + (1,) * (ndim - 2))


def _bn_samples(dtype, shapes):
    cases = [(8, 5), (4, 3, 17)] + [s for s in shapes.image[:2]]
    for shape in cases:
        c = shape[1]
        x = tensor(shapes, dtype, shape, "bn")
        w = tensor(shapes, dtype, (c,), "bnw", low=0.5, high=1.5)
        b = tensor(shapes, dtype, (c,), "bnb")
        rm = tensor(shapes, dtype, (c,), "bnrm", low=-0.5, high=0.5)
        rv = tensor(shapes, dtype, (c,), "bnrv", low=0.5, high=2.0)
        yield Sample((x, rm, rv, w, b, True), note=f"{shape} training")
        yield Sample((x, rm, rv, w, b, False), note=f"{shape} inference")
    x = tensor(shapes, dtype, (6, 4), "bnn")
    yield Sample((x, None, None, None, None, True), note="training without running stats or affine")
    if shapes.noncontig:
        x = noncontig(tensor(shapes, dtype, (7, 5), "bnnc"))
        yield Sample((x, None, None, tensor(shapes, dtype, (5,), "bnncw"), None, True), note="non-contiguous")


def _batch_norm(input, weight, bias, running_mean, running_var, training: bool, eps: float):
    """(out, save_mean, save_invstd), computed in float32 for 16-bit inputs: out in the input's dtype, the
    statistics in `_stats_dtype`'s."""
    axes = (0,) + tuple(range(2, input.ndim))
    x, sdt = _wide(input), _stats_dtype(input, weight, running_mean)
    if training:
        mean = x.mean(axis=axes, keepdims=True)
        centered = x - mean
        var = (centered * centered).mean(axis=axes, keepdims=True)
        invstd = xb.rsqrt(var + eps)
        save_mean, save_invstd = mean.reshape(-1).astype(sdt), invstd.reshape(-1).astype(sdt)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm in inference (training=False) needs running_mean and running_var")
        centered = x - _channel(_wide(running_mean), input.ndim)
        invstd = _channel(xb.rsqrt(_wide(running_var) + eps), input.ndim)
        save_mean = save_invstd = xb.zeros((0,), sdt)
    out = centered * invstd
    if weight is not None:
        out = out * _channel(_wide(weight), input.ndim)
    if bias is not None:
        out = out + _channel(_wide(bias), input.ndim)
    return _narrow(out, input), save_mean, save_invstd


@register("normalization", samples=_bn_samples, torch="torch.nn.functional.batch_norm",
          grad=("input", "weight", "bias"),
          notes="functional: running statistics are read, not updated (compute them from native_batch_norm's "
                "save_mean and the batch variance)")
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor = None,
               bias: Tensor = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5):
    """Normalise each channel (dim 1) by the batch statistics (training) or the running ones (inference)."""
    return _batch_norm(input, weight, bias, running_mean, running_var, training, eps)[0]


def _native_bn_samples(dtype, shapes):
    for s in _bn_samples(dtype, shapes):
        x, rm, rv, w, b, training = s.args
        yield Sample((x, w, b, rm, rv, training, 0.1, 1e-5), {}, s.note, s.grad)


@register("normalization", samples=_native_bn_samples, torch="torch.ops.aten.native_batch_norm",
          grad=("input", "weight", "bias"),
          notes="returns (out, save_mean, save_invstd) (empty in inference, as on PyTorch's CPU); running "
                "statistics are not updated in place")
def native_batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                      running_var: Tensor | None, training: bool, momentum: float, eps: float):
    """ATen's native_batch_norm: (out, save_mean, save_invstd)."""
    return _batch_norm(input, weight, bias, running_mean, running_var, training, eps)


def _stats_dtype(input, *params):
    """The dtype ATen's CPU norms give their statistics: float32 for a 16-bit input with float32 weights or
    running statistics (autocast's mix), else the input's."""
    wider = [p.dtype for p in params if p is not None and p.dtype != input.dtype]
    return wider[0] if wider and input.dtype in ("float16", "bfloat16") else input.dtype


def _bn_train(input, weight, bias, running_mean, running_var, training: bool, momentum: float, eps: float):
    """(out, save_mean, save_invstd, new running_mean, new running_var), computed in float32 for 16-bit inputs:
    the running statistics move by `momentum` towards the batch mean and the unbiased batch variance."""
    axes = (0,) + tuple(range(2, input.ndim))
    sdt = _stats_dtype(input, weight, running_mean)
    if not training:
        out = _batch_norm(_wide(input), _opt(weight), _opt(bias), _wide(running_mean), _wide(running_var), False,
                          eps)[0]
        return out.astype(input.dtype), _empty(sdt), _empty(sdt), running_mean, running_var
    x = _wide(input)
    n = input.size // input.shape[1]
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=axes, keepdims=True)
    invstd = xb.rsqrt(var + eps)
    out = centered * invstd
    if weight is not None:
        out = out * _channel(_wide(weight), input.ndim)
    if bias is not None:
        out = out + _channel(_wide(bias), input.ndim)
    new_mean = new_var = None
    if running_mean is not None:
        new_mean = ((1.0 - momentum) * _wide(running_mean) + momentum * mean.reshape(-1)).astype(running_mean.dtype)
    if running_var is not None:
        unbiased = var.reshape(-1) * (n / (n - 1) if n > 1 else float("inf"))
        new_var = ((1.0 - momentum) * _wide(running_var) + momentum * unbiased).astype(running_var.dtype)
    return out.astype(input.dtype), mean.reshape(-1).astype(sdt), invstd.reshape(-1).astype(sdt), new_mean, new_var


def _opt(x):
    return None if x is None else _wide(x)


def _legit_samples(dtype, shapes):
    for s in _native_bn_samples(dtype, shapes):
        if s.args[3] is not None:
            yield s


@register("normalization", samples=_legit_samples, torch="torch.ops.aten._native_batch_norm_legit_functional",
          grad=("input", "weight", "bias"),
          notes="the running statistics come back updated (the last two outputs), as AOTAutograd's functional "
                "graphs expect")
def _native_batch_norm_legit_functional(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                                        running_mean: Tensor, running_var: Tensor, training: bool, momentum: float,
                                        eps: float):
    """(out, save_mean, save_invstd, running_mean_out, running_var_out): batch norm with the running statistics
    updated when training ((1 - momentum) * running + momentum * batch, the variance unbiased) and returned
    unchanged otherwise; the saved statistics are empty in inference, as on PyTorch's CPU."""
    return _bn_train(input, weight, bias, running_mean, running_var, training, momentum, eps)


@register("normalization", samples=_legit_samples, torch="torch.ops.aten._native_batch_norm_legit",
          grad=("input", "weight", "bias"),
          notes="running statistics are not updated in place (_native_batch_norm_legit_functional returns them)")
def _native_batch_norm_legit(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor,
                             running_var: Tensor, training: bool, momentum: float, eps: float):
    """(out, save_mean, save_invstd) of _native_batch_norm_legit_functional."""
    return _bn_train(input, weight, bias, running_mean, running_var, training, momentum, eps)[:3]


def _no_training_samples(dtype, shapes):
    for s in _legit_samples(dtype, shapes):
        x, w, b, rm, rv, training, momentum, eps = s.args
        if not training:
            yield Sample((x, w, b, rm, rv, momentum, eps), {}, s.note, s.grad)


@register("normalization", samples=_no_training_samples,
          torch="torch.ops.aten._native_batch_norm_legit_no_training", grad=("input", "weight", "bias"))
def _native_batch_norm_legit_no_training(input: Tensor, weight: Tensor | None, bias: Tensor | None,
                                         running_mean: Tensor, running_var: Tensor, momentum: float, eps: float):
    """Batch norm in inference (the running statistics): (out, empty, empty), as on PyTorch's CPU."""
    return _bn_train(input, weight, bias, running_mean, running_var, False, momentum, eps)[:3]


def _bn_backward_samples(dtype, shapes):
    """(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, train, eps, output_mask) for
    the forward's samples: the saved statistics of training ones, None in inference."""
    for s in _native_bn_samples(dtype, shapes):
        x, w, b, rm, rv, training, _, eps = s.args
        if not training and rm is None:
            continue
        g = tensor(shapes, dtype, x.shape, "bnbg", low=-2.0, high=2.0)
        sm = si = None
        if training:
            mean, invstd = _np_stats(x, (0,) + tuple(range(2, x.ndim)), eps)
            sdt = rm.dtype if rm is not None else x.dtype
            sm, si = cast(mean.reshape(-1), str(sdt)), cast(invstd.reshape(-1), str(sdt))
        yield Sample((g, x, w, rm, rv, sm, si, training, eps, [True, w is not None, True]), {}, s.note, s.grad)
    yield Sample((g, x, w, rm, rv, sm, si, training, eps, [False, w is not None, False]), {}, "grad_weight only")


@register("normalization", samples=_bn_backward_samples, torch=_torch_masked("native_batch_norm_backward", 2, None))
def native_batch_norm_backward(grad_out: Tensor, input: Tensor, weight: Tensor | None, running_mean: Tensor | None,
                               running_var: Tensor | None, save_mean: Tensor | None, save_invstd: Tensor | None,
                               train: bool, eps: float, output_mask):
    """ATen's native_batch_norm_backward: (grad_input, grad_weight, grad_bias), from the saved batch statistics
    when `train`, else from the running ones; an output output_mask leaves out (or grad_weight without a weight)
    is an empty tensor."""
    axes = (0,) + tuple(range(2, input.ndim))
    x, g = _wide(input), _wide(grad_out)
    if train:
        mean, invstd = _wide(save_mean), _wide(save_invstd)
    else:
        mean, invstd = _wide(running_mean), xb.rsqrt(_wide(running_var) + eps)
    x_hat = (x - _channel(mean, x.ndim)) * _channel(invstd, x.ndim)
    dbias = g.sum(axis=axes)
    dweight = (g * x_hat).sum(axis=axes)
    scale = invstd if weight is None else invstd * _wide(weight)
    if train:
        m = input.size // input.shape[1]
        dx = _channel(scale, x.ndim) * (g - _channel(dbias, x.ndim) * (1.0 / m) - x_hat * _channel(dweight, x.ndim)
                                        * (1.0 / m))
    else:
        dx = g * _channel(scale, x.ndim)
    wdt = input.dtype if weight is None else weight.dtype
    return _masked(((dx.astype(input.dtype), input.dtype), (None if weight is None else dweight.astype(wdt), wdt),
                    (dbias.astype(wdt), wdt)), output_mask)


# ---- group norm -----------------------------------------------------------------------------------------

def _spatial(x) -> int:
    size = 1
    for d in x.shape[2:]:
        size *= d
    return size


def _group_norm(input, num_groups: int, weight, bias, eps: float):
    """(out, mean, rstd), computed in float32 for 16-bit inputs: out in the input's dtype, the statistics in
    `_stats_dtype`'s."""
    n, c = input.shape[0], input.shape[1]
    if c % num_groups:
        raise ValueError(f"group_norm: {c} channels do not split into {num_groups} groups")
    sdt = _stats_dtype(input, weight)
    g = _wide(input).reshape((n, num_groups, c // num_groups * _spatial(input)))  # (-1 is ambiguous when n is 0)
    mean = g.mean(axis=-1, keepdims=True)
    centered = g - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    rstd = xb.rsqrt(var + eps)
    out = (centered * rstd).reshape(input.shape)
    if weight is not None:
        out = out * _channel(_wide(weight), input.ndim)
    if bias is not None:
        out = out + _channel(_wide(bias), input.ndim)
    return (_narrow(out, input), mean.reshape((n, num_groups)).astype(sdt),
            rstd.reshape((n, num_groups)).astype(sdt))


def _gn_samples(dtype, shapes):
    cases = [((2, 6, 5), 3), ((3, 4), 2), ((2, 8, 4, 4), 4), ((1, 6, 9, 2), 1), ((2, 6, 3), 6)]
    for shape, groups in cases:
        c = shape[1]
        x = tensor(shapes, dtype, shape, "gn")
        yield Sample((x, groups, tensor(shapes, dtype, (c,), "gnw", low=0.5, high=1.5),
                      tensor(shapes, dtype, (c,), "gnb")), note=f"{shape} groups={groups}")
    x = tensor(shapes, dtype, (2, 4, 7), "gnn")
    yield Sample((x, 2), note="no affine")
    if shapes.empty:
        yield Sample((tensor(shapes, dtype, (0, 6, 3), "gne"), 3, tensor(shapes, dtype, (6,), "gnew"), None),
                     note="empty batch")
    if shapes.noncontig:
        yield Sample((noncontig(tensor(shapes, dtype, (5, 6), "gnnc")), 3), note="non-contiguous")


@register("normalization", samples=_gn_samples, torch="torch.nn.functional.group_norm", grad=True)
def group_norm(input: Tensor, num_groups: int, weight: Tensor = None, bias: Tensor = None, eps: float = 1e-5):
    """Normalise each of `num_groups` channel groups of every sample, then scale and shift per channel."""
    return _group_norm(input, num_groups, weight, bias, eps)[0]


def _native_gn_samples(dtype, shapes):
    for s in _gn_samples(dtype, shapes):
        x, groups = s.args[:2]
        w, b = (s.args[2:] + (None, None))[:2]
        hw = 1
        for d in x.shape[2:]:
            hw *= d
        yield Sample((x, w, b, x.shape[0], x.shape[1], hw, groups, 1e-5), {}, s.note, s.grad)


@register("normalization", samples=_native_gn_samples, torch="torch.ops.aten.native_group_norm",
          grad=("input", "weight", "bias"))
def native_group_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, N: int, C: int, HxW: int,
                      group: int, eps: float):
    """ATen's native_group_norm: (out, mean, rstd), the statistics shaped (N, group)."""
    if input.shape[0] != N or input.shape[1] != C or input.size != N * C * HxW:
        raise ValueError(f"native_group_norm: N={N}, C={C}, HxW={HxW} do not describe input {input.shape}")
    return _group_norm(input, group, weight, bias, eps)


def _gn_backward_samples(dtype, shapes):
    """(grad_out, input, mean, rstd, weight, N, C, HxW, group, output_mask) for native_group_norm's samples."""
    for s in _native_gn_samples(dtype, shapes):
        x, w, b, n, c, hw, groups, eps = s.args
        if n == 0 or c // groups * hw <= 2:
            continue            # groups of 1 or 2 elements: grad_input is exactly 0, only rounding noise to compare
        mean, rstd = _np_stats(x.reshape(n, groups, -1), (2,), eps)
        g = tensor(shapes, dtype, x.shape, "gnbg", low=-2.0, high=2.0)
        yield Sample((g, x, cast(mean.reshape(n, groups), dtype), cast(rstd.reshape(n, groups), dtype), w, n, c, hw,
                      groups, [True, w is not None, w is not None]), {}, s.note, s.grad)


@register("normalization", samples=_gn_backward_samples, torch=_torch_masked("native_group_norm_backward", 4, None))
def native_group_norm_backward(grad_out: Tensor, input: Tensor, mean: Tensor, rstd: Tensor, weight: Tensor | None,
                               N: int, C: int, HxW: int, group: int, output_mask):
    """ATen's native_group_norm_backward: (grad_input, grad_weight, grad_bias) from native_group_norm's mean and
    rstd ([N, group]); an output output_mask leaves out is an empty tensor."""
    if input.shape[0] != N or input.shape[1] != C or input.size != N * C * HxW:
        raise ValueError(f"native_group_norm_backward: N={N}, C={C}, HxW={HxW} do not describe input {input.shape}")
    shape = (N, group, C // group * HxW)
    x, g = _wide(input).reshape(shape), _wide(grad_out)
    x_hat = (x - _wide(mean).reshape((N, group, 1))) * _wide(rstd).reshape((N, group, 1))
    gw = g if weight is None else g * _channel(_wide(weight), input.ndim)
    gw = gw.reshape(shape)
    dx = _wide(rstd).reshape((N, group, 1)) * (gw - gw.mean(axis=2, keepdims=True)
                                               - x_hat * (gw * x_hat).mean(axis=2, keepdims=True))
    per_channel = (N, C, HxW)
    dweight = (g.reshape(per_channel) * x_hat.reshape(per_channel)).sum(axis=(0, 2))
    dbias = g.reshape(per_channel).sum(axis=(0, 2))
    wdt = input.dtype if weight is None else weight.dtype
    return _masked(((dx.reshape(input.shape).astype(input.dtype), input.dtype), (dweight.astype(wdt), wdt),
                    (dbias.astype(wdt), wdt)), output_mask)


# ---- renorm, weight norm --------------------------------------------------------------------------------

def _renorm_samples(dtype, shapes):
    for shape, dim in (((5, 7), 0), ((4, 6, 3), 1), ((3, 17), -1)):
        x = tensor(shapes, dtype, shape, "renorm")
        yield Sample((x, 2, dim, 1.5), note=f"{shape} p=2 dim={dim}")
        yield Sample((x, 1, dim, 2.0), note=f"{shape} p=1 dim={dim}")
        yield Sample((x, float("inf"), dim, 1.5), note=f"{shape} p=inf dim={dim}")
    yield Sample((tensor(shapes, dtype, (4, 6), "renorm3"), 3.0, 1, 1.0), note="p=3")
    if shapes.special:
        rows = special(dtype, (3, 4), (1.0, float("nan"), -3.0, 0.5, float("inf"), 1.0, 2.0, 0.0,
                                       -float("inf"), 0.0, 1.0, 2.0))
        yield Sample((rows, float("inf"), 0, 1.0), note="special values, p=inf", grad=False)
        yield Sample((rows, 2, 0, 1.0), note="special values, p=2", grad=False)
    if shapes.noncontig:
        yield Sample((noncontig(tensor(shapes, dtype, (6, 5), "renormnc")), 2, 0, 1.0), note="non-contiguous")


@register("normalization", samples=_renorm_samples, torch="torch.renorm", grad=("input",))
def renorm(input: Tensor, p: float, dim: int, maxnorm: float):
    """Each slice along `dim` whose p-norm (p > 0; inf: the largest magnitude) exceeds `maxnorm` is scaled down
    to norm `maxnorm` (by maxnorm / (norm + 1e-7), as PyTorch)."""
    if input.ndim < 2:
        raise ValueError(f"renorm: input needs at least 2 dims, got {input.ndim}")
    if not p > 0:
        raise ValueError(f"renorm: p must be positive (PyTorch supports no other norm here), got {p}")
    if maxnorm < 0:
        raise ValueError(f"renorm: maxnorm must be >= 0, got {maxnorm}")
    d = dim % input.ndim
    others = tuple(a for a in range(input.ndim) if a != d)
    a = xb.abs(input)
    if p == float("inf"):
        nrm = a.max(axis=others, keepdims=True)
    elif p == 2:
        nrm = xb.sqrt((input * input).sum(axis=others, keepdims=True))
    elif p == 1:
        nrm = a.sum(axis=others, keepdims=True)
    else:
        nrm = xb.power((a ** float(p)).sum(axis=others, keepdims=True), 1.0 / p)
    scale = xb.where(nrm > maxnorm, maxnorm / (nrm + 1e-7), 1.0)
    return input * scale


def _wn_samples(dtype, shapes):
    for shape, dim in (((6, 5), 0), ((4, 3, 5), 0), ((4, 7), 1), ((3, 4, 5), 2)):
        v = tensor(shapes, dtype, shape, "wnv")
        gshape = tuple(n if i == dim else 1 for i, n in enumerate(shape))
        yield Sample((v, tensor(shapes, dtype, gshape, "wng", low=0.5, high=2.0), dim), note=f"{shape} dim={dim}")


@register("normalization", samples=_wn_samples, torch="torch._weight_norm_interface", grad=("v", "g"))
def _weight_norm_interface(v: Tensor, g: Tensor, dim: int = 0):
    """(v * g / ||v||, ||v||): the norm over every dim but `dim`, kept with size 1 (float32 for 16-bit v)."""
    d = dim % v.ndim
    others = tuple(a for a in range(v.ndim) if a != d)
    x = _wide(v)
    nrm = xb.sqrt((x * x).sum(axis=others, keepdims=True))
    return (x * (g / nrm)).astype(v.dtype), nrm

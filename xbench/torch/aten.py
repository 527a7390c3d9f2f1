"""ATen operators in terms of the library: the table the bridge traces captured graphs with.

An ATen op lowers by the first rule that applies:

1. an adapter in this file (`@lowering("slice")`): where ATen's arguments differ from the library
   operator's (weight before indices in `embedding`, `padding_idx=-1` for none, placement arguments), where the
   op is pure view plumbing (`t`, `alias`, `split`), or where the op is random (the seed is a run-time input);
2. the library operator of the same name or alias (`xb.ops`: the `torch=` names in kernels/), called with
   ATen's arguments once placement arguments (`layout`, `device`, `pin_memory`, `memory_format`) are dropped.

Anything else is unsupported: that node runs on torch, and `xb.torch.explain` says why. Rules run while an
operator is being traced: tensors are `xb.Tensor`s, every other argument a plain Python value (dtypes are
xbench's names).
"""
from __future__ import annotations

import contextvars
import functools
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import xbench as xb

from ..lang.tensor import Tensor

PLACEMENT = frozenset({"layout", "device", "pin_memory", "memory_format", "non_blocking", "requires_grad"})
Rule = Callable[..., object]
RULES: dict[str, Rule] = {}


def lowering(*names: str):
    """Register an adapter for ATen ops named `packet` or `packet.overload` (`"slice"`, `"scatter.value"`)."""
    def deco(fn: Rule) -> Rule:
        for n in names:
            RULES[n] = fn
        return fn
    return deco


@dataclass(frozen=True)
class Target:
    """What an FX node's target names: an ATen op (`packet`, `overload`) or a Python function."""
    packet: str
    overload: str
    text: str


def target_of(target) -> Target:
    schema = getattr(target, "_schema", None)
    if schema is not None:
        ns, _, packet = schema.name.partition("::")
        overload = getattr(target, "_overloadname", "default")
        return Target(packet, overload, f"{ns}.{packet}.{overload}")
    name = getattr(target, "__name__", str(target))
    return Target(name, "", f"{getattr(target, '__module__', '') or ''}.{name}".lstrip("."))


def rule_for(target) -> tuple[Rule | None, str]:
    """The rule lowering `target`, or None and the reason there is none."""
    if target in PYTHON:
        return PYTHON[target], ""
    t = target_of(target)
    ns = t.text.split(".", 1)[0]
    inlined = _custom_rule(ns, t.packet)
    if inlined is not None:
        return inlined, ""
    if ns not in ("aten", "prims"):
        return None, f"{t.text} is not an ATen op"
    schema = getattr(target, "_schema", None)
    if schema is not None and schema.is_mutable:
        # xbench operators have no side effects: torch applies the write (AOT keeps buffer and input updates
        # as in-place copies at the end of a graph)
        return None, f"{t.text} writes its input in place"
    fn = RULES.get(f"{t.packet}.{t.overload}") or RULES.get(t.packet)
    if fn is not None:
        return fn, ""
    if ns == "aten":
        if t.packet not in _library_names():
            return None, f"the library has no operator for aten.{t.packet}"
        return library_call(xb.ops.get(t.packet)), ""
    return None, f"no rule for {t.text}"


def _custom_rule(ns: str, packet: str) -> Rule | None:
    """An xbench operator registered as a torch custom op (`xb.torch.custom_op`) joins the graph's trace."""
    from .custom import _registered
    c = _registered.get(f"{ns}::{packet}")
    backward = c is None and packet.endswith("_backward")
    if backward:
        c = _registered.get(f"{ns}::{packet.removesuffix('_backward')}")
    if c is None:
        return None
    names = [p.name for p in c.params]
    op = c._backward if backward else c.op

    def call(*args):
        kw = dict(zip(names, args))
        kw.update({f"ct{i}": a for i, a in enumerate(args[len(names):])})
        return op.inline(**kw)
    return call


@functools.lru_cache(maxsize=1)
def _library_names() -> frozenset:
    return frozenset(xb.ops.list())


def library_call(op) -> Rule:
    def call(*args, **kwargs):
        return op.inline(*args, **{k: v for k, v in kwargs.items() if k not in PLACEMENT})
    call.__name__ = op.name
    return call


def _lib(name: str, *args, **kwargs):
    return xb.ops.get(name).inline(*args, **kwargs)


# ---- Python functions on sizes and tuples (SymInt arithmetic, getitem of multi-output ops) ----------------

PYTHON: dict[Callable, Rule] = {
    operator.getitem: operator.getitem,
    operator.add: operator.add, operator.sub: operator.sub, operator.mul: operator.mul,
    operator.truediv: operator.truediv, operator.floordiv: operator.floordiv, operator.mod: operator.mod,
    operator.neg: operator.neg, operator.pow: operator.pow, operator.eq: operator.eq, operator.ne: operator.ne,
    operator.lt: operator.lt, operator.le: operator.le, operator.gt: operator.gt, operator.ge: operator.ge,
}


def _int_arith():
    import torch
    PYTHON.update({torch.sym_int: int, torch.sym_float: float, torch.sym_max: max, torch.sym_min: min,
                   torch.sym_sqrt: math.sqrt, math.ceil: math.ceil, math.floor: math.floor})


_int_arith()


@lowering("sym_size", "sym_size.int")
def _sym_size(x, dim: int):
    return x.shape[dim]


@lowering("sym_numel")
def _sym_numel(x):
    n = 1
    for s in x.shape:
        n *= s
    return n


@lowering("sym_stride", "sym_stride.int")
def _sym_stride(x, dim: int):
    stride = 1
    for s in x.shape[dim + 1:] if dim >= 0 else x.shape[len(x.shape) + dim + 1:]:
        stride *= s
    return stride


# ---- views and copies (every xbench value is a fresh dense tensor) -----------------------------------------

@lowering("alias", "detach", "lift_fresh_copy", "clone", "contiguous", "_local_scalar_dense", "lift_fresh",
          "alias_copy", "detach_copy", "resolve_conj", "resolve_neg")
def _identity(x, *args, **kwargs):
    return x


@lowering("view", "_unsafe_view", "reshape", "view_copy", "_reshape_alias")
def _view(x, size, *strides):
    return _lib("reshape", x, [int(s) for s in size])


@lowering("t", "t_copy")
def _t(x):
    return _lib("transpose", x, 0, 1) if x.ndim == 2 else x


@lowering("numpy_T")
def _numpy_t(x):
    return _lib("permute", x, list(range(x.ndim))[::-1])


def _clamp_index(i: int | None, n: int, default: int) -> int:
    if i is None:
        return default
    i = int(i)
    if i < 0:
        i += n
    return min(max(i, 0), n)


@lowering("slice", "slice_copy")
def _slice(x, dim: int = 0, start=None, end=None, step: int = 1):
    d = dim % x.ndim
    n = x.shape[d]
    lo, hi = _clamp_index(start, n, 0), _clamp_index(end, n, n)
    if lo == 0 and hi == n and step == 1:
        return x
    index = [slice(None)] * x.ndim
    index[d] = slice(lo, max(lo, hi), int(step))
    return x[tuple(index)]


@lowering("split.Tensor", "split_copy.Tensor", "split")
def _split(x, split_size: int, dim: int = 0):
    d = dim % x.ndim
    n = x.shape[d]
    sizes = [min(split_size, n - i) for i in range(0, n, split_size)] if n else [0]
    return _split_with_sizes(x, sizes, d)


@lowering("split_with_sizes", "split_with_sizes_copy")
def _split_with_sizes(x, split_sizes, dim: int = 0):
    d = dim % x.ndim
    out, at = [], 0
    for s in split_sizes:
        out.append(_slice(x, d, at, at + int(s)))
        at += int(s)
    return tuple(out)


@lowering("unbind.int", "unbind")
def _unbind(x, dim: int = 0):
    d = dim % x.ndim
    return tuple(_lib("select", x, d, i) for i in range(x.shape[d]))


@lowering("copy")
def _copy(self, src, non_blocking: bool = False):
    return xb.broadcast_to(src.astype(self.dtype) if isinstance(src, Tensor) else
                           xb.full((), src, self.dtype), self.shape)


@lowering("fill.Tensor", "fill.Scalar", "fill")
def _fill(self, value):
    if isinstance(value, Tensor):
        return xb.broadcast_to(value.astype(self.dtype), self.shape)
    return xb.full(self.shape, value, self.dtype)


@lowering("expand_copy")
def _expand_copy(x, size, implicit: bool = False):
    return _lib("expand", x, size)


# ---- creation (ATen's empty_* values are unspecified: zeros) -----------------------------------------------

def _dtype(dtype, default: str) -> str:
    return default if dtype is None else dtype


@lowering("empty_like", "zeros_like")
def _zeros_like(x, dtype=None, **placement):
    return xb.zeros(x.shape, _dtype(dtype, x.dtype))


@lowering("ones_like")
def _ones_like(x, dtype=None, **placement):
    return xb.ones(x.shape, _dtype(dtype, x.dtype))


@lowering("empty.memory_format", "empty", "zeros")
def _empty(size, dtype=None, **placement):
    return xb.zeros(tuple(int(s) for s in size), _dtype(dtype, "float32"))


@lowering("empty_permuted")
def _empty_permuted(size, physical_layout, dtype=None, **placement):
    return _empty(size, dtype)


@lowering("empty_strided", "new_empty_strided")
def _empty_strided(*args, dtype=None, **placement):
    x, size = (None, args[0]) if not isinstance(args[0], Tensor) else (args[0], args[1])
    return xb.zeros(tuple(int(s) for s in size), _dtype(dtype, x.dtype if x is not None else "float32"))


@lowering("new_empty", "new_zeros")
def _new_zeros(x, size, dtype=None, **placement):
    return xb.zeros(tuple(int(s) for s in size), _dtype(dtype, x.dtype))


@lowering("new_ones")
def _new_ones(x, size, dtype=None, **placement):
    return xb.ones(tuple(int(s) for s in size), _dtype(dtype, x.dtype))


@lowering("new_full")
def _new_full(x, size, fill_value, dtype=None, **placement):
    return xb.full(tuple(int(s) for s in size), fill_value, _dtype(dtype, x.dtype))


@lowering("full")
def _full(size, fill_value, dtype=None, **placement):
    if isinstance(fill_value, Tensor):
        return xb.broadcast_to(fill_value.astype(dtype or fill_value.dtype), tuple(int(s) for s in size))
    return _lib("full", [int(s) for s in size], fill_value, dtype=dtype)


@lowering("scalar_tensor")
def _scalar_tensor(s, dtype=None, **placement):
    if isinstance(s, Tensor):
        return s.astype(dtype or "float32")
    return _lib("scalar_tensor", s, dtype=dtype)


@lowering("arange.start_step", "arange.start", "arange.default", "arange")
def _arange(*args, dtype=None, **placement):
    return _lib("arange", *args, dtype=dtype)


@lowering("convert_element_type")
def _convert(x, dtype):
    return x if x.dtype == dtype else x.astype(dtype)


# ---- argument adapters ------------------------------------------------------------------------------------

@lowering("embedding")
def _embedding(weight, indices, padding_idx: int = -1, scale_grad_by_freq: bool = False, sparse: bool = False):
    return _lib("embedding", indices, weight)


@lowering("binary_cross_entropy_with_logits")
def _bce_with_logits(self, target, weight=None, pos_weight=None, reduction=1):
    """ATen passes `pos_weight` before `reduction`."""
    return _lib("binary_cross_entropy_with_logits", self, target, weight, reduction, pos_weight)


@lowering("convolution")
def _convolution(input, weight, bias, stride, padding, dilation, transposed: bool, output_padding, groups: int):
    nd = input.ndim - 2
    if transposed:
        if nd != 2:
            raise ValueError(f"transposed convolution over {nd} spatial dims")
        return _lib("conv_transpose2d", input, weight, bias, list(stride), list(padding), list(output_padding),
                    groups, list(dilation))
    name = {1: "conv1d", 2: "conv2d", 3: "conv3d"}.get(nd)
    if name is None:
        raise ValueError(f"convolution over {nd} spatial dims")
    return _lib(name, input, weight, bias, list(stride), list(padding), list(dilation), groups)


@lowering("_low_memory_max_pool_with_offsets")
def _max_pool_with_offsets(x, kernel_size, stride, padding, dilation, ceil_mode: bool = False):
    return _lib(f"max_pool{len(kernel_size)}d_with_offsets", x, kernel_size, stride, padding, dilation, ceil_mode)


@lowering("_low_memory_max_pool_offsets_to_indices")
def _max_pool_offsets_to_indices(offsets, kernel_size, input_size, stride, padding, dilation):
    return _lib(f"max_pool{len(kernel_size)}d_offsets_to_indices", offsets, kernel_size, input_size, stride, padding,
                dilation)


@lowering("scatter.value", "scatter.value_reduce")
def _scatter_value(self, dim: int, index, value, reduce=None):
    return _lib("scatter", self, dim, index, value=value, reduce=reduce)


def _stats_in_input_dtype(input, outs):
    """A norm's saved statistics in the input's dtype, as the graph records them: torch's decompositions, which
    give the graph its dtypes, cast them so (its CPU kernels keep float32 ones under autocast)."""
    out, mean, rstd, *running = outs
    return (out, mean.astype(input.dtype), rstd.astype(input.dtype), *running)


def _stats_as_recorded(name: str) -> Rule:
    # the library's norms compute a 16-bit input in float32 and give its output in the input's dtype
    def rule(input, *args, **kwargs):
        return _stats_in_input_dtype(input, _lib(name, input, *args, **kwargs))
    return rule


for _name in ("native_batch_norm", "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
              "native_layer_norm", "native_group_norm"):
    lowering(_name)(_stats_as_recorded(_name))


@lowering("_native_batch_norm_legit.no_stats")
def _batch_norm_no_stats(input, weight, bias, training: bool, momentum: float, eps: float):
    return _stats_in_input_dtype(input, _lib("native_batch_norm", input, weight, bias, None, None, training,
                                             momentum, eps))


@lowering("native_group_norm_backward")
def _group_norm_backward(grad_out, input, mean, rstd, weight, *args):
    # torch's decomposition computes in float32 and casts every gradient to its tensor arguments' promoted
    # dtype: float32 under autocast, where the weight is float32 (its CPU kernel keeps grad_input 16-bit)
    wide = functools.reduce(xb.dtypes.promote, [t.dtype for t in (grad_out, input, mean, rstd, weight) if t is not None])
    grads = _lib("native_group_norm_backward", grad_out, input, mean, rstd, weight, *args)
    return tuple(g.astype(wide) for g in grads)


@lowering("_scaled_dot_product_flash_attention_for_cpu")
def _sdpa_cpu(query, key, value, dropout_p: float = 0.0, is_causal: bool = False, attn_mask=None, scale=None):
    if attn_mask is None:
        return _lib("_scaled_dot_product_flash_attention", query, key, value, dropout_p, is_causal, False, scale)
    bias = xb.where(attn_mask, 0.0, -math.inf).astype(query.dtype) if attn_mask.dtype == "bool" else attn_mask
    return _lib("_scaled_dot_product_efficient_attention", query, key, value, bias, True, dropout_p, is_causal,
                scale)


# ---- random ops: the seed is a run-time input, so a new step does not recompile ---------------------------

_seed: contextvars.ContextVar = contextvars.ContextVar("xbench_torch_seed", default=None)


def random_seed():
    """The traced seed of the next random op in the graph being traced (each op its own stream)."""
    source = _seed.get()
    if source is None:
        raise ValueError("a random op outside a graph that takes a seed")
    return source()


@lowering("native_dropout")
def _native_dropout(input, p: float, train):
    if train is False or p == 0.0:
        return input, xb.ones(input.shape, "bool")
    return _lib("native_dropout", input, p, True, seed=random_seed())


@lowering("bernoulli.p")
def _bernoulli_p(input, p: float = 0.5, generator=None):
    return _lib("bernoulli", input, p=p, seed=random_seed())


@lowering("bernoulli.default", "bernoulli")
def _bernoulli(input, generator=None):
    return _lib("bernoulli", input, seed=random_seed())


@lowering("rand_like")
def _rand_like(x, dtype=None, **placement):
    return _lib("rand", list(x.shape), seed=random_seed(), dtype=_dtype(dtype, x.dtype))


@lowering("randn_like")
def _randn_like(x, dtype=None, **placement):
    return _lib("randn", list(x.shape), seed=random_seed(), dtype=_dtype(dtype, x.dtype))


@lowering("rand.default", "rand")
def _rand(size, dtype=None, generator=None, **placement):
    return _lib("rand", [int(s) for s in size], seed=random_seed(), dtype=_dtype(dtype, "float32"))


@lowering("randn.default", "randn")
def _randn(size, dtype=None, generator=None, **placement):
    return _lib("randn", [int(s) for s in size], seed=random_seed(), dtype=_dtype(dtype, "float32"))


RANDOM = frozenset({"native_dropout", "bernoulli", "rand_like", "randn_like", "rand", "randn", "randint",
                    "randint_like", "randperm", "normal", "uniform", "exponential", "multinomial", "dropout"})

"""An xbench operator as a PyTorch operator: `xb.torch.custom_op`, and `xb.torch.replace` for modules.

`custom_op(op, name="mylib::rmsnorm")` defines a real `torch.library` operator: a CPU (and CUDA) kernel that
runs the xbench operator on the tensors' memory, a fake kernel that gives output shapes from xbench's own
shape rules (so `torch.compile` and `torch.export` trace through it), and an autograd formula whose backward
is a second custom op, `<name>_backward`, computed by xbench's reverse-mode autodiff of the same body. It
composes with the rest of PyTorch like a built-in op: eager, autograd, torch.compile, DDP.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from .. import dtypes as D
from ..errors import ArgumentError, VerificationError, XbenchError
from ..lang import functions as F
from ..lang.autodiff import backward as reverse
from ..lang.operator import Operator
from ..lang.tensor import TensorSpec
from ..lang.trace import current
from ..verify import compare, op_class, reduction_length
from .interop import TO_TORCH, from_numpy, to_numpy, xb_dtype

_SCHEMA_TYPES = {bool: "bool", int: "int", float: "float", str: "str"}


@dataclass
class _Param:
    name: str
    tensor: bool
    schema: str                  # "Tensor x", "float eps=1e-06"


def _params(op: Operator) -> list[_Param]:
    out = []
    for p in op.signature.parameters.values():
        if op.params[p.name] is not None:
            out.append(_Param(p.name, True, f"Tensor {p.name}"))
            continue
        kind = type(p.default) if p.default is not p.empty and p.default is not None else \
            p.annotation if p.annotation in _SCHEMA_TYPES else None
        if kind not in _SCHEMA_TYPES:
            raise ArgumentError(f"custom_op({op.name}): parameter {p.name!r} needs a type",
                                hint=f"annotate it (`{p.name}: float`) or give it a default value, or make it a "
                                     f"tensor (`{p.name}: Tensor`)")
        default = "" if p.default is p.empty else f"={p.default!r}".replace("'", '"')
        out.append(_Param(p.name, False, f"{_SCHEMA_TYPES[kind]} {p.name}{default}"))
    return out


def _n_outputs(op: Operator) -> int:
    ret = op._return
    return len(ret) if isinstance(ret, tuple) else 1


def _backend_for(tensors: list[torch.Tensor], backend: str | None) -> str:
    if backend is not None:
        return backend
    devices = {t.device.type for t in tensors}
    if len(devices) > 1:
        raise ArgumentError(f"tensors on several devices ({', '.join(sorted(devices))})",
                            hint="move them to one device, or pass backend= explicitly")
    return "cuda" if devices == {"cuda"} else "cpu"


def _fake_array(t: torch.Tensor) -> np.ndarray:
    """A zero-strided array of the tensor's shape and dtype (no memory): enough to trace at its shape."""
    shape = tuple(int(s.node.hint) if isinstance(s, torch.SymInt) else int(s) for s in t.shape)
    return np.broadcast_to(np.zeros((), D.to_numpy(xb_dtype(t.dtype))), shape)


@dataclass
class CustomOp:
    """A registered torch custom op backed by an xbench operator (callable like the op it registered)."""
    op: Operator
    name: str
    backend: str | None = None
    verify: bool = False
    calls: int = 0
    params: list[_Param] = field(default_factory=list)

    def __call__(self, *args, **kwargs):
        return self.torch_op(*args, **kwargs)

    @property
    def torch_op(self):
        ns, _, base = self.name.partition("::")
        return getattr(getattr(torch.ops, ns), base)

    # ---- the kernels ------------------------------------------------------------------------------------
    def _split(self, args) -> tuple[list[torch.Tensor], dict[str, Any]]:
        tensors, statics = [], {}
        for p, a in zip(self.params, args):
            if p.tensor:
                if not isinstance(a, torch.Tensor):
                    raise ArgumentError(f"{self.name}: argument {p.name!r} must be a tensor, got {type(a).__name__}")
                tensors.append(a)
            else:
                statics[p.name] = a
        return tensors, statics

    def _call(self, op: Operator, args, extra: list[torch.Tensor] = ()) -> list[torch.Tensor]:
        tensors, statics = self._split(args)
        tensors = tensors + list(extra)
        backend = _backend_for(tensors, self.backend)
        arrays = [to_numpy(t) for t in tensors]
        names = [p.name for p in self.params if p.tensor] + [f"ct{i}" for i in range(len(extra))]
        kw = dict(zip(names, arrays), **statics)
        outs = op.run(backend=backend, **kw)
        outs = list(outs) if isinstance(outs, tuple) else [outs]
        if self.verify:
            self._check(op, kw, outs)
        device = tensors[0].device if tensors else torch.device("cpu")
        self.calls += 1
        return [from_numpy(np.asarray(o)).to(device) for o in outs]

    def _check(self, op: Operator, kw: dict, outs: list) -> None:
        refs = op.run(backend="reference", **kw)
        refs = list(refs) if isinstance(refs, tuple) else [refs]
        graph = op.trace(**kw)
        k, klass = reduction_length(graph), op_class(graph)
        for i, (o, r) in enumerate(zip(outs, refs)):
            c = compare(o, r, reduction=k, klass=klass)
            if not c:
                raise VerificationError(f"{self.name}: output {i} differs from xbench's float64 reference: {c.message}")

    def forward_kernel(self, *args):
        outs = self._call(self.op, args)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def fake_kernel(self, *args):
        tensors, statics = self._split(args)
        names = [p.name for p in self.params if p.tensor]
        graph = self.op.trace(**dict(zip(names, (_fake_array(t) for t in tensors))), **statics)
        device = tensors[0].device if tensors else torch.device("cpu")
        outs = [torch.empty(v.shape, dtype=TO_TORCH[v.dtype], device=device) for v in graph.outputs]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def backward_kernel(self, *args):
        n = len(self.params)
        return self._call(self._backward, args[:n], list(args[n:]))

    def backward_fake(self, *args):
        tensors, _ = self._split(args[:len(self.params)])
        return [torch.empty_like(t) for t in tensors]


def _backward_operator(op: Operator, n_out: int) -> Operator:
    """An operator (op's arguments, one cotangent per output) -> the cotangent of every tensor argument (zeros
    for integer ones), by reverse-mode autodiff of op's body: built once, specialised per shape."""
    params = list(op.signature.parameters.values())
    tensor_names = [p.name for p in params if op.params[p.name] is not None]

    def body(**kw):
        call = {p.name: kw[p.name] for p in params}
        trace = current()
        start = len(trace.eqns)
        res = op.fn(**call)
        res = [F.asarray(r) for r in (res if isinstance(res, (tuple, list)) else [res])]
        cts = [kw[f"ct{i}"] for i in range(n_out)]
        wrt = [call[n] for n in tensor_names]
        grads = reverse(trace.eqns[start:], res, cts, wrt)
        return tuple(g if D.is_float(t.dtype) else F.zeros(t.shape, t.dtype) for g, t in zip(grads, wrt))

    cts = [inspect.Parameter(f"ct{i}", inspect.Parameter.KEYWORD_ONLY) for i in range(n_out)]
    body.__signature__ = inspect.Signature(
        [p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=inspect.Parameter.empty) for p in params] + cts)
    back = Operator(body, name=f"{op.name}_backward")
    for p in params:
        back._specs[p.name] = op.params[p.name]
    for c in cts:
        back._specs[c.name] = TensorSpec(None)
    return back


_registered: dict[str, CustomOp] = {}
_libraries: dict[str, torch.library.Library] = {}


def custom_op(op: Operator, name: str | None = None, *, backend: str | None = None,
              verify: bool = False) -> CustomOp:
    """Register xbench operator `op` as the torch operator `name` ("namespace::op"; default "xbench::<op>").

    The backend follows the tensors' device (cpu tensors: "cpu", cuda tensors: "cuda") unless `backend=` names
    one; `verify=True` checks every call against xbench's float64 reference. Returns a callable `CustomOp`;
    `torch.ops.<namespace>.<op>` is the same operator."""
    if not isinstance(op, Operator):
        raise ArgumentError(f"custom_op takes an xbench operator (@xb.tensor_op), got {type(op).__name__}")
    name = name or f"xbench::{op.name}"
    if "::" not in name:
        raise ArgumentError(f"custom_op name {name!r} has no namespace", hint=f"write it as 'mylib::{name}'")
    if name in _registered:
        if _registered[name].op is not op:
            raise ArgumentError(f"custom op {name} is already registered for another operator",
                                hint="choose another name")
        return _registered[name]
    params = _params(op)
    n_out = _n_outputs(op)
    c = CustomOp(op, name, backend, verify, params=params)
    c._backward = _backward_operator(op, n_out)
    ns, _, base = name.partition("::")
    lib = _libraries.setdefault(ns, torch.library.Library(ns, "FRAGMENT"))
    sig = ", ".join(p.schema for p in params)
    ret = "Tensor" if n_out == 1 else "(" + ", ".join(["Tensor"] * n_out) + ")"
    lib.define(f"{base}({sig}) -> {ret}")
    plain = ", ".join(p.schema.split("=")[0] for p in params)           # every argument is given to the backward
    lib.define(f"{base}_backward({plain}, " + ", ".join(f"Tensor ct{i}" for i in range(n_out)) + ") -> Tensor[]")
    for key in ("CPU", "CUDA"):
        lib.impl(base, c.forward_kernel, key)
        lib.impl(f"{base}_backward", c.backward_kernel, key)
    torch.library.register_fake(name, c.fake_kernel, lib=lib)
    torch.library.register_fake(f"{name}_backward", c.backward_fake, lib=lib)
    tensor_at = [i for i, p in enumerate(params) if p.tensor]
    back = getattr(getattr(torch.ops, ns), f"{base}_backward")

    def setup_context(ctx, inputs, output):
        ctx.inputs = inputs
        ctx.save_for_backward(*(inputs[i] for i in tensor_at))

    def autograd(ctx, *grads):
        saved = iter(ctx.saved_tensors)
        args = [next(saved) if i in tensor_at else a for i, a in enumerate(ctx.inputs)]
        cts = [g if g is not None else torch.zeros(()) for g in grads]
        gs = iter(back(*args, *cts))
        out = []
        for i, p in enumerate(params):
            g = next(gs) if p.tensor else None
            out.append(g if p.tensor and ctx.inputs[i].is_floating_point() else None)
        return tuple(out)

    torch.library.register_autograd(name, autograd, setup_context=setup_context, lib=lib)
    _registered[name] = c
    return c


# ---- modules ------------------------------------------------------------------------------------------------

_ALIASES = {"w": ("weight",), "weight": ("weight",), "b": ("bias",), "bias": ("bias",),
            "eps": ("eps", "variance_epsilon", "epsilon")}


class XbenchModule(nn.Module):
    """A module whose forward is an xbench operator (as a torch custom op) on its input and the original
    module's own parameters and attributes: the same Parameter objects, so weights and optimiser state stay."""

    def __init__(self, original: nn.Module, op: CustomOp, sources: dict[str, str]):
        super().__init__()
        # the original's own parameters and buffers, under their names: state_dict keys do not change
        for name, p in original.named_parameters(recurse=False):
            self.register_parameter(name, p)
        for name, b in original.named_buffers(recurse=False):
            self.register_buffer(name, b)
        self.__dict__["original"] = original           # not a submodule: its weights are registered above
        self.op = op
        self.sources = sources
        first = op.op.params[op.params[0].name]
        self._rank = len(first.dims) if first is not None and first.dims and Ellipsis not in first.dims else None

    def forward(self, x):
        shape = x.shape
        flat = self._rank is not None and x.ndim > self._rank
        if flat:
            x = x.reshape(-1, *shape[x.ndim - self._rank + 1:])
        args = [x] + [getattr(self.original, self.sources[p.name]) for p in self.op.params[1:]]
        y = self.op(*args)
        return y.reshape(*shape[:-1], y.shape[-1]) if flat else y

    def extra_repr(self) -> str:
        return f"{self.op.name} <- {type(self.original).__name__}"


def _sources(op: CustomOp, module: nn.Module, given: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for p in op.params[1:]:
        candidates = (given[p.name],) if p.name in given else (p.name,) + _ALIASES.get(p.name, ())
        hit = next((c for c in candidates if hasattr(module, c)), None)
        if hit is None:
            attrs = sorted(n for n, _ in module.named_parameters(recurse=False)) + \
                sorted(k for k, v in vars(module).items() if isinstance(v, (int, float)) and not k.startswith("_"))
            raise ArgumentError(f"replace: {type(module).__name__} has nothing for {op.op.name}'s argument "
                                f"{p.name!r} (tried {', '.join(candidates)})",
                                hint=f"map it: replace(model, {{{type(module).__name__}: ({op.op.name}, "
                                     f"{{{p.name!r}: <one of {', '.join(attrs) or 'its attributes'}>}})}})")
        out[p.name] = hit
    return out


def replace(model: nn.Module, mapping: Mapping[type, Any], *, backend: str | None = None,
            verify: bool = False) -> nn.Module:
    """Swap every submodule of a mapped type for an `XbenchModule` running the mapped xbench operator on the
    module's input and its own weights (matched by name: `w` -> `weight`, `eps` -> `variance_epsilon`, ...;
    give `(op, {"arg": "attribute"})` to map them yourself). In place; returns `model`."""
    specs = {}
    for kind, value in mapping.items():
        op, given = value if isinstance(value, tuple) else (value, {})
        specs[kind] = (op if isinstance(op, CustomOp) else custom_op(op, backend=backend, verify=verify), given)
    replaced = 0

    def swap(parent: nn.Module):
        nonlocal replaced
        for child_name, child in list(parent.named_children()):
            hit = next((s for k, s in specs.items() if isinstance(child, k)), None)
            if hit is not None:
                setattr(parent, child_name, XbenchModule(child, hit[0], _sources(hit[0], child, hit[1])))
                replaced += 1
            else:
                swap(child)

    swap(model)
    if not replaced:
        kinds = ", ".join(k.__name__ for k in mapping)
        raise XbenchError(f"replace: the model has no {kinds} module", hint="check the module type you map")
    return model

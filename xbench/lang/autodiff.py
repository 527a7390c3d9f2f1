"""Reverse-mode autodiff: `xb.grad`, `xb.value_and_grad`, `xb.vjp`.

A gradient is itself an operator: tracing it runs the forward body and then walks the recorded equations
backwards, applying each primitive's VJP rule (written below in the xbench language, installed on the primitive
objects as `prim.vjp`). The backward pass is therefore an ordinary graph — fused, compiled and verified on every
backend like any other operator.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentError, TraceError
from ..ir.graph import Eqn
from ..ir.prims import REGISTRY
from . import functions as F
from .operator import Operator, tensor_op
from .tensor import Tensor, TensorSpec
from .trace import current

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _t(v) -> Tensor:
    return Tensor(v)


# ---- VJP rules: (eqn, cotangents of outputs) -> cotangents of inputs (None where there is none) ---------

def _unary_vjp(eqn: Eqn, g: Tensor):
    fn = eqn.params["fn"]
    x, y = _t(eqn.inputs[0]), _t(eqn.out)
    rules: dict[str, Callable[[], Tensor | None]] = {
        "neg": lambda: -g,
        "abs": lambda: g * F.sign(x),
        "exp": lambda: g * y,
        "exp2": lambda: g * y * math.log(2.0),
        "expm1": lambda: g * (y + 1.0),
        "log": lambda: g / x,
        "log2": lambda: g / (x * math.log(2.0)),
        "log10": lambda: g / (x * math.log(10.0)),
        "log1p": lambda: g / (x + 1.0),
        "sqrt": lambda: g * 0.5 / y,
        "rsqrt": lambda: g * (-0.5) * y * y * y,
        "reciprocal": lambda: -g * y * y,
        "sin": lambda: g * F.cos(x),
        "cos": lambda: -g * F.sin(x),
        "tan": lambda: g * (1.0 + y * y),
        "asin": lambda: g * F.rsqrt(1.0 - x * x),
        "acos": lambda: -g * F.rsqrt(1.0 - x * x),
        "atan": lambda: g / (1.0 + x * x),
        "sinh": lambda: g * F.cosh(x),
        "cosh": lambda: g * F.sinh(x),
        "tanh": lambda: g * (1.0 - y * y),
        "asinh": lambda: g * F.rsqrt(x * x + 1.0),
        "acosh": lambda: g * F.rsqrt(x * x - 1.0),
        "atanh": lambda: g / (1.0 - x * x),
        "erf": lambda: g * _TWO_OVER_SQRT_PI * F.exp(-x * x),
        "erfc": lambda: -g * _TWO_OVER_SQRT_PI * F.exp(-x * x),
        "erfinv": lambda: g * (math.sqrt(math.pi) / 2.0) * F.exp(y * y),
        "sigmoid": lambda: g * y * (1.0 - y),
    }
    if fn in ("floor", "ceil", "round", "trunc", "sign"):
        return [F.zeros_like(x)]
    if fn not in rules:
        return [None]
    return [rules[fn]()]


def _binary_vjp(eqn: Eqn, g: Tensor):
    fn = eqn.params["fn"]
    a, b = _t(eqn.inputs[0]), _t(eqn.inputs[1])
    y = _t(eqn.out)
    if fn == "add":
        return [g, g]
    if fn == "sub":
        return [g, -g]
    if fn == "mul":
        return [g * b, g * a]
    if fn == "div":
        return [g / b, -g * y / b]
    if fn in ("maximum", "minimum", "fmax", "fmin"):
        win = (a > b) if fn in ("maximum", "fmax") else (a < b)
        ga = F.where(a == b, g * 0.5, F.where(win, g, 0.0))
        return [ga, g - ga]
    if fn == "pow":
        safe_log = F.where(a > 0, F.log(F.where(a > 0, a, 1.0)), 0.0)
        return [g * b * F.power(a, b - 1.0), g * y * safe_log]
    if fn == "atan2":
        den = a * a + b * b
        return [g * b / den, -g * a / den]
    if fn == "hypot":
        return [g * a / y, g * b / y]
    if fn in ("mod", "fmod"):
        return [g, -g * F.trunc(a / b) if fn == "fmod" else -g * F.floor(a / b)]
    if fn == "copysign":
        return [g * F.sign(a) * F.sign(y), F.zeros_like(b)]
    return [None, None]           # comparisons, logic, floordiv: no gradient


def _where_vjp(eqn: Eqn, g: Tensor):
    c = _t(eqn.inputs[0])
    return [None, F.where(c, g, 0.0), F.where(c, 0.0, g)]


def _cast_vjp(eqn: Eqn, g: Tensor):
    src = eqn.inputs[0].dtype
    return [F.cast(g, src) if D.is_float(src) else None]


def _reduce_vjp(eqn: Eqn, g: Tensor):
    x, y = _t(eqn.inputs[0]), _t(eqn.out)
    kind, axes = eqn.params["kind"], eqn.params["axes"]
    keep = tuple(1 if i in axes else n for i, n in enumerate(x.shape))
    gb = F.broadcast_to(F.reshape(g, keep), x.shape)
    if kind == "sum":
        return [gb]
    if kind == "prod":
        return [gb * F.broadcast_to(F.reshape(y, keep), x.shape) / x]
    if kind in ("max", "min"):
        hit = x == F.broadcast_to(F.reshape(y, keep), x.shape)
        count = F.reshape(F.sum(F.cast(hit, x.dtype), axes), keep)
        return [F.where(hit, gb / F.broadcast_to(count, x.shape), 0.0)]
    return [None]


def _contract_vjp(eqn: Eqn, g: Tensor):
    a, b = _t(eqn.inputs[0]), _t(eqn.inputs[1])
    p = eqn.params
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    la, lb = [""] * a.ndim, [""] * b.ndim
    batch = []
    for i, j in zip(p["lhs_batch"], p["rhs_batch"]):
        la[i] = lb[j] = c = next(letters)
        batch.append(c)
    for i, j in zip(p["lhs_contract"], p["rhs_contract"]):
        la[i] = lb[j] = next(letters)
    free_a = []
    for i in range(a.ndim):
        if not la[i]:
            la[i] = c = next(letters)
            free_a.append(c)
    free_b = []
    for j in range(b.ndim):
        if not lb[j]:
            lb[j] = c = next(letters)
            free_b.append(c)
    sa, sb, so = "".join(la), "".join(lb), "".join(batch + free_a + free_b)
    return [F.einsum(f"{so},{sb}->{sa}", g, b), F.einsum(f"{sa},{so}->{sb}", a, g)]


def _broadcast_vjp(eqn: Eqn, g: Tensor):
    x = eqn.inputs[0]
    shape, dims = eqn.params["shape"], eqn.params["dims"]
    summed = [d for d in range(len(shape)) if d not in dims]
    summed += [d for i, d in enumerate(dims) if x.shape[i] == 1 and shape[d] != 1]
    out = F.sum(g, tuple(sorted(summed))) if summed else g
    return [F.reshape(out, x.shape)]


def _reshape_vjp(eqn: Eqn, g: Tensor):
    return [F.reshape(g, eqn.inputs[0].shape)]


def _permute_vjp(eqn: Eqn, g: Tensor):
    perm = eqn.params["perm"]
    return [F.transpose(g, tuple(int(i) for i in np.argsort(perm)))]


def _scatter_axis(g: Tensor, src_shape: tuple[int, ...], axis: int, index: np.ndarray) -> Tensor:
    """Transpose of `gather(x, index, axis)` along one axis: adds g[..., j, ...] into x[..., index[j], ...]."""
    base = F.zeros(src_shape, g.dtype)
    return F.scatter_add(base, index, g, axis=axis)


def _slice_vjp(eqn: Eqn, g: Tensor):
    x = eqn.inputs[0]
    p = eqn.params
    out = g
    for a, (n, s0, st, sz) in enumerate(zip(x.shape, p["start"], p["step"], p["size"])):
        if st == 1:
            if s0 or s0 + sz != n:
                widths = [(0, 0)] * x.ndim
                widths[a] = (s0, n - s0 - sz)
                out = F.pad(out, widths)
        else:
            shape = list(out.shape)
            shape[a] = n
            out = _scatter_axis(out, tuple(shape), a, s0 + st * np.arange(sz))
    return [out]


def _pad_index(n: int, lo: int, hi: int, mode: str) -> np.ndarray:
    """Source position of every padded position along one axis (-1 for constant padding)."""
    j = np.arange(-lo, n + hi)
    if mode == "constant":
        return np.where((j >= 0) & (j < n), j, -1)
    if mode == "edge":
        return np.clip(j, 0, n - 1)
    if mode == "circular":
        return j % n
    j = np.abs(j)
    return np.where(j >= n, 2 * (n - 1) - j, j)


def _pad_vjp(eqn: Eqn, g: Tensor):
    x = eqn.inputs[0]
    p = eqn.params
    out = g
    for a, (n, lo, hi) in enumerate(zip(x.shape, p["lo"], p["hi"])):
        if not (lo or hi):
            continue
        if p["mode"] == "constant":
            idx = [slice(None)] * x.ndim
            idx[a] = slice(lo, lo + n)
            out = out[tuple(idx)]
        else:
            shape = list(out.shape)
            shape[a] = n
            out = _scatter_axis(out, tuple(shape), a, _pad_index(n, lo, hi, p["mode"]))
    return [out]


def _concat_vjp(eqn: Eqn, g: Tensor):
    axis = eqn.params["axis"]
    outs, offset = [], 0
    for x in eqn.inputs:
        idx = [slice(None)] * g.ndim
        idx[axis] = slice(offset, offset + x.shape[axis])
        outs.append(g[tuple(idx)])
        offset += x.shape[axis]
    return outs


def _window_vjp(eqn: Eqn, g: Tensor):
    x = eqn.inputs[0]
    p = eqn.params
    nd = x.ndim
    out = g
    # undo one window axis at a time, last first, so the trailing tap axes peel off in order
    for j in reversed(range(len(p["axes"]))):
        a, w, s, d = p["axes"][j], p["size"][j], p["stride"][j], p["dilation"][j]
        tap = nd + j
        m = out.shape[a]
        index = (np.arange(m) * s)[:, None] + (np.arange(w) * d)[None, :]
        out = F.moveaxis(out, tap, a + 1)                      # [..., m, w, ...]
        shape = list(out.shape)
        del shape[a + 1]
        shape[a] = x.shape[a]
        out = _scatter_axis(out, tuple(shape), a, index)
    return [out]


def _gather_vjp(eqn: Eqn, g: Tensor):
    x, *idx = eqn.inputs
    base = F.zeros(x.shape, g.dtype)
    return [F.bind_scatter_add(base, g, [_t(i) for i in idx], eqn.params["axes"])] + [None] * len(idx)


def _scatter_add_vjp(eqn: Eqn, g: Tensor):
    x, upd, *idx = eqn.inputs
    gathered = F.bind_gather(g, [_t(i) for i in idx], eqn.params["axes"])
    return [g, gathered] + [None] * len(idx)


def _scan_vjp(eqn: Eqn, g: Tensor):
    p = eqn.params
    if p["kind"] != "sum":
        raise TraceError(f"no gradient for cumulative {p['kind']} yet",
                         hint="use cumsum, or compute the product through exp(cumsum(log(x))) for positive x")
    return [F.cast(F._scan(g, "sum", p["axis"], not p.get("reverse", False)), eqn.inputs[0].dtype)]


def _sort_vjp(eqn: Eqn, g_values: Tensor | None, g_indices=None):
    x = _t(eqn.inputs[0])
    axis = eqn.params["axis"]
    if g_values is None:
        return [None]
    order = _t(eqn.outputs[1])
    coords = [F.iota(x.shape, i) if i != axis else order for i in range(x.ndim)]
    return [F.bind_scatter_add(F.zeros(x.shape, g_values.dtype), g_values, coords, tuple(range(x.ndim)))]


_RULES = {"unary": _unary_vjp, "binary": _binary_vjp, "where": _where_vjp, "cast": _cast_vjp,
          "reduce": _reduce_vjp, "contract": _contract_vjp, "broadcast": _broadcast_vjp, "reshape": _reshape_vjp,
          "permute": _permute_vjp, "slice": _slice_vjp, "pad": _pad_vjp, "concat": _concat_vjp,
          "window": _window_vjp, "gather": _gather_vjp, "scatter_add": _scatter_add_vjp, "scan": _scan_vjp,
          "sort": _sort_vjp, "iota": lambda eqn, g: [], "const": lambda eqn, g: []}
for _name, _rule in _RULES.items():
    REGISTRY[_name].vjp = _rule


# ---- the backward walk --------------------------------------------------------------------------------

def backward(eqns: Sequence[Eqn], outputs: Sequence[Tensor], seeds: Sequence[Tensor | None],
             wrt: Sequence[Tensor]) -> list[Tensor]:
    """Cotangents of `wrt` given cotangents `seeds` of `outputs`, through the recorded `eqns`."""
    ct: dict[int, Tensor] = {}

    def add(var, value: Tensor | None):
        if value is None or not D.is_float(var.dtype):
            return
        value = F.cast(value, var.dtype)
        if value.shape != var.shape:
            value = F.broadcast_to(value, var.shape)
        ct[var.id] = ct[var.id] + value if var.id in ct else value

    for out, seed in zip(outputs, seeds):
        add(out._var, seed)
    for eqn in reversed(list(eqns)):
        gs = [ct.get(v.id) for v in eqn.outputs]
        if all(g is None for g in gs):
            continue
        if eqn.prim.vjp is None:
            raise TraceError(f"no gradient rule for primitive {eqn.prim.name}", loc=eqn.loc)
        ins = eqn.prim.vjp(eqn, *gs) if eqn.prim.multiple_results else eqn.prim.vjp(eqn, gs[0])
        for v, g in zip(eqn.inputs, ins):
            add(v, g)
    return [ct[t._var.id] if t._var.id in ct else F.zeros_like(t) for t in wrt]


def _float_params(op: Operator) -> list[str]:
    return [n for n, s in op._specs.items() if s is not None]


def _argnames(op: Operator, argnums) -> list[str]:
    names = list(op.signature.parameters)
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    out = []
    for i in nums:
        if not -len(names) <= i < len(names):
            raise ArgumentError(f"argnums {i} is out of range for {op.name}{op.signature_text()}")
        out.append(names[i])
    return out


def _as_operator(op) -> Operator:
    return op if isinstance(op, Operator) else tensor_op(op)


def value_and_grad(op, argnums: int | Sequence[int] = 0) -> Operator:
    """An operator returning (value, gradient(s)) of a scalar-valued operator w.r.t. the arguments `argnums`."""
    op = _as_operator(op)
    names = _argnames(op, argnums)
    single = isinstance(argnums, int)

    def body(*args, **kwargs):
        bound = op.signature.bind(*args, **kwargs)
        trace = current()
        start = len(trace.eqns)
        value = op.fn(*args, **kwargs)
        if isinstance(value, (tuple, list)):
            raise TraceError(f"grad of {op.name}: the operator returns {len(value)} values",
                             hint="differentiate an operator that returns one scalar (e.g. a loss)")
        value = F.asarray(value)
        if value.size != 1:
            raise TraceError(f"grad of {op.name}: the output has shape {value.shape}, not a scalar",
                             hint="reduce it first (.sum() or .mean()), or use xb.vjp for non-scalar outputs")
        wrt = [bound.arguments[n] for n in names]
        for n, t in zip(names, wrt):
            if not isinstance(t, Tensor) or not D.is_float(t.dtype):
                raise TraceError(f"grad of {op.name}: argument {n!r} is not a float tensor",
                                 hint="differentiate with respect to float arrays only")
        grads = backward(trace.eqns[start:], [value], [F.ones_like(value)], wrt)
        return value, (grads[0] if single else tuple(grads))

    return _wrap(op, body, f"value_and_grad_{op.name}")


def grad(op, argnums: int | Sequence[int] = 0) -> Operator:
    """An operator returning the gradient of a scalar-valued operator w.r.t. `argnums` (int or tuple)."""
    vg = value_and_grad(op, argnums)

    def body(*args, **kwargs):
        return vg.fn(*args, **kwargs)[1]

    return _wrap(_as_operator(op), body, f"grad_{_as_operator(op).name}")


def vjp(op, *args, **kwargs):
    """(outputs, vjp_fn): `vjp_fn(*cotangents)` returns the cotangents of the tensor arguments."""
    op = _as_operator(op)
    outputs = op(*args, **kwargs)
    multi = isinstance(outputs, tuple)
    outs = outputs if multi else (outputs,)
    names = [n for n in _float_params(op)]
    bound = op.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    tensor_names = [n for n in names if isinstance(bound.arguments.get(n), np.ndarray)
                    and D.is_float(D.canonical(bound.arguments[n].dtype))]

    params = list(op.signature.parameters.values())[:len(args)]

    def body(**kw):
        call_args = [kw[p.name] for p in params]
        cts = [kw[f"ct{i}"] for i in range(len(outs))]
        b = op.signature.bind(*call_args, **kwargs)
        trace = current()
        start = len(trace.eqns)
        res = op.fn(*call_args, **kwargs)
        res = list(res) if isinstance(res, (tuple, list)) else [res]
        wrt = [b.arguments[n] for n in tensor_names]
        return tuple(backward(trace.eqns[start:], [F.asarray(r) for r in res], list(cts), wrt))

    ct_params = [inspect.Parameter(f"ct{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=TensorSpec(None))
                 for i in range(len(outs))]
    body.__signature__ = inspect.Signature(params + ct_params)
    back = Operator(body, name=f"vjp_{op.name}")
    for p in params:
        back._specs[p.name] = op._specs.get(p.name)

    def vjp_fn(*cotangents):
        if len(cotangents) != len(outs):
            raise ArgumentError(f"vjp of {op.name} takes {len(outs)} cotangent(s), got {len(cotangents)}")
        res = back(*args, *cotangents)
        return res if isinstance(res, tuple) else (res,)

    vjp_fn.operator = back
    return outputs, vjp_fn


def _wrap(op: Operator, body: Callable, name: str) -> Operator:
    body.__signature__ = op.signature
    new = Operator(body, name=name)
    new._specs = dict(op._specs)
    new._return = None
    return new

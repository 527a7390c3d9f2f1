"""`@xb.tensor_op`: an operator written once and traced per shape. Running and compiling it is the runtime's
job (`xbench.runtime`, installed as the `Dispatcher`): the language knows no backend and no tuner."""
from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentError, DTypeError, Location, ShapeError, TraceError, XbenchError, user_location
from ..ir.graph import Graph, Var
from . import amp
from .dims import Dim
from .tensor import Tensor, TensorSpec
from .trace import Trace, tracing


class _AutoDims(dict):
    """Namespace for evaluating string annotations: unknown names become Dims (no declaration needed)."""

    def __init__(self, base: Mapping[str, Any]):
        super().__init__()
        self.base = base

    def __missing__(self, key):
        if key in self.base:
            return self.base[key]
        import builtins
        if hasattr(builtins, key):
            return getattr(builtins, key)
        return Dim(key)


def _resolve_annotation(ann, fn) -> Any:
    if isinstance(ann, str):
        import xbench
        ns = dict(fn.__globals__)
        ns.setdefault("Tensor", Tensor)
        ns.setdefault("xb", xbench)
        return eval(ann, {}, _AutoDims(ns))
    return ann


@dataclass
class Binding:
    """One call's arguments, bound to an operator's parameters: tensors (numpy arrays, or Tensors while
    tracing), static values, and the size of each named dim. `key` names its specialisation."""
    arguments: dict[str, Any]
    tensors: dict[str, Any]
    statics: dict[str, Any]
    dims: dict[str, int]

    @property
    def arrays(self) -> list[np.ndarray]:
        return list(self.tensors.values())

    @property
    def key(self) -> tuple:
        return (tuple((n, tuple(a.shape), str(D.canonical(a.dtype))) for n, a in self.tensors.items()),
                tuple((k, static_key(v)) for k, v in self.statics.items()), amp.policy())


class Dispatcher(Protocol):
    """What `op(...)`, `op.run`, `op.compile` and `op.lower` do once an operator is traced: the runtime
    layer (`xbench.runtime`) installs one (`install_dispatcher`); the language only traces."""

    def run(self, op: Operator, args, kwargs, backend: str | None, schedule: Mapping | None, loc): ...

    def compile(self, op: Operator, backend: str, args, kwargs, schedule: Mapping | None, options: dict,
                loc): ...

    def specialize(self, op: Operator, args, kwargs, loc) -> tuple[Any, list[np.ndarray]]: ...

    def specializations(self, op: Operator) -> list: ...

    def last(self, op: Operator) -> Any: ...

    def forget_artifacts(self, op: Operator) -> None: ...


_dispatcher: Dispatcher | None = None


def install_dispatcher(d: Dispatcher) -> None:
    global _dispatcher
    _dispatcher = d


def _dispatch() -> Dispatcher:
    if _dispatcher is None:
        raise XbenchError("no runtime is installed to run operators", hint="import xbench (not only xbench.lang)")
    return _dispatcher


class Operator:
    """A tensor operator. Call it like a function on numpy arrays; see `run`, `compile`, `ir`."""

    donates_inputs = False        # its callers hand their input arrays over (as a backward graph's does)

    def __init__(self, fn: Callable, name: str | None = None):
        self.fn = fn
        self.name = name or fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        functools.update_wrapper(self, fn, updated=())
        self.signature = inspect.signature(fn)
        self._specs: dict[str, TensorSpec | None] = {}
        for p in self.signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TraceError(f"operator {self.name}: *args/**kwargs parameters are not supported",
                                 hint="list the tensor arguments by name", loc=_def_loc(fn))
            ann = _resolve_annotation(p.annotation, fn) if p.annotation is not p.empty else None
            if ann is Tensor:
                ann = TensorSpec(None)
            self._specs[p.name] = ann if isinstance(ann, TensorSpec) else None
        ret = self.signature.return_annotation
        ret = _resolve_annotation(ret, fn) if ret is not inspect.Signature.empty else None
        self._return = ret

    # ---- public API (run by the installed runtime) ---------------------------------------------------
    def __call__(self, *args, **kwargs):
        if tracing() and _any_tensor(args, kwargs):
            return self._inline(args, kwargs)
        backend, schedule = kwargs.pop("backend", None), kwargs.pop("schedule", None)
        return _dispatch().run(self, args, kwargs, backend, schedule, user_location())

    def run(self, *args, backend: str | None = None, schedule: Mapping | None = None, **kwargs):
        """Run on `backend` (default: the session default, "cpu"); numpy in, numpy out."""
        return _dispatch().run(self, args, kwargs, backend, schedule, user_location())

    def compile(self, backend: str, *args, schedule: Mapping | None = None, **kwargs):
        """Compile for `backend` at the shapes of `args`; returns the Artifact (.source, .resources, .run)."""
        options = {k: kwargs.pop(k) for k in list(kwargs) if k not in self.signature.parameters}
        return _dispatch().compile(self, backend, args, kwargs, schedule, options, user_location())

    def trace(self, *args, **kwargs) -> Graph:
        """The graph IR for the shapes of `args`."""
        return _dispatch().specialize(self, args, kwargs, user_location())[0].graph

    def lower(self, *args, fusion: bool = True, **kwargs):
        """The loop-IR program (kernels and buffers) for the shapes of `args`."""
        return _dispatch().specialize(self, args, kwargs, user_location())[0].program(fusion)

    def arrays(self, *args, **kwargs) -> list[np.ndarray]:
        """The tensor arguments of a call, in the order the compiled artifacts take them."""
        return _dispatch().specialize(self, args, kwargs, user_location())[1]

    @property
    def ir(self) -> str:
        """The graph IR of the most recent call, as text."""
        last = _dispatch().last(self)
        if last is None:
            raise XbenchError(f"{self.name} has not been called yet, so no shapes are bound",
                              hint=f"call {self.name}(...) on arrays first, or use {self.name}.trace(...)")
        return last.graph.text()

    @property
    def params(self) -> dict[str, TensorSpec | None]:
        """Each parameter's annotation: a TensorSpec for tensor parameters, None for static ones."""
        return dict(self._specs)

    @property
    def specializations(self) -> list:
        return _dispatch().specializations(self)

    def forget_artifacts(self) -> None:
        """Drop compiled artifacts held in memory (the on-disk caches stay): the next call compiles again,
        picking up newly tuned schedules."""
        _dispatch().forget_artifacts(self)

    def __repr__(self) -> str:
        return f"<xbench operator {self.name}{self.signature_text()}>"

    def signature_text(self) -> str:
        parts = []
        for p in self.signature.parameters.values():
            spec = self._specs[p.name]
            if spec is not None:
                parts.append(f"{p.name}: {spec!r}")
            elif p.default is not p.empty:
                parts.append(f"{p.name}={p.default!r}")
            else:
                parts.append(p.name)
        ret = f" -> {self._return!r}" if isinstance(self._return, TensorSpec) else ""
        return f"({', '.join(parts)}){ret}"

    # ---- binding and tracing -------------------------------------------------------------------------
    def bind(self, args, kwargs, loc: Location | None = None) -> Binding:
        """Bind a call's arguments: tensors, static values and dim sizes (errors name `loc`, the caller)."""
        try:
            bound = self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            names = ", ".join(self.signature.parameters)
            raise ArgumentError(f"{self.name}(): {exc}", hint=f"call it as {self.name}({names})", loc=loc) from None
        bound.apply_defaults()
        tensors: dict[str, Any] = {}
        statics: dict[str, Any] = {}
        for name, value in bound.arguments.items():
            spec = self._specs[name]
            if value is None:
                if spec is not None and self.signature.parameters[name].default is not None:
                    raise ArgumentError(f"{self.name}(): argument {name!r} is None, but the operator declares it a "
                                        f"tensor ({spec!r})", hint=f"pass a numpy array for {name}; if it is "
                                        f"optional, give it a default: `{name}: {spec!r} = None`", loc=loc)
                statics[name] = None
                continue
            if _is_tensor_list(value):
                # a list of tensors (cat, stack, index): each array is an input `name_i`; the list's layout
                # (and any non-array entries, such as index's Nones) is static
                layout = []
                for i, item in enumerate(value):
                    if isinstance(item, (np.ndarray, Tensor)):
                        key = f"{name}_{i}"
                        tensors[key] = item if isinstance(item, Tensor) else self._checked(name, item, loc)
                        layout.append(_Slot(key))
                    else:
                        layout.append(item)
                statics[name] = _TensorList(type(value), tuple(layout))
                continue
            if spec is not None or isinstance(value, (np.ndarray, Tensor)) or _is_array_like(value):
                if isinstance(value, Tensor):
                    tensors[name] = value
                    continue
                if not isinstance(value, np.ndarray):
                    if spec is None or isinstance(value, (str, bytes, dict, set)) or value is None:
                        if spec is None:
                            statics[name] = value
                            continue
                        raise ArgumentError(f"{self.name}(): argument {name!r} must be a numpy array, got "
                                            f"{type(value).__name__}",
                                            hint=f"pass np.asarray(...) for {name} ({spec!r})", loc=loc)
                    value = np.asarray(value)
                tensors[name] = self._checked(name, value, loc)
            else:
                statics[name] = value
        dims = self._bind_dims(tensors, loc)
        return Binding(bound.arguments, tensors, statics, dims)

    def _checked(self, name: str, value: np.ndarray, loc) -> np.ndarray:
        if isinstance(value, np.ma.MaskedArray):
            raise ArgumentError(f"{self.name}(): argument {name!r} is a masked array; operators compute on every "
                                "element and would drop its mask", hint=f"pass {name}.filled(value), or pass the "
                                f"mask as an argument of its own (np.ma.getmaskarray({name})) and apply it with "
                                "xb.where", loc=loc)
        try:
            D.canonical(value.dtype)
        except ValueError:
            raise DTypeError(f"{self.name}(): argument {name!r} has dtype {value.dtype}, which xbench does "
                             f"not support", hint=f"use one of {', '.join(D.DTYPES)} "
                             f"(e.g. {name}.astype(np.float32))", loc=loc) from None
        return value

    def _bind_dims(self, tensors: dict[str, Any], loc) -> dict[str, int]:
        dims: dict[str, tuple[int, str, int]] = {}
        for name, value in tensors.items():
            spec = self._specs.get(name)
            if spec is None:
                continue
            shape = tuple(value.shape)
            dtype = D.canonical(value.dtype) if not isinstance(value, Tensor) else value.dtype
            if spec.dtype and dtype != spec.dtype:
                raise DTypeError(f"{self.name}(): argument {name!r} is {dtype} but the operator declares {spec!r}",
                                 hint=f"pass {name}.astype(np.{spec.dtype if spec.dtype != 'bfloat16' else 'float32'})"
                                 f" or change the annotation", loc=loc)
            if spec.dims is None:
                continue
            entries = list(spec.dims)
            if Ellipsis in entries:
                i = entries.index(Ellipsis)
                fixed = len(entries) - 1
                if len(shape) < fixed:
                    raise ShapeError(f"{self.name}(): argument {name!r} needs at least {fixed} dims ({spec!r}) but "
                                     f"has shape {shape}", hint=_shape_hint(spec, dims), loc=loc)
                lead = len(shape) - fixed
                pairs = list(zip(entries[:i], shape[:i])) + list(zip(entries[i + 1:], shape[i + lead:]))
                axes = list(range(i)) + list(range(i + lead, len(shape)))
            else:
                if len(shape) != len(entries):
                    raise ShapeError(f"{self.name}(): argument {name!r} must have {len(entries)} dims ({spec!r}) "
                                     f"but has shape {shape}", hint=_shape_hint(spec, dims), loc=loc)
                pairs = list(zip(entries, shape))
                axes = list(range(len(shape)))
            for (d, n), axis in zip(pairs, axes):
                if isinstance(d, int):
                    if n != d:
                        raise ShapeError(f"{self.name}(): axis {axis} of argument {name!r} must be {d} ({spec!r}) "
                                         f"but is {n}", loc=loc)
                    continue
                if d.name in dims and dims[d.name][0] != n:
                    size0, arg0, axis0 = dims[d.name]
                    raise ShapeError(
                        f"{self.name}(): dim {d.name} is {size0} from argument {arg0!r} (axis {axis0}) but {n} "
                        f"from argument {name!r} (axis {axis})",
                        hint=f"pass arrays whose {d.name} sizes agree", loc=loc)
                dims.setdefault(d.name, (n, name, axis))
        return {k: v[0] for k, v in dims.items()}

    def trace_binding(self, b: Binding) -> Graph:
        """Run the body on Tensors shaped like the binding's arrays: the graph IR of that specialisation."""
        tensors, statics, dims = b.tensors, b.statics, b.dims
        in_vars = [Var(a.shape, D.canonical(a.dtype), hint=n) for n, a in tensors.items()]
        with Trace(self.name) as tr:
            call_args = dict(b.arguments)
            traced = {n: Tensor(v) for (n, _), v in zip(tensors.items(), in_vars)}
            for n in call_args:
                if isinstance(statics.get(n), _TensorList):
                    lst = statics[n]
                    call_args[n] = lst.kind(traced[e.key] if isinstance(e, _Slot) else e for e in lst.layout)
                elif n in traced:
                    call_args[n] = traced[n]
            result = self._call_fn(call_args)
            if tr.untraceable:                 # the body caught it (`except Exception:`) and went on elsewhere
                err = tr.untraceable[0]
                err.hint = ((err.hint + "; ") if err.hint else "") + ("the operator's own code caught this error "
                            "and went on: while tracing, that `except` cannot take the other branch")
                err.args = (err._format(),)
                raise err
            outs = self._outputs(result, dims)
        graph = Graph(self.name, in_vars, [t._var for t in outs], tr.eqns, list(tensors), dims,
                      {k: v for k, v in statics.items() if not callable(v) and not isinstance(v, _TensorList)})
        _dead_code(graph)
        return graph

    def _call_fn(self, call_args):
        pos, kw = [], {}
        for p in self.signature.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY,):
                pos.append(call_args[p.name])
            else:
                kw[p.name] = call_args[p.name]
        return self.fn(*pos, **kw)

    def _outputs(self, result, dims) -> list[Tensor]:
        from .functions import asarray
        items = list(result) if isinstance(result, (tuple, list)) else [result]
        if result is None:
            raise TraceError(f"operator {self.name} returns nothing", hint="end the body with `return <tensor>`",
                             loc=_def_loc(self.fn))
        outs = []
        for r in items:
            try:
                outs.append(asarray(r))
            except XbenchError:
                raise TraceError(f"operator {self.name} returns a {type(r).__name__}",
                                 hint="return a tensor or a tuple of tensors", loc=_def_loc(self.fn)) from None
        specs = self._return if isinstance(self._return, tuple) else (self._return,) if self._return else ()
        for t, spec in zip(outs, specs):
            if isinstance(spec, TensorSpec) and spec.dtype and t.dtype != spec.dtype and not (
                    amp.policy() and D.is_float(t.dtype) and D.is_float(spec.dtype)):   # autocast chooses floats
                raise DTypeError(f"{self.name} returns {t.dtype} but its annotation says {spec!r}",
                                 hint=f"cast the result (xb.cast(result, xb.{spec.dtype})) or fix the return "
                                      "annotation", loc=_result_loc(t) or _def_loc(self.fn))
            if isinstance(spec, TensorSpec) and spec.dims is not None and Ellipsis not in spec.dims:
                want = []
                for d in spec.dims:
                    want.append(d if isinstance(d, int) else dims.get(d.name))
                ok = len(want) == t.ndim and all(w is None or w == n for w, n in zip(want, t.shape))
                if not ok:
                    raise ShapeError(f"{self.name} returns shape {t.shape} but its annotation says {spec!r} = "
                                     f"{tuple('?' if w is None else w for w in want)}",
                                     hint="fix the body or the return annotation", loc=_def_loc(self.fn))
        return outs

    def inline(self, *args, **kwargs):
        """Call the body inside the operator being traced: its equations join that trace (numpy arguments
        become captured constants)."""
        return self._inline(args, kwargs)

    def _inline(self, args, kwargs):
        b = self.bind(args, kwargs, user_location())
        call_args = dict(b.arguments)
        for n, v in b.tensors.items():
            if not isinstance(v, Tensor):
                from .trace import constant
                call_args[n] = constant(v)
        result = self._call_fn(call_args)
        return result


def _dead_code(graph: Graph) -> None:
    live = {v.id for v in graph.outputs}
    keep = []
    for e in reversed(graph.eqns):
        if any(v.id in live for v in e.outputs):
            keep.append(e)
            live.update(v.id for v in e.inputs)
    graph.eqns = list(reversed(keep))


def _any_tensor(args, kwargs) -> bool:
    def traced(a) -> bool:
        return isinstance(a, Tensor) or isinstance(a, (list, tuple)) and any(isinstance(e, Tensor) for e in a)
    return any(traced(a) for a in args) or any(traced(a) for a in kwargs.values())


@dataclass(frozen=True)
class _Slot:
    """Where a tensor sits in a list argument: the name of its input."""
    key: str


@dataclass(frozen=True)
class _TensorList:
    """A list (or tuple) argument holding tensors: its type and entries (slots for the tensors)."""
    kind: type
    layout: tuple


def _is_tensor_list(value) -> bool:
    return isinstance(value, (list, tuple)) and any(isinstance(e, (np.ndarray, Tensor)) for e in value)


def _is_array_like(value) -> bool:
    return hasattr(value, "__array_interface__") or hasattr(value, "__array__") and not isinstance(value, type)


def static_key(v) -> Any:
    if isinstance(v, Mapping):
        return tuple(sorted((k, static_key(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(static_key(x) for x in v)
    if isinstance(v, np.ndarray):
        return ("ndarray", v.shape, str(v.dtype), v.tobytes())
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def _result_loc(t: Tensor) -> Location | None:
    """The line that computed a traced result (None for an argument returned as it is)."""
    from .trace import current
    return next((e.loc for e in reversed(current().eqns) if t._var in e.outputs), None)


def _def_loc(fn) -> Location | None:
    try:
        return Location(fn.__code__.co_filename, fn.__code__.co_firstlineno, fn.__name__)
    except AttributeError:
        return None


def _shape_hint(spec: TensorSpec, dims: dict) -> str:
    return f"pass an array shaped like {spec!r}"


def tensor_op(fn: Callable | None = None, *, name: str | None = None):
    """Decorate a function written in the xbench language; returns an `Operator`."""
    if fn is None:
        return lambda f: Operator(f, name)
    return Operator(fn, name)

"""`@xb.tensor_op`: an operator written once, traced per shape, compiled per backend, cached at every step."""
from __future__ import annotations

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as D
from ..config import log
from ..errors import ArgumentError, DTypeError, Location, ShapeError, TraceError, XbenchError, user_location
from ..ir.graph import Graph, Var
from . import amp
from .dims import Dim
from .tensor import Tensor, TensorSpec
from .trace import Trace, tracing

_settings = threading.local()


def default_backend() -> str:
    return getattr(_settings, "backend", "cpu")


def set_default_backend(name: str) -> None:
    """The backend `op(...)` runs on (initially "cpu")."""
    _settings.backend = name


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
class Specialization:
    """One traced shape of an operator: its graph, lowered program and the artifacts compiled from it."""
    key: tuple
    graph: Graph
    arg_names: list[str]
    programs: dict[bool, Any] = field(default_factory=dict)
    artifacts: dict[tuple, Any] = field(default_factory=dict)

    def program(self, fusion: bool = True):
        if fusion not in self.programs:
            from ..ir.lower import lower
            self.programs[fusion] = lower(self.graph, fusion=fusion)
        return self.programs[fusion]


class Operator:
    """A tensor operator. Call it like a function on numpy arrays; see `run`, `compile`, `ir`."""

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
        self._cache: dict[tuple, Specialization] = {}
        self._last: Specialization | None = None
        self._lock = threading.RLock()

    # ---- public API ----------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if tracing() and _any_tensor(args, kwargs):
            return self._inline(args, kwargs)
        return self.run(*args, **kwargs)

    def run(self, *args, backend: str | None = None, schedule: Mapping | None = None, **kwargs):
        """Run on `backend` (default: the session default, "cpu"); numpy in, numpy out."""
        spec, arrays = self._specialize(args, kwargs, user_location())
        art = self._artifact(spec, backend or default_backend(), schedule)
        outs = art.run(*arrays)
        return outs[0] if len(outs) == 1 and not self._returns_tuple(spec) else tuple(outs)

    def compile(self, backend: str, *args, schedule: Mapping | None = None, **kwargs):
        """Compile for `backend` at the shapes of `args`; returns the Artifact (.source, .resources, .run)."""
        options = {k: kwargs.pop(k) for k in list(kwargs) if k not in self.signature.parameters}
        spec, _ = self._specialize(args, kwargs, user_location())
        return self._artifact(spec, backend, schedule, **options)

    def trace(self, *args, **kwargs) -> Graph:
        """The graph IR for the shapes of `args`."""
        return self._specialize(args, kwargs, user_location())[0].graph

    def lower(self, *args, fusion: bool = True, **kwargs):
        """The loop-IR program (kernels and buffers) for the shapes of `args`."""
        return self._specialize(args, kwargs, user_location())[0].program(fusion)

    def arrays(self, *args, **kwargs) -> list[np.ndarray]:
        """The tensor arguments of a call, in the order the compiled artifacts take them."""
        return self._specialize(args, kwargs, user_location())[1]

    @property
    def ir(self) -> str:
        """The graph IR of the most recent call, as text."""
        if self._last is None:
            raise XbenchError(f"{self.name} has not been called yet, so no shapes are bound",
                              hint=f"call {self.name}(...) on arrays first, or use {self.name}.trace(...)")
        return self._last.graph.text()

    @property
    def params(self) -> dict[str, TensorSpec | None]:
        """Each parameter's annotation: a TensorSpec for tensor parameters, None for static ones."""
        return dict(self._specs)

    @property
    def specializations(self) -> list[Specialization]:
        return list(self._cache.values())

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
    def _bind(self, args, kwargs, loc: Location | None):
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
        return bound, tensors, statics, dims

    def _checked(self, name: str, value: np.ndarray, loc) -> np.ndarray:
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

    def _specialize(self, args, kwargs, loc) -> tuple[Specialization, list[np.ndarray]]:
        bound, tensors, statics, dims = self._bind(args, kwargs, loc)
        arrays = list(tensors.values())
        key = (tuple((n, tuple(a.shape), str(D.canonical(a.dtype))) for n, a in tensors.items()),
               tuple((k, _static_key(v)) for k, v in statics.items()), amp.policy())
        with self._lock:
            spec = self._cache.get(key)
            if spec is None:
                graph = self._trace(bound, tensors, statics, dims, loc)
                spec = Specialization(key, graph, list(tensors))
                self._cache[key] = spec
                level = logging.INFO if len(self._cache) > 1 else logging.DEBUG
                log.log(level, "traced %s for %s (specialisation %d)", self.name,
                        ", ".join(f"{n}={v}" for n, v in dims.items()) or "its shapes", len(self._cache))
            self._last = spec
        return spec, arrays

    def _trace(self, bound, tensors, statics, dims, loc) -> Graph:
        in_vars = [Var(a.shape, D.canonical(a.dtype), hint=n) for n, a in tensors.items()]
        with Trace(self.name) as tr:
            call_args = dict(bound.arguments)
            traced = {n: Tensor(v) for (n, _), v in zip(tensors.items(), in_vars)}
            for n in call_args:
                if isinstance(statics.get(n), _TensorList):
                    lst = statics[n]
                    call_args[n] = lst.kind(traced[e.key] if isinstance(e, _Slot) else e for e in lst.layout)
                elif n in traced:
                    call_args[n] = traced[n]
            result = self._call_fn(call_args)
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

    def _returns_tuple(self, spec: Specialization) -> bool:
        return len(spec.graph.outputs) > 1

    def _inline(self, args, kwargs):
        bound, tensors, statics, dims = self._bind(args, kwargs, user_location())
        call_args = dict(bound.arguments)
        for n, v in tensors.items():
            if not isinstance(v, Tensor):
                from .trace import constant
                call_args[n] = constant(v)
        result = self._call_fn(call_args)
        return result

    # ---- compiling -----------------------------------------------------------------------------------
    def forget_artifacts(self) -> None:
        """Drop compiled artifacts held in memory (the on-disk caches stay): the next call compiles again,
        picking up newly tuned schedules."""
        for spec in self._cache.values():
            spec.artifacts.clear()

    def _artifact(self, spec: Specialization, backend: str, schedule: Mapping | None = None, **options):
        from ..backends import get
        key = (backend, _static_key(schedule), _static_key(options))
        art = spec.artifacts.get(key)
        if art is None:
            be = get(backend)
            ok, why = be.available()
            if not ok:
                from ..errors import BackendError
                raise BackendError(f"backend {backend!r} is not available here: {why}")
            program = spec.program(options.pop("fusion", True))
            if schedule is None:
                from ..tune.db import tuned_schedules
                schedule = tuned_schedules(program, backend) or None
            schedules = _schedules(be, program, schedule)
            art = be.compile(program, schedules, **options)
            spec.artifacts[key] = art
            log.log(logging.INFO if len(spec.artifacts) > 1 or len(self._cache) > 1 else logging.DEBUG,
                    "compiled %s for %s in %.0f ms%s", self.name, backend, art.compile_ms,
                    " (from cache)" if art.cache_hit else "")
        return art


def _schedules(be, program, given: Mapping | None):
    from ..backends import knobs_of
    from ..ir.schedule import resolve
    given = dict(given or {})
    out = {}
    for k in program.kernels:
        mine = given.pop(k.name, None)
        out[k.name] = resolve(knobs_of(be, k, program), be.default_schedule(k), mine, k.name)
    if given:
        raise ArgumentError(f"schedule names kernels that do not exist: {', '.join(given)}",
                            hint="kernels are: " + ", ".join(k.name for k in program.kernels))
    return out


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


def _static_key(v) -> Any:
    if isinstance(v, Mapping):
        return tuple(sorted((k, _static_key(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return tuple(_static_key(x) for x in v)
    if isinstance(v, np.ndarray):
        return ("ndarray", v.shape, str(v.dtype), v.tobytes())
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


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

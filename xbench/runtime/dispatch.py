"""Dispatch: the specialisation cache per operator, the backend choice, tuned-schedule lookup, compiling."""
from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import log
from ..errors import ArgumentError, BackendError, user_location
from ..ir.graph import Graph
from ..lang.operator import Operator, static_key

_settings = threading.local()


def default_backend() -> str:
    return getattr(_settings, "backend", "cpu")


def set_default_backend(name: str) -> None:
    """The backend `op(...)` runs on (initially "cpu")."""
    _settings.backend = name


@dataclass
class Specialization:
    """One traced shape of an operator: its graph, lowered program and the artifacts compiled from it."""
    key: tuple
    graph: Graph
    arg_names: list[str]
    programs: dict[bool, Any] = field(default_factory=dict)
    artifacts: dict[tuple, Any] = field(default_factory=dict)
    donated: bool = False          # the operator's callers hand their inputs over (`Operator.donates_inputs`)

    def program(self, fusion: bool = True):
        if fusion not in self.programs:
            from ..ir.lower import lower
            self.programs[fusion] = lower(self.graph, fusion=fusion, donated=self.donated)
        return self.programs[fusion]

    def artifact(self, backend: str, schedule: Mapping | None = None, **options):
        """The artifact compiled for `backend` (with the tuned schedules where none is given), compiled once."""
        key = (backend, static_key(schedule), static_key(options))
        art = self.artifacts.get(key)
        if art is None:
            art = compile_program(self.program(options.pop("fusion", True)), backend, schedule, **options)
            self.artifacts[key] = art
            log.log(logging.INFO if len(self.artifacts) > 1 else logging.DEBUG,
                    "compiled %s for %s in %.0f ms%s", self.graph.name, backend, art.compile_ms,
                    " (from cache)" if art.cache_hit else "")
        return art


def compile_program(program, backend: str, schedule: Mapping | None = None, **options):
    """Compile a lowered program for `backend`; without a `schedule`, the tuning database's for its kernels."""
    from ..backends import get
    be = get(backend)
    ok, why = be.available()
    if not ok:
        raise BackendError(f"backend {backend!r} is not available here: {why}")
    if schedule is None:
        from ..tune.db import tuned_schedules
        schedule = tuned_schedules(program, backend) or None
    return be.compile(program, schedules(be, program, schedule), **options)


def schedules(be, program, given: Mapping | None) -> dict:
    """Each kernel's schedule: the backend's default, overridden by the knobs `given` names per kernel."""
    from ..backends import knobs_of
    from ..ir.schedule import resolve
    given = dict(given or {})
    out = {}
    for k in program.kernels:
        mine = given.pop(k.name, None)
        out[k.name] = resolve(knobs_of(be, k, program), be.default_schedule(k), mine, k.name)
    if given:
        raise ArgumentError(f"schedule names kernels that do not exist: {', '.join(given)}",
                            hint="kernels are: " + ", ".join(k.name for k in program.kernels), loc=user_location())
    return out


@dataclass
class _State:
    specs: dict[tuple, Specialization] = field(default_factory=dict)
    last: Specialization | None = None
    lock: threading.RLock = field(default_factory=threading.RLock)


class Runtime:
    """The dispatcher the language calls: each operator's specialisations, kept while the operator lives."""

    def __init__(self):
        self._states: weakref.WeakKeyDictionary[Operator, _State] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def _state(self, op: Operator) -> _State:
        st = self._states.get(op)
        if st is None:
            with self._lock:
                st = self._states.setdefault(op, _State())
        return st

    def specialize(self, op: Operator, args, kwargs, loc) -> tuple[Specialization, list[np.ndarray]]:
        b = op.bind(args, kwargs, loc)
        key = b.key
        st = self._state(op)
        with st.lock:
            spec = st.specs.get(key)
            if spec is None:
                spec = Specialization(key, op.trace_binding(b), list(b.tensors),
                                      donated=getattr(op, "donates_inputs", False))
                st.specs[key] = spec
                level = logging.INFO if len(st.specs) > 1 else logging.DEBUG
                log.log(level, "traced %s for %s (specialisation %d)", op.name,
                        ", ".join(f"{n}={v}" for n, v in b.dims.items()) or "its shapes", len(st.specs))
            st.last = spec
        return spec, b.arrays

    def run(self, op: Operator, args, kwargs, backend, schedule, loc):
        spec, arrays = self.specialize(op, args, kwargs, loc)
        outs = spec.artifact(backend or default_backend(), schedule).run(*arrays)
        return outs[0] if len(outs) == 1 and len(spec.graph.outputs) == 1 else tuple(outs)

    def compile(self, op: Operator, backend: str, args, kwargs, schedule, options, loc):
        spec, _ = self.specialize(op, args, kwargs, loc)
        return spec.artifact(backend, schedule, **options)

    def specializations(self, op: Operator) -> list[Specialization]:
        return list(self._state(op).specs.values())

    def last(self, op: Operator) -> Specialization | None:
        return self._state(op).last

    def forget_artifacts(self, op: Operator) -> None:
        for spec in self._state(op).specs.values():
            spec.artifacts.clear()


runtime = Runtime()

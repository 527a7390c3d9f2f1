"""Backends are plugins found through the entry-point group `xbench.backends`.

Each entry point names an object with this small interface:

    name: str
    default_target: str                      # the hardware its times are for ("cpu-local", "h100", ...)
    available() -> (bool, reason)            # may the backend compile and run here?
    knobs(kernel, program=None) -> dict[str, Knob]   # the schedule knobs it reads for a kernel (of program)
    default_schedule(kernel) -> Schedule
    compile(program, schedules, **options) -> Artifact
    check(program, kernel, schedule) -> str | None   # optional: why a schedule cannot run, without compiling
    prepare(program, schedules) -> job       # optional: write sources so `warm(job)` can compile elsewhere

An `Artifact` is what a compile returns: `.source` (the text users read), `.resources` (what the toolchain
reports), `.kernels` (per-kernel source/resources/schedule) and `.run(*arrays) -> list[np.ndarray]`, which
checks its arrays with `Artifact.check_inputs` (shapes, dtypes, layout) before running.

A backend may also offer `doctor() -> (ok, why, notes)`: whether a default compile works here, beyond being
installed (the tools it calls answer); `python -m xbench backends` prints it.
"""
from __future__ import annotations

import functools
import inspect
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Protocol

import numpy as np

from ..dtypes import to_numpy
from ..errors import ArgumentError, BackendError, DTypeError, ShapeError, user_location
from ..ir.kernel import Kernel, Program
from ..ir.schedule import Knob, Schedule

GROUP = "xbench.backends"
_loaded: dict[str, Any] = {}


class Backend(Protocol):
    name: str
    default_target: str

    def available(self) -> tuple[bool, str]: ...

    def knobs(self, kernel: Kernel, program: Program | None = None) -> dict[str, Knob]: ...

    def default_schedule(self, kernel: Kernel) -> Schedule: ...

    def compile(self, program: Program, schedules: dict[str, Schedule], **options) -> Artifact: ...


@dataclass
class KernelInfo:
    name: str
    kind: str
    source: str
    schedule: Schedule
    resources: dict[str, Any] = field(default_factory=dict)


@dataclass
class Artifact(ABC):
    backend: str
    program: Program
    source: str
    kernels: list[KernelInfo]
    resources: dict[str, Any] = field(default_factory=dict)
    compile_ms: float = 0.0
    cache_hit: bool = False
    predicted: bool = False                  # timings of this backend come from a model, not this machine

    @abstractmethod
    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        """Run on arrays in `program.inputs` order (C-contiguous); one array per program output."""

    def consume(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """`run(*arrays)` for a list the caller gives up: a backend that frees memory early (cpu) empties the
        list and lets each input go after the last kernel that reads it, so an input nothing else holds is freed
        while the rest of the program runs."""
        return self.run(*arrays)

    def check_inputs(self, arrays) -> list[np.ndarray]:
        """The arrays given to `run`, checked against what this artifact was compiled for: one per program input,
        each of the input's shape and dtype (another byte order is converted), C-contiguous, aligned and writable
        (copied where not). Anything else is refused with the input's name, instead of read out of bounds."""
        p = self.program
        if len(arrays) != len(p.inputs):
            raise ArgumentError(f"{p.name} on {self.backend} takes {len(p.inputs)} array(s) "
                                f"({', '.join(p.inputs) or 'none'}), got {len(arrays)}",
                                hint="pass the operator's tensor arguments in order (op.arrays(...) lists them)",
                                loc=user_location())
        out = []
        for a, name, (shape, want) in zip(arrays, p.inputs, self._expected):
            if type(a) is np.ndarray and a.dtype == want and a.shape == shape:        # the common case, quickly
                f = a.flags
                if f.c_contiguous and f.aligned and f.writeable:
                    out.append(a)
                    continue
            buf = p.buffers[name]
            if isinstance(a, np.ma.MaskedArray):
                raise ArgumentError(f"{p.name} on {self.backend}: input {name!r} is a masked array, and compiled "
                                    "operators read no masks", hint=f"pass {name}.filled(value) (or the mask as "
                                    "an argument of its own, applied with xb.where)", loc=user_location())
            a = np.asarray(a)
            if a.shape != shape:
                raise ShapeError(f"{p.name} on {self.backend} was compiled for input {name!r} of shape {shape}, "
                                 f"got {a.shape}", hint="compile again for these shapes (op.compile(backend, "
                                 "*arrays)), or call the operator itself, which compiles per shape",
                                 loc=user_location())
            if a.dtype != want:
                if not np.can_cast(a.dtype, want, casting="equiv"):
                    raise DTypeError(f"{p.name} on {self.backend} was compiled for input {name!r} of dtype "
                                     f"{buf.dtype}, got {a.dtype}", hint=f"pass {name}.astype({buf.dtype!r}), or "
                                     "compile again for this dtype", loc=user_location())
                a = a.astype(want)
            if not (a.flags.c_contiguous and a.flags.aligned and a.flags.writeable):
                a = np.require(a, want, ("C", "A", "W"))   # keeps 0-d arrays 0-d
            out.append(a)
        return out

    @functools.cached_property
    def _expected(self) -> list[tuple[tuple[int, ...], np.dtype]]:
        """(shape, numpy dtype) of each program input, in order."""
        p = self.program
        return [(tuple(p.buffers[n].shape), np.dtype(to_numpy(p.buffers[n].dtype))) for n in p.inputs]

    @property
    def schedules(self) -> dict[str, Schedule]:
        return {k.name: k.schedule for k in self.kernels}

    def __repr__(self) -> str:
        ks = ", ".join(k.name for k in self.kernels)
        return f"<Artifact {self.program.name} on {self.backend}: {len(self.kernels)} kernel(s) [{ks}]>"

    def _repr_markdown_(self) -> str:
        lang = "cpp" if self.backend == "ascend" else "python"
        return f"**{self.program.name}** on `{self.backend}`\n\n```{lang}\n{self.source}\n```"


def knobs_of(backend: Backend, kernel: Kernel, program: Program) -> dict[str, Knob]:
    """`backend.knobs(kernel, program)`, or `knobs(kernel)` for a plugin whose `knobs` takes the kernel alone."""
    try:
        params = inspect.signature(backend.knobs).parameters.values()
    except (TypeError, ValueError):
        params = ()
    if sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params) >= 2 \
            or any(p.kind == p.VAR_POSITIONAL for p in params):
        return backend.knobs(kernel, program)
    return backend.knobs(kernel)


def names() -> list[str]:
    """Every installed backend name."""
    return sorted({ep.name for ep in entry_points(group=GROUP)} | set(_loaded))


def get(name: str) -> Backend:
    if name in _loaded:
        return _loaded[name]
    eps = {ep.name: ep for ep in entry_points(group=GROUP)}
    if name not in eps:
        raise BackendError(f"no backend named {name!r}", hint=f"installed backends: {', '.join(names()) or 'none'} "
                           "(backends are registered under the entry-point group 'xbench.backends'; "
                           "reinstall xbench with `make install` if one is missing)")
    obj = eps[name].load()
    _loaded[name] = obj
    return obj


def register(backend: Backend) -> None:
    """Register a backend object directly (for plugins under development)."""
    _loaded[backend.name] = backend


class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.ms = (time.perf_counter() - self.t0) * 1e3

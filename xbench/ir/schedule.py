"""Schedules are data: a mapping from knob names to values, attached to each kernel.

A backend declares the knobs it reads for a kernel (`Knob`: name, choices, default, meaning) and picks a default
schedule; the tuner searches the choices; the predictor prices a schedule; the cache keys on it.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Knob:
    name: str
    choices: tuple[Any, ...]
    default: Any
    doc: str = ""

    def __post_init__(self):
        if self.default not in self.choices:
            object.__setattr__(self, "choices", (self.default,) + tuple(self.choices))


class Schedule(Mapping[str, Any]):
    """An immutable, hashable knob assignment."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None, **kw: Any):
        merged = dict(items or {})
        merged.update(kw)
        self._items = tuple(sorted(merged.items()))

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other) -> bool:
        return isinstance(other, Mapping) and dict(self) == dict(other)

    def with_(self, **kw: Any) -> Schedule:
        return Schedule(dict(self), **kw)

    def __repr__(self) -> str:
        return "Schedule(" + ", ".join(f"{k}={v!r}" for k, v in self._items) + ")"


def _is_bool(v) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not _is_bool(v)


def _least(knob: Knob) -> Any | None:
    """The smallest choice when a knob's choices are all numbers (larger values are the backend's to judge:
    a tile it shrinks to fit, threads over a device's limit it refuses), else None."""
    if knob.choices and all(isinstance(c, (int, float, np.number)) and not _is_bool(c) for c in knob.choices):
        return min(knob.choices)
    return None


def check_value(knob: Knob, value: Any) -> str | None:
    """Why `value` cannot be given to `knob`, or None when it can: one of its choices (of the same type: True
    is not 1), or, where the choices are all numbers, a number of their kind (an integer where they are) no
    smaller than the smallest."""
    if not knob.choices or any(c == value and _is_bool(c) == _is_bool(value) for c in knob.choices):
        return None
    shown = ", ".join(repr(c) for c in knob.choices)
    least = _least(knob)
    if least is not None:
        whole = all(_is_int(c) for c in knob.choices)
        number = _is_int(value) if whole else isinstance(value, (int, float, np.number)) and not _is_bool(value)
        if number and value >= least:
            return None
        kind = "an integer" if whole else "a number"
        return f"takes one of {shown} (or {kind} of at least {least}), got {value!r}"
    return f"takes one of {shown}, got {value!r}"


def validate(knobs: Mapping[str, Knob], given: Mapping[str, Any], kernel_name: str) -> None:
    """Refuse unknown knobs and values no choice allows, naming the kernel, the knob and its choices."""
    from ..errors import ScheduleError, user_location
    for k, v in given.items():
        if k not in knobs:
            close = difflib.get_close_matches(str(k), list(knobs), n=1)
            raise ScheduleError(f"kernel {kernel_name} has no schedule knob {k!r}"
                                + (f"; did you mean {close[0]!r}?" if close else ""),
                                hint=f"its knobs are {', '.join(sorted(knobs)) or 'none'}", loc=user_location())
        why = check_value(knobs[k], v)
        if why is not None:
            doc = f" ({knobs[k].doc})" if knobs[k].doc else ""
            raise ScheduleError(f"kernel {kernel_name}: knob {k!r} {why}",
                                hint=f"{k}{doc}; default {knobs[k].default!r}", loc=user_location())


def resolve(knobs: Mapping[str, Knob], default: Schedule, given: Mapping[str, Any] | None,
            kernel_name: str) -> Schedule:
    """The default schedule overridden by `given`, with unknown knobs and values refused by name."""
    if not given:
        return default
    validate(knobs, given, kernel_name)
    return default.with_(**given)

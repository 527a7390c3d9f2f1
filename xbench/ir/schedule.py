"""Schedules are data: a mapping from knob names to values, attached to each kernel.

A backend declares the knobs it reads for a kernel (`Knob`: name, choices, default, meaning) and picks a default
schedule; the tuner searches the choices; the predictor prices a schedule; the cache keys on it.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


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


def resolve(knobs: Mapping[str, Knob], default: Schedule, given: Mapping[str, Any] | None,
            kernel_name: str) -> Schedule:
    """The default schedule overridden by `given`, with unknown knobs and values refused by name."""
    if not given:
        return default
    for k, v in given.items():
        if k not in knobs:
            raise ValueError(f"kernel {kernel_name} has no schedule knob {k!r}; its knobs are "
                             f"{', '.join(sorted(knobs)) or 'none'}")
        if knobs[k].choices and v not in knobs[k].choices and not isinstance(v, (int, float)):
            raise ValueError(f"knob {k!r} of kernel {kernel_name} takes one of {knobs[k].choices}, got {v!r}")
    return default.with_(**given)

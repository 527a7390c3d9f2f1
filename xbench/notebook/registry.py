"""The operators compiled in this kernel, kept as records for the JupyterLab sidebar.

A record is plain JSON-able data::

    {
      "name": "softmax",
      "signature": "softmax(x: Tensor[N, D]) -> Tensor[N, D]",
      "dims": {"N": 64, "D": 1024},
      "backends": {
        "cpu":  {"status": "pass", "time_ms": 0.013, "max_abs_error": 3e-8, "message": None,
                 "registers_per_thread": None, "ub_bytes": None, "predicted": False, "target": None},
        "cuda": {"status": "pass", "time_ms": 0.0062, "max_abs_error": 1.2e-7, "message": None,
                 "registers_per_thread": 32, "ub_bytes": None, "predicted": True, "target": "h100"},
        ...
      },
      "best": {"backend": "cpu", "time_ms": 0.013},       # the fastest *measured* time, or None
      "sources": {"cpu": "...", "cuda": "...", "ptx": "...", "ascend": "..."},  # those that exist
      "updated": "2025-01-01T12:00:00+00:00",
    }

A predicted time (`predicted: True`, for `target`) is never ranked against a measured one: `best` is the
fastest measured backend (a record whose `best` names a predicted one is refused).

`Registry.publish` checks a record (every error names the field and says what to write), fills in the
optional fields, and hands the update to every attached sink (see `xbench.notebook.comm`).
"""
from __future__ import annotations

import copy
import datetime as _dt
import math
import threading
from collections.abc import Mapping
from typing import Any, Protocol

from ..config import log

STATUSES = ("pass", "fail", "error")
SOURCE_KINDS = ("cpu", "cuda", "ptx", "ascend")

# field -> (accepted types, may be None, default)
_BACKEND_FIELDS: dict[str, tuple[tuple[type, ...], bool, Any]] = {
    "status": ((str,), False, None),
    "time_ms": ((int, float), True, None),
    "max_abs_error": ((int, float), True, None),
    "message": ((str,), True, None),
    "registers_per_thread": ((int,), True, None),
    "ub_bytes": ((int,), True, None),
    "predicted": ((bool,), False, False),
    "target": ((str,), True, None),
}
_RECORD_FIELDS = ("name", "signature", "dims", "backends", "best", "sources", "updated")


class RecordError(ValueError):
    """An operator record that the sidebar could not show; the message names the field."""


class Sink(Protocol):
    def send(self, message: dict[str, Any]) -> None: ...


def _type_name(types: tuple[type, ...]) -> str:
    names = {int: "an int", float: "a float", str: "a string", bool: "True or False"}
    if types == (int, float):
        return "a number"
    return " or ".join(names.get(t, t.__name__) for t in types)


def _check_value(where: str, value: Any, types: tuple[type, ...], nullable: bool) -> Any:
    if value is None:
        if nullable:
            return None
        raise RecordError(f"{where} is missing (None); give {_type_name(types)}")
    # bool is an int in Python; only accept it where a bool is asked for.
    if isinstance(value, bool) and bool not in types:
        raise RecordError(f"{where} must be {_type_name(types)}, not {value!r}")
    if not isinstance(value, types):
        raise RecordError(f"{where} must be {_type_name(types)}"
                          f"{' or None' if nullable else ''}, not {type(value).__name__} {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise RecordError(f"{where} is {value!r}; JSON cannot carry it: report a non-finite result as "
                          f"status 'fail' with {where.rsplit('.', 1)[-1]}=None and a message")
    if int in types and float not in types and value < 0:
        raise RecordError(f"{where} must not be negative, got {value}")
    return value


def _check_backend(name: str, backend: Any, result: Any) -> dict[str, Any]:
    where = f"record {name!r}: backends[{backend!r}]"
    if not isinstance(backend, str) or not backend:
        raise RecordError(f"record {name!r}: backend names must be non-empty strings, got {backend!r}")
    if not isinstance(result, Mapping):
        raise RecordError(f"{where} must be a dict with 'status' and timings, not {type(result).__name__}")
    unknown = sorted(set(result) - set(_BACKEND_FIELDS))
    if unknown:
        raise RecordError(f"{where} has unknown field(s) {', '.join(map(repr, unknown))}; "
                          f"known fields: {', '.join(_BACKEND_FIELDS)}")
    if "status" not in result:
        raise RecordError(f"{where} is missing 'status'; give one of {', '.join(STATUSES)}")
    out: dict[str, Any] = {}
    for field, (types, nullable, default) in _BACKEND_FIELDS.items():
        value = result.get(field, default)
        out[field] = _check_value(f"{where}.{field}", value, types, nullable)
    if out["status"] not in STATUSES:
        raise RecordError(f"{where}.status is {out['status']!r}; give one of {', '.join(STATUSES)}")
    if out["time_ms"] is not None:
        out["time_ms"] = float(out["time_ms"])
    if out["max_abs_error"] is not None:
        out["max_abs_error"] = float(out["max_abs_error"])
    return out


def validate_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A checked deep copy of `record` with optional fields filled in (`best` None, `sources` {},
    `updated` now). Raises RecordError naming the first missing or ill-typed field."""
    if not isinstance(record, Mapping):
        raise RecordError(f"an operator record must be a dict, not {type(record).__name__}")
    name = record.get("name")
    if not isinstance(name, str) or not name:
        raise RecordError(f"record field 'name' must be a non-empty string, got {name!r}")
    unknown = sorted(set(record) - set(_RECORD_FIELDS))
    if unknown:
        raise RecordError(f"record {name!r} has unknown field(s) {', '.join(map(repr, unknown))}; "
                          f"known fields: {', '.join(_RECORD_FIELDS)}")
    for field in ("signature", "dims", "backends"):
        if field not in record:
            raise RecordError(f"record {name!r} is missing {field!r}")
    signature = _check_value(f"record {name!r}: signature", record["signature"], (str,), False)

    dims = record["dims"]
    if not isinstance(dims, Mapping):
        raise RecordError(f"record {name!r}: dims must be a dict like {{'N': 64}}, not {type(dims).__name__}")
    for dim, size in dims.items():
        if not isinstance(dim, str):
            raise RecordError(f"record {name!r}: dims keys must be dim names (strings), got {dim!r}")
        _check_value(f"record {name!r}: dims[{dim!r}]", size, (int,), False)

    backends = record["backends"]
    if not isinstance(backends, Mapping):
        raise RecordError(f"record {name!r}: backends must be a dict keyed by backend name, "
                          f"not {type(backends).__name__}")
    checked = {backend: _check_backend(name, backend, result) for backend, result in backends.items()}

    best = record.get("best")
    if best is not None:
        if not isinstance(best, Mapping) or set(best) != {"backend", "time_ms"}:
            raise RecordError(f"record {name!r}: best must be None or {{'backend': ..., 'time_ms': ...}}, "
                              f"got {best!r}")
        if best["backend"] not in checked:
            raise RecordError(f"record {name!r}: best.backend is {best['backend']!r}, which is not one of "
                              f"its backends ({', '.join(checked) or 'none'})")
        if checked[best["backend"]]["predicted"]:
            raise RecordError(f"record {name!r}: best.backend is {best['backend']!r}, whose time is predicted; "
                              f"best is the fastest measured backend (or None): a predicted time is not "
                              f"ranked against measured ones")
        time_ms = _check_value(f"record {name!r}: best.time_ms", best["time_ms"], (int, float), False)
        best = {"backend": best["backend"], "time_ms": float(time_ms)}

    sources = record.get("sources") or {}
    if not isinstance(sources, Mapping):
        raise RecordError(f"record {name!r}: sources must be a dict like {{'cpu': '...'}}")
    for kind, text in sources.items():
        if kind not in SOURCE_KINDS:
            raise RecordError(f"record {name!r}: sources has unknown kind {kind!r}; "
                              f"use {', '.join(SOURCE_KINDS)}")
        _check_value(f"record {name!r}: sources[{kind!r}]", text, (str,), False)

    updated = record.get("updated")
    if updated is None:
        updated = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
    else:
        try:
            _dt.datetime.fromisoformat(updated)
        except (TypeError, ValueError):
            raise RecordError(f"record {name!r}: updated must be an ISO 8601 time string, "
                              f"got {updated!r}") from None

    return {
        "name": name,
        "signature": signature,
        "dims": dict(dims),
        "backends": checked,
        "best": best,
        "sources": {kind: sources[kind] for kind in SOURCE_KINDS if kind in sources},
        "updated": updated,
    }


def wire_form(record: Mapping[str, Any]) -> dict[str, Any]:
    """What the frontend receives: the record without source text, with `source_kinds` listing
    the sources it can ask for."""
    out = {k: copy.deepcopy(v) for k, v in record.items() if k != "sources"}
    out["source_kinds"] = list(record.get("sources", {}))
    return out


class Registry:
    """The operator records of one kernel process, and the sinks (frontend channels) told of changes."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Any]] = {}
        self._sinks: list[Sink] = []
        self._lock = threading.RLock()

    def publish(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Add or replace the record named `record['name']` and send an update to every sink.
        Returns the stored (checked, completed) record."""
        checked = validate_record(record)
        with self._lock:
            self._records[checked["name"]] = checked
            self._notify({"type": "update", "operator": wire_form(checked)})
        return copy.deepcopy(checked)

    def remove(self, name: str) -> bool:
        """Forget operator `name`; returns whether it was there."""
        with self._lock:
            if self._records.pop(name, None) is None:
                return False
            self._notify({"type": "remove", "name": name})
        return True

    def clear(self) -> None:
        with self._lock:
            for name in list(self._records):
                self.remove(name)

    def get(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            record = self._records.get(name)
            return copy.deepcopy(record) if record is not None else None

    def names(self) -> list[str]:
        with self._lock:
            return list(self._records)

    def snapshot(self) -> list[dict[str, Any]]:
        """Copies of every record, sources included, in publication order."""
        with self._lock:
            return [copy.deepcopy(r) for r in self._records.values()]

    def snapshot_message(self) -> dict[str, Any]:
        with self._lock:
            return {"type": "snapshot", "operators": [wire_form(r) for r in self._records.values()]}

    def source(self, name: str, kind: str) -> str:
        """The generated source of `kind` for operator `name`; KeyError says what exists."""
        with self._lock:
            record = self._records.get(name)
            if record is None:
                known = ", ".join(self._records) or "none yet"
                raise KeyError(f"no operator named {name!r} in this kernel (known: {known})")
            text = record["sources"].get(kind)
            if text is None:
                known = ", ".join(record["sources"]) or "none"
                raise KeyError(f"operator {name!r} has no {kind!r} source (it has: {known})")
            return text

    def attach(self, sink: Sink) -> None:
        """Send every later change to `sink.send(message)`."""
        with self._lock:
            if sink not in self._sinks:
                self._sinks.append(sink)

    def detach(self, sink: Sink) -> None:
        with self._lock:
            if sink in self._sinks:
                self._sinks.remove(sink)

    def _notify(self, message: dict[str, Any]) -> None:
        for sink in list(self._sinks):
            try:
                sink.send(message)
            # A broken frontend channel must not fail the compile that published.
            except Exception:
                log.warning("xbench: could not send a registry %s to %r", message["type"], sink, exc_info=True)


_registry: Registry | None = None
_registry_lock = threading.Lock()


def registry() -> Registry:
    """The registry of this kernel process (each kernel is its own process)."""
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = Registry()
        return _registry

"""The suite's results as data: one JSON document of runs and rows that runs from different machines merge into.

Schema `xbench-suite/1` (docs/suite.md describes every field):

    {"schema": "xbench-suite/1",
     "runs":   {run_id: {"machine": {...}, "started": iso time, "command": str, "options": {...}, "seconds": s}},
     "rows":   [{"run", "workload", "domain", "mode", "size", "precision", "platform", "engine", "source",
                 "metric", "value", "unit", ...optional "q1", "q3", "samples", "noisy", "detail"}],
     "gate":   [{"run", "workload", "backend", "size", "steps", "ok", "checks": [...], "error", "not_run", "bisect"}],
     "varlen": [{"run", "size", "requests", "p50_ms": {...}, "p99_ms": {...}, "compiles", ...}],
     "errors": [{"run", "workload", "stage", "engine", "error"}]}

A row is one number: `source` says where it came from (`measured`, `predicted`); `platform` is `cpu` for this
machine's processor (the run's `machine` says which) or a target name (`h100`, `a100`, `ascend-910b`, ...).
Merging concatenates runs and rows; a row of the same key (everything but `run`, `value` and the statistics,
plus the machine's host for measured rows) from a later run replaces the earlier one.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA = "xbench-suite/1"
KEY = ("workload", "size", "mode", "precision", "platform", "engine", "source", "metric")
STATS = ("q1", "q3", "samples", "noisy", "detail")


# OMP_WAIT_POLICY as the process's OpenMP runtime (torch's, which numba's loops share) read it when torch was
# imported ('' unset), where the CLI saw it happen; None where torch was imported before the suite (then the
# environment's value now is recorded)
torch_wait_policy: str | None = None


def machine() -> dict:
    """This machine, as a run records it: `omp_wait_policy` is the one the process's OpenMP threads run under
    (eager, Inductor, xbench's parallel loops and GEMMs), `blas` the library xbench's cpu GEMMs call."""
    import torch

    import xbench
    from xbench.backends.cpu import blas
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"host": socket.gethostname(), "cpu": cpu or platform.processor(), "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "") if torch_wait_policy is None else torch_wait_policy,
            "blas": blas.PROVIDER,
            "gpu": _gpu(), "python": platform.python_version(),
            "torch": torch.__version__, "xbench": xbench.__version__}


def _gpu() -> str | None:
    # through xbench's device module: a plain `import numba.cuda` here chose GPU mode on a machine without one, and
    # every later cuda gate was refused ("no CUDA GPU is visible here and the simulator is off")
    from ..backends.cuda.device import device_name
    try:
        return device_name()
    except Exception:
        return None


PEERS = ("eager", "inductor")


@dataclass
class Results:
    """A results document (`to_dict` is the JSON)."""
    runs: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)
    gate: list = field(default_factory=list)
    varlen: list = field(default_factory=list)
    errors: list = field(default_factory=list)     # what failed: {"run", "workload", "stage", "engine", "error"}

    @classmethod
    def new_run(cls, command: str, options: dict) -> tuple[Results, str]:
        run = uuid.uuid4().hex[:12]
        r = cls(runs={run: {"machine": machine(), "started": datetime.datetime.now(datetime.UTC)
                            .isoformat(timespec="seconds"), "command": command, "options": options, "seconds": 0.0}})
        return r, run

    def add(self, run: str, **row) -> dict:
        missing = [k for k in (*KEY, "value", "unit") if k not in row]
        if missing:
            raise ValueError(f"a suite row needs {', '.join(missing)}")
        row = {"run": run, **row}
        self.rows.append(row)
        return row

    @property
    def peer_errors(self) -> list[dict]:
        """Failures of torch itself running a peer engine (eager, Inductor): no xbench code ran in them."""
        return [e for e in self.errors if e["engine"].split("/")[0] in PEERS]

    @property
    def own_errors(self) -> list[dict]:
        """Every other failure: xbench's, or the suite's."""
        return [e for e in self.errors if e not in self.peer_errors]

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "runs": self.runs, "rows": self.rows, "gate": self.gate, "varlen": self.varlen,
                "errors": self.errors}

    def save(self, path: str | Path) -> None:
        from ..cache import atomic_write
        atomic_write(Path(path), json.dumps(self.to_dict(), indent=1, default=_plain))

    @classmethod
    def load(cls, path: str | Path) -> Results:
        data = json.loads(Path(path).read_text())
        return cls.from_dict(data, str(path))

    @classmethod
    def from_dict(cls, data: dict, origin: str = "results") -> Results:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"{origin}: schema {data.get('schema')!r} is not {SCHEMA!r}")
        for i, row in enumerate(data.get("rows", [])):
            missing = [k for k in ("run", *KEY, "value", "unit") if k not in row]
            if missing:
                raise ValueError(f"{origin}: row {i} has no {', '.join(missing)}")
            if row["run"] not in data.get("runs", {}):
                raise ValueError(f"{origin}: row {i} names run {row['run']!r}, which the file does not describe")
        return cls(dict(data.get("runs", {})), list(data.get("rows", [])), list(data.get("gate", [])),
                   list(data.get("varlen", [])), list(data.get("errors", [])))

    def key(self, row: dict) -> tuple:
        host = self.runs.get(row["run"], {}).get("machine", {}).get("host") if row["source"] == "measured" else None
        return (*(row[k] for k in KEY), host)

    def latest(self) -> list[dict]:
        """The rows, one per key: the latest run's."""
        order = {r: v.get("started", "") for r, v in self.runs.items()}
        best: dict[tuple, dict] = {}
        for row in self.rows:
            k = self.key(row)
            if k not in best or order.get(row["run"], "") >= order.get(best[k]["run"], ""):
                best[k] = row
        return list(best.values())

    def find(self, **match) -> list[dict]:
        return [r for r in self.latest() if all(r.get(k) == v for k, v in match.items())]

    def value(self, **match) -> float | None:
        rows = self.find(**match)
        return rows[0]["value"] if rows else None


def merge(*docs: Results) -> Results:
    """One document from several (runs from different machines): every run and row kept; `latest()` resolves a
    key measured twice to the later run."""
    out = Results()
    for d in docs:
        clash = set(out.runs) & set(d.runs)
        for run in clash:
            if out.runs[run] != d.runs[run]:
                raise ValueError(f"run id {run} describes two different runs")
        out.runs.update(d.runs)
        seen = {json.dumps(r, sort_keys=True, default=_plain) for r in out.rows}
        out.rows += [r for r in d.rows if json.dumps(r, sort_keys=True, default=_plain) not in seen]
        out.gate += [g for g in d.gate if g not in out.gate]
        out.varlen += [v for v in d.varlen if v not in out.varlen]
        out.errors += [e for e in d.errors if e not in out.errors]
    return out


def _plain(v):
    if hasattr(v, "item"):
        return v.item()
    if isinstance(v, (set, tuple)):
        return list(v)
    raise TypeError(f"{type(v).__name__} is not JSON")

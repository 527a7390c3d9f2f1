"""The tuning database: every measured candidate and the best schedule per kernel, in SQLite.

Records are content-addressed: the key is a digest of the kernel's loop IR (which includes its shape), the
backend, the target and the tool versions — not of the search space, so editing a space keeps what was learned.
SQLite in WAL mode with a busy timeout makes concurrent writers safe; each record is one transaction, so an
interrupted search keeps everything measured before the interruption and resumes from there.
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..cache import digest
from ..config import cache_dir, tool_versions

SCHEMA = """
CREATE TABLE IF NOT EXISTS candidates (
    key TEXT NOT NULL, config TEXT NOT NULL, status TEXT NOT NULL, time_ms REAL, spread REAL,
    predicted INTEGER NOT NULL DEFAULT 0, message TEXT, op TEXT, kernel TEXT, backend TEXT, target TEXT,
    created REAL NOT NULL, PRIMARY KEY (key, config));
CREATE TABLE IF NOT EXISTS best (
    key TEXT PRIMARY KEY, config TEXT NOT NULL, time_ms REAL, default_ms REAL, predicted INTEGER NOT NULL DEFAULT 0,
    op TEXT, kernel TEXT, backend TEXT, target TEXT, versions TEXT, updated REAL NOT NULL);
"""


def default_target(backend: str) -> str:
    """The hardware a backend's tuning results are for unless told otherwise (its `default_target`)."""
    from ..backends import get
    return getattr(get(backend), "default_target", None) or backend


def kernel_key(kernel, backend: str, target: str) -> str:
    """Content address of a kernel's tuning records."""
    return digest("tune-v1", kernel.signature(), backend, target, tool_versions())


def config_text(config: dict[str, Any]) -> str:
    return json.dumps(dict(sorted(config.items())), sort_keys=True)


class TuningDB:
    """`xb.tuning_db()`: look up, export and import tuning records."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else cache_dir("tune") / "tuning.sqlite"
        self._local = threading.local()
        with self._conn() as c:
            c.executescript(SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=60.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    # ---- candidates ----------------------------------------------------------------------------------
    def record(self, key: str, config: dict, status: str, time_ms: float | None = None, spread: float | None = None,
               predicted: bool = False, message: str = "", **meta: str) -> None:
        with self._conn() as c:
            c.execute("INSERT OR REPLACE INTO candidates VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                      (key, config_text(config), status, time_ms, spread, int(predicted), message,
                       meta.get("op"), meta.get("kernel"), meta.get("backend"), meta.get("target"), time.time()))

    def measured(self, key: str) -> dict[str, dict]:
        """Candidates already evaluated for `key`, by config text."""
        rows = self._conn().execute(
            "SELECT config, status, time_ms, spread, predicted, message FROM candidates WHERE key=?", (key,))
        return {r[0]: {"status": r[1], "time_ms": r[2], "spread": r[3], "predicted": bool(r[4]), "message": r[5]}
                for r in rows}

    # ---- best ----------------------------------------------------------------------------------------
    def set_best(self, key: str, config: dict, time_ms: float, default_ms: float | None, predicted: bool,
                 **meta: str) -> None:
        with self._conn() as c:
            c.execute("INSERT OR REPLACE INTO best VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                      (key, config_text(config), time_ms, default_ms, int(predicted), meta.get("op"),
                       meta.get("kernel"), meta.get("backend"), meta.get("target"), json.dumps(tool_versions()),
                       time.time()))

    def best(self, key: str) -> dict | None:
        row = self._conn().execute("SELECT config FROM best WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def entries(self) -> Iterator[dict]:
        cols = ("key", "config", "time_ms", "default_ms", "predicted", "op", "kernel", "backend", "target",
                "versions", "updated")
        for row in self._conn().execute(f"SELECT {', '.join(cols)} FROM best ORDER BY updated"):
            d = dict(zip(cols, row))
            d["config"] = json.loads(d["config"])
            d["predicted"] = bool(d["predicted"])
            yield d

    # ---- sharing -------------------------------------------------------------------------------------
    def export(self, path: str | Path) -> int:
        """Write every best record (and its candidates) as JSON; returns how many best records."""
        best = list(self.entries())
        cands = [dict(zip(("key", "config", "status", "time_ms", "spread", "predicted", "message", "op", "kernel",
                           "backend", "target", "created"), r))
                 for r in self._conn().execute("SELECT * FROM candidates")]
        Path(path).write_text(json.dumps({"format": "xbench-tuning-1", "best": best, "candidates": cands}, indent=1))
        return len(best)

    def import_(self, path: str | Path) -> int:
        """Merge records exported elsewhere: a record replaces ours only when it is faster. Returns how many
        best records were taken."""
        data = json.loads(Path(path).read_text())
        if data.get("format") != "xbench-tuning-1":
            raise ValueError(f"{path} is not an xbench tuning export")
        taken = 0
        with self._conn() as c:
            for r in data["candidates"]:
                c.execute("INSERT OR IGNORE INTO candidates VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                          (r["key"], r["config"], r["status"], r["time_ms"], r["spread"], int(r["predicted"]),
                           r["message"], r["op"], r["kernel"], r["backend"], r["target"], r["created"]))
            for b in data["best"]:
                row = c.execute("SELECT time_ms FROM best WHERE key=?", (b["key"],)).fetchone()
                if row is None or (b["time_ms"] is not None and row[0] is not None and b["time_ms"] < row[0]):
                    c.execute("INSERT OR REPLACE INTO best VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                              (b["key"], config_text(b["config"]), b["time_ms"], b["default_ms"], int(b["predicted"]),
                               b["op"], b["kernel"], b["backend"], b["target"], b["versions"], b["updated"]))
                    taken += 1
        return taken

    def clear(self) -> None:
        with self._conn() as c:
            c.execute("DELETE FROM candidates")
            c.execute("DELETE FROM best")


_default: TuningDB | None = None


def tuning_db(path: str | Path | None = None) -> TuningDB:
    """The tuning database under the cache directory (or at `path`)."""
    global _default
    if path is not None:
        return TuningDB(path)
    if _default is None or not _default.path.exists() or _default.path.parent != cache_dir("tune"):
        _default = TuningDB()
    return _default


def tuned_schedules(program, backend: str, target: str | None = None) -> dict[str, dict]:
    """Best known schedules for a program's kernels (empty when nothing was tuned: no database is created)."""
    path = cache_dir("tune") / "tuning.sqlite"
    if not path.exists():
        return {}
    db = tuning_db()
    target = target or default_target(backend)
    out = {}
    for k in program.kernels:
        cfg = db.best(kernel_key(k, backend, target))
        if cfg:
            out[k.name] = cfg
    return out

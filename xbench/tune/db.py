"""The tuning database: every measured candidate and the best schedule per kernel, in SQLite.

Records are content-addressed: the key is a digest of the kernel's loop IR (which includes its shape), the
backend, the target and the tool versions — not of the search space, so editing a space keeps what was learned.
SQLite in WAL mode with a busy timeout makes concurrent writers safe; each record is one transaction, so an
interrupted search keeps everything measured before the interruption and resumes from there.
"""
from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..cache import digest, storage_error
from ..config import cache_dir, log, tool_versions
from ..errors import CacheError

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


_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26
_checked: set[tuple] = set()           # (path, inode) whose integrity this process has checked


def _damaged(exc: Exception) -> bool:
    if isinstance(exc, UnicodeDecodeError):
        return True                    # text SQLite handed back (a schema name in its error, a value) is not UTF-8
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return True
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "could not decode to utf-8" in text


class TuningDB:
    """`xb.tuning_db()`: look up, export and import tuning records.

    The database is checked when first opened in a process (SQLite's quick_check); a damaged one (torn, truncated,
    overwritten) is moved aside to `tuning.sqlite.damaged` with a warning and replaced by an empty one, so tuning
    starts afresh instead of every call failing."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path else cache_dir("tune") / "tuning.sqlite"
        self._local = threading.local()
        self._do(lambda c: None)

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise storage_error(exc, self.path.parent, "create") from None
            conn = sqlite3.connect(self.path, timeout=60.0)
            try:
                self._local.inode = os.stat(self.path).st_ino
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                stamp = (str(self.path), self._local.inode)
                if stamp not in _checked:
                    verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
                    if verdict != "ok":
                        detail = "; ".join(ln.strip() for ln in str(verdict).splitlines()[1:3])
                        raise sqlite3.DatabaseError(f"database disk image is malformed: {detail or verdict}")
                    _checked.add(stamp)
                with conn:
                    conn.executescript(SCHEMA)
            except BaseException:
                conn.close()
                raise
            self._local.conn = conn
        return conn

    def _do(self, fn):
        """`fn(connection)`, with a damaged database set aside and replaced once, and other failures (a read-only
        or full disk) raised as CacheErrors that say so."""
        for attempt in (0, 1):
            try:
                return fn(self._conn())
            except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
                if attempt == 0 and _damaged(exc):
                    self._set_aside(exc)
                    continue
                raise self._error(exc) from None

    def _set_aside(self, exc: Exception) -> None:
        conn = getattr(self._local, "conn", None)
        inode = getattr(self._local, "inode", None)
        self._local.conn = None
        if conn is not None:
            conn.close()
        from ..cache import lock
        with lock(self.path):
            try:
                same = inode is None or os.stat(self.path).st_ino == inode
            except FileNotFoundError:
                return                         # another process set it aside already
            if not same:
                return                         # ... and started a fresh one
            aside = self.path.with_name(self.path.name + ".damaged")
            try:
                os.replace(self.path, aside)
                for suffix in ("-wal", "-shm"):    # a stale log must never be replayed into the fresh database
                    with contextlib.suppress(FileNotFoundError):
                        os.replace(f"{self.path}{suffix}", f"{aside}{suffix}")
            except OSError as err:
                raise CacheError(f"the tuning database {self.path} is damaged ({exc}) and cannot be moved aside: "
                                 f"{err.strerror or err}", hint=f"remove {self.path} to start afresh") from None
        log.warning("the tuning database %s is damaged (%s); it was moved to %s and a fresh one started: tuned "
                    "schedules are measured again", self.path, exc, aside)

    def _error(self, exc: Exception) -> CacheError:
        text = str(exc)
        if "readonly" in text or "read-only" in text:
            hint = "make the cache folder writable, or point XBENCH_CACHE_DIR at a writable folder"
        elif "full" in text:
            hint = "free some space, or point XBENCH_CACHE_DIR at a folder on another disk"
        elif "locked" in text:
            hint = "another process holds the database for over a minute; wait for it, or use another XBENCH_CACHE_DIR"
        else:
            hint = "point XBENCH_CACHE_DIR at a writable folder, or remove the file to start afresh"
        return CacheError(f"the tuning database {self.path} cannot be used: {text}", hint=hint)

    # ---- candidates ----------------------------------------------------------------------------------
    def record(self, key: str, config: dict, status: str, time_ms: float | None = None, spread: float | None = None,
               predicted: bool = False, message: str = "", **meta: str) -> None:
        row = (key, config_text(config), status, time_ms, spread, int(predicted), message,
               meta.get("op"), meta.get("kernel"), meta.get("backend"), meta.get("target"), time.time())

        def write(c):
            with c:
                c.execute("INSERT OR REPLACE INTO candidates VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", row)
        self._do(write)

    def measured(self, key: str) -> dict[str, dict]:
        """Candidates already evaluated for `key`, by config text."""
        rows = self._do(lambda c: c.execute(
            "SELECT config, status, time_ms, spread, predicted, message FROM candidates WHERE key=?", (key,)).fetchall())
        return {r[0]: {"status": r[1], "time_ms": r[2], "spread": r[3], "predicted": bool(r[4]), "message": r[5]}
                for r in rows}

    # ---- best ----------------------------------------------------------------------------------------
    def set_best(self, key: str, config: dict, time_ms: float, default_ms: float | None, predicted: bool,
                 **meta: str) -> None:
        row = (key, config_text(config), time_ms, default_ms, int(predicted), meta.get("op"), meta.get("kernel"),
               meta.get("backend"), meta.get("target"), json.dumps(tool_versions()), time.time())

        def write(c):
            with c:
                c.execute("INSERT OR REPLACE INTO best VALUES (?,?,?,?,?,?,?,?,?,?,?)", row)
        self._do(write)

    def best(self, key: str) -> dict | None:
        row = self._do(lambda c: c.execute("SELECT config FROM best WHERE key=?", (key,)).fetchone())
        if row is None:
            return None
        try:
            config = json.loads(row[0])
        except ValueError:
            config = None
        return config if isinstance(config, dict) else None

    def entries(self) -> Iterator[dict]:
        cols = ("key", "config", "time_ms", "default_ms", "predicted", "op", "kernel", "backend", "target",
                "versions", "updated")
        for row in self._do(lambda c: c.execute(f"SELECT {', '.join(cols)} FROM best ORDER BY updated").fetchall()):
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
                 for r in self._do(lambda c: c.execute("SELECT * FROM candidates").fetchall())]
        Path(path).write_text(json.dumps({"format": "xbench-tuning-1", "best": best, "candidates": cands}, indent=1))
        return len(best)

    def import_(self, path: str | Path) -> int:
        """Merge records exported elsewhere: a record replaces ours only when it is faster. Returns how many
        best records were taken."""
        data = json.loads(Path(path).read_text())
        if data.get("format") != "xbench-tuning-1":
            raise ValueError(f"{path} is not an xbench tuning export")
        return self._do(lambda c: self._merge(c, data))

    @staticmethod
    def _merge(c: sqlite3.Connection, data: dict) -> int:
        taken = 0
        with c:
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
        def wipe(c):
            with c:
                c.execute("DELETE FROM candidates")
                c.execute("DELETE FROM best")
        self._do(wipe)


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
    """Best known schedules for a program's kernels (empty when nothing was tuned: no database is created).
    A database that cannot be read costs the tuned schedules, with a warning, never the call."""
    path = cache_dir("tune") / "tuning.sqlite"
    if not path.exists():
        return {}
    target = target or default_target(backend)
    out = {}
    try:
        db = tuning_db()
        for k in program.kernels:
            cfg = db.best(kernel_key(k, backend, target))
            if cfg and _fits(cfg, k, program, backend):
                out[k.name] = cfg
    except CacheError as exc:
        if str(path) not in _warned:
            _warned.add(str(path))
            log.warning("%s; running with default schedules", exc.message)
        return {}
    return out


_warned: set[str] = set()


def _fits(config: dict, kernel, program, backend: str) -> bool:
    """Whether a stored schedule is one the kernel's knobs allow: a record damaged on disk in a way SQLite does
    not notice (a flipped byte in a value), or left by another version, costs its kernel the tuned schedule,
    with a warning, not the call."""
    from ..backends import get, knobs_of
    from ..ir.schedule import check_value
    knobs = knobs_of(get(backend), kernel, program)
    bad = next((f"{k}={v!r}" for k, v in config.items() if k not in knobs or check_value(knobs[k], v)), None)
    if bad is not None:
        log.warning("the tuning database's schedule for kernel %s of %s (%s) is not one its knobs allow (%s); "
                    "using the default schedule (tune it again to replace the record)", kernel.name, program.name,
                    backend, bad)
    return bad is None

"""Content-addressed files under the cache directory, written atomically.

A writer puts the bytes in a temporary file in the same folder, flushes and fsyncs it, then renames it
over the final name. A crash mid-write leaves at most a stray temporary file, never an entry that loads
wrong; readers only ever see complete files.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from .config import cache_dir


def digest(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (sorted keys), used as a cache key."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def atomic_write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def entry(kind: str, key: str, suffix: str) -> Path:
    """Path of the cache entry `key` of `kind` (a subfolder per backend or tool)."""
    return cache_dir(kind) / f"{key}{suffix}"


def write_once(path: Path, data: bytes | str) -> bool:
    """Write `path` atomically unless an identical entry exists; keeps the mtime of an existing one
    (numba's own cache keys on the source file's mtime). Returns True when it wrote."""
    raw = data.encode() if isinstance(data, str) else data
    if path.exists() and path.read_bytes() == raw:
        return False
    atomic_write(path, raw)
    return True

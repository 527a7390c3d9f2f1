"""Content-addressed files under the cache directory: written atomically, sealed, and checked on every load.

A writer puts the bytes in a temporary file in the same folder, flushes and fsyncs it, then renames it over the
final name. A crash mid-write leaves at most a stray temporary file, never an entry that loads wrong.

Sealed entries end with a 48-byte trailer: a tag and the SHA-256 of everything before it. The trailer lets an
entry keep its own format for the programs that read it in place (a shared library for the dynamic loader, a
precompiled header for g++: both ignore bytes after their content), while xbench checks it before any use:
`load(path)` returns the content of a sound entry and None for a missing or damaged one, which it removes so the
caller rebuilds it; `verify(path)` does the same for a file read in place. A truncated, torn or bit-flipped
entry is therefore rebuilt, never loaded. Builders that several processes may run at once take `lock(path)`.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from .config import cache_dir, log
from .errors import CacheError

TAG = b"\x00xbench-seal-1\x00\x00"             # 16 bytes
TRAILER = len(TAG) + 32
_verified: dict[str, tuple] = {}               # path -> (path, inode, size, mtime) when found sound in this process


def digest(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (sorted keys), used as a cache key."""
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def storage_error(exc: OSError, path: Path | str, doing: str = "write") -> CacheError:
    """A clear error for an OSError met while writing or reading `path`."""
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        hint = ("free some space, or point XBENCH_CACHE_DIR at a folder on another disk "
                "(`python -m xbench cache --clear` empties the cache)")
    elif exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = "make the folder writable, or point XBENCH_CACHE_DIR at a writable folder"
    elif exc.errno in (errno.ENOTDIR, errno.EEXIST):
        hint = "a file stands where a folder should be: move it, or point XBENCH_CACHE_DIR elsewhere"
    else:
        hint = "point XBENCH_CACHE_DIR at a writable folder"
    err = CacheError(f"cannot {doing} {path}: {why}", hint=hint)
    err.errno, err.strerror, err.filename = exc.errno, why, str(path)
    return err


def atomic_write(path: Path, data: bytes | str) -> None:
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise storage_error(exc, path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise storage_error(exc, path) from None
        raise


def entry(kind: str, key: str, suffix: str) -> Path:
    """Path of the cache entry `key` of `kind` (a subfolder per backend or tool)."""
    return cache_dir(kind) / f"{key}{suffix}"


def write_once(path: Path, data: bytes | str) -> bool:
    """Write `path` atomically unless an identical entry exists (an entry whose bytes differ, such as a torn or
    edited one, is replaced); keeps the mtime of an existing one (numba's own cache keys on the source file's
    mtime). Returns True when it wrote."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        if path.read_bytes() == raw:
            return False
    except OSError:
        pass
    atomic_write(path, raw)
    return True


# ---- sealed entries --------------------------------------------------------------------------------------

def seal(data: bytes) -> bytes:
    """`data` followed by its trailer."""
    return data + TAG + hashlib.sha256(data).digest()


def unseal(raw: bytes) -> bytes | None:
    """The content of a sealed blob, or None when it is not one or its checksum disagrees."""
    if len(raw) < TRAILER or raw[-TRAILER:-32] != TAG:
        return None
    body = raw[:-TRAILER]
    return body if hashlib.sha256(body).digest() == raw[-32:] else None


def discard(path: Path, why: str) -> None:
    """Remove a damaged entry so that it is rebuilt (where it cannot be removed, it is rebuilt anyway)."""
    log.warning("cache entry %s is damaged (%s); rebuilding it", path, why)
    with contextlib.suppress(OSError):
        os.unlink(path)
    _verified.pop(str(path), None)


def store(path: Path, data: bytes | str) -> None:
    """Write a sealed entry atomically."""
    atomic_write(path, seal(data.encode() if isinstance(data, str) else data))


def load(path: Path) -> bytes | None:
    """The content of the sealed entry at `path`; None when it is missing or damaged (then it is removed)."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read cache entry %s (%s); rebuilding it", path, exc.strerror or exc)
        return None
    body = unseal(raw)
    if body is None:
        discard(Path(path), "no valid checksum" if len(raw) >= TRAILER else f"truncated to {len(raw)} bytes")
    return body


def load_text(path: Path) -> str | None:
    body = load(path)
    if body is None:
        return None
    try:
        return body.decode()
    except UnicodeDecodeError:
        discard(Path(path), "not text")
        return None


def load_json(path: Path) -> Any | None:
    text = load_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        discard(Path(path), "not JSON")
        return None


def store_json(path: Path, value: Any) -> None:
    store(path, json.dumps(value))


def install(tmp: Path | str, path: Path) -> None:
    """Seal a file a tool wrote at `tmp` (in the entry's folder) and rename it into place as `path`."""
    try:
        with open(tmp, "r+b") as f:
            h = hashlib.sha256()
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
            f.write(TAG + h.digest())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise storage_error(exc, path) from None


def verify(path: Path) -> bool:
    """Whether `path` is a sound sealed file, to be read in place by another program (a shared library before
    it is loaded, a precompiled header before g++ reads it). A damaged or unsealed file is removed and False
    returned: the caller rebuilds it. A file already found sound in this process is not read again unless it
    changed."""
    path = Path(path)
    try:
        st = path.stat()
    except OSError:
        return False
    stamp = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if _verified.get(str(path)) == stamp:
        return True
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            body = st.st_size - TRAILER
            if body < 0:
                discard(path, f"truncated to {st.st_size} bytes")
                return False
            left = body
            while left:
                block = f.read(min(left, 1 << 20))
                if not block:
                    break
                h.update(block)
                left -= len(block)
            trailer = f.read(TRAILER)
    except OSError as exc:
        log.warning("cannot read cache entry %s (%s); rebuilding it", path, exc.strerror or exc)
        return False
    if left or trailer[:-32] != TAG or trailer[-32:] != h.digest():
        discard(path, "no valid checksum")
        return False
    _verified[str(path)] = stamp
    return True


@contextlib.contextmanager
def lock(path: Path):
    """An exclusive lock on the entry `path` across processes (a `.lock` file beside it, released when the
    holder exits, even when it is killed), so that concurrent builders build it once. Where no lock file can
    be made (a read-only folder), builders go on unlocked: their entries are written atomically anyway."""
    import fcntl
    try:
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# ---- generated Python modules ----------------------------------------------------------------------------

class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the module from its source every time: no bytecode file is read or written for it (nothing
    checks one; a damaged .pyc beside a generated module would fail every later import)."""

    def get_code(self, fullname):
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)

    def set_data(self, path, data, *, _mode=0o666):  # never write __pycache__/*.pyc
        return None


def import_source(name: str, path: Path):
    """Import the generated module at `path` (a cache entry written by `write_once`) as `name`."""
    loader = _SourceOnlyLoader(name, str(path))
    spec = importlib.util.spec_from_file_location(name, str(path), loader=loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module

"""Process-wide settings: where caches live, logging, tool versions that key the caches."""
from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import os
import platform
import shutil
import tempfile
import warnings
from pathlib import Path

from .errors import CacheError, CacheWarning

log = logging.getLogger("xbench")


def configured_cache_root() -> Path:
    """`$XBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/xbench`, else `~/.cache/xbench`."""
    root = os.environ.get("XBENCH_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "xbench")
    return Path(root)


_roots: dict[Path, Path] = {}          # configured root -> the root in use (itself, or this session's stand-in)


def _unusable(root: Path) -> str | None:
    """Why `root` cannot hold the cache (it is a file, cannot be created or written, has no space), or None."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        return "a file stands where the folder should be"
    except OSError as exc:
        return f"it cannot be created: {exc.strerror or exc}"
    if not root.is_dir():
        return "it is not a folder"
    try:
        fd, probe = tempfile.mkstemp(dir=root, prefix=".xbench-probe-")
    except OSError as exc:
        return f"it cannot be written: {exc.strerror or exc}"
    try:
        if os.write(fd, b"\0" * 4096) < 4096:  # a full disk refuses data, not an empty file
            return "it has no room for a 4 KiB file"
    except OSError as exc:
        return f"it cannot be written: {exc.strerror or exc}"
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
    return None


LOW_SPACE = 64 << 20                   # a cache folder with less free space is passed over for one with more


def _free(path: Path) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def cache_root() -> Path:
    """The cache's root folder. When the configured one is unusable, this session compiles into a temporary
    folder instead (removed at exit; child processes use it too), with a warning saying why and what to do."""
    root = configured_cache_root()
    used = _roots.get(root)
    if used is not None:
        return used
    why = _unusable(root)
    if why is None and _free(root) >= LOW_SPACE:
        _roots[root] = root
        return root
    if why is None and _free(Path(tempfile.gettempdir())) < LOW_SPACE:
        _roots[root] = root                # nowhere better: writes that do not fit fail with CacheErrors
        return root
    why = why or f"only {_free(root) >> 20} MiB free"
    try:
        stand_in = Path(tempfile.mkdtemp(prefix="xbench-cache-"))
    except OSError as exc:
        stand_in, why2 = None, f"{exc.strerror or exc}"
    else:
        why2 = _unusable(stand_in)
    if why2 is not None:
        if stand_in is not None:
            shutil.rmtree(stand_in, ignore_errors=True)
        raise CacheError(f"the cache directory {root} is not usable ({why}), nor is a temporary folder "
                         f"({why2})", hint="point XBENCH_CACHE_DIR at a writable folder with free space")
    atexit.register(shutil.rmtree, stand_in, True)
    from .errors import user_location
    loc = user_location()
    warnings.warn_explicit(
        f"xbench: the cache directory {root} is not usable ({why}); this session compiles into {stand_in} "
        "instead, removed at exit. Point XBENCH_CACHE_DIR at a writable folder with free space to keep "
        "compiled code between sessions.", CacheWarning, loc.filename if loc else "xbench", loc.lineno if loc else 0)
    log.debug("cache: %s unusable (%s); using %s", root, why, stand_in)
    os.environ["XBENCH_CACHE_DIR"] = str(stand_in)
    _roots[root] = _roots[stand_in] = stand_in
    return stand_in


def cache_dir(*parts: str) -> Path:
    """A folder of the cache (created on use): `cache_root() / parts`."""
    path = Path(cache_root(), *parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        from .cache import storage_error
        raise storage_error(exc, path, "create") from None
    return path


def set_log_level(level: int | str) -> None:
    """Show xbench's log (recompilations, cache hits, tool calls) at `level` on stderr."""
    if isinstance(level, str):
        level = logging.getLevelName(level.upper())
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("xbench %(levelname)s: %(message)s"))
        log.addHandler(handler)
    log.setLevel(level)


@functools.cache
def tool_versions() -> dict[str, str]:
    """Versions that change generated code or its meaning; part of every compile-cache key."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "machine": platform.machine()}
    for pkg in ("xbench", "numpy", "numba", "llvmlite"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = "none"
    return out


@contextlib.contextmanager
def environ(values: dict[str, str]):
    """Environment variables set to `values` for the block, then as they were."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (progress then shows as a widget)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})

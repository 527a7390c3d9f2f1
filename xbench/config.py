"""Process-wide settings: where caches live, logging, tool versions that key the caches."""
from __future__ import annotations

import functools
import logging
import os
import platform
from pathlib import Path

log = logging.getLogger("xbench")


def cache_dir(*parts: str) -> Path:
    """`$XBENCH_CACHE_DIR`, else `$XDG_CACHE_HOME/xbench`, else `~/.cache/xbench` (created on use)."""
    root = os.environ.get("XBENCH_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "xbench")
    path = Path(root, *parts)
    path.mkdir(parents=True, exist_ok=True)
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

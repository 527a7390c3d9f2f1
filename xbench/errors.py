"""Errors for people: each names the user's own source line and says what to write instead."""
from __future__ import annotations

import contextlib
import linecache
import os
import sys
import threading
from dataclasses import dataclass
from types import FrameType

import numpy as np

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# frames skipped on the way out to the user's line: xbench's own, and numpy's (a numpy function given a traced
# tensor fails inside numpy, called from the user's line)
_SKIP = (_PKG_DIR, os.path.dirname(os.path.abspath(np.__file__)) + os.sep)


@dataclass(frozen=True)
class Location:
    filename: str
    lineno: int
    function: str = ""

    @property
    def line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}"


_where = threading.local()


@contextlib.contextmanager
def located(loc: Location | None):
    """Within the block, `user_location()` is `loc`: a front end tracing code it did not run as Python (the torch
    bridge, walking a captured graph) tags what it records with the user's own line."""
    before = getattr(_where, "loc", None)
    _where.loc = loc
    try:
        yield
    finally:
        _where.loc = before


def user_location(skip: int = 0) -> Location | None:
    """The innermost stack frame outside the xbench package (and numpy): the user's line (or a library
    operator's)."""
    fixed = getattr(_where, "loc", None)
    if fixed is not None:
        return fixed
    frame: FrameType | None = sys._getframe(1 + skip)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename) if not frame.f_code.co_filename.startswith("<") \
            else frame.f_code.co_filename
        if not filename.startswith(_SKIP) and "importlib" not in filename:
            return Location(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        frame = frame.f_back
    return None


class XbenchError(Exception):
    """Base of every error xbench raises for a user mistake or a missing tool."""

    def __init__(self, message: str, *, hint: str | None = None, loc: Location | None = None):
        self.message = message
        self.hint = hint
        self.loc = loc
        super().__init__(self._format())

    def _format(self) -> str:
        out = f"xbench: {self.message}"
        if self.loc is not None:
            out += f"\n  --> {self.loc}"
            line = self.loc.line
            if line:
                out += f":  {line}"
        if self.hint:
            out += f"\n  hint: {self.hint}"
        return out

    def with_loc(self, loc: Location | None) -> XbenchError:
        if self.loc is None and loc is not None:
            self.loc = loc
            self.args = (self._format(),)
        return self


class ShapeError(XbenchError, ValueError):
    """Shapes or dims do not agree."""


class DTypeError(XbenchError, TypeError):
    """An element type is wrong or unsupported."""


class TraceError(XbenchError, TypeError):
    """Something in an operator body cannot be traced (data-dependent control flow, unsupported construct)."""


class ArgumentError(XbenchError, TypeError):
    """An operator was called with the wrong arguments."""


class BackendError(XbenchError, RuntimeError):
    """A backend cannot compile or run (missing tool, unsupported schedule, device limit)."""


class SimulatorLimitError(BackendError):
    """A simulated run refused before it started, as estimated past the simulator's time limit: nothing ran, so
    nothing was judged right or wrong."""


class VerificationError(XbenchError, AssertionError):
    """A backend's result differs from the reference beyond tolerance."""


class ScheduleError(XbenchError, ValueError):
    """A schedule names a knob a kernel does not have, or a value none of its choices allows."""


class CacheError(XbenchError, OSError):
    """A cache file cannot be written or read (full disk, read-only folder, a file where a folder should be)."""

    def __str__(self) -> str:                  # the message for people, not OSError's "[Errno 28] ..."
        return self._format()


class CacheWarning(UserWarning):
    """The cache directory is not usable, so this session compiles into a temporary one."""

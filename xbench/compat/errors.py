"""Why a kernel cannot be lifted: a `LiftError` names the construct and the kernel's own line."""
from __future__ import annotations

from ..errors import TraceError, VerificationError


class LiftError(TraceError):
    """A kernel uses something xbench does not lift (or would lift wrongly): the construct, the line, the way out."""

    def __init__(self, message: str, line: int = 0, kernel=None, *, construct: str = "", hint: str | None = None,
                 name: str | None = None):
        self.construct = construct
        self.kernel_line = kernel.lineno(line) if kernel is not None and line else None
        loc = kernel.location(line) if kernel is not None and line else None
        name = name or (kernel.name if kernel is not None else "")
        super().__init__(f"cannot lift {name}: {message}" if name else f"cannot lift: {message}", hint=hint, loc=loc)


class LiftMismatch(VerificationError):
    """The lifted operator disagrees with the original kernel on the same inputs."""


class NotSymbolic(Exception):
    """A loop cannot be interpreted once for all its iterations (the interpreter unrolls it instead)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

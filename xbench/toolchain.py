"""External tools (g++, ptxas, ...): every call runs under a time limit and fails with an error that names the
tool, what it was doing and the way out.

A call runs in a process group of its own, so a hung compiler and the processes it started (cc1plus, as, ld)
are killed together when the limit passes; the tool dies with the process that started it (a session killed
with SIGKILL leaves no compiler running). The limit is `$XBENCH_TOOL_TIMEOUT` seconds (default 180: generated
kernels build in seconds) for work such as a compile, and at most 30 s for a quick question such as `--version`.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from .errors import BackendError

DEFAULT_TIMEOUT_S = 180.0
PROBE_TIMEOUT_S = 30.0


class ToolError(BackendError):
    """An external tool could not be started, failed, or did not finish in time."""

    def __init__(self, message: str, *, tool: str, hint: str | None = None, output: str = "",
                 returncode: int | None = None):
        self.tool = tool
        self.output = output
        self.returncode = returncode
        super().__init__(message, hint=hint)


class ToolTimeout(ToolError):
    """An external tool did not finish within its time limit."""


def timeout_s(probe: bool = False) -> float:
    """The time limit of a tool call: `$XBENCH_TOOL_TIMEOUT` (seconds), default 180; a probe gets at most 30 s."""
    raw = os.environ.get("XBENCH_TOOL_TIMEOUT", "")
    try:
        limit = float(raw) if raw.strip() else DEFAULT_TIMEOUT_S
    except ValueError:
        raise BackendError(f"XBENCH_TOOL_TIMEOUT={raw!r} is not a number of seconds",
                           hint="set it to a number, e.g. XBENCH_TOOL_TIMEOUT=300, or unset it") from None
    if limit <= 0:
        raise BackendError(f"XBENCH_TOOL_TIMEOUT={raw!r} must be positive", hint="e.g. XBENCH_TOOL_TIMEOUT=300")
    return min(limit, PROBE_TIMEOUT_S) if probe else limit


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def run(cmd: Sequence[str], *, tool: str, what: str, timeout: float | None = None, probe: bool = False,
        env: dict | None = None, input: str | None = None, hint: str | None = None) -> subprocess.CompletedProcess:
    """Run `cmd` (text output captured) within its time limit; its exit status is the caller's to judge.

    Raises ToolError when it cannot be started and ToolTimeout when it overruns (after killing it and every
    process it started)."""
    limit = timeout_s(probe) if timeout is None else timeout
    try:
        proc = subprocess.Popen(list(cmd), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True, preexec_fn=_die_with_parent)
    except OSError as exc:
        raise ToolError(f"{tool} cannot be started for {what} ({cmd[0]}): {exc.strerror or exc}", tool=tool,
                        hint=hint or f"check that {cmd[0]} is an executable {tool}") from None
    try:
        out, err = proc.communicate(input, timeout=limit)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = _drain(proc)
        raise ToolTimeout(
            f"{tool} did not finish {what} within {limit:g} s and was stopped ({cmd[0]})", tool=tool,
            output=(err or "") + (out or ""),
            hint=hint or f"run the same command in a terminal to see where {tool} stops; if it is only slow "
                         f"here, raise the limit: XBENCH_TOOL_TIMEOUT=<seconds> (now {limit:g})") from None
    except BaseException:
        _kill_group(proc)
        _drain(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def version(path: str, *, tool: str, hint: str | None = None, whole: bool = False) -> str:
    """The first line `path --version` prints (`whole`: all it prints); ToolError when it fails or hangs."""
    proc = run([path, "--version"], tool=tool, what="`--version`", probe=True, hint=hint)
    text = (proc.stdout or "") + (proc.stderr or "")
    if proc.returncode != 0:
        shown = f":\n{_tail(text, 6)}" if text.strip() else " and printed nothing"
        raise ToolError(f"{tool} at {path} failed `--version` (exit {proc.returncode}){shown}", tool=tool,
                        output=text, returncode=proc.returncode,
                        hint=hint or f"{path} is not a working {tool}: reinstall it or put a working one first "
                                     "on PATH")
    if whole:
        return text
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first or path


def _die_with_parent() -> None:
    """In the tool's process, before it starts: be killed when the process that started it dies (even by
    SIGKILL), so a killed session leaves no compiler running on (Linux; elsewhere nothing)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _drain(proc: subprocess.Popen) -> tuple[str, str]:
    """What a killed tool printed (not waiting on a descendant that left the group and still holds its pipes)."""
    try:
        return proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        for f in (proc.stdout, proc.stderr, proc.stdin):
            with contextlib.suppress(Exception):
                if f:
                    f.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        return "", ""

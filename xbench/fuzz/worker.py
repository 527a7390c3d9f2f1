"""Backends run in a child process, so that a crash (SIGSEGV, SIGFPE) or a hang is a finding, not the end of
the run. The parent sends (source, constants, arrays, backend) over a pipe and reads the outputs back; when
the child dies or passes its time limit it is started again.

Run as `python -m xbench.fuzz.worker`: it reads length-prefixed pickles on stdin and writes them on the file
descriptor it was given (its stdout, moved aside so that anything printed goes to stderr).
"""
from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass

import numpy as np


@dataclass
class Outcome:
    """What one backend did: `kind` is ok, error (an exception), unsupported (a BackendError saying the
    backend cannot do it), crash (the process died) or hang (over the time limit)."""
    kind: str
    outputs: list | None = None
    error: str = ""
    detail: str = ""
    seconds: float = 0.0


def _frame(obj) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return struct.pack("<Q", len(data)) + data


def _read(fd: int, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return bytes(out)


class Worker:
    """A child process running backends; `run` returns an Outcome and restarts the child after a crash."""

    def __init__(self, cache_dir: str | None = None, nice: int = 0, env: dict | None = None):
        self.cache_dir = cache_dir
        self.nice = nice
        self.extra_env = env or {}
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        fd, self._log_path = tempfile.mkstemp(prefix="xbench-fuzz-worker-", suffix=".log")
        self._log = os.fdopen(fd, "w+b")

    def _start(self) -> None:
        env = dict(os.environ)
        if self.cache_dir:
            env["XBENCH_CACHE_DIR"] = self.cache_dir
        env.update(self.extra_env)
        self._log.seek(0)
        self._log.truncate()
        self.proc = subprocess.Popen([sys.executable, "-m", "xbench.fuzz.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, env=env,
                                     start_new_session=True,
                                     preexec_fn=(lambda: os.nice(self.nice)) if self.nice else None)
        self.starts += 1

    def _stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write(_frame(None))
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self._stop()
        self._log.close()
        with contextlib.suppress(OSError):
            os.unlink(self._log_path)

    def _tail(self) -> str:
        try:
            with open(self._log_path, "rb") as f:
                f.seek(0, 2)
                f.seek(max(0, f.tell() - 3000))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def run(self, source: str, consts: dict, arrays: list[np.ndarray], backend: str, timeout: float,
            options: dict | None = None, name: str = "fuzz_op") -> Outcome:
        """Compile the operator `name` that `source` defines (with `consts` in its globals) for `backend` and
        run it on `arrays`."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        t0 = time.perf_counter()
        try:
            self.proc.stdin.write(_frame((source, name, consts, arrays, backend, options or {})))
            self.proc.stdin.flush()
            fd = self.proc.stdout.fileno()
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                self._stop()
                return Outcome("hang", error=f"no answer in {timeout:.0f} s", seconds=time.perf_counter() - t0)
            (n,) = struct.unpack("<Q", _read(fd, 8))
            kind, payload, error, detail = pickle.loads(_read(fd, n))
        except (EOFError, BrokenPipeError, OSError):
            code = self.proc.wait()
            name = signal.Signals(-code).name if code < 0 else f"exit status {code}"
            tail = self._tail()
            self.proc = None
            return Outcome("crash", error=f"the process died ({name})", detail=tail,
                           seconds=time.perf_counter() - t0)
        return Outcome(kind, payload, error, detail, time.perf_counter() - t0)


# ---- the child ------------------------------------------------------------------------------------------

def _serve(inp, out_fd: int) -> None:
    from ..errors import BackendError
    ops: dict[str, object] = {}
    while True:
        try:
            (n,) = struct.unpack("<Q", inp.read(8))
        except struct.error:
            return
        msg = pickle.loads(inp.read(n))
        if msg is None:
            return
        source, name, consts, arrays, backend, options = msg
        try:
            key = source + repr(sorted(consts))
            op = ops.get(key)
            if op is None:
                ns = dict(consts)
                exec(compile(source, f"<{name}>", "exec"), ns)
                op = ns[name]
                ops.clear()
                ops[key] = op
            art = op.compile(backend, *arrays, **options)
            outs = [np.array(o, copy=True) for o in art.run(*arrays)]
            reply = ("ok", outs, "", "")
        except BackendError as exc:
            reply = ("unsupported" if _unsupported(exc) else "error", None, f"{type(exc).__name__}: {exc}",
                     traceback.format_exc(limit=12))
        except Exception as exc:                                   # any other exception is a finding
            reply = ("error", None, f"{type(exc).__name__}: {exc}", traceback.format_exc(limit=12))
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        os.write(out_fd, struct.pack("<Q", len(data)))
        view = memoryview(data)
        while view:
            k = os.write(out_fd, view)
            view = view[k:]


UNSUPPORTED = ("has no spelling", "does not take", "not supported", "is not available", "bytes of UB",
               "bytes of L1", "bytes of L0", "would take about")


def _unsupported(exc) -> bool:
    """A backend saying plainly that it cannot do this (a limit it documents), as opposed to failing."""
    if type(exc).__name__ == "TwinError":             # a hardware rule broken by generated code: a bug
        return False
    if type(exc).__name__ == "Unsupported":           # the ascend backend's own "no form for this (yet)"
        return not exc.message.startswith("internal")
    return any(s in exc.message for s in UNSUPPORTED)


def main() -> None:
    out_fd = os.dup(1)
    os.dup2(2, 1)                       # prints of generated code or libraries must not corrupt the channel
    _serve(sys.stdin.buffer, out_fd)


if __name__ == "__main__":
    main()

"""Chaining asynchronous collectives without blocking, in the same order on every rank.

A communication hook runs several collectives per bucket (reduce-scatter, then AllReduce of the shards, then
all-gather). Waiting for each would block the backward pass; instead each stage is started from the
completion callback of the one before (`then`). Two rules keep that correct:

- stage k of every bucket runs on a process group of its own, so the collectives the autograd thread starts
  for new buckets never interleave with those the callbacks start;
- callbacks fire in whatever order the buckets finish on each rank, but collectives on one group must be
  issued in the same order everywhere: `OrderedIssuer` starts stage k of bucket i only after it has started
  stage k of bucket i-1, whatever order the callbacks arrive in.

Nothing here calls `wait()`: the hook's future is completed by the last stage's callback.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import torch


def completed(value: Any) -> torch.futures.Future:
    fut: torch.futures.Future = torch.futures.Future()
    fut.set_result(value)
    return fut


def work_future(work: Any) -> torch.futures.Future:
    """The future of an async collective's Work (None -> an already completed future)."""
    return completed(None) if work is None else work.get_future()


class OrderedIssuer:
    """Starts thunks in ticket order: `ticket()` on the issuing thread (in bucket order), then
    `submit(ticket, thunk)` from any thread; `thunk()` returns a future, and `submit` returns a future that
    completes with that future's value."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._next_ticket = 0
        self._next_start = 0
        self._ready: dict[int, tuple[Callable[[], torch.futures.Future], torch.futures.Future]] = {}

    def ticket(self) -> int:
        with self._lock:
            t = self._next_ticket
            self._next_ticket += 1
            return t

    def submit(self, ticket: int, thunk: Callable[[], torch.futures.Future]) -> torch.futures.Future:
        out: torch.futures.Future = torch.futures.Future()
        to_start = []
        with self._lock:
            self._ready[ticket] = (thunk, out)
            while self._next_start in self._ready:
                to_start.append(self._ready.pop(self._next_start))
                self._next_start += 1
            # start under the lock: two threads must not interleave their issue order
            for th, o in to_start:
                _start(th, o)
        return out


def _start(thunk: Callable[[], torch.futures.Future], out: torch.futures.Future) -> None:
    try:
        fut = thunk()
    except BaseException as exc:  # the error travels to whoever waits on the hook's future
        out.set_exception(exc)
        return
    forward(fut, out)


def forward(src: torch.futures.Future, dst: torch.futures.Future,
            fn: Callable[[Any], Any] | None = None) -> None:
    """When `src` completes, complete `dst` with fn(src.value()) (or the error)."""
    def done(f: torch.futures.Future) -> None:
        try:
            v = f.value()
            dst.set_result(fn(v) if fn is not None else v)
        except BaseException as exc:
            dst.set_exception(exc)
    src.add_done_callback(done)


def then(fut: torch.futures.Future, fn: Callable[[Any], torch.futures.Future | Any]) -> torch.futures.Future:
    """A future of fn(fut.value()); when fn returns a future, of that future's value (flattened)."""
    out: torch.futures.Future = torch.futures.Future()

    def done(f: torch.futures.Future) -> None:
        try:
            r = fn(f.value())
        except BaseException as exc:
            out.set_exception(exc)
            return
        if isinstance(r, torch.futures.Future):
            forward(r, out)
        else:
            out.set_result(r)
    fut.add_done_callback(done)
    return out

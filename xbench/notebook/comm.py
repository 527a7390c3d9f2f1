"""The comms that carry the operator registry of this kernel to the JupyterLab sidebar (`@xbench/lab`).

Protocol (all messages are JSON objects with a "type"):

Kernel -> frontend, on a comm of target ``xbench.registry`` that the kernel opens. It is opened by
`register()` (with a snapshot as its comm_open data) and opened again, with a fresh snapshot, by the next
change after a frontend closed it. Every frontend that registered the target receives it::

    {"type": "snapshot", "operators": [record, ...]}
    {"type": "update", "operator": record}
    {"type": "remove", "name": "softmax"}

Records are sent without their source text: ``sources`` is replaced by ``source_kinds``, the list of
kinds (``cpu``, ``cuda``, ``ptx``, ``ascend``) the frontend may ask for (see `registry.wire_form`).

Frontend -> kernel, on a comm of target ``xbench.control`` that the frontend opens (the data of its
comm_open is treated as the first request). Answers go back on the same comm, so only the asking
frontend receives them::

    {"type": "request_snapshot"}                            -> {"type": "snapshot", "operators": [...]}
    {"type": "request_source", "name": ..., "backend": ...} -> {"type": "source", "name": ..., "backend": ...,
                                                                "text": "..."}
    anything it cannot answer                              -> {"type": "error", "name": ... or None,
                                                                "backend": ... or None, "message": "..."}

A frontend that loads (or reloads) a page opens ``xbench.control`` and asks for a snapshot, and attaches to
an already open ``xbench.registry`` comm found through a ``comm_info_request``. If the kernel has not
loaded xbench, its comm manager refuses ``xbench.control`` with a comm_close, which the sidebar reports.
"""
from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..config import log
from .registry import Registry, registry

REGISTRY_TARGET = "xbench.registry"
CONTROL_TARGET = "xbench.control"


def _error(message: str, name: Any = None, backend: Any = None) -> dict[str, Any]:
    return {
        "type": "error",
        "name": name if isinstance(name, str) else None,
        "backend": backend if isinstance(backend, str) else None,
        "message": message,
    }


def answer(reg: Registry, request: Any) -> dict[str, Any]:
    """The reply to one frontend request on ``xbench.control``."""
    if not isinstance(request, dict) or not isinstance(request.get("type"), str):
        return _error(f"{CONTROL_TARGET}: a request is {{'type': 'request_snapshot'}} or "
                      f"{{'type': 'request_source', 'name': ..., 'backend': ...}}, got {request!r}")
    kind = request["type"]
    if kind == "request_snapshot":
        return reg.snapshot_message()
    if kind == "request_source":
        name, backend = request.get("name"), request.get("backend")
        if not isinstance(name, str) or not isinstance(backend, str):
            return _error("request_source needs string fields 'name' and 'backend'", name, backend)
        try:
            text = reg.source(name, backend)
        except KeyError as e:
            return _error(e.args[0], name, backend)
        return {"type": "source", "name": name, "backend": backend, "text": text}
    return _error(f"{CONTROL_TARGET}: unknown request type {kind!r}; "
                  "use 'request_snapshot' or 'request_source'")


class KernelChannel:
    """Connects a `Registry` to the frontends of one kernel: owns the ``xbench.registry`` comm and answers
    ``xbench.control`` requests. `create_comm` and `manager` default to the `comm` package's (which
    ipykernel sets up); tests pass their own."""

    def __init__(self, reg: Registry, manager: Any, create_comm: Callable[..., Any]) -> None:
        self.registry = reg
        self._manager = manager
        self._create_comm = create_comm
        self._broadcast: Any = None
        self._controls: set[Any] = set()
        self._lock = threading.RLock()
        self._open = False

    def open(self) -> None:
        """Register the control target, open the registry comm (with a snapshot) and start forwarding
        registry changes. Calling it again does nothing."""
        with self._lock:
            if self._open:
                return
            self._open = True
            self._manager.register_target(CONTROL_TARGET, self._on_control_open)
            self._open_broadcast()
            self.registry.attach(self)

    def close(self) -> None:
        """Stop forwarding, close every comm and unregister the control target."""
        with self._lock:
            if not self._open:
                return
            self._open = False
            self.registry.detach(self)
            if getattr(self._manager, "targets", {}).get(CONTROL_TARGET) == self._on_control_open:
                self._manager.unregister_target(CONTROL_TARGET, self._on_control_open)
            comms = [self._broadcast, *self._controls]
            self._broadcast = None
            self._controls.clear()
        for c in comms:
            if c is not None:
                c.close()

    @property
    def broadcast_comm(self) -> Any:
        return self._broadcast

    def send(self, message: dict[str, Any]) -> None:
        """Registry sink: push `message` on the registry comm, re-opening it (with a snapshot that
        already holds the change) if a frontend closed it."""
        with self._lock:
            if not self._open:
                return
            if self._broadcast is None:
                self._open_broadcast()
                return
            self._broadcast.send(message)

    def _open_broadcast(self) -> None:
        c = self._create_comm(target_name=REGISTRY_TARGET, data=self.registry.snapshot_message())
        self._broadcast = c
        c.on_close(lambda msg, c=c: self._on_broadcast_close(c))

    def _on_broadcast_close(self, c: Any) -> None:
        with self._lock:
            if self._broadcast is c:
                self._broadcast = None

    def _on_control_open(self, c: Any, open_msg: dict[str, Any]) -> None:
        with self._lock:
            self._controls.add(c)
        c.on_msg(lambda msg, c=c: self._reply(c, msg["content"]["data"]))
        c.on_close(lambda msg, c=c: self._controls.discard(c))
        data = open_msg.get("content", {}).get("data")
        if data:
            self._reply(c, data)

    def _reply(self, c: Any, request: Any) -> None:
        reply = answer(self.registry, request)
        if reply["type"] == "error":
            log.warning("xbench: %s", reply["message"])
        c.send(reply)


_channels: weakref.WeakKeyDictionary[Any, KernelChannel] = weakref.WeakKeyDictionary()


def register(ipython: Any = None, reg: Registry | None = None) -> KernelChannel | None:
    """Connect this kernel's registry to its frontends (`%load_ext xbench` calls this). Idempotent per
    kernel; returns None outside a Jupyter kernel (plain IPython has no frontend to talk to)."""
    if ipython is None:
        from IPython import get_ipython

        ipython = get_ipython()
    kernel = getattr(ipython, "kernel", None)
    if kernel is None:
        return None
    channel = _channels.get(kernel)
    if channel is None:
        import comm

        channel = KernelChannel(reg or registry(), comm.get_comm_manager(), comm.create_comm)
        _channels[kernel] = channel
    channel.open()
    return channel


def unregister(ipython: Any = None) -> None:
    """Undo `register` (`%unload_ext xbench`)."""
    if ipython is None:
        from IPython import get_ipython

        ipython = get_ipython()
    kernel = getattr(ipython, "kernel", None)
    channel = _channels.pop(kernel, None) if kernel is not None else None
    if channel is not None:
        channel.close()

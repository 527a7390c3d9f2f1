"""The kernel side of the sidebar protocol, driven through the `comm` package's real CommManager with
comms that record what they would publish on IOPub."""
from __future__ import annotations

import copy
import types
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm, CommManager

from xbench.notebook import comm as xcomm
from xbench.notebook.registry import Registry

from .records import ASCEND_SOURCE, softmax


class RecordingComm(BaseComm):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.published: list[tuple[str, Any]] = []
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None,
                    **keys: Any) -> None:
        self.published.append((msg_type, copy.deepcopy(data)))


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> CommManager:
    mgr = CommManager()
    monkeypatch.setattr(comm, "get_comm_manager", lambda: mgr)
    monkeypatch.setattr(comm, "create_comm", RecordingComm)
    return mgr


@pytest.fixture
def channel(manager: CommManager) -> xcomm.KernelChannel:
    reg = Registry()
    reg.publish(softmax())
    ch = xcomm.KernelChannel(reg, manager, RecordingComm)
    ch.open()
    yield ch
    ch.close()


def frontend_opens_control(manager: CommManager, data: Any, comm_id: str = "control-1") -> RecordingComm:
    manager.comm_open(None, None, {"content": {"comm_id": comm_id, "target_name": xcomm.CONTROL_TARGET,
                                               "data": data}})
    return manager.comms[comm_id]


def frontend_sends(manager: CommManager, comm_id: str, data: Any) -> None:
    manager.comm_msg(None, None, {"content": {"comm_id": comm_id, "data": data}})


def frontend_closes(manager: CommManager, comm_id: str) -> None:
    manager.comm_close(None, None, {"content": {"comm_id": comm_id, "data": {}}})


def test_open_registers_control_and_opens_registry_comm_with_snapshot(channel, manager) -> None:
    assert xcomm.CONTROL_TARGET in manager.targets
    broadcast = channel.broadcast_comm
    assert broadcast.target_name == xcomm.REGISTRY_TARGET
    assert manager.comms[broadcast.comm_id] is broadcast  # listed for comm_info requests
    [(kind, data)] = broadcast.published
    assert kind == "comm_open"
    assert data["type"] == "snapshot"
    [op] = data["operators"]
    assert op["name"] == "softmax"
    assert op["source_kinds"] == ["cpu", "cuda", "ptx", "ascend"]
    assert "sources" not in op
    channel.open()  # idempotent
    assert channel.broadcast_comm is broadcast


def test_changes_are_pushed_on_the_registry_comm(channel) -> None:
    broadcast = channel.broadcast_comm
    channel.registry.publish(softmax(name="gelu"))
    channel.registry.remove("softmax")
    sent = [data for kind, data in broadcast.published if kind == "comm_msg"]
    assert [m["type"] for m in sent] == ["update", "remove"]
    assert sent[0]["operator"]["name"] == "gelu"
    assert sent[1] == {"type": "remove", "name": "softmax"}


def test_a_closed_registry_comm_is_reopened_with_a_fresh_snapshot(channel, manager) -> None:
    old = channel.broadcast_comm
    frontend_closes(manager, old.comm_id)
    assert channel.broadcast_comm is None
    channel.registry.publish(softmax(name="gelu"))
    new = channel.broadcast_comm
    assert new is not old
    [(kind, data)] = new.published
    assert kind == "comm_open"
    assert [op["name"] for op in data["operators"]] == ["softmax", "gelu"]
    assert [k for k, _ in old.published] == ["comm_open"]  # nothing more went to the closed comm


def test_control_answers_the_open_request_and_later_ones(channel, manager) -> None:
    control = frontend_opens_control(manager, {"type": "request_snapshot"})
    [(kind, reply)] = control.published
    assert kind == "comm_msg"
    assert reply == channel.registry.snapshot_message()

    frontend_sends(manager, "control-1", {"type": "request_source", "name": "softmax", "backend": "ascend"})
    assert control.published[-1][1] == {"type": "source", "name": "softmax", "backend": "ascend",
                                        "text": ASCEND_SOURCE}

    frontend_sends(manager, "control-1", {"type": "request_source", "name": "gelu", "backend": "cpu"})
    assert control.published[-1][1] == {
        "type": "error", "name": "gelu", "backend": "cpu",
        "message": "no operator named 'gelu' in this kernel (known: softmax)"}

    frontend_sends(manager, "control-1", {"type": "dance"})
    error = control.published[-1][1]
    assert error["type"] == "error"
    assert "unknown request type 'dance'" in error["message"]

    # updates are not duplicated on control comms
    before = len(control.published)
    channel.registry.publish(softmax(name="relu"))
    assert len(control.published) == before


def test_a_control_comm_without_a_request_stays_quiet(channel, manager) -> None:
    control = frontend_opens_control(manager, {})
    assert control.published == []
    assert not control._closed


def test_without_xbench_the_control_comm_is_refused(manager) -> None:
    # no channel opened: the comm manager closes the comm, which tells the frontend "not loaded"
    manager.comm_open(None, None, {"content": {"comm_id": "c9", "target_name": xcomm.CONTROL_TARGET,
                                               "data": {"type": "request_snapshot"}}})
    assert "c9" not in manager.comms


def test_close_closes_every_comm_and_unregisters(manager) -> None:
    ch = xcomm.KernelChannel(Registry(), manager, RecordingComm)
    ch.open()
    broadcast = ch.broadcast_comm
    control = frontend_opens_control(manager, {"type": "request_snapshot"})
    ch.close()
    assert xcomm.CONTROL_TARGET not in manager.targets
    assert broadcast.published[-1][0] == "comm_close"
    assert control.published[-1][0] == "comm_close"
    ch.registry.publish(softmax())
    assert broadcast.published[-1][0] == "comm_close"  # detached from the registry


class FakeKernel:
    pass


def test_register_is_idempotent_per_kernel_and_none_outside_a_kernel(manager) -> None:
    reg = Registry()
    shell = types.SimpleNamespace(kernel=FakeKernel())
    first = xcomm.register(shell, reg)
    assert xcomm.register(shell, reg) is first
    assert first.registry is reg
    assert first.broadcast_comm.published[0][0] == "comm_open"
    other = xcomm.register(types.SimpleNamespace(kernel=FakeKernel()), Registry())
    assert other is not first
    assert xcomm.register(types.SimpleNamespace(), reg) is None
    xcomm.unregister(shell)
    assert first.broadcast_comm is None
    other.close()

"""The protocol against a real IPython kernel: this test plays the JupyterLab frontend over ZMQ, so it
checks what the sidebar will see (message types, comm ids, replies) without a browser."""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from .records import ASCEND_SOURCE, SOFTMAX

TIMEOUT = 60.0


@pytest.fixture(scope="module")
def kernel() -> Iterator[Any]:
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=TIMEOUT)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def run(kc: Any, code: str) -> list[dict]:
    """Execute `code`, return the IOPub messages it caused; fail on an error."""
    msg_id = kc.execute(code)
    messages = []
    deadline = time.monotonic() + TIMEOUT
    while True:
        msg = kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "error":
            pytest.fail("kernel error:\n" + "\n".join(msg["content"]["traceback"]))
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return messages
        messages.append(msg)


def send_shell(kc: Any, msg_type: str, content: dict) -> str:
    msg = kc.session.msg(msg_type, content)
    kc.shell_channel.send(msg)
    return msg["header"]["msg_id"]


def wait_iopub(kc: Any, match: Callable[[dict], bool]) -> dict:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=max(deadline - time.monotonic(), 0.1))
        if match(msg):
            return msg
    pytest.fail("the kernel sent no matching message")


def comm_msg_on(comm_id: str) -> Callable[[dict], bool]:
    return lambda m: m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == comm_id


def test_registry_comm_and_control_requests(kernel: Any) -> None:
    before = run(kernel, "from xbench.notebook import comm as xc\nchannel = xc.register(get_ipython())")
    [opened] = [m for m in before if m["msg_type"] == "comm_open"]
    assert opened["content"]["target_name"] == "xbench.registry"
    assert opened["content"]["data"] == {"type": "snapshot", "operators": []}
    registry_id = opened["content"]["comm_id"]

    published = run(kernel, "from xbench.notebook.registry import registry\n"
                            f"registry().publish(__import__('json').loads({json.dumps(json.dumps(SOFTMAX))}))")
    [update] = [m for m in published if m["msg_type"] == "comm_msg"]
    assert update["content"]["comm_id"] == registry_id
    data = update["content"]["data"]
    assert data["type"] == "update"
    assert data["operator"]["name"] == "softmax"
    assert data["operator"]["backends"]["cuda"]["registers_per_thread"] == 32
    assert data["operator"]["source_kinds"] == ["cpu", "cuda", "ptx", "ascend"]
    assert "sources" not in data["operator"]

    # A reloaded page finds the registry comm through comm_info ...
    info_id = kernel.comm_info(target_name="xbench.registry")
    reply = kernel.get_shell_msg(timeout=TIMEOUT)
    while reply["parent_header"]["msg_id"] != info_id:  # skip the execute replies
        reply = kernel.get_shell_msg(timeout=TIMEOUT)
    assert reply["content"]["comms"] == {registry_id: {"target_name": "xbench.registry"}}

    # ... and opens xbench.control asking for a snapshot.
    control_id = uuid.uuid4().hex
    send_shell(kernel, "comm_open", {"comm_id": control_id, "target_name": "xbench.control",
                                     "data": {"type": "request_snapshot"}})
    snapshot = wait_iopub(kernel, comm_msg_on(control_id))["content"]["data"]
    assert snapshot["type"] == "snapshot"
    assert [op["name"] for op in snapshot["operators"]] == ["softmax"]
    assert snapshot["operators"][0]["best"] == {"backend": "cpu", "time_ms": 1.8234}

    send_shell(kernel, "comm_msg", {"comm_id": control_id,
                                    "data": {"type": "request_source", "name": "softmax", "backend": "ascend"}})
    source = wait_iopub(kernel, comm_msg_on(control_id))["content"]["data"]
    assert source == {"type": "source", "name": "softmax", "backend": "ascend", "text": ASCEND_SOURCE}

    removed = run(kernel, "registry().remove('softmax')")
    assert [m["content"]["data"] for m in removed if m["msg_type"] == "comm_msg"] == [
        {"type": "remove", "name": "softmax"}]


def test_control_is_refused_where_xbench_is_not_loaded() -> None:
    km, kc = start_new_kernel(kernel_name="python3", startup_timeout=TIMEOUT)
    try:
        control_id = uuid.uuid4().hex
        send_shell(kc, "comm_open", {"comm_id": control_id, "target_name": "xbench.control",
                                     "data": {"type": "request_snapshot"}})
        closed = wait_iopub(kc, lambda m: m["msg_type"] in ("comm_close", "comm_msg")
                            and m["content"]["comm_id"] == control_id)
        assert closed["msg_type"] == "comm_close"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)

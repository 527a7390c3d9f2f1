from __future__ import annotations

import copy

import pytest

from xbench.notebook.registry import RecordError, Registry, registry, validate_record, wire_form

from .records import ASCEND_SOURCE, softmax


class Recorder:
    def __init__(self) -> None:
        self.sent: list[dict] = []

    def send(self, message: dict) -> None:
        self.sent.append(copy.deepcopy(message))


def test_validate_fills_optional_fields_and_orders_sources() -> None:
    record = softmax(sources={"ascend": "a", "cpu": "c"})
    checked = validate_record(record)
    cpu = checked["backends"]["cpu"]
    assert cpu == {"status": "pass", "time_ms": 1.8234, "max_abs_error": 5.96e-8, "message": None,
                   "registers_per_thread": None, "ub_bytes": None, "predicted": False, "target": None}
    assert checked["backends"]["cuda"]["registers_per_thread"] == 32
    assert checked["backends"]["cuda"]["target"] == "h100"
    assert list(checked["sources"]) == ["cpu", "ascend"]
    assert checked["updated"].endswith("+00:00")
    assert record["backends"]["cpu"].get("message", "absent") == "absent"  # input left alone


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"name": ""}, "record field 'name' must be a non-empty string, got ''"),
        ({"signature": None}, "record 'softmax': signature is missing (None); give a string"),
        ({"dims": {"N": 64.5}}, "record 'softmax': dims['N'] must be an int, not float 64.5"),
        ({"dims": [64]}, "record 'softmax': dims must be a dict like {'N': 64}, not list"),
        ({"best": {"backend": "tpu", "time_ms": 1.0}},
         "record 'softmax': best.backend is 'tpu', which is not one of its backends (cpu, cuda, ascend)"),
        ({"best": {"backend": "cuda", "time_ms": 0.04125}},
         "record 'softmax': best.backend is 'cuda', whose time is predicted; best is the fastest measured "
         "backend (or None): a predicted time is not ranked against measured ones"),
        ({"sources": {"opencl": "x"}},
         "record 'softmax': sources has unknown kind 'opencl'; use cpu, cuda, ptx, ascend"),
        ({"updated": "yesterday"},
         "record 'softmax': updated must be an ISO 8601 time string, got 'yesterday'"),
        ({"time": 3}, "record 'softmax' has unknown field(s) 'time'; known fields: name, signature"),
    ],
)
def test_validate_names_the_bad_field(change: dict, message: str) -> None:
    with pytest.raises(RecordError) as info:
        validate_record(softmax(**change))
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ({"time_ms": 1.0}, "record 'softmax': backends['cpu'] is missing 'status'; give one of pass, fail, error"),
        ({"status": "ok"}, "record 'softmax': backends['cpu'].status is 'ok'; give one of pass, fail, error"),
        ({"status": "pass", "time_ms": "1 ms"},
         "record 'softmax': backends['cpu'].time_ms must be a number or None, not str '1 ms'"),
        ({"status": "pass", "registers_per_thread": True},
         "record 'softmax': backends['cpu'].registers_per_thread must be an int, not True"),
        ({"status": "fail", "max_abs_error": float("nan")},
         "record 'softmax': backends['cpu'].max_abs_error is nan; JSON cannot carry it"),
        ({"status": "pass", "ub": 3}, "record 'softmax': backends['cpu'] has unknown field(s) 'ub'"),
        ({"status": "pass", "predicted": "yes"},
         "record 'softmax': backends['cpu'].predicted must be True or False, not str 'yes'"),
    ],
)
def test_validate_names_the_bad_backend_field(backend: dict, message: str) -> None:
    record = softmax()
    record["backends"]["cpu"] = backend
    with pytest.raises(RecordError) as info:
        validate_record(record)
    assert str(info.value).startswith(message)


def test_publish_pushes_updates_without_sources_to_every_sink() -> None:
    reg = Registry()
    first, second = Recorder(), Recorder()
    reg.attach(first)
    reg.attach(second)
    reg.attach(first)  # attaching twice sends once
    stored = reg.publish(softmax())
    assert first.sent == second.sent
    assert len(first.sent) == 1
    update = first.sent[0]
    assert update["type"] == "update"
    assert "sources" not in update["operator"]
    assert update["operator"]["source_kinds"] == ["cpu", "cuda", "ptx", "ascend"]
    assert update["operator"]["best"] == {"backend": "cpu", "time_ms": 1.8234}
    assert stored["sources"]["ascend"] == ASCEND_SOURCE


def test_publish_replaces_by_name_and_keeps_order() -> None:
    reg = Registry()
    reg.publish(softmax())
    reg.publish(softmax(name="gelu", signature="gelu(x: Tensor[N]) -> Tensor[N]", dims={"N": 8}))
    reg.publish(softmax(signature="softmax(x: Tensor[N, D]) -> Tensor[N, D]  # v2"))
    assert reg.names() == ["softmax", "gelu"]
    assert [r["signature"] for r in reg.snapshot()] == [
        "softmax(x: Tensor[N, D]) -> Tensor[N, D]  # v2",
        "gelu(x: Tensor[N]) -> Tensor[N]",
    ]
    # snapshot() returns copies: editing them does not change the registry
    reg.snapshot()[0]["name"] = "changed"
    assert reg.names() == ["softmax", "gelu"]


def test_remove_and_snapshot_message() -> None:
    reg = Registry()
    sink = Recorder()
    reg.publish(softmax())
    reg.attach(sink)
    assert reg.snapshot_message()["operators"][0] == wire_form(reg.get("softmax"))
    assert reg.remove("softmax") is True
    assert reg.remove("softmax") is False
    assert sink.sent == [{"type": "remove", "name": "softmax"}]
    assert reg.snapshot_message() == {"type": "snapshot", "operators": []}
    reg.detach(sink)
    reg.publish(softmax())
    assert len(sink.sent) == 1


def test_source_lookup_says_what_exists() -> None:
    reg = Registry()
    reg.publish(softmax(sources={"cpu": "def k(): pass\n"}))
    assert reg.source("softmax", "cpu") == "def k(): pass\n"
    with pytest.raises(KeyError, match=r"operator 'softmax' has no 'ptx' source \(it has: cpu\)"):
        reg.source("softmax", "ptx")
    with pytest.raises(KeyError, match=r"no operator named 'gelu' in this kernel \(known: softmax\)"):
        reg.source("gelu", "cpu")


def test_a_failing_sink_does_not_stop_publication() -> None:
    class Broken:
        def send(self, message: dict) -> None:
            raise ConnectionError("frontend gone")

    reg = Registry()
    good = Recorder()
    reg.attach(Broken())
    reg.attach(good)
    reg.publish(softmax())
    assert reg.names() == ["softmax"]
    assert [m["type"] for m in good.sent] == ["update"]


def test_registry_is_one_per_process() -> None:
    assert registry() is registry()

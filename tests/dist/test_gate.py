"""The accuracy gate on 2 gloo processes (DLRM-like, held-out data): int4 with error feedback within the
stated margin of float32; without error feedback, on the task made hard by a coarse scale, outside it."""
from __future__ import annotations

import pytest

from xbench.dist.gate import MARGIN, GateResult, run_gate

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def gate():
    return run_gate(100, runs=("fp32", "int4+EF/64Ki", "int4/64Ki"), timeout=300)


def test_fp32_learns(gate):
    assert gate.runs["fp32"]["accuracy"] > 0.62            # chance is 0.5 on these labels


def test_error_feedback_within_the_margin(gate):
    assert gate.passed, gate.table()
    g = gate.gaps["int4+EF/64Ki"]
    assert g["accuracy"] >= -MARGIN["accuracy"] and g["loss"] <= MARGIN["loss"]


def test_without_error_feedback_it_differs(gate):
    assert gate.without_ef_fails == {"int4/64Ki": True}, gate.table()
    assert gate.gaps["int4/64Ki"]["accuracy"] < -0.05


def test_bytes_and_table(gate):
    assert gate.runs["int4/64Ki"]["wire_bytes"] == gate.runs["int4+EF/64Ki"]["wire_bytes"] > 0
    assert gate.runs["fp32"]["wire_bytes"] is None
    text = gate.table()
    assert "inside (passes)" in text and "int4/64Ki outside" in text


def test_verdicts_by_hand():
    runs = {"fp32": {"accuracy": 0.70, "loss": 0.60}, "int4+EF": {"accuracy": 0.69, "loss": 0.61},
            "int4": {"accuracy": 0.60, "loss": 0.70}}
    r = GateResult(runs, 10, 2)
    assert r.passed and r.without_ef_fails == {"int4": True}
    r = GateResult({**runs, "int4+EF": {"accuracy": 0.67, "loss": 0.60}}, 10, 2)
    assert not r.passed

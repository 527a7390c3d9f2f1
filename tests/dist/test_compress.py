"""Compression hooks for real on 4 gloo processes: every rank decodes the same result, errors within the
quantisation step, bytes on the wire measured against the formulas, error feedback reducing the error of
the time average, and hooks that return before the communication is done."""
from __future__ import annotations

import pytest

from . import jobs

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def result(launch):
    return launch(jobs.compression_job, 4, timeout=300)


@pytest.mark.parametrize("key", [f"{s}/{f}" for s, f in jobs.SCHEME_FORMS])
def test_identical_and_close(result, key):
    r = result[0][key]
    assert r["identical"]
    scheme = key.split("/")[0]
    # relative to the largest value: int codes lose at most half a step per compression (two in two-phase)
    bound = {"fp32": 1e-6, "fp16": 2 ** -10, "bf16": 2 ** -7, "int8": 2 / 127, "int4": 2 / 7}[scheme]
    assert r["max_err"] <= bound * r["scale"] * 1.5


@pytest.mark.parametrize("key", [f"{s}/{f}" for s, f in jobs.SCHEME_FORMS])
def test_bytes_on_the_wire(result, key):
    r = result[0][key]
    assert r["state_bytes"] * 4 == pytest.approx(r["model"])
    overhead = r["measured"] - r["model"]
    assert 0 <= overhead <= 0.02 * r["model"] + 8192, (key, r["measured"], r["model"])


def test_all_gather_form_costs_more_at_four_ranks(result):
    r = result[0]
    assert r["int4/all-gather"]["measured"] > r["int4/two-phase"]["measured"]
    assert r["int8/two-phase"]["measured"] < 0.3 * r["fp32/two-phase"]["measured"]


def test_error_feedback_averages_out(result):
    ef = result[0]["ef"]
    assert ef[True] < 0.3 * ef[False]


def test_hooks_do_not_block(result):
    for rank in (0, 2, 3):                       # rank 1 is the late one
        assert result[rank]["nonblocking"] == {"int8/two-phase": False, "fp16/all-gather": False, "hier": False}

"""Bytes on the wire per compression scheme and form, by hand, and where the all-gather form loses."""
from __future__ import annotations

import pytest

from xbench.dist import schemes


def test_ring_fp32():
    assert schemes.wire_bytes("fp32", "ring", 1000, 4) == pytest.approx(2 * 3 / 4 * 4000)
    assert schemes.wire_bytes("fp32", "ring", 1000, 1) == 0.0


def test_two_phase_int8_and_int4():
    n, p = 5000, 4
    m = 5120                                     # 5000 padded to p x 256 = 1024-value units
    assert schemes.padded(n, p, "int8", "two-phase") == m
    assert schemes.wire_bytes("int8", "two-phase", n, p) == pytest.approx(2 * 3 / 4 * (m + m // 256))
    assert schemes.wire_bytes("int4", "two-phase", n, p) == pytest.approx(2 * 3 / 4 * (m // 2 + m // 256))
    assert schemes.ratio("int8", "two-phase", 1 << 24, 8) == pytest.approx((1 + 1 / 256) / 4)
    assert schemes.ratio("int4", "two-phase", 1 << 24, 8) == pytest.approx((0.5 + 1 / 256) / 4)


def test_all_gather_grows_with_ranks():
    n = 1 << 24
    for p in (2, 4, 8, 64):
        assert schemes.ratio("int4", "all-gather", n, p) == pytest.approx(p * (0.5 + 1 / 256) / 8)
        assert schemes.ratio("fp16", "all-gather", n, p) == pytest.approx(p * 2 / 8)
    assert schemes.break_even("int8") == 8
    assert schemes.break_even("int4") == 16
    assert schemes.break_even("fp16") == 5


def test_float_two_phase_is_half():
    assert schemes.ratio("bf16", "two-phase", 4096, 16) == pytest.approx(0.5)


def test_names_and_errors():
    assert schemes.scheme_name("bfloat16") == "bf16" and schemes.form_name("allgather") == "all-gather"
    with pytest.raises(ValueError, match="write one of fp32"):
        schemes.scheme_name("int2")
    with pytest.raises(ValueError, match="cannot be summed on the wire"):
        schemes.wire_bytes("int8", "ring", 10, 2)


def test_savings_table():
    rows = {(s.scheme, s.form, s.world): s for s in schemes.savings()}
    assert rows[("int4", "two-phase", 10000)].saving > 0.75
    assert rows[("int4", "all-gather", 10000)].ratio > 600

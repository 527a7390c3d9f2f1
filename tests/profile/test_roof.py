"""The roofline bound of a profile and the flag on a time that beats it."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench.hw import get_target
from xbench.hw.predict import program_counts
from xbench.profile.roof import pct_of_roofline, roof_level, roof_time


def _counts(n: int = 256):
    x = np.zeros((n, n), np.float32)
    return program_counts(xb.ops.softmax.lower(x))


def test_the_bound_is_the_larger_of_compute_and_traffic():
    cs = _counts()
    h100 = get_target("h100")
    t, level = roof_time(cs, h100)
    assert level == h100.memory.name
    [c] = cs
    assert t == max(c.total_flops / h100.peak_flops("float32"), c.bytes / h100.memory.bandwidth)
    assert t == c.bytes / h100.memory.bandwidth                     # softmax: far left of the ridge


def test_warm_runs_are_priced_at_the_cache_that_holds_their_data():
    h100 = get_target("h100")
    assert roof_level(h100, 1 << 20, warm=True).name == "l1"          # 132 SMs x 256 KB hold 1 MiB
    assert roof_level(h100, 40 << 20, warm=True).name == "l2"
    assert roof_level(h100, 1 << 40, warm=True).name == h100.memory.name
    assert roof_level(h100, 1 << 20, warm=False).name == h100.memory.name


def test_a_time_under_its_bound_is_flagged_not_printed():
    cs = _counts()
    h100 = get_target("h100")
    bound, _ = roof_time(cs, h100)
    ok = pct_of_roofline(cs, h100, bound * 2, "predicted", "cuda", warm=False)
    assert ok.value == 50.0 or abs(ok.value - 50.0) < 1e-9
    above = pct_of_roofline(cs, h100, bound / 1.7, "measured", "cuda", warm=False)
    assert above.value is None and not above.available
    assert above.note.startswith("flagged: above its roof (170 %")
    slack = pct_of_roofline(cs, h100, bound / 1.01, "measured", "cuda", warm=False)
    assert slack.available and 100 < slack.value < 102

"""The suite's alternating timer: every run sampled in turn, a slow run stopped by its time budget."""
from __future__ import annotations

import time

from xbench.suite.timing import alternate


def test_a_run_past_its_budget_stops_at_the_least_samples_and_the_others_go_on():
    calls = {"slow": 0, "fast": 0}

    def slow():
        calls["slow"] += 1
        time.sleep(0.03)
        return {"step": 0.03}

    def fast():
        calls["fast"] += 1
        return {"step": 0.001 * calls["fast"]}

    t = alternate({"slow": slow, "fast": fast}, repeats=6, warmup=1, budget_s=0.05, least=2)
    assert t["slow"]["step"].samples == 2 and calls["slow"] == 3          # the warm-up and two samples
    assert t["fast"]["step"].samples == 6 and calls["fast"] == 7
    assert t["fast"]["step"].median_ms == 4.5                            # samples 2..7 ms (the warm-up's 1 left out)
    unbounded = alternate({"slow": slow}, repeats=3, warmup=0)
    assert unbounded["slow"]["step"].samples == 3

"""What the benchmarks measure, checked for values rather than speed: the overlap timeline by hand, the
overlap measurement's bookkeeping on a real DLRM-like step, and the alpha-beta fit (exact on synthetic
times; structure of a real sweep)."""
from __future__ import annotations

import pytest

from xbench.dist import calibrate, overlap

from . import jobs


def test_timeline_by_hand():
    # buckets ready at 1, 2, 3 s, each 1.5 s on the wire, backward ends at 3 s
    t = overlap.simulate([1.0, 2.0, 3.0], [1.5, 1.5, 1.5], 3.0)
    assert t.starts == (1.0, 2.5, 4.0) and t.ends == (2.5, 4.0, 5.5)
    assert t.exposed_s == pytest.approx(2.5) and t.hidden_fraction == pytest.approx(1 - 2.5 / 4.5)
    assert overlap.simulate([0.1], [0.05], 1.0).hidden_fraction == 1.0
    assert overlap.hidden_fraction(10.0, 4.0, 11.0) == pytest.approx(0.75)
    assert overlap.hidden_fraction(10.0, 4.0, 15.0) == 0.0


def test_ddp_bucketing_by_size():
    mib = 1 << 20
    assert overlap.buckets_of([3 * mib] * 4, 25 * mib, mib) == [3 * mib, 9 * mib]
    assert overlap.buckets_of([10 * mib] * 6, 25 * mib, mib) == [10 * mib, 30 * mib, 20 * mib]


def test_fit_is_exact_on_synthetic_times():
    p, alpha, beta = 4, 2e-4, 1 / 1.5e9
    sizes = [1 << k for k in range(10, 22)]
    rows = {n: {"median_s": 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta, "spread": 0.0} for n in sizes}
    sweep = {"world": p, "collectives": {"allreduce": rows}}
    fit = calibrate.fit_alpha_beta(sweep, fit_sizes=sizes[::2])
    assert fit.alpha == pytest.approx(alpha) and fit.beta == pytest.approx(beta) and fit.residual < 1e-9
    assert all(abs(r["error"]) < 1e-9 for r in calibrate.check(fit, sweep, sizes[1::2]))


@pytest.mark.timeout(300)
def test_real_measurements_have_consistent_bookkeeping(launch):
    out = launch(jobs.measure_job, 2, timeout=240)
    ov = out[0]["overlap"]
    assert sum(ov["buckets"]) == 4 * ov["params"]
    assert len(ov["ready_s"]) == len(ov["comm_per_bucket_s"]) == len(ov["buckets"])
    assert ov["ready_s"] == sorted(ov["ready_s"])
    assert all(v > 0 for v in ov["median_s"].values())
    for k in ("hidden_measured", "hidden_blocking", "hidden_predicted", "hidden_timeline"):
        assert 0.0 <= ov[k] <= 1.0
    sw = out[0]["sweep"]
    assert set(sw["collectives"]) == {"allreduce", "all_gather"} and sw["world"] == 2
    for rows in sw["collectives"].values():
        assert set(rows) == {4096, 65536}
        assert all(len(r["samples"]) == 2 and r["median_s"] > 0 for r in rows.values())

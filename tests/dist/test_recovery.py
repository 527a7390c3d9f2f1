"""Recovery under torchrun --max-restarts: rank 1 is killed with SIGKILL mid-training, the job resumes
from its last snapshot and ends with exactly the parameters of an uninterrupted run; the recovery time is
split into detection, restart, load and lost steps."""
from __future__ import annotations

import pytest

from xbench.dist.recovery import run_job

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as pool:        # two torchrun jobs side by side: most of their time is start-up
        plain = pool.submit(run_job, tmp_path_factory.mktemp("plain"), steps=12, every=4, timeout=200)
        killed = pool.submit(run_job, tmp_path_factory.mktemp("killed"), steps=12, every=4, kill_rank=1,
                             kill_at=6, timeout=200)
        return plain.result(), killed.result()


def test_both_finish(runs):
    for r in runs:
        assert r.returncode == 0, r.output


def test_bit_for_bit(runs):
    plain, killed = runs
    assert plain.attempts == 1 and killed.attempts == 2
    assert len(plain.final_sha256) == 64 and killed.final_sha256 == plain.final_sha256


def test_resumed_from_the_last_committed_snapshot(runs):
    _, k = runs
    assert k.killed_at >= 6 and k.resumed_from in (4, 8) and k.resumed_from <= k.killed_at
    assert k.recovery["lost_steps"] == k.killed_at - k.resumed_from


def test_recovery_time_split(runs):
    rec = runs[1].recovery
    for key in ("detection_s", "restart_s", "spawn_s", "startup_s", "load_s", "step_s"):
        assert rec[key] is not None and rec[key] > 0, key
    assert rec["total_s"] == pytest.approx(rec["detection_s"] + rec["restart_s"] + rec["load_s"] + rec["lost_s"])
    assert rec["restart_s"] == pytest.approx(rec["spawn_s"] + rec["startup_s"])
    assert runs[0].saves and all(s["total_s"] >= s["blocking_s"] for s in runs[0].saves)

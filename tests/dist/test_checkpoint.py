"""Snapshots on 2 gloo processes: every K steps, asynchronous, model + optimizer + loader position + RNG
restored bit for bit, the oldest pruned, and a torn (truncated) or uncommitted snapshot skipped for the one
before it."""
from __future__ import annotations

import pytest

from xbench.dist.loader import ShardedLoader

from . import jobs

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def result(launch, tmp_path_factory):
    root = tmp_path_factory.mktemp("snapshots")
    return launch(jobs.checkpoint_job, 2, args=(str(root),), timeout=240)


def test_every_k_steps_and_pruned(result):
    r = result[0]
    assert r["kept"] == ["step-00000004", "step-00000006", "step-00000008"]    # keep=3 of 2, 4, 6, 8
    assert r["all_verified"]


def test_resume_from_the_newest(result):
    for r in result:
        step, log, same = r["intact"]
        assert step == 8 and log == []
        assert same == {"params": True, "momentum": True, "loader": True, "rng": True}


def test_a_truncated_snapshot_is_skipped(result):
    step, log, same = result[0]["truncated"]
    assert step == 6 and all(same.values())
    assert len(log) == 1 and log[0].startswith("torn snapshot step-00000008: ") and "bytes, the manifest says" in log[0]
    assert result[1]["truncated"][0] == 6                       # rank 0 decides for everyone


def test_an_uncommitted_snapshot_is_skipped(result):
    step, log, same = result[0]["uncommitted"]
    assert step == 4 and all(same.values())
    assert any("step-00000006: no COMMITTED.json" in m for m in log)


def test_loader_is_deterministic_and_refuses_a_different_shape():
    a, b = ShardedLoader(10, 3, rank=1, world=2, seed=5), ShardedLoader(10, 3, rank=1, world=2, seed=5)
    seq = [a.next().tolist() for _ in range(4)]
    assert seq == [b.next().tolist() for _ in range(4)]
    assert all(len(s) == 3 for s in seq) and a.epoch == 3      # 5 indices per rank: one batch of 3 per epoch
    c = ShardedLoader(10, 4, rank=1, world=2, seed=5)
    with pytest.raises(ValueError, match="batch=3"):
        c.load_state_dict(a.state_dict())

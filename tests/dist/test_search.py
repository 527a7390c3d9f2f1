"""The strategy search: the step model's accounting on one plan, infeasible plans and why, and exhaustive,
random and RL search agreeing on the optimum of a small space."""
from __future__ import annotations

import math

import pytest

from xbench.dist.search import GPT, Plan, Space, evaluate, exhaustive, random_search, reinforce


@pytest.fixture(scope="module")
def space():
    s = Space.for_model("gpt-1.3b", "dgx-a100", 32)
    s.choices["micro"] = [1, 4, 16]
    s.choices["bucket_mb"] = [5, 25]
    return s


def test_flops_and_params():
    m = GPT["gpt-13b"]
    assert m.params == pytest.approx(12 * 40 * 5120 ** 2 + 51200 * 5120)
    assert m.flops_per_iteration == pytest.approx(72 * 512 * 2048 * 40 * 5120 ** 2 *
                                                  (1 + 2048 / (6 * 5120) + 51200 / (16 * 40 * 5120)))


def test_one_plan(space):
    r = evaluate(Plan(2, 2, 16, False, 25, "fp32"), space)
    assert r.feasible and r.parts["dp"] == 8 and r.parts["micro_batch"] == 256 // (8 * 16)
    assert r.parts["bubble"] == pytest.approx(1 / 17)
    assert r.step_s == pytest.approx(r.parts["pipeline_s"] + r.parts["dp_exposed_s"] + r.parts["codec_s"])


def test_infeasible_plans_say_why(space):
    assert "not a multiple" in evaluate(Plan(1, 1, 64, False, 25, "fp32"), space).why
    big = Space.for_model("gpt-13b", "dgx-a100", 8)
    r = evaluate(Plan(1, 1, 16, False, 25, "fp32"), big)
    assert not r.feasible and "GiB usable HBM" in r.why and math.isinf(r.step_s)


def test_searches_find_the_optimum(space):
    ex = exhaustive(space)
    assert ex.evaluations == space.size
    assert ex.best.step_s == min(evaluate(p, space).step_s for p in space.plans())
    target = ex.best.step_s
    for run in (random_search(space, seed=1, target=target), reinforce(space, seed=1, target=target)):
        assert run.best.step_s == target and run.to_best <= space.size
        assert run.trace == sorted(run.trace, reverse=True)       # best-so-far never gets worse
    capped = random_search(space, budget=5, seed=2)
    assert capped.evaluations == 5

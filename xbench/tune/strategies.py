"""Search strategies: which candidate to evaluate next.

- `exhaustive`: every legal configuration (default first) — for small spaces;
- `random`: a seeded random sample;
- `guided`: the default schedule and each knob moved alone from it (up to half the budget), then simulated
  annealing over a surrogate model — a prior cost (the performance predictor's estimate, when the backend gives
  one, else none) corrected by a ridge regression on one-hot knob features refitted to every measured point;
  each step measures the unmeasured candidate the surrogate ranks best among the annealing walk's proposals.
  The surrogate is additive in log time, so two knobs that each help are proposed together.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .space import Space, neighbours


def _key(config: dict) -> tuple:
    return tuple(sorted(config.items()))


def exhaustive(space: Space, budget: int, measure: Callable[[dict], float | None], **_) -> Iterator[dict]:
    yield from space.configs[:budget]


def random_search(space: Space, budget: int, measure, seed: int = 0, **_) -> Iterator[dict]:
    rest = space.configs[1:]
    rng = random.Random(seed)
    rng.shuffle(rest)
    yield from ([space.configs[0]] + rest)[:budget]


class Surrogate:
    """log(time) ≈ prior + w · onehot(config), ridge-regularised, refitted on every measurement."""

    def __init__(self, space: Space, prior: Callable[[dict], float | None] | None = None, ridge: float = 1.0):
        self.features = [(n, v) for n, k in sorted(space.knobs.items()) for v in k.choices]
        self.prior = prior
        self.ridge = ridge
        self.X: list[np.ndarray] = []
        self.y: list[float] = []
        self.w = np.zeros(len(self.features) + 1)

    def _x(self, config: dict) -> np.ndarray:
        return np.array([1.0] + [1.0 if config.get(n) == v else 0.0 for n, v in self.features])

    def _prior(self, config: dict) -> float:
        p = self.prior(config) if self.prior else None
        return math.log(p) if p and p > 0 else 0.0

    def add(self, config: dict, time_ms: float) -> None:
        self.X.append(self._x(config))
        self.y.append(math.log(time_ms) - self._prior(config))
        X, y = np.array(self.X), np.array(self.y)
        A = X.T @ X + self.ridge * np.eye(X.shape[1])
        self.w = np.linalg.solve(A, X.T @ y)

    def predict(self, config: dict) -> float:
        return float(np.exp(self._x(config) @ self.w + self._prior(config)))


def guided(space: Space, budget: int, measure: Callable[[dict], float | None], seed: int = 0,
           prior: Callable[[dict], float | None] | None = None, **_) -> Iterator[dict]:
    rng = random.Random(seed)
    model = Surrogate(space, prior)
    done: set[tuple] = set()
    steps = min(budget, space.size)
    # the opening: the default, then each knob moved alone from it (at most half the budget), so the one-hot
    # model has seen every knob's own effect before it ranks combinations of them
    opening = ([space.configs[0]] + neighbours(space, space.configs[0]))[:max(1, steps // 2)]
    measured = []
    for candidate in opening:
        done.add(_key(candidate))
        yield candidate
        t = measure(candidate)
        if t is not None and t > 0:
            model.add(candidate, t)
            measured.append((t, candidate))
    current = min(measured, key=lambda m: m[0])[1] if measured else space.configs[0]
    temperature = 1.0
    for _ in range(steps - len(opening)):
        # an annealing walk proposes; the surrogate picks the most promising unmeasured proposal
        walk, c = [], current
        for _ in range(4 * len(space.knobs) + 4):
            nb = neighbours(space, c)
            if not nb:
                break
            nxt = rng.choice(nb)
            delta = math.log(model.predict(nxt)) - math.log(model.predict(c))
            if delta < 0 or rng.random() < math.exp(-delta / max(temperature, 1e-3)):
                c = nxt
            walk.append(c)
        fresh = [w for w in walk if _key(w) not in done] or [c for c in space.configs if _key(c) not in done]
        if not fresh:
            return
        candidate = min(fresh, key=model.predict)
        done.add(_key(candidate))
        yield candidate
        t = measure(candidate)
        if t is not None and t > 0:
            model.add(candidate, t)
            if t <= model.predict(current) or rng.random() < temperature * 0.2:
                current = candidate
        temperature *= 0.85


STRATEGIES: dict[str, Callable[..., Iterator[dict[str, Any]]]] = {
    "exhaustive": exhaustive, "random": random_search, "guided": guided}

"""Model-level accuracy: xbench in float32 must be about as close to float64 as torch eager in float32 is.

A deep model's float32 result differs from its exact value by rounding accumulated over many ops (and a badly
conditioned one, such as batch norm over two samples, by much more); the per-op tolerance table cannot bound
that. The criterion here: xbench's distance from a float64 run of the same model is at most FACTOR times
eager float32's distance, or within the tolerance table for one float32 op (whichever is larger)."""
from __future__ import annotations

import copy

import numpy as np
import torch

from xbench.verify import tolerance

FACTOR = 4.0


def double(model: torch.nn.Module, batch: dict) -> tuple[torch.nn.Module, dict]:
    return (copy.deepcopy(model).double(),
            {k: v.double() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in batch.items()})


def error(a: torch.Tensor, exact: torch.Tensor) -> float:
    return float((a.detach().double() - exact.detach()).abs().max())


def assert_as_accurate(got: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, what: str) -> None:
    scale = float(exact.detach().abs().max()) or 1.0
    floor = tolerance("float32")[0] * scale
    mine, theirs = error(got, exact), error(eager, exact)
    assert mine <= max(FACTOR * theirs, floor), (
        f"{what}: xbench is {mine:.3g} from float64, eager float32 {theirs:.3g} (allowed {FACTOR}x, or {floor:.3g})")


def assert_curves_as_accurate(got: list[float], eager: list[float], exact: list[float], what: str) -> None:
    g, e, x = (np.asarray(v, np.float64) for v in (got, eager, exact))
    floor = tolerance("float32")[0] * float(np.abs(x).max())
    mine, theirs = np.abs(g - x), np.abs(e - x)
    worst = int(np.argmax(mine - np.maximum(FACTOR * theirs, floor)))
    assert (mine <= np.maximum(FACTOR * theirs.max(), floor)).all(), (
        f"{what}: step {worst} loss {g[worst]:.7g}, eager {e[worst]:.7g}, float64 {x[worst]:.7g}")

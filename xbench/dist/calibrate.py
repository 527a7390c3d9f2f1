"""Calibrating the cost model here: alpha and beta of gloo over loopback, fitted from measured sweeps, then
checked on sizes the fit never saw.

`measure_sweep` (run on every rank through `xbench.dist.run`) times AllReduce (and AllGather) of each size
`repeats` times, alternating sizes within each round so that drift of a shared machine spreads over all of
them, and keeps the median and spread per size. `fit_alpha_beta` fits the ring model

    t(n) = 2(p-1) alpha + 2(p-1)/p n beta

by least squares on relative error (every size weighs the same, small or large), on the fitting sizes only;
`check` predicts the held-out sizes and reports the error of each. The fit is stored in the cache
(`loopback-gloo-p<p>.json`), where `Topology.detect()` finds it.

    sweep = xb.dist.run(measure_sweep, 2, args=(sizes, 15))[0]
    fit = fit_alpha_beta(sweep, world=2, fit_sizes=sizes[::2])
"""
from __future__ import annotations

import datetime
import json
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

DEFAULT_SIZES = [1 << k for k in range(10, 25)]              # 1 KiB .. 16 MiB


def default_split(sizes: list[int]) -> tuple[list[int], list[int]]:
    """Fit on every other size, hold out the rest."""
    return sizes[::2], sizes[1::2]


def measure_sweep(rank: int, world: int, sizes: list[int] | None = None, repeats: int = 15,
                  collectives: tuple[str, ...] = ("allreduce", "all_gather")) -> dict:
    """Per collective and size (bytes of the AllReduce buffer / the AllGather input): median seconds,
    relative spread (max-min)/median, and every sample."""
    import torch
    import torch.distributed as dist

    sizes = sizes or DEFAULT_SIZES
    bufs = {n: torch.ones(max(1, n // 4)) for n in sizes}
    outs = {n: torch.empty(max(1, n // 4) * world) for n in sizes}

    def once(c: str, n: int) -> float:
        dist.barrier()
        t0 = time.perf_counter()
        if c == "allreduce":
            dist.all_reduce(bufs[n])
        else:
            dist.all_gather_single(outs[n], bufs[n])
        return time.perf_counter() - t0

    for c in collectives:                        # warm-up: connections, allocations
        for n in sizes[:3] + sizes[-1:]:
            once(c, n)
    samples: dict[str, dict[int, list[float]]] = {c: {n: [] for n in sizes} for c in collectives}
    for r in range(repeats):
        order = sizes if r % 2 == 0 else sizes[::-1]
        for c in collectives:
            for n in order:
                samples[c][n].append(once(c, n))
    # the slowest rank's time is the collective's time
    mine = {c: {n: v for n, v in d.items()} for c, d in samples.items()}
    everyone: list = [None] * world
    dist.all_gather_object(everyone, mine)
    out: dict = {"world": world, "repeats": repeats, "sizes": sizes, "collectives": {}}
    for c in collectives:
        rows = {}
        for n in sizes:
            per_rep = [max(e[c][n][i] for e in everyone) for i in range(repeats)]
            med = statistics.median(per_rep)
            rows[n] = {"median_s": med, "spread": (max(per_rep) - min(per_rep)) / med if med > 0 else 0.0,
                       "samples": per_rep}
        out["collectives"][c] = rows
    return out


@dataclass(frozen=True)
class Fit:
    world: int
    alpha: float                # s per step
    beta: float                 # s per byte
    fit_sizes: tuple[int, ...]
    residual: float             # RMS relative error on the fitting sizes
    date: str

    @property
    def bandwidth(self) -> float:
        return 1.0 / self.beta if self.beta > 0 else float("inf")

    def predict(self, collective: str, n: int) -> float:
        p = self.world
        if collective == "allreduce":
            return 2 * (p - 1) * self.alpha + 2 * (p - 1) / p * n * self.beta
        if collective == "all_gather":                 # n = input bytes of one rank; output p*n
            return (p - 1) * self.alpha + (p - 1) * n * self.beta
        raise ValueError(f"xbench: no calibrated model for {collective!r}")


def fit_alpha_beta(sweep: dict, world: int | None = None, fit_sizes: list[int] | None = None,
                   collective: str = "allreduce") -> Fit:
    """Least-squares alpha and beta of the ring AllReduce model on `fit_sizes` (relative error)."""
    p = world or sweep["world"]
    rows = sweep["collectives"][collective]
    sizes = [int(n) for n in (fit_sizes or default_split(sorted(int(k) for k in rows))[0])]
    t = np.array([rows[n]["median_s"] if n in rows else rows[str(n)]["median_s"] for n in sizes])
    a = np.array([[2 * (p - 1), 2 * (p - 1) / p * n] for n in sizes], dtype=np.float64)
    w = 1.0 / t
    sol, *_ = np.linalg.lstsq(a * w[:, None], t * w, rcond=None)
    alpha, beta = (max(float(sol[0]), 0.0), max(float(sol[1]), 1e-15))
    pred = a @ np.array([alpha, beta])
    resid = float(np.sqrt(np.mean(((pred - t) / t) ** 2)))
    return Fit(p, alpha, beta, tuple(sizes), resid, datetime.date.today().isoformat())


def check(fit: Fit, sweep: dict, sizes: list[int], collective: str = "allreduce") -> list[dict]:
    """Predicted against measured for `sizes` (held out of the fit)."""
    rows = sweep["collectives"][collective]
    out = []
    for n in sizes:
        m = rows[n] if n in rows else rows[str(n)]
        pred = fit.predict(collective, n)
        out.append({"bytes": n, "measured_s": m["median_s"], "spread": m["spread"], "predicted_s": pred,
                    "error": (pred - m["median_s"]) / m["median_s"]})
    return out


def store(fit: Fit) -> Path:
    """Save the fit where `Topology.detect()` looks for it."""
    from ..cache import atomic_write
    from ..config import cache_dir

    path = Path(cache_dir("dist")) / f"loopback-gloo-p{fit.world}.json"
    atomic_write(path, json.dumps({**asdict(fit), "bandwidth": fit.bandwidth}, indent=1))
    return path


def calibrate(world: int = 2, sizes: list[int] | None = None, repeats: int = 15, save: bool = True,
              timeout: float = 600.0) -> tuple[Fit, list[dict], dict]:
    """Sweep, fit on half the sizes, check on the other half (and AllGather on all sizes), store the fit."""
    from .launch import run

    sizes = sizes or DEFAULT_SIZES
    sweep = run(measure_sweep, world, args=(sizes, repeats), timeout=timeout)[0]
    fit_s, held = default_split(sizes)
    fit = fit_alpha_beta(sweep, world, fit_s)
    rows = check(fit, sweep, held) + [dict(r, collective="all_gather") for r in check(fit, sweep, sizes, "all_gather")]
    if save:
        store(fit)
    return fit, rows, sweep

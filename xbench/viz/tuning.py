"""Figures of a tuning run: time per candidate in evaluation order, and a heatmap over two knobs."""
from __future__ import annotations

import numpy as np


def _kernel(result, kernel):
    ks = [k for k in result.kernels if kernel in (None, k.kernel)]
    if not ks:
        raise ValueError(f"no kernel {kernel!r} in this result; kernels: {[k.kernel for k in result.kernels]}")
    return ks[0] if kernel else max(ks, key=lambda k: k.default_ms or 0)


def candidates_figure(result, kernel: str | None = None):
    """Time of every candidate of one kernel (the slowest by default) in the order they were evaluated, with the
    best-so-far line; rejected and failed candidates are marked on the axis."""
    import matplotlib.pyplot as plt
    k = _kernel(result, kernel)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    xs = np.arange(len(k.candidates))
    ts = np.array([c.time_ms if c.time_ms is not None else np.nan for c in k.candidates], dtype=float)
    ok = ~np.isnan(ts)
    ax.plot(xs[ok], ts[ok], "o", color="tab:blue", label="candidate")
    best = np.fmin.accumulate(np.where(ok, ts, np.inf))
    ax.step(xs, np.where(np.isinf(best), np.nan, best), where="post", color="tab:green", label="best so far")
    bad = [i for i, c in enumerate(k.candidates) if c.status in ("rejected", "failed")]
    if bad:
        ax.plot(bad, [np.nanmin(ts) if ok.any() else 0] * len(bad), "x", color="tab:red", label="rejected/failed")
    if k.default_ms:
        ax.axhline(k.default_ms, color="gray", ls="--", lw=1, label="default schedule")
    unit = "predicted ms" if result.predicted else "ms"
    ax.set(xlabel="candidate", ylabel=unit, title=f"{result.op}/{k.kernel} on {result.backend}"
           f"{' (predicted)' if result.predicted else ''}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def _ordered(values: set) -> list:
    try:
        return sorted(values)
    except TypeError:          # mixed types: a stable, readable order
        return sorted(values, key=repr)


def heatmap_figure(result, x: str, y: str, kernel: str | None = None):
    """Best time for each pair of values of knobs `x` and `y` (minimum over the other knobs)."""
    import matplotlib.pyplot as plt
    k = _kernel(result, kernel)
    valid = [c for c in k.candidates if c.time_ms is not None]
    for name in (x, y):
        if not any(name in c.config for c in valid):
            raise ValueError(f"kernel {k.kernel} has no knob {name!r}; knobs: {sorted(valid[0].config)}")
    xv = _ordered({c.config[x] for c in valid})
    yv = _ordered({c.config[y] for c in valid})
    grid = np.full((len(yv), len(xv)), np.nan)
    for c in valid:
        i, j = yv.index(c.config[y]), xv.index(c.config[x])
        grid[i, j] = np.fmin(grid[i, j], c.time_ms)
    fig, ax = plt.subplots(figsize=(1.2 * len(xv) + 2.5, 0.8 * len(yv) + 2))
    im = ax.imshow(grid, cmap="viridis_r", aspect="auto")
    ax.set_xticks(range(len(xv)), [str(v) for v in xv])
    ax.set_yticks(range(len(yv)), [str(v) for v in yv])
    for i in range(len(yv)):
        for j in range(len(xv)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", color="w", fontsize="small")
    ax.set(xlabel=x, ylabel=y, title=f"{result.op}/{k.kernel}: best ms")
    fig.colorbar(im, ax=ax, label="predicted ms" if result.predicted else "ms")
    fig.tight_layout()
    fig.grid_values = grid
    return fig

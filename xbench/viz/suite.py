"""The benchmark suite's cross-platform chart, drawn from data the suite computed (`xbench.suite.report.chart_data`).

Two panels sharing the workloads: on the left, each platform's throughput relative to the reference platform
(log scale; this machine's cpu measured, the other platforms predicted, hatched); on the right, the measured
speed-up of xbench and Inductor over torch eager on this cpu.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from .svg import INK, to_svg

COLORS = {"cpu": "#7f7f7f", "h100": "#2a7ab0", "h200": "#1b4f72", "a100": "#58a55c", "ascend-910b": "#c0392b",
          "xbench": "#4c72b0", "inductor": "#dd8452"}


def suite_chart(data: Mapping | None, title: str = ""):
    """`data`: {"workloads": [labels], "reference": name, "platforms": {name: [ratio or None per workload]},
    "measured": [platform names measured, not predicted], "speedups": {engine: [x over eager or None]}}."""
    if not data or not data.get("workloads"):
        return None
    import matplotlib.pyplot as plt
    import numpy as np

    names: Sequence[str] = data["workloads"]
    n = len(names)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 0.42 * n + 1.6), sharey=True,
                                      gridspec_kw={"width_ratios": [3, 2]})
    y = np.arange(n)
    plats = list(data["platforms"])
    h = 0.8 / max(len(plats), 1)
    for i, p in enumerate(plats):
        vals = [v if v else np.nan for v in data["platforms"][p]]
        measured = p in data.get("measured", ())
        left.barh(y - 0.4 + h * (i + 0.5), vals, height=h, color=COLORS.get(p, "#999999"),
                  hatch=None if measured else "//", edgecolor="white", linewidth=0.3,
                  label=f"{p} ({'measured' if measured else 'predicted'})")
    left.set_xscale("log")
    left.axvline(1.0, color=INK, linewidth=0.8)
    left.set_xlabel(f"throughput relative to {data['reference']} (predicted)")
    left.set_yticks(y, names)
    left.invert_yaxis()
    sp = data.get("speedups", {})
    hs = 0.8 / max(len(sp), 1)
    for i, (e, vals) in enumerate(sp.items()):
        right.barh(y - 0.4 + hs * (i + 0.5), [v if v else np.nan for v in vals], height=hs,
                   color=COLORS.get(e, "#999999"), label=f"{e} (measured)")
    right.axvline(1.0, color=INK, linewidth=0.8)
    right.axvline(1.2, color=INK, linewidth=0.6, linestyle=":")
    right.set_xlabel("speed-up over torch eager on this cpu")
    for ax in (left, right):
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.tick_params(colors=INK, labelsize=8)
        ax.xaxis.label.set_color(INK)
        ax.legend(fontsize=7, loc="lower right", frameon=False, labelcolor=INK)
    if title:
        fig.suptitle(title, color=INK)
    fig.tight_layout()
    return fig


__all__ = ["suite_chart", "to_svg"]

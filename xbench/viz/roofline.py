"""Roofline figures: operators placed against the compute and memory roofs of each target.

    fig = xb.roofline(xb.profile(xb.ops.softmax, x), targets=("cpu-local", "h100"))
    fig = xb.roofline([rep1, rep2, (xb.ops.matmul, (a, b))], normalized=True)
    fig.savefig("roofline.svg")

One panel per target: a horizontal compute roof per (dtype, unit) peak of the target, a diagonal memory roof per
level with a bandwidth, the ridge point of each memory roof against the main compute roof (marked), and each
operator as a point at (arithmetic intensity, FLOP/s): a filled circle where its time was measured on that
target's backend, an open triangle for the predicted time. `normalized=True` draws one panel with every
target's roofline scaled to 1 (x = intensity / ridge, y = FLOP/s / peak). What was drawn is also kept as data
in `fig.roofline_data` (`RooflineData`): the roofs, ridges and points of each panel.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..hw.target import Target, TargetError, get_target

MEASURED_MARKER = "o"
PREDICTED_MARKER = "^"


@dataclass
class Point:
    label: str
    target: str
    intensity: float           # FLOP / byte
    flops_per_s: float
    kind: str                  # measured | predicted
    time_ms: float


@dataclass
class Panel:
    target: str
    compute_roofs: dict[str, float] = field(default_factory=dict)     # "float32 vector" -> FLOP/s
    memory_roofs: dict[str, float] = field(default_factory=dict)      # "hbm" -> bytes/s
    ridges: dict[str, float] = field(default_factory=dict)            # memory level -> FLOP/byte
    main_roof: str = ""
    points: list[Point] = field(default_factory=list)


@dataclass
class RooflineData:
    panels: dict[str, Panel]
    normalized: bool = False


def _reports(items: Any, targets: Sequence[str], profile_options: dict) -> list:
    from ..profile import Report, profile
    if isinstance(items, Report) or hasattr(items, "lower") or (
            isinstance(items, tuple) and len(items) == 2 and hasattr(items[0], "lower")):
        items = [items]
    out = []
    for it in items:
        if isinstance(it, Report):
            out.append(it)
        elif isinstance(it, tuple) and len(it) == 2 and hasattr(it[0], "lower"):
            op, args = it
            args = args if isinstance(args, tuple) else (args,)
            backends = tuple(dict.fromkeys({"cpu": "cpu", "gpu": "cuda", "npu": "ascend"}[get_target(t).kind]
                                           for t in targets))
            out.append(profile(op, *args, backends=profile_options.pop("backends", backends), targets=targets,
                               **profile_options))
        elif hasattr(it, "lower"):
            raise TypeError(f"roofline() needs the arguments of operator {getattr(it, 'name', it)!r} to place it: "
                            f"pass (op, (args...)) or a Report from xb.profile(op, *args)")
        else:
            raise TypeError(f"roofline() takes Reports, (operator, args) pairs or a list of them, got "
                            f"{type(it).__name__}")
    return out


def _number(rep, name: str, *where: str) -> float | None:
    m = rep.get(name, *where)
    if m is None or not m.available or not isinstance(m.value, (int, float)):
        return None
    return float(m.value)


def _main_roof(t: Target, dtype: str | None) -> str:
    """The compute roof ridges are computed against: the dtype's fastest unit (default float32)."""
    dt = dtype or "float32"
    cands = [(v, f"{d} {u}") for (d, u), v in t.peaks.items() if d == dt]
    if not cands:
        cands = [(v, f"{d} {u}") for (d, u), v in t.peaks.items()]
    return max(cands)[1]


def roofline_data(reports: Sequence, targets: Sequence[str], *, dtype: str | None = None,
                  dtypes: Iterable[str] | None = None) -> RooflineData:
    """The roofs, ridges and operator points of each target's panel (what `roofline` draws)."""
    panels = {}
    keep = set(dtypes) if dtypes is not None else None
    for name in targets:
        t = get_target(name)
        p = Panel(t.name)
        for (d, u), v in sorted(t.peaks.items(), key=lambda kv: -kv[1]):
            if keep is None or d in keep or d == (dtype or "float32"):
                p.compute_roofs[f"{d} {u}"] = v
        for m in t.memory_levels:
            if m.bandwidth is not None and m.managed in ("hardware", "memory"):
                p.memory_roofs[m.name] = m.bandwidth
        p.main_roof = _main_roof(t, dtype)
        peak = t.peaks[tuple(p.main_roof.split(" "))]
        p.ridges = {lv: peak / bw for lv, bw in p.memory_roofs.items()}
        for rep in reports:
            flops = _number(rep, "flops")
            nbytes = _number(rep, "bytes")
            if not flops or not nbytes:
                continue
            ai = flops / nbytes
            label = rep.op + (f" {rep.shapes}" if rep.shapes else "")
            measured = [m for m in rep.filter("time_ms", target=t.name) if m.available]
            for m in measured:
                p.points.append(Point(label, t.name, ai, flops / (m.value / 1e3), "measured", float(m.value)))
            pred = [m for m in rep.filter("predicted_time_ms", target=t.name) if m.available]
            for m in pred:
                p.points.append(Point(label, t.name, ai, flops / (m.value / 1e3), "predicted", float(m.value)))
        panels[t.name] = p
    return RooflineData(panels)


def roofline(reports_or_ops: Any, targets: Sequence[str] | None = None, *, dtype: str | None = None,
             dtypes: Iterable[str] | None = None, normalized: bool = False, path: str | None = None,
             figsize: tuple[float, float] | None = None, **profile_options: Any):
    """Draw a roofline figure (module docstring) and return the matplotlib Figure (inline in Jupyter).

    `reports_or_ops`: a Report, an (operator, args) pair, or a list of them (pairs are profiled first, with
    `profile_options`). `targets` defaults to the targets the reports mention. `dtype` picks the compute roof
    ridges are drawn against (default float32); `dtypes` limits the compute roofs drawn. `path` saves the figure
    (PNG, SVG, PDF by its extension)."""
    from matplotlib.figure import Figure

    if targets is None:
        from ..profile import Report
        items = reports_or_ops if isinstance(reports_or_ops, (list, tuple)) and not (
            len(reports_or_ops) == 2 and hasattr(reports_or_ops[0], "lower")) else [reports_or_ops]
        found = [m.target for r in items if isinstance(r, Report) for m in r.records if m.target]
        targets = list(dict.fromkeys(found)) or ["cpu-local"]
    targets = list(targets)
    for name in targets:
        try:
            get_target(name)
        except TargetError as e:
            raise TargetError(str(e).replace("xbench: ", "")) from None
    reports = _reports(reports_or_ops, targets, dict(profile_options))
    data = roofline_data(reports, targets, dtype=dtype, dtypes=dtypes)
    data.normalized = normalized
    n = 1 if normalized else len(targets)
    fig = Figure(figsize=figsize or (5.2 * n, 4.2), layout="constrained")
    axes = fig.subplots(1, n, squeeze=False)[0]
    if normalized:
        _normalized_panel(axes[0], data)
    else:
        for ax, name in zip(axes, targets):
            _panel(ax, data.panels[get_target(name).name])
    fig.roofline_data = data
    if path:
        fig.savefig(path)
    return fig


_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def _panel(ax, p: Panel) -> None:
    pts = p.points
    xs = [q.intensity for q in pts] + list(p.ridges.values())
    lo = min([x for x in xs if x > 0] + [1.0]) / 10
    hi = max(xs + [1.0]) * 10
    top = max(p.compute_roofs.values())
    for name, v in p.compute_roofs.items():
        main = name == p.main_roof
        ax.plot([lo, hi], [v / 1e9, v / 1e9], color="0.25" if main else "0.6", lw=1.6 if main else 0.8,
                ls="-" if main else "--", label=f"peak {name}", gid=f"compute:{name}")
        ax.annotate(f"{name} {_rate(v, 'FLOP/s')}", (hi, v / 1e9), ha="right", va="bottom", fontsize=7,
                    color="0.3")
    for i, (lv, bw) in enumerate(p.memory_roofs.items()):
        x_end = top / bw
        ax.plot([lo, min(hi, x_end)], [bw * lo / 1e9, bw * min(hi, x_end) / 1e9], color=_COLORS[i % len(_COLORS)],
                lw=1.2, label=f"{lv} {_rate(bw, 'B/s')}", gid=f"memory:{lv}")
        r = p.ridges[lv]
        ax.plot([r], [bw * r / 1e9], marker="D", ms=4, color=_COLORS[i % len(_COLORS)], ls="none",
                gid=f"ridge:{lv}")
        ax.annotate(f"ridge {r:.3g}", (r, bw * r / 1e9), xytext=(3, -10), textcoords="offset points", fontsize=7,
                    color=_COLORS[i % len(_COLORS)])
    for q in pts:
        filled = q.kind == "measured"
        ax.plot([q.intensity], [q.flops_per_s / 1e9], marker=MEASURED_MARKER if filled else PREDICTED_MARKER,
                ms=7, ls="none", color="black" if filled else "none", markeredgecolor="black",
                label=f"{q.label} ({q.kind})", gid=f"point:{q.kind}:{q.label}")
        ax.annotate(q.label.split(" ")[0], (q.intensity, q.flops_per_s / 1e9), xytext=(5, 4),
                    textcoords="offset points", fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    bottom = min([q.flops_per_s / 1e9 for q in pts] + [min(p.memory_roofs.values(), default=1e9) * lo / 1e9])
    ax.set_ylim(bottom / 3, top / 1e9 * 3)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("performance (GFLOP/s)")
    ax.set_title(p.target)
    ax.grid(True, which="major", lw=0.3, alpha=0.5)
    ax.legend(fontsize=6, loc="lower right")


def _normalized_panel(ax, data: RooflineData) -> None:
    """One panel: each target's roofline scaled so its main peak is 1 and its memory ridge is at 1."""
    xs = [0.01, 100.0]
    ax.plot(xs, [min(1.0, x) for x in xs], color="0.25", lw=1.6, label="roofline (normalised)", gid="roof")
    ax.plot([0.01, 1.0], [0.01, 1.0], color="0.25", lw=1.6)
    for i, p in enumerate(data.panels.values()):
        peak = max(v for k, v in p.compute_roofs.items() if k == p.main_roof)
        mem = next((m for m in ("hbm", "dram", "memory") if m in p.ridges), None) or list(p.ridges)[-1]
        ridge = p.ridges[mem]
        for q in p.points:
            filled = q.kind == "measured"
            c = _COLORS[i % len(_COLORS)]
            ax.plot([q.intensity / ridge], [q.flops_per_s / peak], marker=MEASURED_MARKER if filled else
                    PREDICTED_MARKER, ms=7, ls="none", color=c if filled else "none", markeredgecolor=c,
                    label=f"{p.target}: {q.label} ({q.kind})", gid=f"point:{p.target}:{q.kind}:{q.label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("intensity / ridge point (memory roof)")
    ax.set_ylabel("performance / peak")
    ax.set_title("normalised roofline")
    ax.grid(True, lw=0.3, alpha=0.5)
    ax.legend(fontsize=6, loc="lower right")


def _rate(v: float, unit: str) -> str:
    for p, s in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if v >= s:
            return f"{v / s:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


__all__ = ["Panel", "Point", "RooflineData", "roofline", "roofline_data"]

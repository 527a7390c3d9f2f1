"""Roofline figures: operators placed against the compute and memory roofs of every target, on one chart.

    fig = xb.roofline(xb.profile(xb.ops.softmax, x))                 # every target the report mentions
    fig = xb.roofline(rep, target="h100")                            # one target in detail
    fig = xb.roofline([rep1, rep2, (xb.ops.matmul, (a, b))], normalized=True)
    fig.savefig("roofline.svg"); roofline_svg(fig)                    # SVG with values on hover

Several targets share one chart, as Nsight Compute and Intel Advisor draw theirs: each target's roofline (its
device-memory roof up to the ridge point, then its main compute roof) in a colour of its own, named at the
right end of its compute roof, and the operator's point on each target in the same colour: a filled circle
where its time was measured on that target, an open triangle where it is predicted. The legend sits outside the
chart, with each target's peak, bandwidth and ridge point. With one target (`target=` or a single entry in
`targets`) the chart shows that target's detail: a roof per compute peak (dtype and unit), a diagonal per memory
level with a bandwidth, the ridge point of each against the main peak. Labels are moved apart until none overlaps
(`xbench.viz.labels`); a point above its own roof, which no kernel can reach, is ringed in red and says so.
`normalized=True` draws every target scaled to its own roofline (x = intensity / ridge, y = FLOP/s / peak).

What was drawn is kept in `fig.roofline_data` (`RooflineData`: roofs, ridges and points per target), the hover
texts in `fig.roofline_tooltips` (group id -> text, for `roofline_svg`), and the label artists in
`fig.roofline_labels`.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..hw.target import Target, TargetError, get_target
from .svg import INK, to_svg

MEASURED_MARKER = "o"
PREDICTED_MARKER = "^"
# Okabe and Ito's colour-blind-safe palette (mid tones, legible on light and dark backgrounds)
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#999933", "#882255")
ABOVE = "#E8001C"
WIDTH_IN = 9.0             # the chart at notebook width: 9 in at 100 dpi is 900 px
HEIGHT_IN = 5.4
ABOVE_ROOF = 1.02


@dataclass
class Point:
    label: str
    target: str
    intensity: float           # FLOP / byte
    flops_per_s: float
    kind: str                  # measured | predicted
    time_ms: float
    op: str = ""
    level: str = ""            # the memory level its roof is priced at (`profile.roof.roof_level`)

    @property
    def gid(self) -> str:
        return f"point:{self.kind}:{self.op or self.label}"


@dataclass
class Panel:
    target: str
    compute_roofs: dict[str, float] = field(default_factory=dict)     # "float32 vector" -> FLOP/s
    memory_roofs: dict[str, float] = field(default_factory=dict)      # "hbm" -> bytes/s
    ridges: dict[str, float] = field(default_factory=dict)            # memory level -> FLOP/byte
    main_roof: str = ""
    memory: str = ""                                                  # the device memory level
    points: list[Point] = field(default_factory=list)

    @property
    def peak(self) -> float:
        return self.compute_roofs[self.main_roof]

    def attainable(self, intensity: float, level: str | None = None) -> float:
        """FLOP/s the roofline allows at `intensity`: the main peak, or the roof of memory `level` (default: the
        device memory) below it."""
        bw = self.memory_roofs.get(level or self.memory, math.inf)
        return min(self.peak, bw * intensity)

    def roof(self, q: Point) -> float:
        """The roof above a point: the memory level its data come from (warm cpu runs: the cache that holds
        them), or the main peak."""
        return self.attainable(q.intensity, q.level or None)

    def above(self, q: Point) -> bool:
        return q.flops_per_s > ABOVE_ROOF * self.roof(q)


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
    """The roofs, ridges and operator points of each target (what `roofline` draws)."""
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
        p.memory = t.memory.name if t.memory.name in p.memory_roofs else next(iter(p.memory_roofs), "")
        p.main_roof = _main_roof(t, dtype)
        p.compute_roofs.setdefault(p.main_roof, t.peaks[tuple(p.main_roof.split(" "))])
        p.ridges = {lv: p.peak / bw for lv, bw in p.memory_roofs.items()}
        from ..profile.roof import roof_level
        for rep in reports:
            flops = _number(rep, "flops")
            nbytes = _number(rep, "bytes")
            if not flops or not nbytes:
                continue
            ai = flops / nbytes
            label = rep.op + (f" {rep.shapes}" if rep.shapes else "")
            for name_, kind in (("time_ms", "measured"), ("predicted_time_ms", "predicted")):
                for m in rep.filter(name_, target=t.name):
                    if m.available and isinstance(m.value, (int, float)) and m.value > 0:
                        level = roof_level(t, nbytes, warm=t.kind == "cpu").name   # cpu timings run warm
                        p.points.append(Point(label, t.name, ai, flops / (m.value / 1e3), kind, float(m.value),
                                              rep.op, level if level in p.memory_roofs else p.memory))
        panels[t.name] = p
    return RooflineData(panels)


# ---- drawing ------------------------------------------------------------------------------------------------

def _rate(v: float, unit: str) -> str:
    for p, s in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= s:
            return f"{v / s:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def _time(ms: float) -> str:
    from ..profile.timing import fmt_time
    return fmt_time(ms).strip()


def _style(ax) -> None:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_facecolor("none")
    for spine in ax.spines.values():
        spine.set_color(INK)
        spine.set_alpha(0.5)
    ax.tick_params(colors=INK, labelcolor=INK, which="both", labelsize=8)
    ax.grid(True, which="major", color=INK, alpha=0.12, lw=0.6)
    ax.xaxis.label.set_color(INK)
    ax.yaxis.label.set_color(INK)
    ax.title.set_color(INK)
    from matplotlib.ticker import FuncFormatter
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _rate(v, "FLOP/s") if v > 0 else ""))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))


def _span(panels: Sequence[Panel]) -> tuple[float, float, float, float]:
    xs = [q.intensity for p in panels for q in p.points] + [r for p in panels for r in p.ridges.values()]
    lo = min([x for x in xs if x > 0] + [1.0]) / 8
    hi = max(xs + [1.0]) * 8
    ys = [q.flops_per_s for p in panels for q in p.points]
    top = max([max(p.compute_roofs.values()) for p in panels] + ys)
    bottom = min(ys + [min(bw for p in panels for bw in p.memory_roofs.values()) * lo])
    return lo, hi, bottom / 4, top * 2.5


class _Drawing:
    """The state of one figure being drawn: labels to spread and hover texts."""

    def __init__(self, fig):
        self.fig = fig
        self.labels: list = []
        self.markers: list = []
        self.roofs: list = []                # lines a point's label must not sit on
        self.tooltips: dict[str, str] = {}

    def label(self, ax, text: str, xy, offset, *, color=INK, ha="left", va="center", size=8, leader=False,
              gid=None, weight="normal"):
        kw = {}
        if leader:
            kw["arrowprops"] = {"arrowstyle": "-", "lw": 0.6, "color": color, "alpha": 0.6, "shrinkA": 1,
                                "shrinkB": 4, "relpos": (0, 0.5)}
        a = ax.annotate(text, xy, xytext=offset, textcoords="offset points", ha=ha, va=va, fontsize=size,
                        color=color, fontweight=weight, annotation_clip=False, **kw)
        a.set_gid(gid or f"label:{len(self.labels)}:{text}")
        self.labels.append(a)
        return a

    def point(self, ax, p: Panel, q: Point, color: str, *, name: str | None = None, x=None, y=None,
              who: str = "", quiet: bool = False) -> None:
        """Draw the point (hover text: its values) and, unless `quiet`, its label: `who`, its time."""
        measured = q.kind == "measured"
        above = p.above(q)
        x = q.intensity if x is None else x
        y = q.flops_per_s if y is None else y
        gid = f"point:{p.target}:{q.kind}:{q.op or q.label}" if name is None else name
        (ln,) = ax.plot([x], [y], marker=MEASURED_MARKER if measured else PREDICTED_MARKER, ms=8 if measured else 9,
                        ls="none", color=color, markerfacecolor=color if measured else "none",
                        markeredgecolor=ABOVE if above else color, markeredgewidth=2.2 if above else 1.6,
                        zorder=5, gid=gid, label="_nolegend_")
        self.markers.append(ln)
        bound = p.roof(q)
        where = q.level or p.memory
        self.tooltips[gid] = (
            f"{q.label} on {p.target} ({q.kind})\ntime {_time(q.time_ms)}\n{_rate(q.flops_per_s, 'FLOP/s')} at "
            f"{q.intensity:.3g} FLOP/B\n{where} roof there {_rate(bound, 'FLOP/s')}: {q.flops_per_s / bound:.0%} of it"
            + ("\nABOVE ITS ROOF: the roof or the count is wrong" if above else ""))
        if quiet:
            return
        cached = f" (in {where})" if where != p.memory else ""
        text = (f"{who} " if who else "") + _time(q.time_ms) + cached + (" above its roof!" if above else "")
        self.label(ax, text, (x, y), (7, 0), color=ABOVE if above else color, leader=True, size=8,
                   gid=f"label:{gid}", weight="bold" if above else "normal")

    def finish(self) -> None:
        from .labels import spread
        points = [a for a in self.labels if a.get_gid().startswith("label:point:")]
        spread(self.fig, points, self.markers, self.roofs)      # the operator's labels off the roofs
        spread(self.fig, self.labels, self.markers)
        self.fig.canvas.draw()
        self.fig.set_layout_engine("none")       # the layout the labels were spread in, kept for every save
        self.fig.roofline_tooltips = self.tooltips
        self.fig.roofline_labels = list(self.labels)


def _op_lines(ax, d: _Drawing, panels: Sequence[Panel], bottom: float) -> None:
    """A dotted line at each operator's intensity, named at the foot of the chart."""
    seen: dict[str, float] = {}
    for p in panels:
        for q in p.points:
            seen.setdefault(q.op or q.label, q.intensity)
    for op, ai in seen.items():
        ax.axvline(ai, color=INK, lw=0.8, ls=":", alpha=0.45, zorder=1, gid=f"intensity:{op}")
        d.tooltips[f"intensity:{op}"] = f"{op}: {ai:.3g} FLOP/B"
        d.label(ax, f"{op}  {ai:.3g} FLOP/B", (ai, bottom), (3, 4), ha="left", va="bottom", size=7.5,
                gid=f"label:intensity:{op}")


def _overview(fig, data: RooflineData, title: str) -> None:
    """Every target's roofline and points on one chart (module docstring)."""
    from matplotlib.lines import Line2D

    ax = fig.subplots()
    _style(ax)
    d = _Drawing(fig)
    panels = list(data.panels.values())
    lo, hi, bottom, top = _span(panels)
    handles = [Line2D([], [], ls="none", marker=MEASURED_MARKER, color=INK, label="measured here"),
               Line2D([], [], ls="none", marker=PREDICTED_MARKER, color=INK, markerfacecolor="none",
                      label="predicted")]
    named: dict[float, list[str]] = {}
    same: dict[tuple, list[tuple[Panel, Point, str]]] = {}
    for i, p in enumerate(panels):
        c = PALETTE[i % len(PALETTE)]
        bw = p.memory_roofs.get(p.memory)
        if bw is None:
            continue
        r = p.peak / bw
        (roof,) = ax.plot([lo, r, hi], [bw * lo, p.peak, p.peak], color=c, lw=1.8, solid_joinstyle="miter",
                          gid=f"roof:{p.target}", label="_nolegend_")
        d.roofs.append(roof)
        d.tooltips[f"roof:{p.target}"] = (f"{p.target}: {p.main_roof} peak {_rate(p.peak, 'FLOP/s')}, "
                                          f"{p.memory} {_rate(bw, 'B/s')}, ridge {r:.3g} FLOP/B")
        named.setdefault(p.peak, []).append(p.target)
        handles.append(Line2D([], [], color=c, lw=1.8, label=f"{p.target}: {_rate(p.peak, 'FLOP/s')} "
                              f"{p.main_roof.split(' ')[0]}, {p.memory} {_rate(bw, 'B/s')}, ridge {r:.3g} FLOP/B"))
        for q in p.points:
            same.setdefault((q.op, q.kind, round(q.intensity, 12), round(q.flops_per_s, 3)), []).append((p, q, c))
    for group in same.values():              # targets where the operator lands on the same spot: one label
        p, q, c = group[0]
        d.point(ax, p, q, c, who=", ".join(g[0].target for g in group))
        for p2, q2, c2 in group[1:]:
            d.point(ax, p2, q2, c2, who="", quiet=True)
    for peak, names in named.items():       # targets with the same peak share one roof and one name
        color = PALETTE[[p.target for p in panels].index(names[0]) % len(PALETTE)]
        d.label(ax, ", ".join(names), (hi, peak), (-4, 3), ha="right", va="bottom", color=color, size=8,
                gid=f"label:roof:{'+'.join(names)}")
    _op_lines(ax, d, panels, bottom)
    _finish(fig, ax, d, (lo, hi, bottom, top), title, handles, ncols=2)


def _finish(fig, ax, d, span: tuple, title: str, handles: list, ncols: int) -> None:
    """Axes limits and labels, the title, the legend under the chart; then the labels are placed."""
    lo, hi, bottom, top = span
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom, top)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)", fontsize=9)
    ax.set_ylabel("performance (FLOP/s)", fontsize=9)
    ax.set_title(title, fontsize=10, loc="left")
    fig.legend(handles=handles, loc="outside lower center", fontsize=7.5, frameon=False, labelcolor=INK,
               handlelength=1.6, ncols=ncols, columnspacing=1.5)
    d.finish()


def _detail(fig, p: Panel, title: str) -> None:
    """One target: every compute roof, every memory roof, the ridge points, the points."""
    from matplotlib.lines import Line2D

    ax = fig.subplots()
    _style(ax)
    d = _Drawing(fig)
    lo, hi, bottom, top = _span([p])
    handles = []
    peak_top = max(p.compute_roofs.values())
    by_value: dict[float, list[str]] = {}
    for name, v in p.compute_roofs.items():
        main = name == p.main_roof
        (line,) = ax.plot([lo, hi], [v, v], color=INK, alpha=0.85 if main else 0.4, lw=1.6 if main else 0.9,
                          ls="-" if main else "--", gid=f"compute:{name}", label="_nolegend_")
        d.roofs.append(line)
        d.tooltips[f"compute:{name}"] = f"{p.target} {name} peak: {_rate(v, 'FLOP/s')}"
        by_value.setdefault(v, []).append(name)
    for v, names in by_value.items():        # roofs of the same height: one label naming them all
        units = dict.fromkeys(n.split(" ")[1] for n in names)
        text = " · ".join(", ".join(n.split(" ")[0] for n in names if n.split(" ")[1] == u) + f" {u}"
                          for u in units)
        d.label(ax, f"{text} {_rate(v, 'FLOP/s')}", (hi, v), (-4, 2), ha="right", va="bottom", size=7.5,
                gid=f"label:compute:{'+'.join(names)}")
    for i, (lv, bw) in enumerate(p.memory_roofs.items()):
        c = PALETTE[i % len(PALETTE)]
        x_end = min(hi, peak_top / bw)
        (line,) = ax.plot([lo, x_end], [bw * lo, bw * x_end], color=c, lw=1.3, gid=f"memory:{lv}",
                          label="_nolegend_")
        d.roofs.append(line)
        r = p.ridges[lv]
        ax.plot([r], [bw * r], marker="D", ms=4, color=c, ls="none", gid=f"ridge:{lv}", label="_nolegend_")
        d.tooltips[f"memory:{lv}"] = f"{p.target} {lv}: {_rate(bw, 'B/s')}, ridge {r:.3g} FLOP/B against " \
                                     f"{p.main_roof}"
        d.tooltips[f"ridge:{lv}"] = d.tooltips[f"memory:{lv}"]
        d.label(ax, f"ridge {r:.3g}", (r, bw * r), (4, -9), color=c, size=7, gid=f"label:ridge:{lv}")
        handles.append(Line2D([], [], color=c, lw=1.3, label=f"{lv} {_rate(bw, 'B/s')}"))
    for q in p.points:
        d.point(ax, p, q, PALETTE[0] if q.kind == "measured" else PALETTE[1], name=q.gid)
    _op_lines(ax, d, [p], bottom)
    handles += [Line2D([], [], color=INK, lw=1.6, label=f"{p.main_roof} (ridges against it)"),
                Line2D([], [], ls="none", marker=MEASURED_MARKER, color=PALETTE[0], label="measured here"),
                Line2D([], [], ls="none", marker=PREDICTED_MARKER, color=PALETTE[1], markerfacecolor="none",
                       label="predicted")]
    _finish(fig, ax, d, (lo, hi, bottom, top), title, handles, ncols=3)


def _normalized(fig, data: RooflineData, title: str) -> None:
    """One chart: each target's roofline scaled so its main peak is 1 and its memory ridge is at 1."""
    from matplotlib.lines import Line2D

    ax = fig.subplots()
    _style(ax)
    from matplotlib.ticker import FuncFormatter
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    d = _Drawing(fig)
    pts = [(p, q) for p in data.panels.values() for q in p.points]
    xs = [q.intensity / p.ridges[p.memory] for p, q in pts] + [1.0]
    lo, hi = min(xs) / 8, max(xs) * 8
    ax.plot([lo, 1.0, hi], [lo, 1.0, 1.0], color=INK, lw=1.6, alpha=0.85, gid="roof", label="_nolegend_")
    handles = [Line2D([], [], color=INK, lw=1.6, label="each target's device-memory roofline, scaled (a warm "
                      "point above it ran from cache)")]
    for i, p in enumerate(data.panels.values()):
        c = PALETTE[i % len(PALETTE)]
        ridge = p.ridges[p.memory]
        for q in p.points:
            scaled = Point(q.label, q.target, q.intensity, q.flops_per_s, q.kind, q.time_ms, q.op)
            d.point(ax, p, scaled, c, x=q.intensity / ridge, y=q.flops_per_s / p.peak,
                    name=f"point:{p.target}:{q.kind}:{q.op or q.label}")
        handles.append(Line2D([], [], ls="none", marker="s", color=c, label=p.target))
    ys = [q.flops_per_s / p.peak for p, q in pts] + [lo]
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(ys) / 4, 3.0)
    ax.set_xlabel("intensity / ridge point (device memory)", fontsize=9)
    ax.set_ylabel("performance / peak", fontsize=9)
    ax.set_title(title, fontsize=10, loc="left")
    fig.legend(handles=handles, loc="outside lower center", fontsize=7.5, frameon=False, labelcolor=INK,
               ncols=min(4, len(handles)))
    d.finish()


def roofline(reports_or_ops: Any, targets: Sequence[str] | None = None, *, target: str | None = None,
             dtype: str | None = None, dtypes: Iterable[str] | None = None, normalized: bool = False,
             path: str | None = None, figsize: tuple[float, float] | None = None, **profile_options: Any):
    """Draw a roofline figure (module docstring) and return the matplotlib Figure (inline in Jupyter).

    `reports_or_ops`: a Report, an (operator, args) pair, or a list of them (pairs are profiled first, with
    `profile_options`). `targets` defaults to the targets the reports mention; `target` draws one of them in
    detail. `dtype` picks the compute roof ridges are drawn against (default float32); `dtypes` limits the
    compute roofs drawn. `path` saves the figure (PNG, SVG, PDF by its extension)."""
    from matplotlib.figure import Figure

    if targets is None:
        from ..profile import Report
        items = reports_or_ops if isinstance(reports_or_ops, (list, tuple)) and not (
            len(reports_or_ops) == 2 and hasattr(reports_or_ops[0], "lower")) else [reports_or_ops]
        found = [m.target for r in items if isinstance(r, Report) for m in r.records if m.target]
        targets = list(dict.fromkeys(found)) or ["cpu-local"]
    targets = list(targets)
    if target is not None and target not in targets:
        targets.append(target)
    for name in targets:
        try:
            get_target(name)
        except TargetError as e:
            raise TargetError(str(e).replace("xbench: ", "")) from None
    reports = _reports(reports_or_ops, targets, dict(profile_options))
    data = roofline_data(reports, targets, dtype=dtype, dtypes=dtypes)
    data.normalized = normalized
    ops = ", ".join(dict.fromkeys(r.op + (f" {r.shapes}" if r.shapes else "") for r in reports))
    fig = Figure(figsize=figsize or (WIDTH_IN, HEIGHT_IN), layout="constrained", dpi=100)
    if normalized:
        _normalized(fig, data, f"{ops}: normalised roofline of {len(data.panels)} targets")
    elif target is not None or len(targets) == 1:
        p = data.panels[get_target(target or targets[0]).name]
        _detail(fig, p, f"{ops} on {p.target}")
    else:
        _overview(fig, data, f"{ops} on {len(data.panels)} targets")
    fig.roofline_data = data
    if path:
        fig.savefig(path)
    return fig


def roofline_svg(fig) -> str:
    """The figure as SVG whose points and roofs show their values on hover (`xbench.viz.svg.to_svg`)."""
    return to_svg(fig, getattr(fig, "roofline_tooltips", {}))


def roofline_text(report, targets: Sequence[str] | None = None, indent: str = "") -> str:
    """The roofline as text (a terminal's view): per target its peak, memory roof and ridge, and each point of
    the operator with its time and its share of the roof above it."""
    targets = list(targets or dict.fromkeys(m.target for m in report.records if m.target))
    data = roofline_data([report], targets)
    lines = []
    for p in data.panels.values():
        bw = p.memory_roofs.get(p.memory, math.nan)
        lines.append(f"{p.target}: {p.main_roof} peak {_rate(p.peak, 'FLOP/s')}, {p.memory} {_rate(bw, 'B/s')}, "
                     f"ridge {p.peak / bw:.3g} FLOP/B")
        if not p.points:
            lines.append("    no time for this target (neither measured nor predicted)")
        for q in p.points:
            bound = p.roof(q)
            level = q.level or p.memory
            side = "memory-bound" if q.intensity < p.ridges.get(level, math.inf) else "compute-bound"
            share = f"ABOVE ITS ROOF ({q.flops_per_s / bound:.0%} of the {level} roof: the roof or the count is " \
                f"wrong)" if p.above(q) else f"{q.flops_per_s / bound:.0%} of the {level} roof there"
            lines.append(f"    {q.kind:9s} {_time(q.time_ms):>9s}  {_rate(q.flops_per_s, 'FLOP/s'):>13s} at "
                         f"{q.intensity:.3g} FLOP/B ({side}): {share}")
    return "\n".join(indent + line for line in lines)


__all__ = ["Panel", "Point", "RooflineData", "roofline", "roofline_data", "roofline_svg", "roofline_text"]

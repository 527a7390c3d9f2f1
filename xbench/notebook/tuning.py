"""The Tuning tab of a `%%tensorop --tune` cell: the default and best schedule of each kernel, every candidate
the tuner evaluated (measured, predicted, rejected with the comparison that failed, failed with its error), the
time per candidate in evaluation order, and a heatmap over two knobs picked from drop-downs. Everything reads
"predicted" when the backend has no hardware here. Text and HTML (with the figures as PNG) forms as well, for
nbconvert, GitHub and nbval.
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import ipywidgets as W

from .runner import TuningOutcome, figure_png

PNG_STYLE = "max-width: 100%;"


def _fmt_time(ms: float | None) -> str:
    from .view import fmt_time
    return fmt_time(ms)


def _value(v: Any) -> str:
    return str(v)


# ---- what the tab says ------------------------------------------------------------------------------------------

def where(outcome: TuningOutcome) -> str:
    """'cpu (cpu-local, measured here)' or 'cuda for h100 (predicted: ...)'."""
    res = outcome.result
    target = res.target if res is not None else (outcome.target or "its default target")
    if outcome.predicted:
        return (f"{outcome.backend} for {target} (predicted: there is no {target} here; every candidate was "
                f"checked against the reference in the simulator, then timed by the performance model)")
    return f"{outcome.backend} ({target}, measured here)"


def headline(outcome: TuningOutcome) -> str:
    res = outcome.result
    if res is None:
        return f"{outcome.backend}: {outcome.error}"
    counts = res.counts()
    found = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("measured", "predicted", "rejected", "failed", "pruned")
                      if counts.get(s, 0) or s in ("rejected", "pruned"))
    label = " (predicted)" if res.predicted else ""
    how = "".join(f", {what} {v}" for what, v in (("strategy", outcome.strategy), ("budget", outcome.budget))
                  if v is not None)
    how += " per kernel" if outcome.budget is not None else ""
    return (f"tuned on {where(outcome)}{how}, in {res.seconds:.1f} s: {_fmt_time(res.default_ms)} -> "
            f"{_fmt_time(res.best_ms)}{label} ({res.speedup:.2f}x); {found}")


KERNEL_HEADER = ("kernel", "default", "best", "speedup", "best schedule (knobs changed from the default)")


def kernel_rows(outcome: TuningOutcome) -> list[list[str]]:
    """Default against best per kernel."""
    rows = []
    for k in outcome.result.kernels:
        changed = {n: v for n, v in k.best.items() if k.default.get(n) != v}
        best = ", ".join(f"{n}={_value(v)}" for n, v in changed.items()) or "the default"
        rows.append([k.kernel, _fmt_time(k.default_ms), _fmt_time(k.best_ms),
                     f"{k.speedup:.2f}x" if k.speedup else "—", best])
    return rows


def knob_names(outcome: TuningOutcome, kernel: str | None = None) -> list[str]:
    names: list[str] = []
    for k in outcome.result.kernels:
        if kernel in (None, k.kernel):
            for c in k.candidates:
                names.extend(n for n in c.config if n not in names)
    return names


def candidate_header(outcome: TuningOutcome) -> list[str]:
    several = len(outcome.result.kernels) > 1
    time = "time (predicted)" if outcome.predicted else "time"
    return ["#", *(["kernel"] if several else []), *knob_names(outcome), "status", time, "note"]


def candidate_rows(outcome: TuningOutcome) -> list[list[str]]:
    """Every candidate in the order it was evaluated (the plot's x axis), its knobs, status and time; the note
    says why it was rejected or failed, and which is the default and the best."""
    several = len(outcome.result.kernels) > 1
    names = knob_names(outcome)
    rows = []
    for k in outcome.result.kernels:
        for i, c in enumerate(k.candidates):
            notes = []
            if c.config == k.default:
                notes.append("default")
            if c.config == k.best:
                notes.append("best")
            if c.reused:
                notes.append("from the tuning database")
            if c.message:
                notes.append(c.message)
            rows.append([str(i), *([k.kernel] if several else []),
                         *(_value(c.config[n]) if n in c.config else "" for n in names),
                         c.status, _fmt_time(c.time_ms), "; ".join(notes)])
    return rows


def default_axes(outcome: TuningOutcome, kernel: str) -> tuple[str, str] | None:
    """The two knobs of `kernel` whose values varied most among the candidates that have a time."""
    k = next(k for k in outcome.result.kernels if k.kernel == kernel)
    timed = [c for c in k.candidates if c.time_ms is not None]
    names = knob_names(outcome, kernel)
    if len(names) < 2:
        return None
    ranked = sorted(names, key=lambda n: -len({repr(c.config.get(n)) for c in timed}))
    return ranked[0], ranked[1]


def main_kernel(outcome: TuningOutcome) -> str:
    """The kernel shown first: the slowest one by its default time."""
    ks = outcome.result.kernels
    return max(ks, key=lambda k: k.default_ms or k.best_ms or 0).kernel


NOTE = ("op(...) and op.compile(...) use the best schedule from now on (it is stored in xb.tuning_db()); the tuner "
        "checks every candidate against the float64 reference before timing it and rejects one that changes "
        "the numbers")


# ---- figures ------------------------------------------------------------------------------------------------

def plot_png(outcome: TuningOutcome, kernel: str) -> bytes:
    return figure_png(outcome.result.plot(kernel))


def heatmap_figure(outcome: TuningOutcome, x: str, y: str, kernel: str) -> Any:
    """`TuneResult.heatmap`, its title saying "predicted" and the target when the times are predicted."""
    fig = outcome.result.heatmap(x, y, kernel)
    if outcome.predicted:
        ax = fig.axes[0]
        ax.set_title(f"{ax.get_title().replace(': best ms', ': best predicted ms')} ({outcome.result.target})")
    return fig


def heatmap_png(outcome: TuningOutcome, x: str, y: str, kernel: str) -> bytes:
    return figure_png(heatmap_figure(outcome, x, y, kernel))


def _heatmap_or_message(outcome: TuningOutcome, kernel: str, axes: tuple[str, str] | None) -> bytes | str:
    if axes is None:
        return f"{kernel} has one knob: no heatmap"
    if axes[0] == axes[1]:
        return "pick two different knobs for the heatmap"
    try:
        return heatmap_png(outcome, axes[0], axes[1], kernel)
    except ValueError as exc:
        return str(exc)


# ---- the three forms ----------------------------------------------------------------------------------------

def tuning_text(outcome: TuningOutcome) -> str:
    from .view import _text_table
    if outcome.result is None:
        return headline(outcome)
    return "\n".join([headline(outcome), _text_table(KERNEL_HEADER, kernel_rows(outcome)),
                      "candidates", _text_table(candidate_header(outcome), candidate_rows(outcome))])


def _img(png: bytes, alt: str) -> str:
    import base64
    return f'<img src="data:image/png;base64,{base64.b64encode(png).decode()}" alt="{alt}" style="{PNG_STYLE}"/>'


def _tables_html(outcome: TuningOutcome) -> str:
    from .view import _table
    return (f"<p><b>{html.escape(headline(outcome))}</b></p>{_table(KERNEL_HEADER, kernel_rows(outcome))}"
            f"<p>{html.escape(NOTE)}.</p><b>candidates</b>"
            f"{_table(candidate_header(outcome), candidate_rows(outcome))}")


def tuning_html(outcome: TuningOutcome, figures: Sequence[bytes | str] | None = None) -> str:
    """Static HTML: the tables and, below, the plot and the heatmap of the main kernel (as PNG)."""
    from .view import _error_html
    if outcome.result is None:
        return _error_html(headline(outcome), outcome.traceback)
    if figures is None:
        kernel = main_kernel(outcome)
        figures = [plot_png(outcome, kernel), _heatmap_or_message(outcome, kernel, default_axes(outcome, kernel))]
    parts = [_tables_html(outcome)]
    for fig, alt in zip(figures, ("time per candidate", "heatmap")):
        parts.append(_img(fig, alt) if isinstance(fig, bytes) else f"<p>{html.escape(fig)}</p>")
    return "".join(parts)


class TuningPane:
    """The widget of the Tuning tab: tables, then the kernel, x-knob and y-knob pickers above the time-per-candidate
    plot and the heatmap (redrawn when a picker changes)."""

    def __init__(self, outcome: TuningOutcome):
        from .view import _error_html
        self.outcome = outcome
        self.figures: list[bytes | str] = []
        self._busy = False
        self._plot = b""
        if outcome.result is None:
            self.widget: W.Widget = W.HTML(_error_html(headline(outcome), outcome.traceback))
            return
        kernels = [k.kernel for k in outcome.result.kernels]
        kernel = main_kernel(outcome)
        self.kernel = W.Dropdown(options=kernels, value=kernel, description="kernel")
        self.x = W.Dropdown(description="x knob")
        self.y = W.Dropdown(description="y knob")
        self.plot = W.Image(format="png")
        self.heat = W.Image(format="png")
        self.plot_note = W.HTML()
        self.heat_note = W.HTML()
        self._set_knobs(kernel)
        self._draw()
        self.kernel.observe(self._on_kernel, names="value")
        self.x.observe(self._on_axes, names="value")
        self.y.observe(self._on_axes, names="value")
        pickers = W.HBox([self.kernel, self.x, self.y]) if len(kernels) > 1 else W.HBox([self.x, self.y])
        from . import html as H
        self.widget = W.VBox([W.HTML(H.view(_tables_html(outcome))), pickers,
                              W.HBox([W.VBox([self.plot, self.plot_note]), W.VBox([self.heat, self.heat_note])])])

    def _set_knobs(self, kernel: str) -> None:
        names = knob_names(self.outcome, kernel)
        axes = default_axes(self.outcome, kernel)
        self.x.options = self.y.options = names
        if axes is not None:
            self.x.value, self.y.value = axes

    def _show(self, image: W.Image, note: W.HTML, fig: bytes | str) -> None:
        if isinstance(fig, bytes):
            image.value, note.value = fig, ""
            image.layout.display = None
        else:
            image.layout.display = "none"
            note.value = f"<p>{html.escape(fig)}</p>"

    def _draw(self, plot: bool = True) -> None:
        kernel = self.kernel.value
        axes = (self.x.value, self.y.value) if self.x.value and self.y.value else None
        if plot:
            self._plot = plot_png(self.outcome, kernel)
            self._show(self.plot, self.plot_note, self._plot)
        heat = _heatmap_or_message(self.outcome, kernel, axes)
        self._show(self.heat, self.heat_note, heat)
        self.figures = [self._plot, heat]

    def _on_kernel(self, change: dict) -> None:
        self._busy = True             # setting the knob pickers must not redraw the heatmap twice on the way
        try:
            self._set_knobs(change["new"])
        finally:
            self._busy = False
        self._draw()

    def _on_axes(self, change: dict) -> None:
        if not self._busy:
            self._draw(plot=False)


class TuningView:
    """An `xb.tune` result shown as the Tuning tab of a `%%tensorop --tune` cell (tables, plot, heatmap with its
    knob pickers; text and HTML forms too): `TuningView(xb.tune(op, x, backend="cuda", budget=8))`."""

    def __init__(self, result: Any, budget: int | None = None, strategy: str | None = None):
        self.outcome = TuningOutcome(result.backend, result.target, budget, strategy, result)
        self.pane = TuningPane(self.outcome)
        self.widget = self.pane.widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.widget._repr_mimebundle_()
        data["text/plain"] = tuning_text(self.outcome)
        data["text/html"] = tuning_html(self.outcome, self.pane.figures)
        return data

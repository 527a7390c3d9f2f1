"""`xb.explore(op)`: an interactive profiling widget. One slider per dim, backend, target and dtype pickers;
every change re-runs the operator (compile, check against the reference, time, and profile when xb.profile is
present) and updates the summary, the metrics table and the roofline in place, with a progress bar."""
from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as W

from ..lang.operator import Operator
from . import html as H
from . import runner
from .runner import OperatorResult, Settings
from .view import (
    SUMMARY_HEADER,
    _error_html,
    _table,
    header_text,
    metrics_html,
    roofline_html,
    roofline_message,
    summary_rows,
)

SIZES = tuple(2 ** i for i in range(0, 17))          # slider stops: 1 .. 65536
DTYPES = ("float32", "float16", "bfloat16", "float64")


def _stops(value: int) -> list[int]:
    return sorted(set(SIZES) | {int(value)})


class Explorer:
    """The widget behind `xb.explore`. `dims[name]`, `backends`, `targets` and `dtype` are the controls (drive
    their `.value`); `result` is the latest run, `runs` counts them, `error` holds the last failure."""

    def __init__(self, op: Operator, sizes: Mapping[str, int] | None = None, backends: Sequence[str] | None = None,
                 targets: Sequence[str] | None = None, dtype: str = "float32"):
        from ..hw import list_targets
        if not isinstance(op, Operator):
            raise TypeError(f"xb.explore takes an operator (a function decorated with @xb.tensor_op or defined in a "
                            f"%%tensorop cell), not {type(op).__name__}")
        self.op = op
        self.runs = 0
        self.result: OperatorResult | None = None
        self.error: str | None = None
        names = _dim_names(op)
        sizes = dict(sizes or {})
        bad = [n for n in sizes if n not in names]
        if bad:
            raise ValueError(f"xb.explore: {op.name} has no dim {', '.join(bad)} (its dims: {', '.join(names)})")
        start = dict(runner.make_inputs(op, sizes).dims)
        self.dims = {n: W.SelectionSlider(options=_stops(start[n]), value=start[n], description=n,
                                          continuous_update=False) for n in names}
        available = runner.installed_backends()
        chosen = list(backends) if backends else available
        self.backends = W.SelectMultiple(options=sorted(set(available) | set(chosen), key=_order(available)),
                                         value=tuple(chosen), description="backends", rows=min(4, len(available)))
        known = list_targets()
        self.targets = W.SelectMultiple(options=known, value=tuple(t for t in targets or () if t in known),
                                        description="targets", rows=min(5, len(known)))
        self.dtype = W.Dropdown(options=list(DTYPES), value=dtype, description="dtype")
        self.progress = W.IntProgress(value=0, min=0, max=1, description="idle")
        self.header = W.HTML()
        self.summary = W.HTML()
        self.metrics = W.HTML()
        self.roofline = W.HTML(layout=W.Layout(display="none"))
        self.status = W.HTML()
        self.roofline_note = W.HTML()
        controls = W.VBox([*self.dims.values(), W.HBox([self.backends, self.targets]), self.dtype,
                           W.HBox([self.progress, self.status])])
        outputs = W.Tab(children=[self.summary, self.metrics, W.VBox([self.roofline, self.roofline_note])],
                        titles=("Summary", "Metrics", "Roofline"))
        self.widget = W.VBox([controls, self.header, outputs])
        for control in [*self.dims.values(), self.backends, self.targets, self.dtype]:
            control.observe(self._changed, names="value")
        self.refresh()

    def settings(self) -> Settings:
        return Settings(backends=list(self.backends.value), sizes={n: int(s.value) for n, s in self.dims.items()},
                        dtype=self.dtype.value, targets=list(self.targets.value) or None, profile=True)

    def _changed(self, change: Mapping[str, Any]) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Run the operator with the current controls and update the views."""
        settings = self.settings()
        steps = runner.steps(settings)
        self.progress.max = len(steps)
        self.progress.value = 0
        self.progress.bar_style = "info"

        def step(key: str, what: str) -> None:
            self.progress.description = key
            self.status.value = H.view(f"<span class='xb-note'>{H.esc(what)}</span>")
            if key in steps:
                self.progress.value = steps.index(key)

        try:
            result = runner.evaluate(self.op, settings, progress=step)
        except Exception as exc:  # shown in the widget; the controls stay usable
            self.error = runner._short(exc)
            self.summary.value = _error_html(self.error)
            self.progress.bar_style = "danger"
            self.progress.description = "failed"
            self.runs += 1
            return
        self.error = None
        self.result = result
        self.runs += 1
        self.header.value = f"<b>{html.escape(header_text(result))}</b>"
        self.summary.value = H.view(_table(SUMMARY_HEADER, summary_rows(result)))
        self.metrics.value = H.view(metrics_html(result.profile))
        message = roofline_message(result.profile)
        if message is None:
            self.roofline.value = H.view(roofline_html(result.profile.roofline_svg))
            self.roofline.layout.display = None
            self.roofline_note.value = ""
        else:
            self.roofline.layout.display = "none"
            self.roofline_note.value = f"<p>{html.escape(message)}</p>"
        self.progress.value = self.progress.max
        self.progress.bar_style = "success"
        self.progress.description = "done"
        self.status.value = ""
        from .registry import registry
        registry().publish(result.record())

    def text(self) -> str:
        from .view import _text_table
        if self.result is None:
            return f"xb.explore({self.op.name}): {self.error}"
        lines = [f"xb.explore({self.op.name}): " + header_text(self.result),
                 _text_table(SUMMARY_HEADER, summary_rows(self.result))]
        return "\n".join(lines)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.widget._repr_mimebundle_()
        data["text/plain"] = self.text()
        if self.result is not None:
            data["text/html"] = (f"<p><b>{html.escape(header_text(self.result))}</b></p>"
                                 + _table(SUMMARY_HEADER, summary_rows(self.result)))
        return data


def _order(available: list[str]):
    return lambda n: (available.index(n) if n in available else len(available), n)


def _dim_names(op: Operator) -> list[str]:
    from ..profile.checks import dim_names
    return dim_names(op)


def explore(op: Operator, sizes: Mapping[str, int] | None = None, *, backends: Sequence[str] | None = None,
            targets: Sequence[str] | None = None, dtype: str = "float32") -> Explorer:
    """An interactive profiling widget for `op`: a slider per dim (starting at `sizes`, default 16), backend,
    target and dtype pickers. Every change re-runs and re-profiles the operator and updates the view in place."""
    return Explorer(op, sizes, backends, targets, dtype)

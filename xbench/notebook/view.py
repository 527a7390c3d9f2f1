"""The output of a `%%tensorop` cell: one ipywidgets view (tabs for the summary, the IR, the code of each backend,
the backends side by side, toolchain resources, the metrics and the roofline) that also carries a text and a
static HTML form, so it reads in nbconvert, on GitHub and in nbval as well as in JupyterLab.

The HTML is styled by `xbench.notebook.html` (JupyterLab's theme colours: light and dark) and never scrolls inside
the notebook: code wraps, tables keep numbers on one line and wrap their notes, the roofline scales to the cell.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ipywidgets as W

from ..profile.timing import fmt_time
from . import html as H
from .compare import compare_html
from .runner import (
    DEFAULT_SIZES,
    PROFILER_MISSING,
    BackendResult,
    OperatorResult,
    ProfileResult,
    installed_backends,
    predicted_time,
)
from .tuning import TuningPane, headline, tuning_html, tuning_text

TITLES = {"summary": "Summary", "ir": "IR", "cpu": "CPU", "cuda": "CUDA", "ptx": "PTX", "ascend": "Ascend C",
          "compare": "Side by side", "resources": "Resources", "metrics": "Metrics", "roofline": "Roofline",
          "tuning": "Tuning"}
LANG = {"cpu": "python", "cuda": "python", "ascend": "cpp", "ptx": "text", "ir": "text"}
SHOW_CHOICES = ("summary", "ir", "cpu", "cuda", "ptx", "ascend", "compare", "resources", "metrics", "roofline",
                "tuning")
STATUS_MARK = {"pass": "✓ pass", "fail": "✗ fail", "error": "! error"}
TIME_WIDTH = len("999 µs (ascend-910b)")
NO_PROFILE = "run the cell with --profile for the metrics and the roofline"
ALL_TARGETS = "all targets"

__all__ = ["TITLES", "SHOW_CHOICES", "CellView", "ErrorView", "OperatorView", "fmt_time", "session_text"]


# ---- formatting ---------------------------------------------------------------------------------------------

def fmt_error(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def fmt_dims(dims) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items()) or "no named dims"


def pre(text: str) -> str:
    return H.pre(text)


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    # a time column is as wide as its widest possible entry, so measured times never shift the columns after it
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    widths = [max(w, TIME_WIDTH) if h.startswith("time") else w for w, h in zip(widths, header)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    return "\n".join(lines)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A table in the views' style; the last column ('note') may wrap."""
    return H.table(header, rows, note_columns=(len(header) - 1,) if header and header[-1] == "note" else ())


def _error_html(message: str, tb: str | None = None) -> str:
    return H.error(message, tb)


# ---- what each tab says ---------------------------------------------------------------------------------------

SUMMARY_HEADER = ("backend", "status", "max |error|", "rtol", "checked at", "time of run()", "time predicted", "note")


def summary_rows(result: OperatorResult) -> list[list[str]]:
    rows = []
    for name, r in result.backends.items():
        if r.status == "pass" and r.measured_ms is None and r.predicted:
            time = "simulated (no time)"
        else:
            time = fmt_time(r.measured_ms) + (" (noisy)" if r.noisy else "")
        found = predicted_time(result.profile, name)
        predicted = f"{fmt_time(found[0])} ({found[1]})" if found else "—"
        rtol = f"{r.tolerance[0]:.1e}" if r.tolerance else "—"
        rows.append([name, STATUS_MARK[r.status], fmt_error(r.max_abs_error), rtol, r.checked_at, time, predicted,
                     r.message or ""])
    return rows


def summary_html(result: OperatorResult) -> str:
    rows = summary_rows(result)
    classes = [[""] * len(SUMMARY_HEADER) for _ in rows]
    for i, r in enumerate(result.backends.values()):
        classes[i][1] = f"xb-{r.status}"
    return H.table(SUMMARY_HEADER, rows, note_columns=(len(SUMMARY_HEADER) - 1,), classes=classes)


def header_text(result: OperatorResult) -> str:
    from .runner import signature
    dims = fmt_dims(result.dims)
    note = ""
    if result.inputs.defaulted:
        note = f" ({', '.join(result.inputs.defaulted)}: default size; set sizes with --sizes)"
    return f"{signature(result.op)}  at {dims}{note}, {result.dtype} inputs"


def resource_tables(result: OperatorResult) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per backend, with names and units (`xbench.profile.resources`)."""
    from ..profile.resources import resource_tables as tables
    out = []
    for name, r in result.backends.items():
        if r.artifact is not None:
            out += tables(name, r.artifact)
    return out


def resources_html(result: OperatorResult) -> str:
    """A column per backend (side by side where the cell is wide enough), each with its tables."""
    from ..profile.resources import resource_tables as tables
    cards = []
    for name, r in result.backends.items():
        if r.artifact is None:
            continue
        body = "".join(f"<h4>{H.esc(t)}</h4>{H.table(h, rows)}" for t, h, rows in tables(name, r.artifact))
        cards.append(f"<div data-backend='{H.esc(name)}'>{body}</div>")
    return f"<div class='xb-cards'>{''.join(cards)}</div>" if cards else "<p>no backend compiled</p>"


def metrics_html(profile: ProfileResult | None) -> str:
    if profile is None:
        return f"<p>{H.esc(NO_PROFILE)}.</p>"
    if profile.report is None:
        return _error_html(profile.error or PROFILER_MISSING, profile.traceback)
    rep = profile.report
    if hasattr(rep, "_repr_html_"):
        return rep._repr_html_()
    return pre(metrics_text(profile))


def metrics_text(profile: ProfileResult | None) -> str:
    if profile is None:
        return NO_PROFILE
    if profile.report is None:
        return profile.error or PROFILER_MISSING
    rep = profile.report
    return rep.grouped_text() if hasattr(rep, "grouped_text") else str(rep)


def roofline_message(profile: ProfileResult | None) -> str | None:
    if profile is None:
        return NO_PROFILE
    if profile.report is None:
        return profile.error or PROFILER_MISSING
    if profile.roofline_svg is None:
        return profile.roofline_error or "no roofline"
    return None


def roofline_html(svg: str) -> str:
    return f"<div class='xb-roofline'>{svg}</div>"


def backend_html(r: BackendResult, source: str | None, lang: str) -> str:
    parts = []
    if r.status != "pass":
        parts.append(_error_html(f"{r.backend}: {r.status}: {r.message}", r.traceback))
    elif r.message:
        parts.append(f"<p>{H.esc(r.message)}</p>")
    if source is not None:
        parts.append(H.code(source, lang))
    return "".join(parts)


def ir_html(r: OperatorResult) -> str:
    return "<h4>graph IR</h4>" + H.code(r.graph_text) + "<h4>loop IR (kernels)</h4>" + H.code(r.loops_text)


def compare_pane(r: OperatorResult, uid: str | None = None) -> str | None:
    """The Side by side tab, or None when no backend compiled."""
    kernels = {b: br.artifact.kernels for b, br in r.backends.items()
               if br.artifact is not None and br.artifact.kernels and b in ("cpu", "cuda", "ascend")}
    if not kernels or r.program is None:
        return None
    return compare_html(r.program, kernels, uid)


# ---- the widget -----------------------------------------------------------------------------------------------

class RooflinePane:
    """The Roofline tab: every target on one chart, or one target in detail (buttons), values on hover."""

    def __init__(self, profile: ProfileResult):
        self.profile = profile
        targets = list(profile.roofline_targets or [])
        self.picker = W.ToggleButtons(options=[ALL_TARGETS, *targets] if len(targets) > 1 else targets,
                                      value=ALL_TARGETS if len(targets) > 1 else (targets[0] if targets else None),
                                      tooltips=["every target on one chart"] * (len(targets) > 1)
                                      + [f"{t} in detail: every roof of it" for t in targets],
                                      style={"button_width": "auto"})
        self.chart = W.HTML(H.view(roofline_html(profile.roofline_svg or "")))
        self.picker.observe(self._pick, names="value")
        self.widget = W.VBox([self.picker, self.chart])
        self._svgs: dict[str, str] = {str(self.picker.value): profile.roofline_svg or ""}

    def _pick(self, change: Any) -> None:
        from .runner import roofline_detail_svg
        key = change["new"]
        if key not in self._svgs:
            self._svgs[key] = roofline_detail_svg(self.profile, None if key == ALL_TARGETS else key)
        self.chart.value = H.view(roofline_html(self._svgs[key]))


class OperatorView:
    """The tabs of one operator. `tab.selected_index` follows `show`; `keys` names each tab."""

    def __init__(self, result: OperatorResult, show: str | None = None):
        self.result = result
        self.tuning: TuningPane | None = None
        self.roofline: RooflinePane | None = None
        self.keys: list[str] = []
        self.panes: dict[str, W.Widget] = {}
        children = []
        for key, widget in self._panes():
            self.keys.append(key)
            self.panes[key] = widget
            children.append(widget)
        titles = [TITLES.get(k, k) for k in self.keys]
        self.tab = W.Tab(children=children, titles=titles)
        self.tab.selected_index = self.keys.index(show) if show in self.keys else 0
        self.header = W.HTML(H.view(f"<div class='xb-title'>{H.esc(header_text(result))}</div>"))
        self.widget = W.VBox([self.header, self.tab])
        self.widget.add_class("xb-operator")

    def _panes(self) -> list[tuple[str, W.Widget]]:
        r = self.result

        def pane(body: str) -> W.HTML:
            return W.HTML(H.view(body))

        panes: list[tuple[str, W.Widget]] = [("summary", pane(summary_html(r)))]
        panes.append(("ir", pane(ir_html(r))))
        sources = r.sources()
        for name, br in r.backends.items():
            panes.append((name, pane(backend_html(br, sources.get(name), LANG.get(name, "text")))))
            if name == "cuda" and "ptx" in sources:
                panes.append(("ptx", pane(H.code(sources["ptx"]))))
        side = compare_pane(r)
        if side is not None:
            panes.append(("compare", pane(side)))
        panes.append(("resources", pane(resources_html(r))))
        panes.append(("metrics", pane(metrics_html(r.profile))))
        message = roofline_message(r.profile)
        if message is None:
            self.roofline = RooflinePane(r.profile)
            panes.append(("roofline", self.roofline.widget))
        else:
            panes.append(("roofline", pane(f"<p>{H.esc(message)}</p>")))
        if r.tuning is not None:
            self.tuning = TuningPane(r.tuning)
            panes.append(("tuning", self.tuning.widget))
        return panes


class CellView:
    """What a `%%tensorop` cell displays: the tabs of each operator it compiled (one Tab per operator when
    there are several), with text and HTML fallbacks."""

    def __init__(self, results: list[OperatorResult], show: str | None = None, notes: Sequence[str] = ()):
        self.results = results
        self.show = show
        self.notes = list(notes)
        self.views = [OperatorView(r, show) for r in results]
        parts: list[W.Widget] = []
        if self.notes:
            parts.append(W.HTML(H.view("".join(f"<p>{H.esc(n)}</p>" for n in self.notes))))
        if len(self.views) == 1:
            parts.append(self.views[0].widget)
        elif self.views:
            parts.append(W.Tab(children=[v.widget for v in self.views], titles=[r.op.name for r in results]))
        self.widget = W.VBox(parts)

    # ---- fallbacks -----------------------------------------------------------------------------------------
    def text(self) -> str:
        out = list(self.notes)
        for r in self.results:
            out.append(header_text(r))
            out.append(_indent(_text_table(SUMMARY_HEADER, summary_rows(r))))
            if r.tuning is not None and self.show != "tuning":
                out.append(_indent(headline(r.tuning)))
            if self.show:
                shown = _tab_text(r, self.show)
                if shown is not None:
                    out.append(f"-- {TITLES.get(self.show, self.show)} --\n{shown}")
        return "\n".join(out)

    def html(self) -> str:
        out = [f"<p>{H.esc(n)}</p>" for n in self.notes]
        for r, view in zip(self.results, self.views):
            out.append(f"<div class='xb-title'>{H.esc(header_text(r))}</div>")
            out.append(summary_html(r))
            sections = [("ir", ir_html(r))]
            sources = r.sources()
            for name, br in r.backends.items():
                body = "" if br.status == "pass" else _error_html(f"{name}: {br.status}: {br.message}")
                if name in sources:
                    body += H.code(sources[name], LANG.get(name, "text"))
                sections.append((name, body))
                if name == "cuda" and "ptx" in sources:
                    sections.append(("ptx", H.code(sources["ptx"])))
            side = compare_pane(r)
            if side is not None:
                sections.append(("compare", side))
            sections.append(("resources", resources_html(r)))
            sections.append(("metrics", metrics_html(r.profile)))
            message = roofline_message(r.profile)
            if message is None:
                sections.append(("roofline", roofline_html(r.profile.roofline_svg)))
            else:
                sections.append(("roofline", f"<p>{H.esc(message)}</p>"))
            if r.tuning is not None:
                figures = view.tuning.figures if view.tuning is not None and view.tuning.figures else None
                sections.append(("tuning", tuning_html(r.tuning, figures)))
            for key, body in sections:
                opened = " open" if key == self.show else ""
                out.append(f"<details{opened}><summary>{H.esc(TITLES.get(key, key))}</summary>{body}</details>")
        return H.view("\n".join(out))

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.widget._repr_mimebundle_()
        data["text/plain"] = self.text()
        data["text/html"] = self.html()
        return data


def _tab_text(r: OperatorResult, key: str) -> str | None:
    if key == "summary":
        return None
    if key == "ir":
        return r.graph_text + "\n\n" + r.loops_text
    sources = r.sources()
    if key in sources:
        return sources[key]
    if key in r.backends:
        return f"{key}: {r.backends[key].status}: {r.backends[key].message}"
    if key == "compare":
        kernels = r.kernel_sources()
        return "\n\n".join(f"-- {TITLES[k]} --\n{kernels[k]}" for k in ("cpu", "cuda", "ascend") if k in kernels)
    if key == "resources":
        return "\n\n".join(f"{t}\n{_text_table(h, rows)}" for t, h, rows in resource_tables(r))
    if key == "metrics":
        return metrics_text(r.profile)
    if key == "roofline":
        return roofline_message(r.profile) or "(the roofline is a figure; see the widget or the HTML output)"
    if key == "tuning":
        return tuning_text(r.tuning) if r.tuning is not None else "not tuned: run the cell with --tune"
    return None


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


class ErrorView:
    """A user error of a cell: the traceback from the user's own frame on, behind a collapsed section (the short
    message is the cell's error output)."""

    def __init__(self, full: str):
        self.full = full
        inner = W.HTML(H.view(pre(full)))
        self.widget = W.Accordion(children=[inner], titles=("Traceback (from your code)",))
        self.widget.selected_index = None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.widget._repr_mimebundle_()
        data["text/plain"] = "(full traceback: %xbench --traceback)"
        return data


def session_text(defaults: Any, records: list[dict[str, Any]]) -> tuple[str, str]:
    """(text, html) of `%xbench`: the session defaults and the operators compiled in this kernel."""
    backends = ", ".join(defaults.backends) if defaults.backends else \
        "every installed backend (" + ", ".join(installed_backends()) + ")"
    sizes = fmt_dims(defaults.sizes) if defaults.sizes else \
        f"none (dims in order {', '.join(map(str, DEFAULT_SIZES[:3]))}, ...)"
    settings = [["backends", backends], ["sizes", sizes], ["dtype", defaults.dtype],
                ["targets", ", ".join(defaults.targets) if defaults.targets else "the profiler's default"],
                ["profile", "on" if defaults.profile else "off"], ["show", defaults.show or "summary"]]
    header = ["operator", "dims", *_backend_columns(records)]
    rows = []
    for rec in records:
        row = [rec["signature"], fmt_dims(rec["dims"])]
        for b in header[2:]:
            res = rec["backends"].get(b)
            row.append("" if res is None else STATUS_MARK[res["status"]]
                       + (f" {fmt_time(res['time_ms'])}" if res["time_ms"] is not None else "")
                       + (" predicted" if res["time_ms"] is not None and res["predicted"] else ""))
        rows.append(row)
    text = "xbench session defaults\n" + _indent(_text_table(["setting", "value"], settings))
    text += "\ncompiled operators\n" + (_indent(_text_table(header, rows)) if rows else "  none yet")
    page = "<b>xbench session defaults</b>" + H.table(["setting", "value"], settings, note_columns=(1,))
    page += "<b>compiled operators</b>" + (H.table(header, rows) if rows else "<p>none yet</p>")
    return text, H.view(page)


def _backend_columns(records: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for rec in records:
        out.extend(b for b in rec["backends"] if b not in out)
    return out


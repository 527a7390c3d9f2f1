"""The output of a `%%tensorop` cell: one ipywidgets view (tabs for the summary, the IR, the code of each backend,
toolchain resources, the metrics table and the roofline) that also carries a text and a static HTML form, so it
reads in nbconvert, on GitHub and in nbval as well as in JupyterLab.
"""
from __future__ import annotations

import base64
import html
import os
from collections.abc import Mapping, Sequence
from typing import Any

import ipywidgets as W

from ..profile.timing import fmt_time
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
STATUS_COLOR = {"pass": "#1a7f37", "fail": "#cf222e", "error": "#9a6700"}
TIME_WIDTH = len("999 µs (ascend-910b)")
NO_PROFILE = "run the cell with --profile for the metrics table and the roofline"
_CODE_STYLE = ("max-height: 32em; overflow: auto; white-space: pre; font-size: 12px; line-height: 1.35; margin: 0; "
               "padding: 6px; border: 1px solid #ddd;")


# ---- formatting ---------------------------------------------------------------------------------------------

def fmt_error(x: float | None) -> str:
    return "—" if x is None else f"{x:.1e}"


def fmt_dims(dims: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in dims.items()) or "no named dims"


def fmt_bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    return f"{n / 1024:.1f} KiB" if n < 1 << 20 else f"{n / (1 << 20):.1f} MiB"


HIGHLIGHT_CLASS = "xb-hl"


def highlight(text: str, lang: str) -> str:
    """`text` as HTML with syntax colours by class; `highlight_style()` holds the colours (one stylesheet per
    output keeps the saved notebook small)."""
    from pygments import highlight as _hl
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name

    lexer = get_lexer_by_name(lang if lang in ("python", "cpp") else "text")
    formatter = HtmlFormatter(nowrap=True, style="default")
    return f'<pre class="{HIGHLIGHT_CLASS}" style="{_CODE_STYLE}">{_hl(text, lexer, formatter)}</pre>'


def highlight_style() -> str:
    from pygments.formatters import HtmlFormatter

    rules = HtmlFormatter(style="default").get_style_defs(f".{HIGHLIGHT_CLASS}")
    # token colours only, scoped to our blocks: no page-wide `pre` rule, the notebook's background stays
    rules = "\n".join(r for r in rules.splitlines()
                      if r.startswith(f".{HIGHLIGHT_CLASS} .") and "background" not in r.split("{")[0])
    return f"<style>{rules}</style>"


def pre(text: str) -> str:
    return f'<pre style="{_CODE_STYLE}">{html.escape(text)}</pre>'


def _scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool)) or v is None


def _shown(key: str, v: Any) -> bool:
    """Resource entries worth a row: not the toolchain's raw output, not the cache's file paths, not the counters
    of the latest run (the profiler reports those)."""
    if key in ("ptxas_output", "function", "launches", "entry", "counters"):
        return False
    return not (isinstance(v, str) and os.path.isabs(v))


def _value(key: str, v: Any) -> str:
    if key.endswith("_ms") and isinstance(v, (int, float)) and not isinstance(v, bool):
        return fmt_time(float(v))
    return _cell(v)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "(" + ", ".join(_cell(x) for x in v) + ")"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{k}: {_cell(x)}" for k, x in v.items()) + "}"
    return str(v)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, escape: bool = True) -> str:
    esc = html.escape if escape else (lambda s: s)
    head = "".join(f"<th style='text-align:left;padding:2px 8px'>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td style='text-align:left;padding:2px 8px'>{esc(c)}</td>" for c in row)
                   + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    # a time column is as wide as its widest possible entry, so measured times never shift the columns after it
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    widths = [max(w, TIME_WIDTH) if h.startswith("time") else w for w, h in zip(widths, header)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    return "\n".join(lines)


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


def header_text(result: OperatorResult) -> str:
    from .runner import signature
    dims = fmt_dims(result.dims)
    note = ""
    if result.inputs.defaulted:
        note = f" ({', '.join(result.inputs.defaulted)}: default size; set sizes with --sizes)"
    return f"{signature(result.op)}  at {dims}{note}, {result.dtype} inputs"


def resource_tables(result: OperatorResult) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) per backend: the artifact's totals, then one column per kernel (or launch)."""
    out = []
    for name, r in result.backends.items():
        art = r.artifact
        if art is None:
            continue
        totals = [[k, _value(k, v)] for k, v in art.resources.items() if _shown(k, v)]
        if totals:
            out.append((f"{name}: totals", ["", "value"], totals))
        per: dict[str, dict[str, Any]] = {}
        for k in art.kernels:
            launches = k.resources.get("launches")
            if isinstance(launches, Mapping):          # cuda: launch name -> resources
                items = list(launches.items())
            elif isinstance(launches, list) and launches and all(isinstance(x, Mapping) for x in launches):
                items = [(str(x.get("entry", f"{k.name}[{i}]")), x) for i, x in enumerate(launches)]
            else:
                items = [(k.name, k.resources)]
            for launch, res in items:
                per[launch] = {key: v for key, v in res.items() if _shown(key, v)}
        if per:
            keys: list[str] = []
            for res in per.values():
                keys.extend(k for k in res if k not in keys)
            rows = [[key, *(_value(key, res.get(key, "")) for res in per.values())] for key in keys]
            out.append((f"{name}: per kernel", ["", *per], rows))
    return out


def metrics_html(profile: ProfileResult | None) -> str:
    if profile is None:
        return f"<p>{html.escape(NO_PROFILE)}.</p>"
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
    return rep.table() if hasattr(rep, "table") else str(rep)


def roofline_message(profile: ProfileResult | None) -> str | None:
    if profile is None:
        return NO_PROFILE
    if profile.report is None:
        return profile.error or PROFILER_MISSING
    if profile.roofline_png is None:
        return profile.roofline_error or "no roofline"
    return None


def _error_html(message: str, tb: str | None = None) -> str:
    out = f"<p style='color:#cf222e;white-space:pre-wrap'><b>{html.escape(message)}</b></p>"
    if tb:
        out += f"<details><summary>Full traceback</summary>{pre(tb)}</details>"
    return out


def backend_html(r: BackendResult, source: str | None, lang: str) -> str:
    parts = []
    if r.status != "pass":
        parts.append(_error_html(f"{r.backend}: {r.status}: {r.message}", r.traceback))
    elif r.message:
        parts.append(f"<p>{html.escape(r.message)}</p>")
    if source is not None:
        parts.append(highlight(source, lang))
    return "".join(parts)


# ---- the widget -----------------------------------------------------------------------------------------------

class OperatorView:
    """The tabs of one operator. `tab.selected_index` follows `show`; `keys` names each tab."""

    def __init__(self, result: OperatorResult, show: str | None = None):
        self.result = result
        self.tuning: TuningPane | None = None
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
        self.header = W.HTML(f"{highlight_style()}<b>{html.escape(header_text(result))}</b>")
        self.widget = W.VBox([self.header, self.tab])

    def _panes(self) -> list[tuple[str, W.Widget]]:
        r = self.result
        panes: list[tuple[str, W.Widget]] = [("summary", W.HTML(_table(SUMMARY_HEADER, summary_rows(r))))]
        panes.append(("ir", W.HTML("<b>graph IR</b>" + pre(r.graph_text) + "<b>loop IR (kernels)</b>"
                                   + pre(r.loops_text))))
        sources = r.sources()
        for name, br in r.backends.items():
            panes.append((name, W.HTML(backend_html(br, sources.get(name), LANG.get(name, "text")))))
            if name == "cuda" and "ptx" in sources:
                panes.append(("ptx", W.HTML(pre(sources["ptx"]))))
        kernels = r.kernel_sources()
        side = [k for k in ("cpu", "cuda", "ascend") if k in kernels]
        if len(side) > 1:
            columns = [W.VBox([W.HTML(f"<b>{TITLES[k]}</b>"), W.HTML(highlight(kernels[k], LANG[k]))],
                              layout=W.Layout(flex="1 1 0", min_width="0")) for k in side]
            panes.append(("compare", W.HBox(columns, layout=W.Layout(width="100%"))))
        tables = resource_tables(r)
        res = "".join(f"<h4>{html.escape(t)}</h4>{_table(h, rows)}" for t, h, rows in tables)
        panes.append(("resources", W.HTML(res or "<p>no backend compiled</p>")))
        panes.append(("metrics", W.HTML(metrics_html(r.profile))))
        message = roofline_message(r.profile)
        if message is None:
            roof: W.Widget = W.Image(value=r.profile.roofline_png, format="png")
        else:
            roof = W.HTML(f"<p>{html.escape(message)}</p>")
        panes.append(("roofline", roof))
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
            parts.append(W.HTML("".join(f"<p>{html.escape(n)}</p>" for n in self.notes)))
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
        out = [f"<p>{html.escape(n)}</p>" for n in self.notes]
        for r, view in zip(self.results, self.views):
            out.append(f"<p><b>{html.escape(header_text(r))}</b></p>")
            out.append(_table(SUMMARY_HEADER, summary_rows(r)))
            sections = [("ir", pre("graph IR\n" + r.graph_text + "\n\nloop IR (kernels)\n" + r.loops_text))]
            sources = r.sources()
            for name, br in r.backends.items():
                body = "" if br.status == "pass" else _error_html(f"{name}: {br.status}: {br.message}")
                if name in sources:
                    body += pre(sources[name])
                sections.append((name, body))
                if name == "cuda" and "ptx" in sources:
                    sections.append(("ptx", pre(sources["ptx"])))
            tables = resource_tables(r)
            sections.append(("resources", "".join(f"<h4>{html.escape(t)}</h4>{_table(h, rows)}"
                                                  for t, h, rows in tables)))
            sections.append(("metrics", metrics_html(r.profile)))
            message = roofline_message(r.profile)
            if message is None:
                png = base64.b64encode(r.profile.roofline_png).decode()
                sections.append(("roofline", f'<img src="data:image/png;base64,{png}" alt="roofline"/>'))
            else:
                sections.append(("roofline", f"<p>{html.escape(message)}</p>"))
            if r.tuning is not None:
                figures = view.tuning.figures if view.tuning is not None and view.tuning.figures else None
                sections.append(("tuning", tuning_html(r.tuning, figures)))
            for key, body in sections:
                opened = " open" if key == self.show else ""
                out.append(f"<details{opened}><summary>{html.escape(TITLES.get(key, key))}</summary>{body}"
                           "</details>")
        return "\n".join(out)

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
    """A user error of a cell: the full traceback behind a collapsed section (the short message is the cell's
    error output)."""

    def __init__(self, full: str):
        self.full = full
        inner = W.HTML(pre(full))
        self.widget = W.Accordion(children=[inner], titles=("Full traceback",))
        self.widget.selected_index = None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.widget._repr_mimebundle_()
        data["text/plain"] = "(full traceback: %xbench --traceback)"
        return data


def session_text(defaults: Any, records: list[dict[str, Any]]) -> tuple[str, str]:
    """(text, html) of `%xbench`: the session defaults and the operators compiled in this kernel."""
    backends = ", ".join(defaults.backends) if defaults.backends else \
        "every installed backend (" + ", ".join(installed_backends()) + ")"
    sizes = fmt_dims(defaults.sizes) if defaults.sizes else f"none (dims in order {', '.join(map(str, DEFAULT_SIZES[:3]))}, ...)"
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
    page = "<b>xbench session defaults</b>" + _table(["setting", "value"], settings)
    page += "<b>compiled operators</b>" + (_table(header, rows) if rows else "<p>none yet</p>")
    return text, page


def _backend_columns(records: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for rec in records:
        out.extend(b for b in rec["backends"] if b not in out)
    return out

"""The profile of one operator call: a plain list of metric records, looked up by name and backend or target.

Every record says where its number came from:

- ``measured``  — timed or checked on this machine;
- ``toolchain`` — reported by a compiler or assembler (ptxas, g++) for the generated code;
- ``simulated`` — from a simulation (the cache simulator, the Ascend CPU twin's counters);
- ``predicted`` — from the performance model of a target;
- ``counted``   — counted exactly from the loop IR (flops, compulsory bytes).

A record whose value could not be obtained has ``value = None`` and says why in ``note`` ("unavailable: ...").
"""
from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

SOURCES = ("measured", "toolchain", "simulated", "predicted", "counted")


@dataclass(frozen=True)
class Metric:
    """One number of a profile. `kernels` breaks it down per kernel where that applies; `low`/`high` are its
    spread (timings: the quartiles) or confidence interval (sampled simulations)."""

    name: str
    value: Any
    unit: str = ""
    source: str = "measured"
    backend: str | None = None
    target: str | None = None
    kernels: Mapping[str, Any] = field(default_factory=dict)
    low: float | None = None
    high: float | None = None
    note: str = ""

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"metric {self.name}: source {self.source!r}; write one of {', '.join(SOURCES)}")

    @property
    def available(self) -> bool:
        return self.value is not None

    @property
    def where(self) -> str:
        parts = [p for p in (self.backend, self.target) if p]
        return "/".join(dict.fromkeys(parts))

    def __float__(self) -> float:
        if not isinstance(self.value, (int, float)):
            raise TypeError(f"{self.name} ({self.where or 'operator'}) is {self.text()}, not a number")
        return float(self.value)

    def text(self, value: Any = ...) -> str:
        """The value with its unit, e.g. '1.23 ms', '97.5 %', 'unavailable: ...'."""
        v = self.value if value is ... else value
        if v is None:
            return self.note or "unavailable"
        return _fmt(v, self.unit)

    def spread_text(self) -> str:
        if self.low is None or self.high is None:
            return ""
        return f"[{_fmt(self.low, self.unit)} .. {_fmt(self.high, self.unit)}]"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": _jsonable(self.value), "unit": self.unit, "source": self.source,
                "backend": self.backend, "target": self.target,
                "kernels": {k: _jsonable(v) for k, v in self.kernels.items()},
                "low": _jsonable(self.low), "high": _jsonable(self.high), "note": self.note}


def unavailable(name: str, reason: str, *, unit: str = "", source: str = "measured", backend: str | None = None,
                target: str | None = None) -> Metric:
    """A record that could not be obtained, and why."""
    reason = str(reason).replace("xbench: ", "").split("\n")[0]
    return Metric(name, None, unit, source, backend, target, note=f"unavailable: {reason}")


def _jsonable(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            return v.item()
        except (TypeError, ValueError):
            return str(v)
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    return str(v)


def _fmt(v: Any, unit: str) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"{v} {unit}".strip()
    if isinstance(v, float) and not math.isfinite(v):
        return f"{v} {unit}".strip()
    if unit in ("B", "FLOP"):
        return _si(v, unit)
    if unit == "%":
        return f"{v:.1f} %"
    if isinstance(v, int):
        return f"{v:,} {unit}".strip()
    a = abs(v)
    if a == 0:
        return f"0 {unit}".strip()
    if a >= 1e5 or a < 1e-3:
        return f"{v:.3g} {unit}".strip()
    return f"{v:.4g} {unit}".strip()


def _si(v: float, unit: str) -> str:
    for p, s in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= s:
            return f"{v / s:.3g} {p}{unit}"
    return f"{v:.0f} {unit}" if float(v).is_integer() else f"{v:.3g} {unit}"


class Report:
    """The metrics of one profiled call (see `xbench.profile.profile`).

        rep["time_ms", "cpu"].value              # a record by name and backend, target or source
        rep["registers_per_thread", "cuda", "h100"]
        rep.value("flops")                       # the bare value
        rep.table()                              # text; rep.to_pandas(), rep.to_dict(), Jupyter HTML
    """

    def __init__(self, op: str, records: Iterable[Metric], *, shapes: str = "", kernels: Iterable[str] = (),
                 details: Mapping[str, Any] | None = None):
        self.op = op
        self.shapes = shapes
        self.records: list[Metric] = list(records)
        self.kernels = list(kernels)
        self.details: dict[str, Any] = dict(details or {})   # raw objects (counts, caches, predictions)

    # ---- lookup ------------------------------------------------------------------------------------------
    def filter(self, name: str | None = None, where: str | None = None, *, backend: str | None = None,
               target: str | None = None, source: str | None = None) -> list[Metric]:
        """Records matching every given field (`where` matches the backend or the target)."""
        out = []
        for m in self.records:
            if name is not None and m.name != name:
                continue
            if where is not None and where not in (m.backend, m.target):
                continue
            if backend is not None and m.backend != backend:
                continue
            if target is not None and m.target != target:
                continue
            if source is not None and m.source != source:
                continue
            out.append(m)
        return out

    def __getitem__(self, key: str | tuple) -> Metric:
        if isinstance(key, str):
            name, wheres = key, ()
        else:
            name, *wheres = key
        found = self.filter(name)
        if not found:
            known = ", ".join(sorted({m.name for m in self.records}))
            raise KeyError(f"the report of {self.op} has no metric {name!r}; it has: {known}")
        for w in wheres:
            found = [m for m in found if w in (m.backend, m.target, m.source)]
        if len(found) == 1:
            return found[0]
        if not found:
            places = ", ".join(sorted({m.where or "operator" for m in self.filter(name)}))
            raise KeyError(f"{name!r} is not reported for {'/'.join(map(str, wheres))}; it is for: {places}")
        places = ", ".join(repr(m.where) for m in found)
        if len({m.where for m in found}) == 1:
            raise KeyError(f"{name!r} is reported for {found[0].where} by several sources "
                           f"({', '.join(m.source for m in found)}); name one, e.g. "
                           f"rep[{name!r}, {found[0].backend or found[0].target!r}, {found[0].source!r}]")
        raise KeyError(f"{name!r} is reported for several places ({places}); name one, e.g. "
                       f"rep[{name!r}, {found[0].backend or found[0].target!r}"
                       f"{', ' + repr(found[0].target) if found[0].backend and found[0].target else ''}]")

    def value(self, name: str, *where: str) -> Any:
        return self[(name, *where)].value

    def get(self, name: str, *where: str, default: Any = None) -> Metric | Any:
        try:
            return self[(name, *where)]
        except KeyError:
            return default

    def __contains__(self, key: str | tuple) -> bool:
        try:
            self[key]
            return True
        except KeyError:
            return False

    def __iter__(self) -> Iterator[Metric]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def names(self) -> list[str]:
        return list(dict.fromkeys(m.name for m in self.records))

    @property
    def places(self) -> list[str]:
        return list(dict.fromkeys(m.where or "operator" for m in self.records))

    # ---- rendering ---------------------------------------------------------------------------------------
    def rows(self) -> list[dict[str, Any]]:
        return [m.to_dict() for m in self.records]

    def table(self, *, kernels: bool = False, width: int = 160) -> str:
        """A text table: one row per record (per kernel too with `kernels=True`)."""
        head = f"{self.op}{' ' + self.shapes if self.shapes else ''}: {len(self.records)} metrics"
        cols = ("metric", "where", "value", "source", "note")
        rows = []
        for m in self.records:
            spread = m.spread_text()
            value = m.text() if m.available else "n/a"
            rows.append((m.name, m.where or "operator", value, m.source,
                         "  ".join(x for x in (spread, m.note) if x)))
            if kernels and m.kernels and len(m.kernels) > 1:
                for k, v in m.kernels.items():
                    rows.append(("  " + k, "", m.text(v), "", ""))
        widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c) for i, c in enumerate(cols)]
        widths[-1] = max(10, width - sum(widths[:-1]) - 8)
        lines = [head, "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
        lines.append("  ".join("-" * w for w in widths))
        for r in rows:
            cells = [r[i].ljust(widths[i]) if i < 4 else _clip(r[i], widths[i]) for i in range(5)]
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<Report {self.op}{' ' + self.shapes if self.shapes else ''}: {len(self.records)} metrics over " \
               f"{', '.join(self.places)}>"

    def to_dict(self) -> dict[str, Any]:
        return {"op": self.op, "shapes": self.shapes, "kernels": self.kernels, "records": self.rows()}

    def to_json(self, **kw: Any) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Report:
        recs = [Metric(r["name"], r["value"], r.get("unit", ""), r.get("source", "measured"), r.get("backend"),
                       r.get("target"), dict(r.get("kernels") or {}), r.get("low"), r.get("high"), r.get("note", ""))
                for r in d["records"]]
        return cls(d["op"], recs, shapes=d.get("shapes", ""), kernels=d.get("kernels", ()))

    def to_pandas(self):
        """A DataFrame with one row per record (needs pandas)."""
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - pandas is optional
            raise ImportError("Report.to_pandas needs pandas (pip install pandas); use Report.rows() for plain "
                              "dicts") from e
        rows = []
        for m in self.records:
            d = m.to_dict()
            d["kernels"] = m.kernels or None
            rows.append(d)
        return pd.DataFrame(rows, columns=["name", "value", "unit", "source", "backend", "target", "low", "high",
                                           "note", "kernels"])

    def groups(self) -> dict[str, list[Metric]]:
        """The records by where they apply: the operator first, then each backend and target in order."""
        out: dict[str, list[Metric]] = {}
        for m in self.records:
            out.setdefault(m.where or "operator", []).append(m)
        return out

    @staticmethod
    def group_title(where: str, metrics: Iterable[Metric]) -> str:
        """'operator: counted from the loop IR', 'cuda for h100: toolchain, simulated, predicted', ..."""
        sources = ", ".join(dict.fromkeys(m.source for m in metrics))
        if where == "operator":
            return f"operator ({sources})"
        backend, _, target = where.partition("/")
        return f"{backend} {'on' if 'measured' in sources else 'for'} {target} ({sources})" if target else \
            f"{backend} ({sources})"

    def grouped_text(self, *, indent: str = "", width: int = 150) -> str:
        """A text table per place (`groups`), notes clipped to the width: what a terminal shows."""
        head = f"{self.op}{' ' + self.shapes if self.shapes else ''}: {len(self.records)} metrics"
        lines = [indent + head]
        for where, ms in self.groups().items():
            rows = [(m.name, m.text() if m.available else "n/a", m.source,
                     "  ".join(x for x in (m.spread_text(), m.note) if x)) for m in ms]
            w = [max(len(r[i]) for r in rows) for i in range(3)]
            lines.append(f"{indent}{self.group_title(where, ms)}")
            for r in rows:
                left = f"{indent}  {r[0].ljust(w[0])}  {r[1].rjust(w[1])}  {r[2].ljust(w[2])}  "
                lines.append((left + _clip(r[3], max(10, width - len(left)))).rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """Grouped by where the metrics apply, each group collapsible, numbers with their units kept on one
        line; colours from JupyterLab's theme variables (light and dark), with fallbacks elsewhere."""
        e = html.escape
        out = [REPORT_STYLE, f"<div class='xb-report'><div class='xb-report-head'><b>{e(self.op)}</b> "
               f"<code>{e(self.shapes)}</code> &middot; {len(self.records)} metrics</div>"]
        for where, ms in self.groups().items():
            out.append(f"<details open class='xb-group' data-where='{e(where)}'><summary>"
                       f"{e(self.group_title(where, ms))}</summary><table class='xb-metrics'><colgroup><col class='xb-c1'>"
                       "<col class='xb-c2'><col class='xb-c3'><col></colgroup><thead><tr>"
                       "<th>metric</th><th class='xb-num'>value</th><th>source</th><th>note</th></tr></thead><tbody>")
            for m in ms:
                cls = "" if m.available else " class='xb-na'"
                note = " ".join(x for x in (m.spread_text(), m.note) if x)
                per = ""
                if m.kernels and len(m.kernels) > 1:
                    per = "<div class='xb-per'>" + "<br>".join(
                        f"{e(str(k))}: <span class='xb-num'>{e(m.text(v))}</span>" for k, v in m.kernels.items()) \
                        + "</div>"
                value = e(m.text()) if m.available else "n/a"
                out.append(f"<tr{cls}><td><code>{e(m.name)}</code></td><td class='xb-num'>{value}{per}</td>"
                           f"<td><span class='xb-src xb-src-{e(m.source)}'>{e(m.source)}</span></td>"
                           f"<td class='xb-note'>{e(note)}</td></tr>")
            out.append("</tbody></table></details>")
        out.append("</div>")
        return "".join(out)


REPORT_STYLE = """<style>
.xb-report { color: var(--jp-ui-font-color1, #1f1f1f); font-size: 12px; max-width: 100%; }
.xb-report-head { margin: 2px 0 6px; }
.xb-report details.xb-group { margin: 4px 0; border: 1px solid var(--jp-border-color2, #ddd); border-radius: 3px; }
.xb-report details.xb-group > summary { cursor: pointer; padding: 3px 8px; font-weight: 600;
  background: var(--jp-layout-color2, #f3f3f3); }
.xb-report table.xb-metrics { border-collapse: collapse; width: 100%; table-layout: auto; }
.xb-report table.xb-metrics col.xb-c1 { width: 24%; } .xb-report table.xb-metrics col.xb-c2 { width: 16%; }
.xb-report table.xb-metrics col.xb-c3 { width: 10%; }
.xb-report table.xb-metrics td:first-child { overflow-wrap: anywhere; }
.xb-report table.xb-metrics th, .xb-report table.xb-metrics td { text-align: left; padding: 2px 8px;
  vertical-align: top; border-top: 1px solid var(--jp-border-color3, #eee); }
.xb-report table.xb-metrics .xb-num { white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums;
  padding-right: 16px; }
.xb-report td.xb-note { overflow-wrap: anywhere; color: var(--jp-ui-font-color2, #555); }
.xb-report tr.xb-na td { color: var(--jp-ui-font-color3, #888); }
.xb-report .xb-per { font-size: 11px; color: var(--jp-ui-font-color2, #555); }
.xb-report .xb-src { white-space: nowrap; font-size: 11px; padding: 0 4px; border-radius: 3px;
  border: 1px solid var(--jp-border-color2, #ccc); }
</style>"""


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: max(0, n - 1)] + "…"

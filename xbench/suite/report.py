"""The suite's results for people: a terminal table, the issue's targets checked, and an HTML report.

Every number says where it came from: *measured* on this machine's cpu (xbench, torch eager, Inductor, in one
process, alternating: medians, with the interquartile spread), or *predicted* by xbench's hardware model over the
kernels the workload compiled to.
"""
from __future__ import annotations

import html as _html
from dataclasses import dataclass

from ..profile.timing import fmt_time
from .results import Results
from .workloads import WORKLOADS

PRIMARY = {"train": ("samples_per_s", "samples/s", True), "infer": ("latency_ms", "ms", False),
           "decode": ("tokens_per_s", "tokens/s", True)}
TIME = {"train": "step_ms", "infer": "latency_ms", "decode": "decode_ms_per_token"}


def _label(name: str) -> str:
    return WORKLOADS[name].label if name in WORKLOADS else name


def _num(v: float | None, unit: str = "") -> str:
    if v is None:
        return "—"
    if unit == "ms":
        return fmt_time(v).strip()
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def _with_unit(v: float | None, unit: str) -> str:
    if not v:
        return "—"
    return _num(v, unit) if unit == "ms" else f"{_num(v, unit)} {unit}"


def _bytes(v: float | None) -> str:
    if v is None:
        return "—"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if v >= scale:
            return f"{v / scale:.1f} {unit}"
    return f"{v:.0f} B"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "—"


def workloads_in(res: Results) -> list[str]:
    seen = dict.fromkeys(r["workload"] for r in res.rows)
    seen.update(dict.fromkeys(g["workload"] for g in res.gate))
    order = list(WORKLOADS)
    return sorted(seen, key=lambda n: order.index(n) if n in order else len(order))


def _grid(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)   # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])


def measured_rows(res: Results, times: bool = False) -> tuple[list[str], list[list[str]]]:
    """The measured table: throughput, ratios and first calls; `times`: the medians as times only (a step, an
    inference, a decode step) with their spread."""
    if times:
        return _measured_times(res)
    head = ["workload", "mode", "precision", "eager", "xbench", "inductor", "xbench/eager", "xbench/inductor",
            "CPU time eager/xbench", "first call xbench", "first call inductor"]
    rows = []
    for name in workloads_in(res):
        for prec in ("float32", "bfloat16"):
            found = res.find(workload=name, precision=prec, platform="cpu", source="measured")
            if not found:
                continue
            mode = found[0]["mode"]
            metric, unit, _ = PRIMARY[mode]
            t = {e: res.value(workload=name, precision=prec, platform="cpu", engine=e, metric=TIME[mode])
                 for e in ("eager", "xbench", "inductor")}
            v = {e: res.value(workload=name, precision=prec, platform="cpu", engine=e, metric=metric)
                 for e in ("eager", "xbench", "inductor")}
            fc = {e: _first_call(res, name, prec, e) for e in ("xbench", "inductor")}
            cpu = {e: _cpu_ms(res, name, prec, e, TIME[mode]) for e in ("eager", "xbench")}
            if not any(t.values()):
                continue
            rows.append([_label(name), mode, prec, *(_with_unit(v[e], unit) for e in ("eager", "xbench", "inductor")),
                         _ratio(t["eager"], t["xbench"]), _ratio(t["inductor"], t["xbench"]),
                         _ratio(cpu["eager"], cpu["xbench"]),
                         fc["xbench"], fc["inductor"]])
    return head, rows


def _first_call(res: Results, name: str, prec: str, engine: str) -> str:
    rows = res.find(workload=name, precision=prec, platform="cpu", engine=engine, metric="first_call_s")
    if not rows:
        return "—"
    later = (rows[0].get("detail") or {}).get("recompiled_graphs")
    return f"{rows[0]['value']:.1f} s" + (f" (+{later} recompiled)" if later else "")


def _cpu_ms(res: Results, name: str, prec: str, engine: str, metric: str) -> float | None:
    rows = res.find(workload=name, precision=prec, platform="cpu", engine=engine, source="measured", metric=metric)
    return (rows[0].get("detail") or {}).get("cpu_ms") if rows else None


def _measured_times(res: Results) -> tuple[list[str], list[list[str]]]:
    engines = [e for e in ("eager", "xbench", "inductor") if res.find(engine=e, platform="cpu", source="measured")]
    head = ["workload", "mode", "precision", "measures", *engines]
    rows = []
    for name in workloads_in(res):
        for prec in ("float32", "bfloat16"):
            found = res.find(workload=name, precision=prec, platform="cpu", source="measured", metric=TIME.get(
                WORKLOADS[name].mode if name in WORKLOADS else "train"))
            if not found:
                continue
            mode = found[0]["mode"]
            cells = []
            for e in engines:
                r = res.find(workload=name, precision=prec, platform="cpu", engine=e, metric=TIME[mode])
                # fmt_time's numbers are four characters wide: the column keeps its width whatever the times
                cells.append(f"{fmt_time(r[0]['value'])} [{fmt_time(r[0]['q1'])} - {fmt_time(r[0]['q3'])}]"
                             if r else "—")
            what = {"train": "training step", "infer": "inference", "decode": "decode step"}[mode]
            rows.append([_label(name), mode, prec, what, *cells])
    return head, rows


def predicted_rows(res: Results) -> tuple[list[str], list[list[str]]]:
    targets = list(dict.fromkeys(r["platform"] for r in res.rows if r["source"] == "predicted"))
    ref = next((r["detail"]["reference"] for r in res.rows if r["metric"] == "ratio_to_reference"), "")
    bounded = any(r["metric"] == "hardware_ratio_to_reference" for r in res.rows)
    head = ["workload", "size", "precision"] + [f"{t}" for t in targets] + \
           [f"{t} compute/bw %" for t in targets] + [f"{t}/{ref}" for t in targets if t != ref] + \
           ([f"{t}/{ref} bound" for t in targets if t != ref] if bounded else [])
    rows = []
    for name in workloads_in(res):
        sizes = dict.fromkeys(r["size"] for r in res.rows if r["workload"] == name and r["source"] == "predicted")
        for size in sizes:
            for prec in ("float32", "bfloat16"):
                found = res.find(workload=name, size=size, precision=prec, source="predicted")
                if not found:
                    continue
                mode = found[0]["mode"]
                metric, unit, _ = PRIMARY[mode]
                q = dict(workload=name, size=size, precision=prec, source="predicted")
                vals = [res.value(**q, platform=t, metric=metric) for t in targets]
                pct = []
                for t in targets:
                    suffix = "_decode" if mode == "decode" else ""
                    c = res.value(**q, platform=t, metric="pct_peak_compute" + suffix)
                    b = res.value(**q, platform=t, metric="pct_peak_bandwidth" + suffix)
                    pct.append(f"{c:.2g}{'!' if c > 100 else ''}/{b:.2g}" if c is not None and b is not None else "—")
                ratios = [res.value(**q, platform=t, metric="ratio_to_reference") for t in targets if t != ref]
                if bounded:
                    ratios += [res.value(**q, platform=t, metric="hardware_ratio_to_reference")
                               for t in targets if t != ref]
                rows.append([_label(name), size, prec, *(_with_unit(v, unit) for v in vals), *pct,
                             *(f"{r:.2f}x" if r else "—" for r in ratios)])
    return head, rows


def gate_rows(res: Results) -> tuple[list[str], list[list[str]]]:
    backends = list(dict.fromkeys(g["backend"] for g in res.gate))
    head = ["workload", *backends]
    rows = []
    latest = {(g["workload"], g["backend"]): g for g in res.gate}
    for name in workloads_in(res):
        cells = []
        for b in backends:
            g = latest.get((name, b))
            if g is None:
                cells.append("—")
            elif g.get("not_run"):
                cells.append("not run: simulator limit")
            elif g["ok"]:
                cells.append(f"pass ({g['steps']} steps)" if g["steps"] else "pass (inference)")
            else:
                op = (g.get("bisect") or {}).get("departure", {}).get("op", "")
                cells.append("FAIL" + (f": {op}" if op else "") + (f" ({g['error'][:40]})" if g.get("error") else ""))
        if any(c != "—" for c in cells):
            rows.append([_label(name), *cells])
    return head, rows


def memory_rows(res: Results) -> tuple[list[str], list[list[str]]]:
    head = ["workload", "engine", "peak float32", "peak bfloat16", "bf16/f32", "saved float32", "saved bfloat16",
            "bf16/f32 saved"]
    rows = []
    for name in workloads_in(res):
        for e in ("eager", "inductor", "xbench"):
            p = [res.value(workload=name, engine=e, precision=q, metric="peak_activation_bytes")
                 for q in ("float32", "bfloat16")]
            s = [res.value(workload=name, engine=e, precision=q, metric="saved_activation_bytes")
                 for q in ("float32", "bfloat16")]
            if p[0] is None:
                continue
            rows.append([_label(name), e, _bytes(p[0]), _bytes(p[1]), _ratio(p[1], p[0]), _bytes(s[0]), _bytes(s[1]),
                         _ratio(s[1], s[0])])
    return head, rows


def varlen_text(res: Results) -> str:
    if not res.varlen:
        return ""
    v = res.varlen[-1]
    lines = [f"{v['requests']} requests of {min(v['lengths'])}-{max(v['lengths'])} tokens (size {v['size']}); "
             f"xbench buckets {', '.join(map(str, v['buckets']))}: {v['compiles']} compilations "
             f"({v['dynamo_graphs']} Dynamo graphs) in {v['warmup_s']:.1f} s before the stream"]
    for k in v["p50_ms"]:
        diff = v["max_logit_diff"].get(k)
        lines.append(f"  {k:16s} p50 {fmt_time(v['p50_ms'][k])}  p99 {fmt_time(v['p99_ms'][k])}"
                     + (f"  (logits within {diff:.1e} of unpadded)" if diff is not None else ""))
    return "\n".join(lines)


@dataclass
class Target:
    claim: str
    measured: str
    ok: bool | None                     # None: not measured in this run


def targets(res: Results) -> list[Target]:
    """The issue's targets on this machine, each with what this run measured (and at which size)."""
    out = []
    for name in workloads_in(res):
        w = WORKLOADS.get(name)
        if w is None:
            continue
        for prec in ("float32", "bfloat16"):
            rows = {e: res.find(workload=name, precision=prec, platform="cpu", engine=e, source="measured",
                                metric=TIME[w.mode]) for e in ("eager", "xbench", "inductor")}
            t = {e: r[0]["value"] if r else None for e, r in rows.items()}
            if not t["xbench"] or not t["eager"]:
                continue
            size = rows["xbench"][0]["size"]
            sp = t["eager"] / t["xbench"]
            ce, cx = (_cpu_ms(res, name, prec, e, TIME[w.mode]) for e in ("eager", "xbench"))
            cpu = f" (CPU time {ce / cx:.2f}x)" if ce and cx else ""
            if w.mode == "train":
                out.append(Target(f"{w.label} training step, {prec} ({size}): >= 1.2x eager", f"{sp:.2f}x{cpu}",
                                  sp >= 1.2))
                if t["inductor"]:
                    si = t["inductor"] / t["xbench"]
                    out.append(Target(f"{w.label} training step, {prec} ({size}): >= Inductor", f"{si:.2f}x",
                                      si >= 1.0))
            else:
                what = "inference" if w.mode == "infer" else "decode step"
                out.append(Target(f"{w.label} {what}, {prec} ({size}): >= 1.2x eager", f"{sp:.2f}x{cpu}", sp >= 1.2))
        for e in ("eager", "xbench"):
            rows = [res.find(workload=name, engine=e, precision=q, metric="peak_activation_bytes")
                    for q in ("float32", "bfloat16")]
            if rows[0] and rows[1] and rows[0][0]["value"]:
                r = rows[1][0]["value"] / rows[0][0]["value"]
                out.append(Target(f"{w.label} ({e}) bf16 peak activation memory <= 0.55x float32 "
                                  f"({rows[0][0]['size']})", f"{r:.2f}x", r <= 0.55))
    for r in res.find(workload="resnet", size="published", platform="ascend-910b", metric="hardware_ratio_to_reference"):
        ref = r["detail"]["reference"]
        own = res.value(workload="resnet", size="published", precision=r["precision"], platform="ascend-910b",
                        metric="ratio_to_reference")
        mine = f" (xbench's own kernels: {100 * own:.0f} %; its cuda backend runs contractions on CUDA cores)" if own else ""
        out.append(Target(f"the seeds' claim, predicted: ResNet-50 training ({r['precision']}, 224 px) on ascend-910b "
                          f"at 92 % of {ref}'s throughput", f"{100 * r['value']:.0f} % at each chip's roofline bound"
                          f"{mine}", None))
    for v in res.varlen[-1:]:
        a, b = v["p99_ms"].get("xbench bucketed"), v["p99_ms"].get("eager padded")
        if a and b:
            out.append(Target(f"variable-length BERT ({v['size']}): xbench p99 below eager padded",
                              f"{fmt_time(a).strip()} vs {fmt_time(b).strip()}", a < b))
    return out


SECTIONS = ("runs", "measured", "predicted", "gate", "memory", "varlen", "targets", "errors")


def table(res: Results, sections=SECTIONS, times: bool = False) -> str:
    """The report as text: the `sections` named (all by default); `times`: the measured table as times only."""
    parts = []
    if "runs" in sections:
        for r, v in res.runs.items():
            m = v["machine"]
            parts.append(f"run {r}: {m.get('cpu', '')} ({m.get('cores')} cores, torch {m.get('torch')} with "
                         f"{m.get('torch_threads')} threads{', ' + m['gpu'] if m.get('gpu') else ''}), "
                         f"{v.get('seconds', 0):.0f} s")
            if v.get("stages"):
                parts.append("  where the time went: " + ", ".join(f"{k} {t:.0f} s" for k, t in v["stages"].items()))
    tables = [("measured", "Measured on this cpu (medians of alternating runs)", measured_rows(res, times)),
              ("predicted", "Predicted by the hardware model over xbench's kernels (predicted, not measured)",
               predicted_rows(res)),
              ("gate", "Accuracy gate against torch eager (outputs and loss curve)", gate_rows(res)),
              ("memory", "Peak activation memory of a training step (measured)", memory_rows(res))]
    for key, title, (head, rows) in tables:
        if rows and key in sections:
            parts += ["", title, _grid(head, rows)]
    v = varlen_text(res)
    if v and "varlen" in sections:
        parts += ["", "Variable-length BERT inference (measured)", v]
    ts = targets(res)
    if ts and "targets" in sections:
        judged = [t for t in ts if t.ok is not None]
        met = sum(t.ok is True for t in judged)
        parts += ["", f"Targets: {met} of {len(judged)} met"]
        parts += [f"  {'met   ' if t.ok else 'MISSED' if t.ok is False else 'claim '} {t.claim}: {t.measured}"
                  for t in ts]
    if "errors" in sections:
        for title, errors in (("Errors", res.own_errors),
                              ("torch could not run these peers here (no xbench code ran in them)", res.peer_errors)):
            if errors:
                parts += ["", title] + [f"  {e['workload']} {e['stage']} {e['engine']}: {e['error']}" for e in errors]
    return "\n".join(parts).strip("\n")


def chart_data(res: Results, precision: str = "float32") -> dict:
    """What the cross-platform chart draws (`xbench.viz.suite.suite_chart`): per workload, each platform's
    throughput over the reference platform's (the cpu's measured with xbench, the others predicted), and the
    measured speed-ups over eager."""
    ref = next((r["detail"]["reference"] for r in res.rows if r["metric"] == "ratio_to_reference"), None)
    if ref is None:
        return {}
    plats = ["cpu", *dict.fromkeys(r["platform"] for r in res.rows if r["source"] == "predicted")]
    names, series, speed = [], {p: [] for p in plats}, {"xbench": [], "inductor": []}
    for name in workloads_in(res):
        mode = WORKLOADS[name].mode if name in WORKLOADS else "train"
        metric, _, higher = PRIMARY[mode]
        measured = res.find(workload=name, precision=precision, platform="cpu", source="measured", metric=metric)
        if not measured:
            continue
        size = measured[0]["size"]
        refv = _reference_value(res, name, size, precision, ref, metric)
        if not refv:
            continue
        names.append(_label(name))
        for p in plats:
            src = "measured" if p == "cpu" else "predicted"
            v = res.value(workload=name, size=size, precision=precision, platform=p, engine="xbench", source=src,
                          metric=metric)
            series[p].append((v / refv if higher else refv / v) if v else None)
        t = {e: res.value(workload=name, precision=precision, platform="cpu", engine=e, source="measured",
                          metric=TIME[mode]) for e in ("eager", "xbench", "inductor")}
        for e in speed:
            speed[e].append(t["eager"] / t[e] if t["eager"] and t[e] else None)
    speed = {e: v for e, v in speed.items() if any(v)}
    return {"workloads": names, "reference": ref, "platforms": series, "measured": ["cpu"], "speedups": speed}


def _reference_value(res: Results, name: str, size: str, precision: str, ref: str, metric: str) -> float | None:
    """The reference platform's predicted value (kept in the ratio rows when the reference is not a target)."""
    v = res.value(workload=name, size=size, precision=precision, platform=ref, source="predicted", metric=metric)
    if v:
        return v
    for r in res.find(workload=name, size=size, precision=precision, metric="ratio_to_reference"):
        base = res.value(workload=name, size=size, precision=precision, platform=r["platform"], source="predicted",
                         metric=metric)
        if base and r["value"]:
            higher = PRIMARY[r["mode"]][2]
            return base / r["value"] if higher else base * r["value"]
    return None


# ---- HTML ---------------------------------------------------------------------------------------------------

_CSS = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin:1em 0}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-variant-numeric:tabular-nums}"
        "td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}.miss{color:#b00}.met{color:#070}"
        ".note{color:#666;font-size:90%}")


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    h = "".join(f"<th>{_html.escape(str(c))}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{_html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{h}</tr>{body}</table>"


def html(res: Results, chart: bool = True) -> str:
    """A self-contained HTML report: the tables, the targets and the cross-platform chart (inline SVG)."""
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>xbench suite</title>",
           f"<style>{_CSS}</style></head><body><h1>xbench benchmark suite</h1>"]
    for r, v in res.runs.items():
        m = v["machine"]
        out.append(f"<p class='note'>run {r} ({_html.escape(v.get('started', ''))}): "
                   f"{_html.escape(str(m.get('cpu', '')))}, {m.get('cores')} cores, torch {m.get('torch')}, "
                   f"xbench {m.get('xbench')}{', ' + _html.escape(m['gpu']) if m.get('gpu') else ''}; "
                   f"<code>{_html.escape(v.get('command', ''))}</code></p>")
    if chart:
        from ..viz.suite import suite_chart, to_svg
        fig = suite_chart(chart_data(res))
        if fig is not None:
            out.append("<h2>Across platforms</h2><p class='note'>cpu: measured here; other platforms: predicted by "
                       "xbench's hardware model over the same kernels.</p>" + to_svg(fig))
    for title, (head, rows) in (("Measured on this cpu", measured_rows(res)),
                                ("Predicted (hardware model)", predicted_rows(res)),
                                ("Accuracy gate", gate_rows(res)), ("Peak activation memory", memory_rows(res))):
        if rows:
            out.append(f"<h2>{title}</h2>" + _html_table(head, rows))
    v = varlen_text(res)
    if v:
        out.append(f"<h2>Variable-length BERT</h2><pre>{_html.escape(v)}</pre>")
    ts = targets(res)
    if ts:
        out.append("<h2>Targets</h2><ul>" + "".join(
            f"<li class='{'met' if t.ok else 'miss' if t.ok is False else 'note'}'>"
            f"{'met' if t.ok else 'missed' if t.ok is False else 'claim'}: {_html.escape(t.claim)} "
            f"&mdash; {_html.escape(t.measured)}</li>" for t in ts) + "</ul>")
    for title, errors in (("Errors", res.own_errors), ("torch could not run these peers here", res.peer_errors)):
        if errors:
            out.append(f"<h2>{title}</h2><ul>" + "".join(
                f"<li>{_html.escape(e['workload'])} {_html.escape(e['stage'])} {_html.escape(e['engine'])}: "
                f"{_html.escape(e['error'])}</li>" for e in errors) + "</ul>")
    out.append("</body></html>")
    return "\n".join(out)


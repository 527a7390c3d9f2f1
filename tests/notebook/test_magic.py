"""%%tensorop and %xbench in a real IPython shell: options, the namespace, errors at the cell's line, the widget,
the registry records, and the text/HTML fallbacks."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import xbench as xb
from xbench.lang.operator import Operator
from xbench.notebook.cell import CellError
from xbench.notebook.magics import OptionError, XbenchMagics, check_targets, parse_sizes
from xbench.notebook.registry import registry
from xbench.notebook.runner import DEFAULT_SIZES

from .conftest import run_cell

SOFTMAX = """\
%%tensorop --backends cpu,cuda,ascend --dtype float64 --sizes N=8,D=24 --show cpu --profile --targets h100
def softmax(x: Tensor[N, D]) -> Tensor[N, D]:
    e = xb.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
"""


def softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@dataclass
class Compiled:
    ran: Any
    view: Any
    record: dict
    namespace_op: Any


@pytest.fixture(scope="module")
def softmax_cell(ip) -> Compiled:
    """One cell for three backends: cpu and cuda pass in float64; ascend has no float64 and fails."""
    registry().clear()
    ran = run_cell(ip, SOFTMAX)
    assert ran.error is None, ran.io.stdout
    m = ip.magics_manager.registry["XbenchMagics"]
    return Compiled(ran, m.last_view, registry().get("softmax"), ip.user_ns["softmax"])


# ---- options ------------------------------------------------------------------------------------------------------

def test_sizes_parse_and_bad_sizes_say_what_to_write():
    assert parse_sizes("N=4096, D=1_024") == {"N": 4096, "D": 1024}
    assert parse_sizes("") == {}
    for bad in ("N", "N=x", "N=0", "3=4"):
        with pytest.raises(OptionError, match="NAME=SIZE pairs"):
            parse_sizes(bad)


def test_unknown_target_lists_the_known_ones():
    assert check_targets(["h100", "ascend-910b"]) == ["h100", "ascend-910b"]
    with pytest.raises(OptionError, match=r"(?s)unknown target .h1000.*known targets: .*h100"):
        check_targets(["h1000"])


def test_help_lists_every_option(ip):
    doc = ip.find_cell_magic("tensorop").__doc__
    for option in ("--backends", "--show", "--profile", "--sizes", "--targets", "--dtype"):
        assert option in doc
    assert "ir|cpu|cuda|ptx|ascend" in doc.replace("summary|", "")
    assert "--traceback" in ip.find_line_magic("xbench").__doc__


def test_bad_option_in_a_cell_is_one_short_message(ip):
    ran = run_cell(ip, "%%tensorop --sizes N=lots\ndef f(x: Tensor[N]) -> Tensor[N]:\n    return x\n")
    assert isinstance(ran.error, CellError)
    assert "--sizes: cannot read 'N=lots'" in str(ran.error)
    assert "Traceback" not in ran.io.stdout
    ran = run_cell(ip, "%%tensorop --sizes M=4\ndef f(x: Tensor[N]) -> Tensor[N]:\n    return x\n")
    assert "--sizes names M, which no operator in this cell has" in str(ran.error)
    ran = run_cell(ip, "%%tensorop --show loops\ndef f(x: Tensor[N]) -> Tensor[N]:\n    return x\n")
    assert "--show: there is no 'loops' tab" in str(ran.error)


# ---- operators in the namespace -----------------------------------------------------------------------------------

def test_functions_become_operators_in_the_namespace(ip, magics):
    ip.user_ns.pop("xb", None)
    ip.user_ns.pop("Tensor", None)
    ran = run_cell(ip, """\
%%tensorop --backends cpu --sizes N=4,K=8
def gelu(x):
    return 0.5 * x * (1 + xb.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))

def mlp(x: Tensor[N, K], w: Tensor[K, H]) -> Tensor[N, H]:
    return gelu(x @ w)
""")
    assert ran.error is None, ran.io.stdout
    assert isinstance(ip.user_ns["gelu"], Operator) and isinstance(ip.user_ns["mlp"], Operator)
    assert ip.user_ns["xb"] is xb
    # the undeclared dims of the annotations became dims; H took the default size
    [result] = magics.last_view.results
    assert result.dims == {"N": 4, "K": 8, "H": DEFAULT_SIZES[2]}     # the third dim's default
    assert result.inputs.defaulted == ["H"]
    assert "gelu: defined as an operator, not compiled (parameter x has no Tensor[...] annotation)" in \
        ran.io.outputs[0].data["text/plain"]
    # the operator is an ordinary callable on arrays of any size
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((5, 2)).astype(np.float32)
    h = x.astype(np.float64) @ w
    want = 0.5 * h * (1 + np.tanh(0.7978845608 * (h + 0.044715 * h ** 3)))
    np.testing.assert_allclose(ip.user_ns["mlp"](x, w), want, rtol=2e-5, atol=2e-6)


# ---- errors point at the cell's line ------------------------------------------------------------------------------

def test_trace_error_names_the_cell_line_and_keeps_the_traceback(ip, magics):
    ran = run_cell(ip, """\
%%tensorop --backends cpu
def bad(x: Tensor[N]) -> Tensor[N]:
    y = x * 2
    if y > 0:
        return y
    return x
""")
    err = ran.error
    assert isinstance(err, CellError) and err.line == 4
    lines = str(err).splitlines()
    assert lines[0].startswith("xbench: cell line 4: operator bad: the value of a traced tensor is not known")
    assert lines[1] == "     4 |     if y > 0:"
    assert lines[2].startswith("  hint: choose values with xb.where")
    # IPython shows the short message, not a compiler traceback
    assert "xbench: cell line 4" in ran.io.stdout and "Traceback" not in ran.io.stdout
    assert "xbench/lang" not in ran.io.stdout
    # the full traceback is one click away (a collapsed section) and printed by %xbench --traceback
    [shown] = ran.io.outputs
    assert shown.data["text/plain"] == "(full traceback: %xbench --traceback)"
    assert "application/vnd.jupyter.widget-view+json" in shown.data
    assert "Traceback (most recent call last)" in magics.last_error.full
    assert "xbench/lang/" in magics.last_error.full
    # ... starting at the user's own frame: no IPython or magic frames above it
    first = magics.last_error.full.split("\n")[1]
    assert ", line 4, in bad" in first, magics.last_error.full[:400]
    assert "IPython" not in magics.last_error.full and "magics.py" not in magics.last_error.full
    again = run_cell(ip, "%xbench --traceback")
    assert "Traceback (most recent call last)" in again.io.stdout


def test_a_misspelt_name_suggests_the_close_match(ip, magics):
    ran = run_cell(ip, "%%tensorop --backends cpu\ndef act(x: Tensor[N]) -> Tensor[N]:\n    return xb.tanhh(x)\n")
    lines = str(ran.error).splitlines()
    assert lines[0] == "xbench: cell line 3: operator act: AttributeError: module 'xbench' has no attribute 'tanhh'"
    assert lines[-1] == "  hint: did you mean xb.tanh?"
    ran = run_cell(ip, "%%tensorop --backends cpu\ndef act2(xs: Tensor[N]) -> Tensor[N]:\n    return xb.tanh(xss)\n")
    assert str(ran.error).splitlines()[0].endswith("NameError: name 'xss' is not defined")
    assert str(ran.error).splitlines()[-1] == "  hint: did you mean xs?"


@pytest.mark.parametrize("body, line, message", [
    ("def f(x: Tensor[N]) -> Tensor[N]:\n    y = x +\n    return y\n", 3, "SyntaxError: invalid syntax"),
    ("def f(x: Tensor[N]) -> Tensor[N]:\n    return undefined_helper(x)\n", 3,
     "operator f: NameError: name 'undefined_helper' is not defined"),
    ("def f(x: Tensor[N], y: Tensor[M]) -> Tensor[N]:\n    z = x * 2\n    return z + y\n", 4,
     "operator f: shapes (4,) and (5,) do not broadcast"),
])
def test_other_errors_point_at_their_line(ip, body, line, message):
    sizes = "N=4,M=5" if "Tensor[M]" in body else "N=4"
    ran = run_cell(ip, f"%%tensorop --backends cpu --sizes {sizes}\n" + body)
    assert isinstance(ran.error, CellError), ran.io.stdout
    assert ran.error.line == line
    first = str(ran.error).splitlines()[0]
    assert first.startswith(f"xbench: cell line {line}: "), first
    assert message in first, first
    assert str(ran.error).splitlines()[1] == f"  {line:>4} | {body.splitlines()[line - 2]}"


def test_a_cell_without_functions_says_what_to_write(ip):
    ran = run_cell(ip, "%%tensorop\nx = 1\n")
    assert "defines no function" in str(ran.error) and "def scale(x: Tensor[N])" in str(ran.error)


# ---- the widget, a failing backend, the records ------------------------------------------------------------------

def test_widget_has_the_tabs_and_a_failing_backend_has_its_error_tab(softmax_cell):
    view = softmax_cell.view
    [ov] = view.views
    assert ov.keys == ["summary", "ir", "cpu", "cuda", "ptx", "ascend", "compare", "resources", "metrics", "roofline"]
    assert list(ov.tab.titles) == ["Summary", "IR", "CPU", "CUDA", "PTX", "Ascend C", "Side by side", "Resources",
                                   "Metrics", "Roofline"]
    assert ov.tab.selected_index == ov.keys.index("cpu")          # --show cpu
    result = view.results[0]
    assert [r.status for r in result.backends.values()] == ["pass", "pass", "error"]
    ascend = ov.panes["ascend"].value
    assert "the ascend backend has no float64 type" in ascend and "<summary>Traceback</summary>" in ascend
    cpu = ov.panes["cpu"].value
    assert "k0_row" in cpu and "<span" in cpu                      # highlighted code
    ptx = ov.panes["ptx"].value
    assert ".version" in ptx and ".entry" in ptx
    res = ov.panes["resources"].value
    registers = result.backends["cuda"].artifact.resources["registers_max"]
    # resources as tables with names and units
    assert re.search(rf"registers / thread \(max\)</td><td[^>]*>{registers}</td>", res)
    assert re.search(r"shared memory / block \(max\)</td><td[^>]*>[\d.]+ KiB</td>", res)
    assert "{'" not in res and "ascend" not in re.findall(r"<h4>(\w+):", res)
    assert "graph softmax(x: f64[8,24])" in ov.panes["ir"].value and "kernel k0_" in ov.panes["ir"].value
    # --profile: the report's metrics and the roofline of the profiled backends
    report = result.report
    assert report is not None, result.profile.error
    assert report._repr_html_() in ov.panes["metrics"].value
    # grouped by backend and target, each group collapsible
    groups = re.findall(r"<details open class='xb-group' data-where='([^']+)'>", ov.panes["metrics"].value)
    assert groups[0] == "operator" and "cpu" in groups and "cuda/h100" in groups
    assert report["registers_per_thread", "cuda", "h100"].value == registers
    roof = ov.roofline
    assert roof is not None and ov.panes["roofline"] is roof.widget
    assert roof.picker.options == ("h100",) and "<svg" in roof.chart.value
    assert "<title>softmax" in roof.chart.value                          # values on hover
    # the outputs are right: the cell checked them, and so does this test
    x = np.random.default_rng(3).standard_normal((8, 24))
    np.testing.assert_allclose(softmax_cell.namespace_op.run(x, backend="cuda"), softmax_ref(x), rtol=1e-12)


def test_record_published_to_the_registry(softmax_cell):
    rec = softmax_cell.record
    result = softmax_cell.view.results[0]
    assert rec["name"] == "softmax"
    assert rec["signature"] == "softmax(x: Tensor[N, D]) -> Tensor[N, D]"
    assert rec["dims"] == {"N": 8, "D": 24}
    assert list(rec["backends"]) == ["cpu", "cuda", "ascend"]
    cpu, cuda, ascend = (rec["backends"][b] for b in ("cpu", "cuda", "ascend"))
    assert cpu["status"] == "pass" and cpu["time_ms"] > 0 and cpu["predicted"] is False
    # with --profile the profiler's measurement is the time (the cell does not time the backend twice)
    assert cpu["time_ms"] == result.report["time_ms", "cpu"].value and result.backends["cpu"].timing is None
    assert 0 <= cpu["max_abs_error"] < 1e-13
    assert cuda["status"] == "pass" and cuda["predicted"] is True and cuda["target"] == "h100"
    assert cuda["time_ms"] == result.report["predicted_time_ms", "cuda", "h100"].value > 0
    assert cuda["registers_per_thread"] == result.backends["cuda"].artifact.resources["registers_max"] > 0
    assert ascend["status"] == "error" and "no float64 type" in ascend["message"]
    assert set(rec["sources"]) == {"cpu", "cuda", "ptx"}
    assert rec["sources"]["cpu"] == result.backends["cpu"].artifact.source
    # the best is the fastest measured time; an H100's predicted time is not ranked against this CPU's
    assert rec["best"] == {"backend": "cpu", "time_ms": cpu["time_ms"]}


def test_a_run_that_raises_leaves_no_pass_in_the_panel(ip, magics):
    ok = run_cell(ip, "%%tensorop --backends cpu\ndef flip(x: Tensor[N]) -> Tensor[N]:\n    return -x\n")
    assert ok.error is None and registry().get("flip")["backends"]["cpu"]["status"] == "pass"
    bad = run_cell(ip, "%%tensorop --backends cpu\ndef flip(x: Tensor[N]) -> Tensor[N]:\n"
                       "    if x > 0:\n        return x\n    return -x\n")
    assert bad.error is not None
    rec = registry().get("flip")
    assert rec["backends"]["cpu"]["status"] == "error" and rec["best"] is None and rec["sources"] == {}
    assert rec["backends"]["cpu"]["message"].startswith("the last run of its cell raised: cell line 3")
    assert run_cell(ip, "%%tensorop --backends cpu\ndef flip(x: Tensor[N]) -> Tensor[N]:\n    return -x\n").error is None
    syntax = run_cell(ip, "%%tensorop --backends cpu\ndef flip(x: Tensor[N]) -> Tensor[N]:\n    return -x +\n")
    assert syntax.error is not None and registry().get("flip")["backends"]["cpu"]["status"] == "error"


def test_text_and_html_fallbacks(softmax_cell):
    data = softmax_cell.ran.io.outputs[0].data
    assert set(data) == {"text/plain", "text/html", "application/vnd.jupyter.widget-view+json"}
    text = data["text/plain"]
    lines = text.splitlines()
    assert lines[0] == "softmax(x: Tensor[N, D]) -> Tensor[N, D]  at N=8, D=24, float64 inputs"
    assert re.match(r"  cpu +✓ pass +\d\.\de-\d\d +\d\.\de-\d\d +N=8, D=24 +\d", lines[2])
    # sizes the user gave, small enough for the simulator, are kept; the loops that then run once are named
    assert re.match(r"  cuda +✓ pass .* N=8, D=24 +simulated \(no time\) +[ \d]\d\.?\d* [nµm]?s \(h100\) +"
                    r"ran once: k0_row blocks over outer points \(grid x\), k0_row 32 lanes over 24 elements", lines[3])
    assert re.match(r"  ascend +! error .* the ascend backend has no float64 type", lines[4])
    assert "-- CPU --" in text and "def k0_row" in text              # --show cpu prints the code
    page = data["text/html"]
    summaries = re.findall(r"<details(?: open)?><summary>([^<]+)</summary>", page)      # one section per tab
    assert summaries == ["IR", "CPU", "CUDA", "PTX", "Ascend C", "Side by side", "Resources", "Metrics",
                         "Roofline"]
    assert "<details open><summary>CPU</summary>" in page
    assert "no float64 type" in page
    assert re.search(r"<summary>Roofline</summary><div class='xb-roofline'><svg ", page)
    assert "<summary>Metrics</summary><style>" in page and "<div class='xb-report'>" in page


def test_xbench_line_magic_sets_defaults_and_lists_operators(ip, magics):
    shown = ip.run_line_magic("xbench", "--backends cpu --sizes N=8 --dtype float64")
    text = shown._repr_mimebundle_()["text/plain"]
    assert re.search(r"backends +cpu\n", text) and re.search(r"sizes +N=8\n", text)
    assert re.search(r"dtype +float64\n", text) and "none yet" in text
    ran = run_cell(ip, "%%tensorop\ndef double(x: Tensor[N]) -> Tensor[N]:\n    return 2 * x\n")
    assert ran.error is None, ran.io.stdout
    rec = registry().get("double")
    assert rec["dims"] == {"N": 8} and list(rec["backends"]) == ["cpu"]
    assert magics.last_view.results[0].inputs.kwargs["x"].dtype == np.float64
    text = ip.run_line_magic("xbench", "")._repr_mimebundle_()["text/plain"]
    assert re.search(r"double\(x: Tensor\[N\]\) -> Tensor\[N\] +N=8 +✓ pass \d", text)
    # a cell's own flags win over the defaults
    ran = run_cell(ip, "%%tensorop --sizes N=3\ndef triple(x: Tensor[N]) -> Tensor[N]:\n    return 3 * x\n")
    assert registry().get("triple")["dims"] == {"N": 3}
    text = ip.run_line_magic("xbench", "--reset")._repr_mimebundle_()["text/plain"]
    assert re.search(r"sizes +none", text) and re.search(r"dtype +float32", text)
    with pytest.raises(CellError, match="unknown target 'nope'"):
        ip.run_line_magic("xbench", "--targets nope")


def test_magic_is_registered_by_load_ext(ip):
    assert isinstance(ip.magics_manager.registry["XbenchMagics"], XbenchMagics)
    assert ip.find_cell_magic("tensorop") is not None and ip.find_line_magic("xbench") is not None


def test_last_result_gives_the_cell_report(softmax_cell):
    from xbench.notebook import last_result

    result = last_result("softmax")
    assert result is softmax_cell.view.results[0]
    assert result.report["flops"].value > 0
    with pytest.raises(LookupError, match=r"no %%tensorop cell has compiled 'nope' in this session \(compiled: .*"
                                          r"softmax"):
        last_result("nope")


def test_operators_before_a_failing_one_still_show_and_publish(ip):
    ran = run_cell(ip, """\
%%tensorop --backends cpu --sizes N=4
def fine(x: Tensor[N]) -> Tensor[N]:
    return x + 1

def broken(x: Tensor[N]) -> Tensor[N]:
    return x.reshape(3, -1)
""")
    assert isinstance(ran.error, CellError) and ran.error.line == 6
    assert str(ran.error).startswith("xbench: cell line 6: operator broken: ")
    view, collapsed = ran.io.outputs
    assert view.data["text/plain"].startswith("fine(x: Tensor[N]) -> Tensor[N]  at N=4")
    assert collapsed.data["text/plain"] == "(full traceback: %xbench --traceback)"
    assert registry().names() == ["fine"]


def test_figures_have_a_png_form(ip):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    fig.subplots().plot([0, 1], [1, 0])
    data, _ = ip.display_formatter.format(fig)
    assert data["image/png"][:8] == b"\x89PNG\r\n\x1a\n"

"""`%%tensorop --tune` in a real IPython shell: the search on cpu (measured), a backend without hardware here
(predicted, with candidates rejected for changing the numbers and schedules pruned), the Tuning tab, its
pickers, its text and HTML fallbacks, and the options' errors. Every tuning run here uses its own cache
directory, so the tuning database starts empty and nothing tuned here is picked up by other tests."""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import xbench as xb
from xbench import backends
from xbench.backends import Artifact, KernelInfo
from xbench.ir.schedule import Knob, Schedule
from xbench.notebook.cell import CellError
from xbench.notebook.runner import Inputs, call_args, tuning_target
from xbench.notebook.tuning import heatmap_figure
from xbench.notebook.view import fmt_time
from xbench.tune import tuner

from .conftest import run_cell


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield


class ChipBackend:
    """A backend without its hardware here: it runs through numpy, its time comes from a formula whose optimum is
    tile 16 (1 ms; the default tile 8 is 2 ms), a `broken` schedule adds 1 to every output, tile 64 is over a
    hard limit, and `broken_default=True` makes the default schedule the broken one."""

    default_target = "chip-1"

    def __init__(self, name: str, broken_default: bool = False):
        self.name = name
        self.broken_default = broken_default

    def available(self) -> tuple[bool, str]:
        return True, "numpy"

    def knobs(self, kernel: Any, program: Any = None) -> dict[str, Knob]:
        return {"tile": Knob("tile", (8, 16, 32, 64), 8, "tile length"),
                "broken": Knob("broken", (False, True), self.broken_default, "add 1 to every output")}

    def default_schedule(self, kernel: Any) -> Schedule:
        return Schedule(tile=8, broken=self.broken_default)

    def check(self, program: Any, kernel: Any, schedule: Schedule) -> str | None:
        return "tile 64 needs more scratch than the chip has" if schedule["tile"] > 32 else None

    def compile(self, program: Any, schedules: dict[str, Schedule] | None = None, **options: Any) -> Artifact:
        schedules = schedules or {k.name: self.default_schedule(k) for k in program.kernels}
        return ChipArtifact(self.name, program, "# numpy", [KernelInfo(k.name, k.kind, "", schedules[k.name])
                                                            for k in program.kernels], predicted=True)


class ChipArtifact(Artifact):
    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        from xbench.backends.reference import evaluate
        outs = [o.astype(np.float32) for o in evaluate(self.program.graph, *arrays)]
        return [o + 1 for o in outs] if any(k.schedule["broken"] for k in self.kernels) else outs

    def predict_ms(self, kernel: str, target: str) -> float:
        s = next(k.schedule for k in self.kernels if k.name == kernel)
        return 1.0 + abs(np.log2(s["tile"]) - 4)


@pytest.fixture
def chip() -> Any:
    for b in (ChipBackend("chip"), ChipBackend("badchip", broken_default=True)):
        backends.register(b)
    yield
    for name in ("chip", "badchip"):
        backends._loaded.pop(name, None)


def softmax_ref(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def section(page: str, title: str) -> str:
    """The body of one <details> section of the HTML fallback."""
    found = re.search(rf"<summary>{title}</summary>(.*?)</details>", page, re.S)
    assert found, f"no {title} section"
    return found.group(1)


# ---- cpu: measured ----------------------------------------------------------------------------------------------

def test_tune_on_cpu_measures_stores_and_the_operator_uses_the_best(ip, magics):
    ran = run_cell(ip, """\
%%tensorop --backends cpu --sizes N=6,D=40 --tune --budget 3
def softmax(x: Tensor[N, D]) -> Tensor[N, D]:
    e = xb.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
""")
    assert ran.error is None, ran.io.stdout
    [result] = magics.last_view.results
    tuning = result.tuning
    res = tuning.result
    assert tuning.backend == "cpu" and not tuning.predicted and res.target == "cpu-local"
    [k] = res.kernels
    # the progress line counted every candidate and carried the best time so far
    # ... and ends on the time the table has (the top few re-measured), in its units
    final = ran.io.stderr.rstrip().rsplit("\r", 1)[-1]
    assert f"softmax/{k.kernel}: 3/3  best {fmt_time(k.best_ms).strip()} (re-measured)" in final
    assert len(k.candidates) == 3 and {c.status for c in k.candidates} == {"measured"}
    assert k.best_ms == min(c.time_ms for c in k.candidates) > 0
    kernel = ip.user_ns["softmax"].lower(result.inputs.kwargs["x"]).kernels[0]
    knobs = xb.backends.get("cpu").knobs(kernel)
    assert k.candidates[0].config == k.default == {n: knob.default for n, knob in knobs.items()}
    # the best schedule is in the database and used by the operator from now on, with the right numbers
    entries = [e for e in xb.tuning_db().entries() if e["op"] == "softmax"]
    assert [e["config"] for e in entries] == [k.best]
    x = result.inputs.kwargs["x"]
    assert dict(ip.user_ns["softmax"].compile("cpu", x).schedules[k.kernel]) == k.best
    np.testing.assert_allclose(ip.user_ns["softmax"](x), softmax_ref(x.astype(np.float64)), rtol=1e-5, atol=1e-7)

    # the Tuning tab opens first; its tables say what the result says
    [ov] = magics.last_view.views
    assert ov.keys[-1] == "tuning" and ov.tab.selected_index == len(ov.keys) - 1
    assert ov.tab.titles[-1] == "Tuning"
    page = ov.panes["tuning"].children[0].value
    assert "tuned on cpu (cpu-local, measured here), strategy auto, budget 3 per kernel" in page
    speedup = f"{k.default_ms / k.best_ms:.2f}x"
    assert f"<td>{speedup}</td>" in page
    rows = re.findall(r"<tr><td[^>]*>(\d+)</td>(.*?)</tr>", page)
    assert [int(i) for i, _ in rows] == [0, 1, 2]
    for (_, cells), c in zip(rows, k.candidates):
        values = re.findall(r"<td[^>]*>(.*?)</td>", cells)
        assert values[-3:-1] == ["measured", fmt_time(c.time_ms)]
        notes = values[-1].split("; ")     # a message may itself mention "the best so far"
        assert ("default" in notes) == (c.config == k.default)
        assert ("best" in notes) == (c.config == k.best)

    # pickers: every knob of the kernel; a new pair redraws the heatmap, the same knob twice says so
    pane = ov.tuning
    assert sorted(pane.x.options) == sorted(knobs) and pane.x.value != pane.y.value
    assert pane.figures[0][:4] == b"\x89PNG" and pane.figures[1][:4] == b"\x89PNG"
    before, first_y = pane.figures[1], pane.y.value
    pane.y.value = pane.x.value
    assert pane.figures[1] == "pick two different knobs for the heatmap"
    assert pane.heat.layout.display == "none" and "pick two different knobs" in pane.heat_note.value
    pane.y.value = next(n for n in knobs if n not in (pane.x.value, first_y))
    assert pane.figures[1][:4] == b"\x89PNG" and pane.figures[1] != before
    assert pane.heat.layout.display is None

    # fallbacks: the text prints the tuning tables (the tab opened first), the HTML has them with both figures
    data = magics.last_view._repr_mimebundle_()
    text = data["text/plain"]
    assert "-- Tuning --" in text
    for c in k.candidates:
        assert re.search(rf"\n{k.candidates.index(c)} .* measured +{re.escape(fmt_time(c.time_ms))}", text)
    tab = section(data["text/html"], "Tuning")
    assert "<details open><summary>Tuning</summary>" in data["text/html"]
    assert len(re.findall(r'<img src="data:image/png;base64,[A-Za-z0-9+/]{100}', tab)) == 2


# ---- a backend without hardware here: predicted, rejected, pruned -------------------------------------------------

def test_predicted_tuning_rejects_wrong_numbers_and_labels_everything_predicted(ip, magics, chip, monkeypatch):
    shown: list[Any] = []
    monkeypatch.setattr(tuner, "in_notebook", lambda: True)   # the widget progress bar
    monkeypatch.setattr("IPython.display.display", shown.append)
    ran = run_cell(ip, """\
%%tensorop --backends chip --sizes N=4,D=8 --tune --budget 6 --strategy exhaustive
def weigh(pred: Tensor[N, D], target: Tensor[N, D]) -> Tensor[N, D]:
    return xb.exp(pred) * target
""")
    assert ran.error is None, ran.io.stdout
    [result] = magics.last_view.results
    res = result.tuning.result
    [k] = res.kernels
    assert res.predicted and res.target == "chip-1"
    assert res.counts() == {"predicted": 3, "rejected": 3, "pruned": 2}
    assert k.best == {"broken": False, "tile": 16} and k.best_ms == 1.0 and k.default_ms == 2.0
    [bar] = shown
    assert bar.children[0].value == 6 and bar.children[0].max == 6
    assert "best 1.00 ms (predicted)" in bar.children[1].value

    pane = magics.last_view.views[0].tuning
    page = pane.widget.children[0].value
    assert "tuned on chip for chip-1 (predicted: there is no chip-1 here" in page
    assert "2.00 ms -&gt; 1.00 ms (predicted) (2.00x); 3 predicted, 3 rejected, 2 pruned" in page
    assert "<th>time (predicted)</th>" in page
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", r) for r in re.findall(r"<tr>(<td.*?)</tr>", page)][1:]
    rejected = [r for r in rows if r[3] == "rejected"]
    assert [r[1] for r in rejected] == ["True"] * 3 and all(r[4] == "—" for r in rejected)
    assert all("outside tolerance" in r[5] for r in rejected)
    assert [r[4] for r in rows if r[3] == "predicted"] == ["2.00 ms", "1.00 ms", "2.00 ms"]
    fig = heatmap_figure(result.tuning, "tile", "broken", k.kernel)
    assert fig.axes[0].get_title() == f"weigh/{k.kernel}: best predicted ms (chip-1)"
    np.testing.assert_array_equal(fig.grid_values, [[2.0, 1.0, 2.0]])    # broken=True has no time: no row
    text = magics.last_view._repr_mimebundle_()["text/plain"]
    assert re.search(r"\n1 +False +16 +predicted +1\.00 ms +best\n", text)


def test_several_kernels_have_a_kernel_column_and_a_kernel_picker(ip, magics, chip):
    ran = run_cell(ip, """\
%%tensorop --backends chip --sizes N=4,K=8,M=6 --tune --budget 2 --strategy exhaustive
def attend(a: Tensor[N, K], b: Tensor[K, M]) -> Tensor[N, M]:
    h = a @ b
    e = xb.exp(h - h.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
""")
    assert ran.error is None, ran.io.stdout
    res = magics.last_view.results[0].tuning.result
    assert [k.kernel for k in res.kernels] == ["k0_contract", "k1_row"]
    pane = magics.last_view.views[0].tuning
    page = pane.widget.children[0].value
    header = re.findall(r"<th>(.*?)</th>", page)
    assert header[5:] == ["#", "kernel", "broken", "tile", "status", "time (predicted)", "note"]
    kernels = [re.findall(r"<td[^>]*>(.*?)</td>", r)[1] for r in re.findall(r"<tr>(<td[^>]*>\d+</td>.*?)</tr>", page)]
    assert kernels == ["k0_contract"] * 2 + ["k1_row"] * 2
    # exhaustive in space order with a budget of 2: the default (tile 8, 2 ms), then tile 16 (1 ms, the optimum)
    assert all(k.default_ms == 2.0 and k.best_ms == 1.0 and k.best == {"broken": False, "tile": 16}
               for k in res.kernels)
    assert list(pane.kernel.options) == ["k0_contract", "k1_row"] and pane.kernel.value == "k0_contract"
    first = list(pane.figures)
    pane.kernel.value = "k1_row"
    assert (pane.x.value, pane.y.value) == ("tile", "broken")     # tile varied among the timed candidates
    assert pane.figures[0] != first[0] and pane.figures[0][:4] == b"\x89PNG"


def test_a_backend_that_fails_is_not_tuned_and_says_why(ip, magics, chip):
    ran = run_cell(ip, "%%tensorop --backends badchip --sizes N=4 --tune --budget 2\n"
                       "def inc(x: Tensor[N]) -> Tensor[N]:\n    return x + 1\n")
    assert ran.error is None, ran.io.stdout
    [result] = magics.last_view.results
    assert result.backends["badchip"].status == "fail" and result.tuning.result is None
    pane = magics.last_view.views[0].panes["tuning"].value
    assert "badchip: not tuned: the badchip backend did not pass (fail: " in pane
    assert "-- Tuning --\nbadchip: not tuned" in magics.last_view._repr_mimebundle_()["text/plain"]


# ---- options ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, message", [
    ("--tune --budget 0", "--budget: cannot read '0'"),
    ("--tune --budget few", "--budget: cannot read 'few'"),
    ("--tune --strategy fastest", "--strategy: there is no 'fastest' search"),
    ("--budget 4", "%%tensorop: --budget has no effect without --tune"),
    ("--budget 4 --strategy random", "--budget and --strategy have no effect without --tune"),
    ("--show tuning", "--show tuning has no effect without --tune"),
])
def test_tuning_options_that_cannot_be_used_say_what_to_write(ip, flags, message):
    ran = run_cell(ip, f"%%tensorop --backends cpu {flags}\ndef f(x: Tensor[N]) -> Tensor[N]:\n    return x\n")
    assert isinstance(ran.error, CellError) and message in str(ran.error)
    assert "hint:" in str(ran.error)


def test_help_lists_the_tuning_options(ip):
    doc = ip.find_cell_magic("tensorop").__doc__
    for option in ("--tune", "--budget", "--strategy", "auto|exhaustive|random|guided"):
        assert option in doc


def test_tuning_target_is_the_first_target_of_the_backends_kind():
    assert tuning_target("cuda", ["ascend-910b", "a100", "h100"]) == "a100"
    assert tuning_target("ascend", ["h100", "ascend-910b"]) == "ascend-910b"
    assert tuning_target("ascend", ["h100"]) is None            # the backend's own default target
    assert tuning_target("cpu", ["h100"]) is None and tuning_target("cuda", None) is None


def test_call_args_are_positional_up_to_a_defaulted_parameter():
    @xb.tensor_op
    def f(x: xb.Tensor, target: xb.Tensor, scale: float = 2.0, *, bias: xb.Tensor) -> xb.Tensor:
        return x * target * scale + bias

    a, b, c = np.zeros(2), np.ones(2), np.full(2, 3.0)
    args, kwargs = call_args(f, Inputs([], {"x": a, "target": b, "bias": c}, {}, []))
    assert args[0] is a and args[1] is b and len(args) == 2
    assert list(kwargs) == ["bias"] and kwargs["bias"] is c

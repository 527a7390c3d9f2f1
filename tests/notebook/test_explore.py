"""xb.explore: the controls are traitlets; changing one re-runs the operator and updates the views in place."""
from __future__ import annotations

import re

import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench.notebook.explore import Explorer
from xbench.notebook.registry import registry


@xb.tensor_op
def rowscale(x: Tensor[N, D], w: Tensor[D]) -> Tensor[N, D]:
    return x * w / xb.sqrt(xb.mean(x * x, axis=-1, keepdims=True) + 1.0)


@pytest.fixture(scope="module")
def explorer() -> Explorer:
    return xb.explore(rowscale, {"N": 8}, backends=["cpu"], targets=["h100"])


def test_explore_reruns_on_every_change(explorer):
    ex = explorer
    assert isinstance(ex, Explorer)
    assert ex.runs == 1 and ex.error is None
    assert list(ex.dims) == ["N", "D"]
    assert ex.result.dims == {"N": 8, "D": 24}
    assert ex.progress.value == ex.progress.max and ex.progress.bar_style == "success"
    assert "N=8, D=24" in ex.header.value

    ex.dims["D"].value = 32                       # what a slider drag does
    assert ex.runs == 2
    assert ex.result.dims == {"N": 8, "D": 32}
    assert "N=8, D=32" in ex.header.value
    assert registry().get("rowscale")["dims"] == {"N": 8, "D": 32}
    cpu = ex.result.backends["cpu"]
    assert cpu.status == "pass" and cpu.time_ms > 0
    assert f"{cpu.max_abs_error:.1e}" in ex.summary.value

    ex.dtype.value = "float64"
    assert ex.runs == 3 and ex.result.dtype == "float64"
    assert ex.result.inputs.kwargs["x"].dtype == np.float64
    assert ex.result.backends["cpu"].max_abs_error < 1e-12

    ex.dims["D"].value = 16
    ex.backends.value = ("cpu", "cuda")
    assert ex.runs == 5 and list(ex.result.backends) == ["cpu", "cuda"]
    assert ex.result.backends["cuda"].status == "pass"
    assert "simulated (no time)" in ex.summary.value

    # every run profiles: the metrics and the roofline follow the controls
    report = ex.result.report
    assert report is not None, ex.result.profile.error
    assert report._repr_html_() in ex.metrics.value and "<td>N=8" not in ex.metrics.value
    assert report.value("flops") == xb.profile(rowscale, *ex.result.inputs.kwargs.values(), backends=["cpu"],
                                                targets=["h100"], timing=False).value("flops")
    one_panel = ex.roofline.value
    assert "<svg" in one_panel and ex.roofline.layout.display is None
    assert re.search(r"<title>rowscale .* on h100 \(predicted\)", one_panel)      # values on hover
    ex.targets.value = ("h100", "ascend-910b")
    assert ex.runs == 6 and ex.settings().targets == ["h100", "ascend-910b"]
    assert ex.result.report["predicted_time_ms", "ascend", "ascend-910b"] is not None
    assert ex.roofline.value != one_panel


@xb.tensor_op
def quads(x: Tensor[N]) -> Tensor:
    return x.reshape(-1, 4).sum(axis=-1)


def test_explore_reports_a_failing_run_and_recovers():
    ex = Explorer(quads, {"N": 8}, backends=["cpu"], targets=["h100"])
    assert ex.error is None and ex.result.dims == {"N": 8}
    ex.dims["N"].value = 1                        # 1 element cannot be read as rows of 4
    assert ex.runs == 2 and ex.error is not None and "reshape" in ex.error
    assert ex.progress.bar_style == "danger" and ex.progress.description == "failed"
    assert "reshape" in ex.summary.value
    ex.dims["N"].value = 16
    assert ex.runs == 3 and ex.error is None and ex.progress.bar_style == "success"
    assert ex.result.dims == {"N": 16} and ex.result.backends["cpu"].status == "pass"


def test_explore_fallbacks(explorer):
    data = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"].startswith("xb.explore(rowscale): rowscale(x: Tensor[N, D], w: Tensor[D])")
    assert "cpu" in data["text/plain"].splitlines()[2]
    assert "<table class='xb-table'>" in data["text/html"]


def test_explore_rejects_what_it_cannot_use():
    with pytest.raises(TypeError, match="takes an operator"):
        xb.explore(lambda x: x)
    with pytest.raises(ValueError, match=r"rowscale has no dim M \(its dims: N, D\)"):
        xb.explore(rowscale, {"M": 4})

"""Roofline figures: their content (roofs, ridge points, operator points, labels), not their pixels."""
from __future__ import annotations

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import xbench as xb
from xbench.hw import get_target
from xbench.profile import Metric, Report


def report(op: str, flops: float, nbytes: float, **times: float) -> Report:
    recs = [Metric("flops", flops, "FLOP", "counted"), Metric("bytes", nbytes, "B", "counted")]
    for target, (kind, ms) in times.items():
        t = target.replace("_", "-")
        if kind == "measured":
            recs.append(Metric("time_ms", ms, "ms", "measured", "cpu", t))
        else:
            recs.append(Metric("predicted_time_ms", ms, "ms", "predicted", "cuda", t))
    return Report(op, recs)


def lines(ax) -> dict[str, object]:
    return {ln.get_gid(): ln for ln in ax.get_lines() if ln.get_gid()}


def test_panels_roofs_ridges_and_points(tmp_path) -> None:
    h100 = get_target("h100")
    a = report("stream", 1e9, 8e9, h100=("predicted", 4.0))
    b = report("gemm", 2e12, 1e9, h100=("predicted", 50.0))
    fig = xb.roofline([a, b], targets=["h100"], path=str(tmp_path / "roof.svg"))
    assert (tmp_path / "roof.svg").read_text().startswith("<?xml")
    (ax,) = fig.axes
    ls = lines(ax)
    # a compute roof per peak, at the peak in GFLOP/s
    for (d, u), v in h100.peaks.items():
        roof = ls[f"compute:{d} {u}"]
        assert set(roof.get_ydata()) == {v / 1e9}
    # a memory roof per level with a bandwidth: y = bandwidth * x
    for m in ("l1", "l2", "hbm"):
        x, y = ls[f"memory:{m}"].get_xdata(), ls[f"memory:{m}"].get_ydata()
        assert y[0] == pytest.approx(h100.bandwidth(m) * x[0] / 1e9)
    # ridge points against the fp32 vector peak, marked where the roofs meet
    panel = fig.roofline_data.panels["h100"]
    assert panel.main_roof == "float32 vector"
    ridge = ls["ridge:hbm"]
    assert ridge.get_xdata()[0] == pytest.approx(66.9e12 / 3.35e12)
    assert ridge.get_ydata()[0] == pytest.approx(66.9e3)
    # the operators: intensity = flops / bytes, performance = flops / predicted time; open triangles
    p = ls["point:predicted:stream"]
    assert (p.get_xdata()[0], p.get_ydata()[0]) == (pytest.approx(0.125), pytest.approx(1e9 / 4e-3 / 1e9))
    assert p.get_marker() == "^" and p.get_markerfacecolor() == "none"
    q = ls["point:predicted:gemm"]
    assert (q.get_xdata()[0], q.get_ydata()[0]) == (pytest.approx(2000.0), pytest.approx(2e12 / 50e-3 / 1e9))
    labels = [t.get_text() for t in ax.texts]
    assert "stream" in labels and "gemm" in labels and any(t.startswith("ridge 20") for t in labels)
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_title() == "h100"


def test_measured_and_predicted_markers_one_panel_per_target() -> None:
    r = report("softmax", 1e8, 8e8, h100=("predicted", 0.3), ascend_910b=("predicted", 0.5))
    r.records.append(Metric("time_ms", 2.0, "ms", "measured", "cuda", "h100"))
    fig = xb.roofline(r, targets=("h100", "ascend-910b"))
    assert [ax.get_title() for ax in fig.axes] == ["h100", "ascend-910b"]
    ls = lines(fig.axes[0])
    m = ls["point:measured:softmax"]
    assert m.get_marker() == "o" and m.get_ydata()[0] == pytest.approx(1e8 / 2e-3 / 1e9)
    assert "point:predicted:softmax" in ls
    asc = lines(fig.axes[1])
    assert "compute:float16 tensor" in asc and "memory:hbm" in asc and "memory:ub" not in asc
    assert "point:measured:softmax" not in asc


def test_normalised_panel() -> None:
    r = report("op", 1e9, 1e9, h100=("predicted", 1.0), a100=("predicted", 1.0))
    fig = xb.roofline(r, targets=("h100", "a100"), normalized=True)
    (ax,) = fig.axes
    ls = lines(ax)
    h100, a100 = get_target("h100"), get_target("a100")
    for t in (h100, a100):
        pt = ls[f"point:{t.name}:predicted:op"]
        ridge = t.peak_flops("float32", "vector") / t.bandwidth("hbm")
        assert pt.get_xdata()[0] == pytest.approx(1.0 / ridge)
        assert pt.get_ydata()[0] == pytest.approx(1e12 / t.peak_flops("float32", "vector"))
    assert fig.roofline_data.normalized


def test_profiles_operators_given_with_their_arguments(tmp_path) -> None:
    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    fig = xb.roofline((xb.ops.softmax, (x,)), targets=("h100",), budget=100_000)
    pts = fig.roofline_data.panels["h100"].points
    assert [(p.kind, p.intensity) for p in pts] == [("predicted", pytest.approx(5 / 8))]
    with pytest.raises(TypeError, match=r"pass \(op, \(args...\)\)"):
        xb.roofline(xb.ops.softmax, targets=("h100",))

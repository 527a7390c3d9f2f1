"""Roofline figures: their content (roofs, ridge points, operator points, labels), not their pixels."""
from __future__ import annotations

import re

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

import xbench as xb
from xbench.hw import get_target
from xbench.profile import Metric, Report
from xbench.viz.labels import overlaps
from xbench.viz.roofline import ABOVE, roofline_svg, roofline_text


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


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.roofline_labels]


def test_one_target_in_detail(tmp_path) -> None:
    h100 = get_target("h100")
    a = report("stream", 1e9, 8e9, h100=("predicted", 4.0))
    b = report("gemm", 2e12, 1e9, h100=("predicted", 50.0))
    fig = xb.roofline([a, b], targets=["h100"], path=str(tmp_path / "roof.svg"))
    assert (tmp_path / "roof.svg").read_text().startswith("<?xml")
    (ax,) = fig.axes
    ls = lines(ax)
    # a compute roof per peak, at the peak in FLOP/s; roofs of one height share one label
    for (d, u), v in h100.peaks.items():
        roof = ls[f"compute:{d} {u}"]
        assert set(roof.get_ydata()) == {v}
    assert "float16, bfloat16 tensor 989 TFLOP/s" in texts(fig)
    # a memory roof per level with a bandwidth: y = bandwidth * x
    for m in ("l1", "l2", "hbm"):
        x, y = ls[f"memory:{m}"].get_xdata(), ls[f"memory:{m}"].get_ydata()
        assert y[0] == pytest.approx(h100.bandwidth(m) * x[0])
    # ridge points against the fp32 vector peak, marked where the roofs meet
    panel = fig.roofline_data.panels["h100"]
    assert panel.main_roof == "float32 vector"
    ridge = ls["ridge:hbm"]
    assert ridge.get_xdata()[0] == pytest.approx(66.9e12 / 3.35e12)
    assert ridge.get_ydata()[0] == pytest.approx(66.9e12)
    # the operators: intensity = flops / bytes, performance = flops / predicted time; open triangles
    p = ls["point:predicted:stream"]
    assert (p.get_xdata()[0], p.get_ydata()[0]) == (pytest.approx(0.125), pytest.approx(1e9 / 4e-3))
    assert p.get_marker() == "^" and p.get_markerfacecolor() == "none"
    q = ls["point:predicted:gemm"]
    assert (q.get_xdata()[0], q.get_ydata()[0]) == (pytest.approx(2000.0), pytest.approx(2e12 / 50e-3))
    labels = texts(fig)
    assert "4.00 ms" in labels and "50.0 ms" in labels and any(t.startswith("ridge 20") for t in labels)
    assert "stream  0.125 FLOP/B" in labels and "gemm  2e+03 FLOP/B" in labels
    assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_title(loc="left") == "stream, gemm on h100"
    assert overlaps(fig, fig.roofline_labels) == []


def test_every_target_on_one_chart_with_labels_apart() -> None:
    r = report("softmax", 3.28e5, 5.24e5, h100=("predicted", 0.00623), h200=("predicted", 0.00623),
               a100=("predicted", 0.00754), ascend_910b=("predicted", 0.00533))
    r.records.append(Metric("time_ms", 0.028, "ms", "measured", "cpu", "a100"))
    fig = xb.roofline(r, targets=("h100", "h200", "a100", "ascend-910b"))
    (ax,) = fig.axes                                   # one chart, not a panel per target
    ls = lines(ax)
    for t in ("h100", "h200", "a100", "ascend-910b"):
        target = get_target(t)
        roof = ls[f"roof:{t}"]
        peak, bw = target.peak_flops("float32"), target.memory.bandwidth   # the fastest float32 unit
        assert list(roof.get_ydata())[1:] == [peak, peak] and roof.get_xdata()[1] == pytest.approx(peak / bw)
        assert f"point:{t}:predicted:softmax" in ls
    m = ls["point:a100:measured:softmax"]
    assert m.get_marker() == "o" and m.get_ydata()[0] == pytest.approx(3.28e5 / 0.028e-3)
    labels = texts(fig)
    # H100 and H200 share a peak (one roof name) and the operator lands on the same spot on both (one label)
    assert "h100, h200" in labels and "h100, h200 6.23 µs" in labels
    assert "a100 28.0 µs" in labels and "ascend-910b 5.33 µs" in labels
    assert overlaps(fig, fig.roofline_labels) == []
    # the legend is outside the chart and names every roof with its numbers
    (legend,) = fig.legends
    renderer = fig.canvas.get_renderer()
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    entries = [t.get_text() for t in legend.get_texts()]
    assert "h100: 66.9 TFLOP/s float32, hbm 3.35 TB/s, ridge 20 FLOP/B" in entries
    assert fig.get_size_inches()[0] <= 9.0                # notebook width


def test_a_point_above_its_roof_is_flagged() -> None:
    r = report("fast", 1e9, 1e9, h100=("predicted", 1e-9))     # 1e18 FLOP/s: above any roof
    fig = xb.roofline(r, targets=("h100", "a100"))
    pt = lines(fig.axes[0])["point:h100:predicted:fast"]
    assert pt.get_markeredgecolor() == ABOVE
    assert any(t.endswith("above its roof!") for t in texts(fig))
    assert "ABOVE ITS ROOF" in fig.roofline_tooltips["point:h100:predicted:fast"]
    assert "ABOVE ITS ROOF" in roofline_text(r, ["h100"])


def test_svg_shows_values_on_hover_in_the_page_colour() -> None:
    r = report("softmax", 1e8, 8e8, h100=("predicted", 0.3), ascend_910b=("predicted", 0.5))
    fig = xb.roofline(r, targets=("h100", "ascend-910b"))
    svg = roofline_svg(fig)
    assert svg.startswith("<svg") and 'width="100%"' in svg and "max-width: 864px" in svg
    assert re.search(r'<g id="point:h100:predicted:softmax">\s*<title>softmax on h100 \(predicted\)\ntime 300 µs',
                     svg)
    assert "currentColor" in svg and "#010203" not in svg
    assert roofline_svg(fig) == svg                     # the same figure, the same text


def test_normalised_chart() -> None:
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


def test_profiles_operators_given_with_their_arguments() -> None:
    x = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    fig = xb.roofline((xb.ops.softmax, (x,)), targets=("h100",), budget=100_000)
    pts = fig.roofline_data.panels["h100"].points
    assert [(p.kind, p.intensity) for p in pts] == [("predicted", pytest.approx(5 / 8))]
    with pytest.raises(TypeError, match=r"pass \(op, \(args...\)\)"):
        xb.roofline(xb.ops.softmax, targets=("h100",))

"""Stencils written with xb.pad + slices on the ascend backend: every tap is a shifted window -- one DataCopy /
DataCopyPad of the run of in-range columns per tile, the pad value around it, and for edge / reflect / circular
padding only the few columns beyond the edge on the scalar unit -- checked against the float64 reference for
1-D and 2-D stencils in every pad mode, at sizes that are not whole tiles nor whole 32-byte blocks; and the
predictor, which prices what still runs on the scalar unit."""
import re

import numpy as np
import pytest

import xbench as xb
from xbench.hw.predict import ASSUMPTIONS, predict_program
from xbench.hw.target import get_target

rng = np.random.default_rng(18)
MODES = ("constant", "reflect", "edge", "circular")
W1 = 2          # half-width of the 1-D stencil (5 taps: shifts -2 .. 2, most of them not 32-byte aligned)


def stencils(mode: str):
    """A 5-point 1-D stencil and a 3x3 box blur, both over xb.pad(..., mode), in one operator."""
    kw = {"value": 0.75} if mode == "constant" else {}

    @xb.tensor_op(name=f"stencils_{mode}")
    def op(x: xb.Tensor["N"], y: xb.Tensor["H", "W"]):
        n = x.shape[0]
        p = xb.pad(x, W1, mode=mode, **kw)
        line = p[W1:W1 + n] * 0.5
        for d in (-2, -1, 1, 2):
            line = line + p[W1 + d:W1 + d + n] * (0.25 / abs(d))
        H, W = y.shape
        q = xb.pad(y, 1, mode=mode, **kw)
        box = q[0:H, 0:W]
        for di in range(3):
            for dj in range(3):
                if di or dj:
                    box = box + q[di:di + H, dj:dj + W]
        return line, box / 9.0
    return op


OPS = {m: stencils(m) for m in MODES}


def edge_reads(mode: str, n: int, rows: int) -> int:
    """GetValue calls the edges need: constant padding none; the others, per row of a tap shifted by d, the |d|
    columns beyond the edge (1-D: shifts -2..2; box blur: 3 rows of taps shifted by -1 and 1 along a row)."""
    if mode == "constant":
        return 0
    return sum(abs(d) for d in range(-W1, W1 + 1)) + rows * 3 * 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n, hw", [(37, (7, 9)), (3001, (33, 130))])
def test_stencils_match_the_reference_without_a_scalar_loop(mode: str, n: int, hw: tuple[int, int]) -> None:
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(hw).astype(np.float32)
    op = OPS[mode]
    for r in xb.verify(op, x, y, backend="ascend"):
        assert r.ok, r.message
    art = op.compile("ascend", x, y)
    assert art.resources["scalar_path"] == [], art.resources["scalar_path"]
    wins = [w for ln in art.resources["launches"] for w in ln.get("windows", [])]
    assert len(wins) == 5 + 9, wins
    c = art.last_counters["totals"]
    assert c["scalar_gm_reads"] == edge_reads(mode, n, hw[0])
    assert c["scalar_ub_writes"] == c["scalar_gm_reads"]     # each edge column written once into its tile
    # no element loop in Compute: the only loops on the scalar unit are the edge completions in CopyIn
    compute = re.findall(r"void Compute\(\) \{(.*?)\n    \}", art.source, re.S)
    assert compute and not any("for (" in body or "GetValue" in body for body in compute)
    assert "CopyGmToUbWindow(" in art.source and "DataCopyPad(dst[a0], from, params, pad);" in art.source


@pytest.mark.parametrize("mode", ["constant", "reflect"])     # the pad value in DataCopyPad, edges on the scalar unit
def test_half_precision_stencils(mode: str) -> None:
    x = rng.standard_normal(203).astype(np.float16)             # 203 halves: not a whole number of 32-byte blocks
    y = rng.standard_normal((5, 21)).astype(np.float16)
    for r in xb.verify(OPS[mode], x, y, backend="ascend"):
        assert r.ok, r.message
    assert OPS[mode].compile("ascend", x, y).resources["scalar_path"] == []


@xb.tensor_op
def laplacians(x: xb.Tensor["H", "W"]):
    """Four pad modes in one program: 20 taps, more than the 4 input queues a double-buffered tile has, so most
    windows land in scratch tiles with explicit pipe syncs."""
    H, W = x.shape
    outs = []
    for mode in MODES:
        p = xb.pad(x, 1, mode=mode, **({"value": -1.5} if mode == "constant" else {}))
        c = p[1:H + 1, 1:W + 1]
        outs.append(p[0:H, 1:W + 1] + p[2:H + 2, 1:W + 1] + p[1:H + 1, 0:W] + p[1:H + 1, 2:W + 2] - 4.0 * c)
    return tuple(outs)


@xb.tensor_op
def windowed(x: xb.Tensor["N"]):
    """sliding_window over a reflect-padded row: the taps are a reduction axis, one window copy per tap."""
    w = xb.sliding_window(xb.pad(x, 3, mode="reflect"), (7,))
    return w.sum(axis=-1), w.max(axis=-1)


def test_windows_beyond_the_queues_and_inside_reductions() -> None:
    x = rng.standard_normal((19, 45)).astype(np.float32)
    for r in xb.verify(laplacians, x, backend="ascend"):
        assert r.ok, r.message
    art = laplacians.compile("ascend", x)
    assert art.resources["scalar_path"] == [] and "XbSync<HardEvent::V_MTE2>();" in art.source
    v = rng.standard_normal(1001).astype(np.float32)
    for r in xb.verify(windowed, v, backend="ascend"):
        assert r.ok, r.message
    art = windowed.compile("ascend", v)
    assert art.resources["scalar_path"] == [] and {ln["form"] for ln in art.resources["launches"]} == {"tiles"}
    assert art.last_counters["totals"]["scalar_gm_reads"] == 2 * 2 * (1 + 2 + 3)   # 2 kernels, 2 edges, taps 1..3


@xb.tensor_op
def stencil3(x: xb.Tensor["N"]):
    p = xb.pad(x, 1)
    n = x.shape[0]
    return 0.25 * p[0:n] + 0.5 * p[1:n + 1] + 0.25 * p[2:n + 2]


@xb.tensor_op
def strided3(x: xb.Tensor["N"]):
    """A stride-2 stencil (every other output): strided taps still gather element by element."""
    p = xb.pad(x, 1)
    n = x.shape[0]
    return 0.25 * p[0:n:2] + 0.5 * p[1:n + 1:2] + 0.25 * p[2:n + 2:2]


def _predict(op, x):
    art = op.compile("ascend", x)
    runs = art.counters(x)["launches"]
    res = {k.name: {**k.resources, "counters": [r for r in runs if r["kernel"] == k.name]} for k in art.kernels}
    (k,) = predict_program(art.program, "ascend-910b", resources=res).kernels
    return k, art.last_counters


def test_the_predictor_prices_the_scalar_path() -> None:
    x = rng.standard_normal(1 << 16).astype(np.float32)
    asc = get_target("ascend-910b")
    k, c = _predict(stencil3, x)
    assert c["totals"]["scalar_gm_reads"] == 0 and k.bound != "scalar" and k.terms["scalar"] == 0.0
    # the re-reads of the shifted taps come from L2; HBM moves the compulsory bytes (x once, out once)
    assert c["totals"]["mte2_bytes"] > 2.5 * x.nbytes
    assert k.terms["hbm"] == pytest.approx(2 * x.nbytes / asc.bandwidth("memory"), rel=1e-6)
    s, cs = _predict(strided3, x)
    per_core = max(sum(pc[n] for n in ("scalar_gm_reads", "scalar_gm_writes", "scalar_ub_reads", "scalar_ub_writes"))
                   for pc in cs["launches"][0]["per_core"])
    assert per_core > 0 and s.bound == "scalar"
    cycles = ASSUMPTIONS["npu_scalar_access_cycles"].value
    assert s.terms["scalar"] == pytest.approx(per_core * cycles / asc.clock_hz, rel=1e-6)
    assert s.time_s > 5 * k.time_s        # half the outputs, yet far slower: the scalar unit is the bound
    assert any("scalar GetValue/SetValue" in n for n in s.notes)

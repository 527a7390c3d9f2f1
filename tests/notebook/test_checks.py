"""What a cell checks each backend at: distinct sizes per dim (so broadcasting and contraction mistakes fail),
the simulated backends at sizes where their loops wrap, and the same errors in the Summary and Metrics tabs."""
from __future__ import annotations

import re

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.profile import checks

from .conftest import run_cell

N, D = xb.dims("N D")


def test_a_broadcast_along_the_wrong_axis_is_not_a_pass(ip, magics):
    # s: Tensor[N] multiplies the rows of x: Tensor[N, D] only if written s[:, None]; at N == D it "worked"
    ran = run_cell(ip, "%%tensorop --backends cpu\ndef rowscale(x: Tensor[N, D], s: Tensor[N]) -> Tensor[N, D]:\n"
                       "    return x * s\n")
    assert ran.error is not None
    assert "do not broadcast" in str(ran.error) and "cell line 3" in str(ran.error)


def test_a_contraction_over_the_wrong_dim_is_not_a_pass(ip, magics):
    ran = run_cell(ip, "%%tensorop --backends cpu\ndef proj(x: Tensor[N, D], w: Tensor[N, K]) -> Tensor[N, K]:\n"
                       "    return x @ w\n")
    assert ran.error is not None and "cell line 3" in str(ran.error)


def test_summary_and_metrics_report_the_same_errors_at_the_same_sizes(ip, magics):
    ran = run_cell(ip, "%%tensorop --backends cpu,cuda,ascend --profile --targets h100,ascend-910b\n"
                       "def softmax(x: Tensor[N, D]) -> Tensor[N, D]:\n"
                       "    e = xb.exp(x - x.max(axis=-1, keepdims=True))\n"
                       "    return e / e.sum(axis=-1, keepdims=True)\n")
    assert ran.error is None, ran.io.stdout
    [result] = magics.last_view.results
    rep = result.report
    assert result.dims == {"N": checks.DEFAULT_SIZES[0], "D": checks.DEFAULT_SIZES[1]}
    for backend, sim in (("cpu", None), ("cuda", "cuda"), ("ascend", "ascend")):
        r = result.backends[backend]
        assert r.status == "pass", r.message
        want = result.dims if sim is None else {"N": checks.SIM_SIZES[sim][0], "D": checks.SIM_SIZES[sim][1]}
        assert r.check.dims == want
        metric = rep["max_abs_error", backend]
        assert metric.value == r.max_abs_error
        at = ", ".join(f"{k}={v}" for k, v in want.items())
        assert f"at {at}" in metric.note
        if sim is not None:
            assert "every loop ran more than one trip" in metric.note
    text = ran.io.outputs[0].data["text/plain"]
    row = next(line for line in text.splitlines() if line.startswith("  cuda "))
    assert re.search(rf"N={checks.SIM_SIZES['cuda'][0]}, D={checks.SIM_SIZES['cuda'][1]}", row)


def test_every_loop_of_a_row_kernel_wraps_at_the_simulated_sizes():
    @xb.tensor_op
    def rmsnorm(x: Tensor[N, D], w: Tensor[D]) -> Tensor[N, D]:
        return x * xb.rsqrt(xb.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

    inputs = checks.make_inputs(rmsnorm, {})
    for backend in ("cuda", "ascend"):
        c = checks.check(rmsnorm, inputs.args, inputs.kwargs, backend, given=[])
        assert c.ok and c.resized
        assert c.loops and not c.once, c.loops
        assert c.dims["N"] != c.dims["D"]


def test_loop_trips_read_from_the_launches():
    x = np.zeros((8, 24), np.float32)

    @xb.tensor_op
    def neg(x: Tensor[N, D]) -> Tensor[N, D]:
        return -x

    art = neg.compile("cuda", x)
    [loop] = checks.loop_trips(art)
    # 192 points, 2 simulated blocks of 256 threads: one trip
    assert loop.trips == 1 and "grid-stride" in loop.loop
    big = neg.compile("cuda", np.zeros((37, 41), np.float32))
    assert checks.loop_trips(big)[0].trips == 3               # 1517 points over 512 threads
    assert checks.loop_trips(neg.compile("cpu", x)) == []

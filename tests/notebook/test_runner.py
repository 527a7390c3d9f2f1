"""Inputs made from annotations, the simulator's check sizes, and the PNG of a figure: no compiling here."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench.notebook.runner import (
    DEFAULT_SIZE,
    SIM_CHECK_SIZE,
    InputError,
    check_inputs,
    figure_png,
    make_inputs,
    unknown_sizes,
)
from xbench.notebook.view import fmt_time


@xb.tensor_op
def mixed(idx: Tensor[N, xb.int32], x: Tensor[..., N, 3], scale: float = 2.0) -> Tensor:
    return xb.take(x, idx, axis=-2) * scale


def test_inputs_follow_the_annotations():
    inp = make_inputs(mixed, {"N": 5}, "float64")
    assert inp.dims == {"N": 5} and inp.defaulted == []
    idx, x = inp.kwargs["idx"], inp.kwargs["x"]
    assert idx.dtype == np.int32 and idx.shape == (5,) and idx.min() >= 0 and idx.max() < 8
    assert x.dtype == np.float64 and x.shape == (5, 3)          # `...` takes no extra axes
    assert "scale" not in inp.kwargs                           # defaults stay defaults
    again = make_inputs(mixed, {"N": 5}, "float64")
    np.testing.assert_array_equal(again.kwargs["x"], x)         # seeded: a notebook shows the same numbers
    default = make_inputs(mixed, {}, "float16")
    assert default.dims == {"N": DEFAULT_SIZE} and default.defaulted == ["N"]
    assert default.kwargs["x"].dtype == np.float16


def test_an_unannotated_parameter_without_default_is_named():
    @xb.tensor_op
    def f(x: Tensor[N], k):
        return x * k

    with pytest.raises(InputError, match=r"parameter 'k' has no Tensor\[\.\.\.\] annotation and no default"):
        make_inputs(f, {}, "float32")
    assert unknown_sizes([f, mixed], {"N": 2, "Q": 3}) == ["Q"]


def test_simulated_backends_are_checked_at_clipped_sizes():
    small = make_inputs(mixed, {"N": SIM_CHECK_SIZE})
    assert check_inputs(mixed, small, "float32") is None
    big = make_inputs(mixed, {"N": 1000})
    clipped, dims = check_inputs(mixed, big, "float32")
    assert dims == {"N": SIM_CHECK_SIZE} and clipped.kwargs["x"].shape == (SIM_CHECK_SIZE, 3)


def test_figure_png_and_time_format():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([1, 2], [3, 4])
    png = figure_png(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)
    assert [fmt_time(x) for x in (None, 2e-4, 0.0123, 4.5, 0.9996, 2500.0, 3.6e6)] == \
        ["—", " 200 ns", "12.3 µs", "4.50 ms", "1.00 ms", "2.50 s", "3600 s"]

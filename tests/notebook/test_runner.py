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
    DEFAULT_SIZES,
    InputError,
    figure_png,
    make_inputs,
    unknown_sizes,
)
from xbench.notebook.view import fmt_time
from xbench.profile.checks import SIM_ELEMENTS, SIM_SIZES, sim_dims

B, N, D, K = xb.dims("B N D K")


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
    assert default.dims == {"N": DEFAULT_SIZES[0]} and default.defaulted == ["N"]
    assert default.kwargs["x"].dtype == np.float16


def test_an_unannotated_parameter_without_default_is_named():
    @xb.tensor_op
    def f(x: Tensor[N], k):
        return x * k

    with pytest.raises(InputError, match=r"parameter 'k' has no Tensor\[\.\.\.\] annotation and no default"):
        make_inputs(f, {}, "float32")
    assert unknown_sizes([f, mixed], {"N": 2, "Q": 3}) == ["Q"]


@xb.tensor_op
def three(x: Tensor[B, N, D], w: Tensor[D, K]) -> Tensor[B, N, K]:
    return x @ w


def test_unsized_dims_get_distinct_sizes():
    inp = make_inputs(three, {"N": 5})
    assert inp.dims == {"B": DEFAULT_SIZES[0], "N": 5, "D": DEFAULT_SIZES[2], "K": DEFAULT_SIZES[3]}
    assert inp.defaulted == ["B", "D", "K"]
    assert len(set(DEFAULT_SIZES)) == len(DEFAULT_SIZES)
    # a default never takes a size the user gave another dim
    clash = make_inputs(three, {"N": DEFAULT_SIZES[0]})
    assert len(set(clash.dims.values())) == 4


def test_simulated_backends_are_checked_at_sizes_of_their_own():
    # dims the user did not size take the simulator's sizes; the largest tensor stays within SIM_ELEMENTS
    dims = sim_dims(mixed, {"N": 4}, given=())
    assert dims == {"N": SIM_SIZES["cuda"][0]}
    assert sim_dims(mixed, {"N": 4}, given=("N",)) == {"N": 4}          # a size the user gave, small: kept
    assert sim_dims(mixed, {"N": 1000}, given=("N",)) == {"N": 1000}       # 3000 elements fit
    assert sim_dims(mixed, {"N": 5000}, given=("N",)) == {"N": SIM_SIZES["cuda"][0]}
    assert sim_dims(mixed, {"N": 4}, given=(), backend="ascend") == {"N": SIM_SIZES["ascend"][0]}
    big = sim_dims(three, {"B": 64, "N": 512, "D": 256, "K": 128}, given=("B", "N", "D", "K"))
    assert len(set(big.values())) == 4                                   # every dim its own size
    assert big["B"] * big["N"] * max(big["D"], big["K"]) <= SIM_ELEMENTS
    # dims of equal size may stay equal; dims of different sizes never become equal
    same = sim_dims(three, {"B": 2, "N": 41, "D": 41, "K": 3}, given=("B", "N", "D", "K"))
    assert same["N"] == same["D"] == 41
    apart = sim_dims(three, {"B": 2, "N": 41, "D": 4096, "K": 3}, given=("B", "N", "D", "K"))
    assert apart["N"] != apart["D"]


def test_figure_png_and_time_format():
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([1, 2], [3, 4])
    png = figure_png(fig)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert not plt.fignum_exists(fig.number)
    assert [fmt_time(x) for x in (None, 2e-4, 0.0123, 4.5, 0.9996, 2500.0, 3.6e6)] == \
        ["—", " 200 ns", "12.3 µs", "4.50 ms", "1.00 ms", "2.50 s", "3600 s"]

"""A run too long for numba's CUDA simulator is refused with the ways out; a long one is announced first."""
from __future__ import annotations

import numpy as np
import pytest

import xbench as xb
from xbench.backends import cuda as cuda_backend
from xbench.backends.cuda import device
from xbench.errors import BackendError

# The guard estimates and limits runs of numba's CUDA simulator; where a GPU takes this process's kernels, the
# module runs in a child process with the simulator on (test_simulator_elsewhere.py).
pytestmark = pytest.mark.skipif(device.mode() != "simulator",
                                reason="a CUDA GPU runs this process's kernels: test_simulator_elsewhere.py runs "
                                       "this module with the simulator on")


def test_a_4096_square_softmax_is_refused_at_once_with_the_ways_out():
    x = np.zeros((4096, 4096), np.float32)
    art = xb.ops.softmax.compile("cuda", x)
    assert art.sim_seconds() > 10 * cuda_backend.SIM_MAX_S
    with pytest.raises(BackendError) as err:
        art.run(x)
    assert "would take about" in err.value.message and "f32[4096,4096]" in err.value.message
    assert "XBENCH_CUDASIM_MAX_S=" in err.value.hint and "smaller inputs" in err.value.hint


def test_the_limit_and_the_warning(monkeypatch):
    x = np.random.default_rng(0).standard_normal((8, 24)).astype(np.float32)
    art = xb.ops.softmax.compile("cuda", x)
    monkeypatch.setenv("XBENCH_CUDASIM_MAX_S", "1e-6")
    with pytest.raises(BackendError, match="the limit is 0 s"):
        art.run(x)
    monkeypatch.setenv("XBENCH_CUDASIM_MAX_S", "0")                 # no limit
    monkeypatch.setattr(cuda_backend, "SIM_WARN_S", 0.0)
    with pytest.warns(UserWarning, match="runs in numba's CUDA simulator"):
        out = art.run(x)[0]
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-5)
    monkeypatch.setenv("XBENCH_CUDASIM_MAX_S", "soon")
    with pytest.raises(BackendError, match="not a number of seconds"):
        art.run(x)


def test_a_scatter_add_run_as_phases_is_priced_per_element_and_runs():
    # index_add becomes one kernel with no outer axes (a copy, then the scatter-add), launched as one phase per
    # stage over that stage's own elements: 64k + 32k points, one element each, not each point a whole stage
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 64)).astype(np.float32)
    idx = rng.integers(0, 1024, 512).astype(np.int64)
    src = rng.standard_normal((512, 64)).astype(np.float32)
    art = xb.ops.index_add.compile("cuda", x, 0, idx, src)
    assert [ln.details["points"] for ln in art.launches] == [1024 * 64, 512 * 64]
    assert art.sim_seconds() == pytest.approx((1024 + 512) * 64 / cuda_backend.SIM_RATES["point"]
                                              + 2 * cuda_backend.SIM_LAUNCH_S)
    ref = x.copy()
    np.add.at(ref, idx, src)
    np.testing.assert_allclose(art.run(x, idx, src)[0], ref, rtol=1e-5, atol=1e-5)

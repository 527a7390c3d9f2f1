"""Mixed precision: the autocast policy, and dynamic loss scaling."""
import ml_dtypes
import numpy as np
import pytest

import xbench as xb
from xbench import Tensor

rng = np.random.default_rng(5)


@xb.tensor_op
def block(x: Tensor["B", "D"], w: Tensor["E", "D"], g: Tensor["E"]):
    h = xb.ops.linear(x, w)
    return xb.ops.softmax(h * g), h


@pytest.mark.parametrize("low", ["bf16", "fp16"])
def test_autocast_runs_contractions_low_and_softmax_in_float32(low):
    x, w, g = (rng.standard_normal(s).astype(np.float32) for s in ((16, 32), (8, 32), (8,)))
    with xb.autocast(low):
        graph = block.trace(x, w, g)
        p, h = block(x, w, g)
        results = xb.verify(block, x, w, g, backend="cpu")
    lowname = "bfloat16" if low == "bf16" else "float16"
    contract = [e for e in graph.eqns if e.prim.name == "contract"][0]
    assert [v.dtype for v in contract.inputs] == [lowname, lowname] and contract.out.dtype == lowname
    assert h.dtype == (ml_dtypes.bfloat16 if low == "bf16" else np.float16)
    assert p.dtype == np.float32                            # softmax promoted back to float32
    assert all(r.ok for r in results), [r.message for r in results]
    rel = np.abs(h.astype(np.float32) - x @ w.T).max() / np.abs(x @ w.T).max()
    assert rel < (1.6e-2 if low == "bf16" else 2e-3)        # rounding of the 16-bit result, not more


def test_policy_is_part_of_the_specialisation():
    x, w, g = (rng.standard_normal(s).astype(np.float32) for s in ((4, 8), (2, 8), (2,)))
    n = len(block.specializations)
    block(x, w, g)
    with xb.autocast("bf16"):
        block(x, w, g)
    assert len(block.specializations) == n + 2
    assert block(x, w, g)[1].dtype == np.float32           # outside the context: full precision again


def test_autocast_refuses_a_wide_type():
    with pytest.raises(ValueError, match="16-bit float"), xb.autocast("float32"):
        pass


def test_loss_scaler_backs_off_on_overflow_and_grows_when_clean():
    s = xb.LossScaler(scale=1024.0, growth_interval=3)
    grads, ok = s.unscale([np.array([2048.0, -1024.0])])
    assert ok and np.allclose(grads[0], [2.0, -1.0])
    _, ok = s.unscale([np.array([np.inf])])
    assert not ok and s.scale == 512.0 and s.skipped == 1
    for _ in range(3):
        s.unscale([np.ones(2)])
    assert s.scale == 1024.0

"""16-bit float storage on the cpu backend: conversions bit-exact against numpy and ml_dtypes, and operators
running on float16 / bfloat16 buffers against the reference."""
import ml_dtypes
import numba
import numpy as np
import pytest

import xbench as xb
from xbench.backends.cpu import lowp

rng = np.random.default_rng(11)
h = lowp.compiled()


@numba.njit
def _map_load(fn, bits, out):
    for i in range(bits.size):
        out[i] = fn(bits[i])


@numba.njit
def _map_store(fn, x, out):
    for i in range(x.size):
        out[i] = fn(x[i])


def _interesting_floats() -> np.ndarray:
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 1e-8, 5.96e-8, 2.98e-8,
                         6.1e-5, 6.103515625e-05, 3.0e38, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11], np.float32)
    # every float16 value, the midpoints between neighbours (ties) and random floats over the whole range
    f16 = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    f16 = f16[np.isfinite(f16)]
    mids = ((f16[:-1].astype(np.float64) + f16[1:]) / 2).astype(np.float32)
    rand = (rng.standard_normal(200_000) * np.exp(rng.uniform(-30, 30, 200_000))).astype(np.float32)
    return np.concatenate([specials, -specials, f16, mids, rand])


def test_float16_load_is_exact_for_every_bit_pattern():
    bits = np.arange(65536, dtype=np.uint16)
    out = np.empty(65536, np.float32)
    _map_load(h._xb_f16_load, bits, out)
    want = bits.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(out.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.isnan(out[np.isnan(want)]).all()


def test_float16_store_rounds_like_numpy():
    x = _interesting_floats()
    out = np.empty(x.size, np.uint16)
    _map_store(h._xb_f16_store, x, out)
    want = x.astype(np.float16)
    nan = np.isnan(want)
    np.testing.assert_array_equal(out[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(out[nan].view(np.float16)).all()


def test_bfloat16_round_trip_matches_ml_dtypes():
    x = _interesting_floats()
    out = np.empty(x.size, np.uint16)
    _map_store(h._xb_bf16_store, x, out)
    want = x.astype(ml_dtypes.bfloat16)
    nan = np.isnan(want.astype(np.float32))
    np.testing.assert_array_equal(out[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(out[nan].view(ml_dtypes.bfloat16).astype(np.float32)).all()
    back = np.empty(x.size, np.float32)
    _map_load(h._xb_bf16_load, out, back)
    np.testing.assert_array_equal(back[~nan], want.astype(np.float32)[~nan])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_operators_on_16_bit_buffers(dtype):
    x = rng.standard_normal((37, 64)).astype(dtype)
    w = rng.standard_normal((64, 24)).astype(dtype)
    b = rng.standard_normal(24).astype(dtype)
    for op, args in [(xb.ops.softmax, (x,)), (xb.ops.layer_norm, (x, 64, x[0], x[1])), (xb.ops.gelu, (x,)),
                     (xb.ops.linear, (x, w.T.copy(), b)), (xb.ops.cumsum, (x, 1))]:
        out = op(*args)
        assert out.dtype == np.dtype(dtype)
        for r in xb.verify(op, *args, backend="cpu"):
            assert r.ok, f"{op.name}: {r.message}"


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_16_bit_math_uses_the_vectorisable_float32_helpers(dtype):
    """16-bit floats compute in float32, so exp, erf, tanh... take float32's polynomial helpers, not libm's
    scalar calls (BERT's bf16 GELU of 1024x1024 took 8 ms through math.erf)."""
    x = (rng.standard_normal((64, 256)) * 3).astype(dtype)
    for op, helper, libm in [(xb.ops.gelu, "_xb_erf_f32(", "math.erf("), (xb.ops.softmax, "_xb_exp_f32(", "math.exp("),
                             (xb.ops.tanh, "_xb_tanh_f32(", "math.tanh(")]:
        source = "\n".join(k.source for k in op.compile("cpu", x).kernels)
        assert helper in source and libm not in source, op.name
        for r in xb.verify(op, x, backend="cpu"):
            assert r.ok, f"{op.name}: {r.message}"

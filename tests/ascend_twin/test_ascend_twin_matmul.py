"""The Matmul high-level API on the twin: fp16 x fp16 -> fp32 with bias, tiling rules and cube counters."""
from __future__ import annotations

import numpy as np
import pytest

from xbench.backends.ascend.twin import TwinConfig, TwinError, cube_tiling

RNG = np.random.default_rng(7)
M, N, K = 100, 128, 80  # M is not a multiple of singleCoreM: the second row of blocks gets a 36-row tail


def good_tiling(**overrides: int):
    values = {"usedCoreNum": 4, "M": M, "N": N, "Ka": K, "Kb": K, "singleCoreM": 64, "singleCoreN": 64,
              "singleCoreK": K, "baseM": 32, "baseN": 64, "baseK": 32, "stepM": 2, "stepN": 1, "stepKa": 3,
              "stepKb": 3, "depthA1": 6, "depthB1": 3, "dbL0A": 2, "dbL0B": 2, "dbL0C": 1, "isBias": 1,
              "iterateOrder": 0}
    return cube_tiling(**{**values, **overrides})


def operands():
    a = RNG.standard_normal((M, K)).astype(np.float16)
    b = RNG.standard_normal((K, N)).astype(np.float16)
    bias = RNG.standard_normal(N).astype(np.float32)
    return a, b, bias


def test_matmul_with_bias_matches_numpy_and_counts_cube_work(libs):
    a, b, bias = operands()
    c = np.zeros((M, N), np.float32)
    res = libs["matmul"].launch("matmul_bias", 4, a, b, bias, c, good_tiling())
    ref = a.astype(np.float64) @ b.astype(np.float64) + bias
    np.testing.assert_allclose(c, ref, rtol=1e-5, atol=1e-5)

    t = res.totals
    assert t["cube_macs"] == M * N * K
    assert t["matmul_calls"] == 4
    # A and B stay resident in L1 (stepKa * baseK = 96 >= K, stepM * baseM = 64 = singleCoreM): each block
    # loads its A rows and B columns once, plus its slice of the bias.
    assert t["mte2_bytes"] == 2 * (M * K * 2) + 2 * (K * N * 2) + 2 * (N * 4)
    assert t["fixpipe_bytes"] == M * N * 4
    # 16x16x16 fractals per block: (4 M x 4 N x 5 K) for 64-row blocks, (3 x 4 x 5) for the 36-row tails.
    assert t["cube_fractals"] == 2 * 80 + 2 * 60


def test_matmul_streaming_tiling_reloads_operands(libs):
    a, b, bias = operands()
    c = np.zeros((M, N), np.float32)
    tiling = good_tiling(baseN=32, stepKa=1, stepKb=1, depthA1=2, depthB1=1)
    res = libs["matmul"].launch("matmul_bias", 4, a, b, bias, c, tiling)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64) + bias, rtol=1e-5, atol=1e-5)
    # K no longer fits in L1: A is re-read for each of the 2 N tiles, B for each of the 2 M tiles of a block.
    assert res.totals["mte2_bytes"] == 2 * (2 * M * K * 2) + 2 * (2 * K * N * 2) + 2 * (N * 4)


def test_matmul_transposed_b_through_init(libs):
    m, n, k = 32, 48, 64
    a = RNG.standard_normal((m, k)).astype(np.float16)
    bt = RNG.standard_normal((n, k)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    tiling = cube_tiling(M=m, N=n, Ka=k, Kb=k, singleCoreM=m, singleCoreN=n, singleCoreK=k, baseM=32, baseN=48,
                         baseK=64, stepM=1, stepN=1, stepKa=1, stepKb=1, depthA1=1, depthB1=1)
    libs["matmul"].launch("matmul_bt", 1, a, bt, c, tiling)
    np.testing.assert_allclose(c, a.astype(np.float64) @ bt.astype(np.float64).T, rtol=1e-5, atol=1e-5)


def test_matmul_with_tiling_passed_by_value(libs):
    m, n, k = 48, 32, 40
    a = RNG.standard_normal((m, k)).astype(np.float16)
    b = RNG.standard_normal((k, n)).astype(np.float16)
    c = np.zeros((m, n), np.float32)
    tiling = cube_tiling(M=m, N=n, Ka=k, Kb=k, singleCoreM=m, singleCoreN=n, singleCoreK=k, baseM=48, baseN=32,
                         baseK=48, stepM=1, stepN=1, stepKa=1, stepKb=1, depthA1=1, depthB1=1)
    res = libs["matmul"].launch("matmul_by_value", 1, a, b, c, tiling)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    assert res.totals["cube_macs"] == m * n * k
    with pytest.raises(TwinError) as err:
        libs["matmul"].launch("matmul_by_value", 1, a, b, c, bytes(tiling)[:64])
    assert err.value.rule == "launch-args" and "struct of 128 bytes" in err.value.detail


def test_illegal_tiling_names_the_broken_rules(libs):
    a, b, bias = operands()
    c = np.zeros((M, N), np.float32)
    bad = good_tiling(baseM=128, baseK=256, depthA1=5)
    with pytest.raises(TwinError) as err:
        libs["matmul"].launch("matmul_bias", 4, a, b, bias, c, bad)
    e = err.value
    assert e.rule == "cube-tiling" and e.block == 0
    assert "L0A: baseM * baseK * sizeof(A) * dbL0A = 128 * 256 * 2 * 2 = 131072 bytes > 65536" in e.detail
    assert "depthA1 = 5 must equal stepM * stepKa * db = 2 * 3 * (1 or 2)" in e.detail


def test_tiling_checked_against_the_configured_l0a(libs):
    a, b, bias = operands()
    c = np.zeros((M, N), np.float32)
    with pytest.raises(TwinError) as err:
        libs["matmul"].launch("matmul_bias", 4, a, b, bias, c, good_tiling(), config=TwinConfig(l0a_bytes=2048))
    assert err.value.rule == "cube-tiling" and "4096 bytes > 2048" in err.value.detail


def test_transposing_b_needs_istrans(libs):
    a = np.zeros((32, 64), np.float16)
    bt = np.zeros((48, 64), np.float16)
    c = np.zeros((32, 48), np.float32)
    tiling = cube_tiling(M=32, N=48, Ka=64, Kb=64, singleCoreM=32, singleCoreN=48, singleCoreK=64, baseM=32,
                         baseN=48, baseK=64, stepM=1, stepN=1, stepKa=1, stepKb=1, depthA1=1, depthB1=1)
    with pytest.raises(TwinError) as err:
        libs["matmul"].launch("matmul_bt_without_istrans", 1, a, bt, c, tiling)
    assert err.value.rule == "matmul-usage" and "ISTRANS=true" in err.value.detail


def test_cube_tiling_rejects_unknown_fields():
    with pytest.raises(TypeError, match="no field 'baseQ'"):
        cube_tiling(baseQ=16)

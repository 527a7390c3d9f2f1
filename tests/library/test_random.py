"""The counter-based random numbers: deterministic per seed on every backend, and distributed as promised
(Kolmogorov-Smirnov and chi-square tests at a fixed seed, so the p-values are fixed numbers too)."""
import numpy as np
import pytest
from scipy import stats

import xbench as xb
from xbench.ops import random_ops as R

ops = xb.ops
N = 200_000


def test_the_python_hash_and_the_tensor_hash_agree():
    @xb.tensor_op
    def h(x: xb.Tensor):
        return R._pcg(x)
    x = np.array([0, 1, 2, 12345, 2**31, 2**32 - 1], np.int64)
    assert list(h(x, backend="reference")) == [R.pcg(int(v)) for v in x]
    assert list(h(x, backend="cpu")) == [R.pcg(int(v)) for v in x]
    assert R.pcg(0) != R.pcg(1) and all(0 <= R.pcg(v) < 2**32 for v in range(100))


def test_same_seed_same_numbers_on_every_backend_and_new_seed_new_numbers():
    a = ops.rand((64, 33), seed=7, backend="cpu")
    b = ops.rand((64, 33), seed=7, backend="reference")
    c = ops.rand((64, 33), seed=8, backend="cpu")
    assert a.dtype == np.float32 and np.array_equal(a, b)
    assert not np.array_equal(a, c)
    assert abs(np.corrcoef(a.ravel(), c.ravel())[0, 1]) < 0.05
    # big seeds use all 64 bits
    assert not np.array_equal(ops.rand((32,), seed=2**40, backend="cpu"), ops.rand((32,), seed=0, backend="cpu"))


@pytest.mark.parametrize("dtype,bits", [("float32", 24), ("float16", 11), ("bfloat16", 8), ("float64", 53)])
def test_rand_is_uniform_on_the_grid_of_its_dtype(dtype, bits):
    u = ops.rand((N,), seed=1, dtype=dtype, backend="reference").astype(np.float64)
    assert u.min() >= 0.0 and u.max() < 1.0
    k = u * 2.0**bits
    assert np.all(k == np.floor(k))                                 # exact multiples of 2**-bits
    if bits <= 11:      # a coarse grid: each of its 2**bits values equally often
        assert stats.chisquare(np.bincount(k.astype(np.int64), minlength=2**bits)).pvalue > 1e-3
    else:
        assert stats.kstest(u, "uniform").pvalue > 1e-3
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002


def test_randn_is_standard_normal():
    z = ops.randn((N,), seed=2, backend="reference")
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    z64 = ops.randn((N,), seed=2, dtype="float64", backend="reference")
    assert z64.dtype == np.float64 and stats.kstest(z64, "norm").pvalue > 1e-3


def test_randint_covers_its_range_evenly():
    r = ops.randint(-5, 12, (N,), seed=3, backend="reference")
    assert r.dtype == np.int64 and r.min() == -5 and r.max() == 11
    counts = np.bincount(r + 5, minlength=17)
    assert stats.chisquare(counts).pvalue > 1e-3
    assert ops.randint(0, 4, (10,), seed=3, dtype="int32", backend="cpu").dtype == np.int32


def test_bernoulli_and_exponential_and_normal_distributions():
    p = np.linspace(0.05, 0.95, 19).astype(np.float32)
    draws = ops.bernoulli(np.broadcast_to(p, (20_000, 19)).copy(), seed=4, backend="reference")
    assert set(np.unique(draws)) <= {0.0, 1.0} and draws.dtype == np.float32
    assert np.allclose(draws.mean(axis=0), p, atol=0.015)
    e = ops.exponential_(np.zeros(N, np.float32), lambd=2.0, seed=5, backend="reference")
    assert e.min() >= 0 and stats.kstest(e, "expon", args=(0, 0.5)).pvalue > 1e-3
    mean = np.array([-1.0, 0.0, 3.0], np.float32)
    std = np.array([0.5, 1.0, 2.0], np.float32)
    z = ops.normal(np.broadcast_to(mean, (30_000, 3)).copy(), std, seed=6, backend="reference")
    assert np.allclose(z.mean(axis=0), mean, atol=0.05) and np.allclose(z.std(axis=0), std, rtol=0.03)
    u = ops.uniform_(np.zeros((N,), np.float32), from_=-2.0, to=3.0, seed=9, backend="reference")
    assert u.min() >= -2 and u.max() < 3 and stats.kstest(u, "uniform", args=(-2, 5)).pvalue > 1e-3


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_dropout_keeps_one_minus_p_and_rescales(backend):
    x = np.random.default_rng(0).standard_normal((400, 250)).astype(np.float32)
    out, mask = ops.native_dropout(x, 0.3, True, seed=10, backend=backend)
    assert mask.dtype == np.bool_ and abs(mask.mean() - 0.7) < 0.005
    np.testing.assert_allclose(out[mask], x[mask] / 0.7, rtol=1e-6)
    assert np.all(out[~mask] == 0)
    same = ops.dropout(x, 0.3, True, seed=10, backend=backend)
    np.testing.assert_array_equal(same, out)                    # the same mask from the same seed
    other = ops.dropout(x, 0.3, True, seed=11, backend=backend)
    assert not np.array_equal(other != 0, mask)
    ident, full = ops.native_dropout(x, 0.3, False, backend=backend)
    assert np.array_equal(ident, x) and full.all()


def test_randperm_and_multinomial():
    for n in (1, 17, 1000):
        p = ops.randperm(n, seed=12, backend="cpu")
        assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(n))
    assert not np.array_equal(ops.randperm(50, seed=1, backend="cpu"), np.arange(50))
    w = np.array([[0.1, 0.0, 0.5, 0.4], [1.0, 1.0, 1.0, 1.0]], np.float32)
    pick = ops.multinomial(w, 3, seed=13, backend="cpu")
    assert pick.shape == (2, 3) and all(len(set(r)) == 3 for r in pick.tolist()) and 1 not in pick[0]
    probs = np.array([0.1, 0.0, 0.5, 0.4], np.float32)
    draws = ops.multinomial(probs, 50_000, replacement=True, seed=14, backend="reference")
    counts = np.bincount(draws, minlength=4)
    assert counts[1] == 0
    assert stats.chisquare(counts[[0, 2, 3]], 50_000 * probs[[0, 2, 3]]).pvalue > 1e-3
    first = [ops.multinomial(probs, 1, seed=s, backend="reference")[0] for s in range(300)]
    assert stats.chisquare(np.bincount(first, minlength=4)[[0, 2, 3]], 300 * probs[[0, 2, 3]]).pvalue > 1e-3

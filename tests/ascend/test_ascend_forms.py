"""Less common shapes of loop IR on the ascend backend: composed math functions against scipy, more inputs
than the queues have events for, a kernel that reads back what it stored, 0-d tensors, and the host half of
the real-CANN build script."""
import ctypes
import subprocess
from pathlib import Path

import numpy as np
from scipy import special

import xbench as xb
from xbench.backends.ascend import twin

ROOT = Path(__file__).resolve().parents[2]
rng = np.random.default_rng(11)


@xb.tensor_op
def math_zoo(x: xb.Tensor["N"], u: xb.Tensor["N"], z: xb.Tensor["N"], w: xb.Tensor["N"]):
    return (xb.sin(x), xb.cos(x), xb.tan(z), xb.sinh(x), xb.cosh(x), xb.asinh(x), xb.acosh(w), xb.atanh(u),
            xb.atan(x), xb.asin(u), xb.acos(u), xb.sign(x), xb.atan2(x, z), xb.hypot(x, z), xb.fmod(x, z),
            x // z, x % z, xb.copysign(z, x), xb.erfinv(u), xb.expm1(x), xb.log1p(w))


def test_composed_math_matches_scipy():
    n = 700
    x = (rng.standard_normal(n) * 4).astype(np.float32)
    x[:4] = [0.0, -0.0, 1e-3, -1e-3]
    u = rng.uniform(-0.99, 0.99, n).astype(np.float32)
    z = rng.uniform(-1.4, 1.4, n).astype(np.float32)
    w = rng.uniform(1, 5, n).astype(np.float32)
    art = math_zoo.compile("ascend", x, u, z, w)
    outs = art.run(x, u, z, w)
    X, U, Z, W = (a.astype(np.float64) for a in (x, u, z, w))
    expect = [np.sin(X), np.cos(X), np.tan(Z), np.sinh(X), np.cosh(X), np.arcsinh(X), np.arccosh(W), np.arctanh(U),
              np.arctan(X), np.arcsin(U), np.arccos(U), np.sign(X), np.arctan2(X, Z), np.hypot(X, Z), np.fmod(X, Z),
              np.floor_divide(X, Z), np.mod(X, Z), np.copysign(Z, X), special.erfinv(U), np.expm1(X), np.log1p(W)]
    for i, (got, want) in enumerate(zip(outs, expect)):
        scale = np.abs(want).max()
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=4e-6 * scale, err_msg=f"output {i}")
    # all on the vector unit but float fmod, // and %: exact fmod is integer long division on the scalar unit
    path = art.resources["scalar_path"]
    assert len(path) == 3 and path[0].startswith("fmod(") and "//" in path[1] and "%" in path[2]


@xb.tensor_op
def six_inputs(a: xb.Tensor["M", "N"], b: xb.Tensor["M", "N"], c: xb.Tensor["M", "N"], d: xb.Tensor["N"],
               e: xb.Tensor["N"], f: xb.Tensor["N"]):
    return (a * d + b * e) / (xb.abs(c) + f * f + 1.0)


def test_more_inputs_than_queue_events_use_scratch_tiles():
    """Six contiguous loads with double buffering: four get queues (8 VECIN events), two are copied straight
    into scratch tiles with explicit MTE2/V syncs."""
    m, n = 40, 300
    args = [rng.standard_normal((m, n)).astype(np.float32) for _ in range(3)] + \
           [rng.standard_normal(n).astype(np.float32) for _ in range(3)]
    for r in xb.verify(six_inputs, *args, backend="ascend"):
        assert r.ok, r.message
    art = six_inputs.compile("ascend", *args)
    (launch,) = art.resources["launches"]
    queues = [k for k, v in launch["ub"].items() if v["position"] == "VECIN"]
    assert len(queues) == 4 and launch["scalar_path"] == []
    assert art.source.count("XbSync<HardEvent::MTE2_V>();") == 1
    assert art.last_counters["totals"]["mte2_bytes"] == sum(a.nbytes for a in args[:3]) + m * 3 * n * 4


@xb.tensor_op
def mean_and_var(x: xb.Tensor["B", "N"]):
    mu = x.mean(axis=0)
    return mu, ((x - mu) ** 2).mean(axis=0)


def test_a_kernel_that_reads_back_what_it_stored():
    x = rng.standard_normal((9, 70)).astype(np.float32)
    for r in xb.verify(mean_and_var, x, backend="ascend"):
        assert r.ok, r.message


@xb.tensor_op
def scalar_ops(a: xb.Tensor[()], b: xb.Tensor[()]):
    return xb.sin(a) * b, xb.atan2(a, b), xb.erf(a)


def test_zero_dimensional_tensors():
    a, b = np.float32(0.7).reshape(()), np.float32(-0.3).reshape(())
    for r in xb.verify(scalar_ops, a, b, backend="ascend"):
        assert r.ok, r.message


def test_cann_script_dry_run_builds_the_same_host_tiling(tmp_path):
    """The script's host half (structs + tiling functions cut out of the generated file) compiles on its own
    and fills the same tiling as the twin build's host functions."""
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((37, 24), (19, 24), (19,)))
    art = xb.ops.linear.compile("ascend", x, w, b)
    src = tmp_path / "linear.cpp"
    src.write_text(art.source)
    out = tmp_path / "cann"
    proc = subprocess.run([str(ROOT / "scripts" / "ascend_build_cann.sh"), "--dry-run", str(src), str(out)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "ascendc_library(xbench_kernels STATIC" in (out / "CMakeLists.txt").read_text()
    lib = ctypes.CDLL(str(out / "libxbench_tiling.so"))
    (info,) = art.launches
    struct = type(info.tiling)
    fn = lib[f"{info.launch.entry}_tiling"]
    fn.restype, fn.argtypes = ctypes.c_uint32, [ctypes.POINTER(struct), ctypes.c_uint32]
    t = struct()
    assert fn(ctypes.byref(t), 24) == info.block_dim
    assert bytes(t) == bytes(info.tiling)


def test_cann_script_refuses_without_a_toolkit(tmp_path):
    src = tmp_path / "k.cpp"
    src.write_text('#include "kernel_operator.h"\n')
    proc = subprocess.run([str(ROOT / "scripts" / "ascend_build_cann.sh"), str(src), str(tmp_path / "o")],
                          capture_output=True, text=True, check=False,
                          env={"PATH": "/usr/bin:/bin", "ASCEND_HOME_PATH": str(tmp_path / "none")})
    assert proc.returncode != 0 and "does not exist" in proc.stderr


def test_twin_counts_queue_traffic():
    """The counters the tests above lean on: EnQue / DeQue per queue round trip."""
    assert "que_deque" in (Path(twin.INCLUDE_DIR) / "xbench_twin" / "runtime.h").read_text()


@xb.tensor_op
def sorts(x: xb.Tensor["M", "N"]):
    return xb.sort(x, axis=-1, descending=True), xb.argsort(x, axis=0), xb.topk(x, 4)[1]


@xb.tensor_op
def scatter(x: xb.Tensor["N", "D"], idx: xb.Tensor["K"], u: xb.Tensor["K", "D"]):
    return xb.scatter_add(x, idx, u, axis=0)


def test_sort_and_scatter_take_the_scalar_path():
    x = rng.standard_normal((5, 33)).astype(np.float32)
    for r in xb.verify(sorts, x, backend="ascend"):
        assert r.ok, r.message
    art = sorts.compile("ascend", x)
    assert [ln["form"] for ln in art.resources["launches"]].count("scalar") == 3
    np.testing.assert_array_equal(art.run(x)[1], np.argsort(x, axis=0, kind="stable"))
    base, idx, upd = rng.standard_normal((7, 5)).astype(np.float32), np.array([3, 0, 3, 6, 3]), \
        rng.standard_normal((5, 5)).astype(np.float32)             # index 3 three times
    for r in xb.verify(scatter, base, idx, upd, backend="ascend"):
        assert r.ok, r.message
    (launch,) = scatter.compile("ascend", base, idx, upd).resources["launches"]
    assert launch["form"] == "scalar" and launch["block_dim"] == 1   # one core: no two cores add to one row

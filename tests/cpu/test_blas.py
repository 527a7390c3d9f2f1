"""The kernels' GEMMs: torch's MKL where torch is loaded first, SciPy's OpenBLAS otherwise, the same results."""
import os
import subprocess
import sys

# In a fresh process (which BLAS the kernels call is fixed when `blas` is imported): every entry point against
# float64 numpy, over the layouts the kernels pass, inside a parallel loop too; the name of the provider.
_CHECK = r"""
import sys
if sys.argv[1] == "torch":
    import torch
import numba
import numpy as np
from xbench.backends.cpu import blas, runtime

rng = np.random.default_rng(0)
worst = 0.0
for dt, tol in ((np.float32, 1e-5), (np.float64, 1e-13)):
    a = rng.standard_normal((37, 53)).astype(dt)
    b = rng.standard_normal((53, 29)).astype(dt)
    want = a.astype(np.float64) @ b.astype(np.float64)
    scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    err = lambda got, w=want: float(np.max(np.abs(got - w) / scale))
    out = np.empty((37, 29), dt)
    for x, y in ((a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b)), (a[:, ::1], b[::1, :])):
        blas.dot(x, y, out)
        worst = max(worst, err(out) / tol)
    blas.dot(a[::-1][::-1], b[:, ::-1], out)                     # a layout BLAS does not take: copied first
    worst = max(worst, err(out, want[:, ::-1]) / tol)
    o_t = np.empty((29, 37), dt).T                                # an output that is a transposed view
    blas.dot(a, b, o_t)
    worst = max(worst, err(o_t) / tol)
    acc = np.ones((37, 29), dt)
    blas.dot_add(a, b, acc)
    worst = max(worst, err(acc - 1) / tol)
    with runtime.blas_threads(1):
        blas.dot(a, b, out)
    worst = max(worst, err(out) / tol)

    @numba.njit(parallel=True)
    def batched(x, y, z):
        for i in numba.prange(x.shape[0]):
            blas.dot(x[i], y[i], z[i])

    x = rng.standard_normal((8, 64, 48)).astype(dt)
    y = rng.standard_normal((8, 48, 40)).astype(dt)
    z = np.empty((8, 64, 40), dt)
    batched(x, y, z)
    w = np.einsum("bmk,bkn->bmn", x.astype(np.float64), y.astype(np.float64))
    s = np.einsum("bmk,bkn->bmn", np.abs(x).astype(np.float64), np.abs(y).astype(np.float64))
    worst = max(worst, float(np.max(np.abs(z - w) / s)) / tol)
print(blas.PROVIDER, worst)
"""


def _run(first: str, **env) -> tuple[str, float]:
    out = subprocess.run([sys.executable, "-c", _CHECK, first], capture_output=True, text=True,
                         env={**os.environ, **env}, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    provider, worst = out.stdout.split()
    return provider, float(worst)


def _mkl() -> bool:
    import torch
    return torch.backends.mkl.is_available()


def test_with_torch_loaded_the_gemms_run_on_torchs_mkl_where_torch_has_it():
    """torch imported first: its MKL, or, in a torch build without MKL, OpenBLAS as without torch; right either way."""
    provider, worst = _run("torch")
    assert provider == ("mkl" if _mkl() else "openblas")
    assert worst < 1


def test_without_torch_or_when_asked_the_gemms_run_on_openblas():
    for first, env in (("", {}), ("torch", {"XBENCH_BLAS": "openblas"})):
        provider, worst = _run(first, **env)
        assert provider == "openblas"
        assert worst < 1


# blas_threads(1) and after, as the BLAS the GEMMs call reports its thread count: MKL's for this thread, or each
# OpenBLAS's (threadpoolctl) where torch has no MKL
_THREADS = r"""
import ctypes, os, torch
from xbench.backends.cpu import blas, runtime
if blas.PROVIDER == "mkl":
    lib = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    lib.MKL_Get_Max_Threads.restype = ctypes.c_int
    count = lambda: lib.MKL_Get_Max_Threads()
else:
    import scipy.linalg
    from threadpoolctl import threadpool_info
    count = lambda: max(i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openblas")
seen = [count()]
with runtime.blas_threads(1):
    seen.append(count())
seen.append(count())
print(blas.PROVIDER, *seen)
"""


def test_blas_threads_limits_the_gemms_threads_and_restores_them():
    env = {k: v for k, v in os.environ.items() if k != "XBENCH_BLAS"}
    env.update(OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2")
    for asked, provider in (({}, "mkl" if _mkl() else "openblas"), ({"XBENCH_BLAS": "openblas"}, "openblas")):
        out = subprocess.run([sys.executable, "-c", _THREADS], capture_output=True, text=True, timeout=600,
                             env={**env, **asked})
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.split() == [provider, "2", "1", "2"], asked


def test_a_kernel_is_cached_under_the_code_of_the_helpers_it_links(monkeypatch):
    """numba links `blas.dot` (and the other helpers) into each kernel's cached machine code and keys that cache
    on the kernel's file alone: a change to a helper must name a new file, or the kernel keeps the old code."""
    import numpy as np

    import xbench as xb
    import xbench.backends.cpu as cpu

    n = xb.dims("N")

    @xb.tensor_op
    def double(x: xb.Tensor[n]) -> xb.Tensor[n]:
        return x + x

    program = double.lower(np.ones(8, np.float32))
    backend = cpu.CpuBackend()
    schedules = {k.name: backend.default_schedule(k) for k in program.kernels}
    paths = []
    for helpers in ("before", "after"):
        monkeypatch.setattr(cpu, "_linked_sources", lambda h=helpers: h)
        paths.append(backend._write(program, schedules)[2])
    assert paths[0] != paths[1]
    assert paths[0].read_text() == paths[1].read_text()

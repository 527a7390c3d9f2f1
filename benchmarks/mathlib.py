"""Vectorisable math helpers vs libm vs numpy, against this machine's memory bandwidth.

For each function: the xbench helper in a numba prange loop (what generated kernels run), the same
loop calling `math.<fn>` (scalar libm: numba here has no SVML), and numpy's (or scipy's) ufunc, which
runs on one thread. The bandwidth ceiling is measured in the same run with a copy loop and a triad
loop under the same threads, so the percentages compare like with like.

Traffic model: an elementwise kernel reads its inputs, writes its output and, without streaming
stores, reads the output line first (write-allocate): float32 in -> out is 12 bytes per element.
"GB/s" below counts that traffic; "% copy" is the copy loop's time (re-measured beside each function)
over the kernel's time, scaled to the same traffic: 100 % = as fast as moving the same bytes.

A second table gives each variant's compute cost (CPU time of one thread, data in cache), which other
processes on a shared machine do not distort, and how far below the memory-bound budget it is.

    python benchmarks/mathlib.py [--n 16777216] [--threads 2] [--repeat 7] [--dtype float32,float64]
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable

import numba
import numpy as np
import scipy.special

from xbench.backends.cpu.mathlib import FLAGS, FUNCTIONS, compiled_loop

# The same loop calling scalar libm (what a loop gets without the helpers; numba here has no SVML).
_LIBM_FLAGS = set(FLAGS)


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_exp(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.exp(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_log(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.log(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_exp2(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.exp2(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_log2(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.log2(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_tanh(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.tanh(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_erf(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.erf(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_sigmoid(x, out):
    one = x.dtype.type(1)
    for i in numba.prange(x.shape[0]):
        out[i] = one / (one + math.exp(-x[i]))


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_expm1(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.expm1(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_log1p(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.log1p(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_sin(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.sin(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_cos(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.cos(x[i])


@numba.njit(parallel=True, fastmath=_LIBM_FLAGS, error_model="numpy")
def libm_pow(x, y, out):
    for i in numba.prange(x.shape[0]):
        out[i] = math.pow(x[i], y[i])


LIBM = {"exp": libm_exp, "log": libm_log, "exp2": libm_exp2, "log2": libm_log2, "tanh": libm_tanh, "erf": libm_erf, "sigmoid": libm_sigmoid,
        "expm1": libm_expm1, "log1p": libm_log1p, "sin": libm_sin, "cos": libm_cos, "pow": libm_pow}
UFUNC: dict[str, tuple[str, Callable]] = {
    "exp": ("np.exp", np.exp), "log": ("np.log", np.log), "tanh": ("np.tanh", np.tanh),
    "erf": ("scipy.special.erf", scipy.special.erf), "sigmoid": ("scipy.special.expit", scipy.special.expit),
    "expm1": ("np.expm1", np.expm1), "log1p": ("np.log1p", np.log1p), "sin": ("np.sin", np.sin),
    "cos": ("np.cos", np.cos), "pow": ("np.power", np.power), "exp2": ("np.exp2", np.exp2),
    "log2": ("np.log2", np.log2),
}
DOMAIN = {"log": (0.01, 100.0), "log2": (0.01, 100.0), "log1p": (-0.5, 100.0), "pow": (0.1, 10.0)}


@numba.njit(parallel=True)
def copy(x, out):
    for i in numba.prange(x.shape[0]):
        out[i] = x[i]


@numba.njit(parallel=True)
def triad(a, b, out, s):
    for i in numba.prange(a.shape[0]):
        out[i] = a[i] + s * b[i]


def median_time(fn: Callable, args: tuple, repeat: int, **kwargs) -> float:
    fn(*args, **kwargs)  # warm-up (compiles, faults the pages in)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*args, **kwargs)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cpu_ns_per_element(fn: Callable, args: tuple, n: int, repeat: int, **kwargs) -> float:
    """CPU time of the calling thread per element, data in L2: the compute cost, unaffected by other
    processes taking turns on the cores (wall time is; this machine is shared)."""
    fn(*args, **kwargs)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.thread_time()
        for _ in range(20):
            fn(*args, **kwargs)
        best = min(best, (time.thread_time() - t0) / (20 * n))
    return best * 1e9


def compute_section(dtype: str, names: list[str], bandwidth: float, repeat: int) -> None:
    """1 thread, 2**16 elements (in L2), serial loops. 'mem-bound x' is how many times faster the
    computation runs on the machine's cores than memory can feed it (>= 1: the fused elementwise
    kernel is limited by memory bandwidth, not by the function)."""
    n, rng, size = 1 << 16, np.random.default_rng(1), np.dtype(dtype).itemsize
    cores = numba.get_num_threads()
    print(f"\n{dtype}, compute cost: 1 thread, {n} elements in cache, CPU time; memory feeds "
          f"{bandwidth:.0f} GB/s over {cores} cores")
    print(f"{'function':9s} {'variant':24s} {'ns/elem':>8s} {'mem-bound x':>12s}")
    for name in names:
        fn = FUNCTIONS[name, dtype]
        lo, hi = DOMAIN.get(name, (-10.0, 10.0))
        xs = tuple(rng.uniform(lo, hi, n).astype(dtype) for _ in range(fn.arity))
        out = np.empty(n, dtype)
        serial_libm = numba.njit(fastmath=_LIBM_FLAGS, error_model="numpy")(LIBM[name].py_func)
        uname, ufunc = UFUNC[name]
        need = (fn.arity + 2) * size / (bandwidth / cores)      # ns per element per core at bandwidth
        for label, f, kw in ((f"xbench {fn.symbol}", compiled_loop(name, dtype, parallel=False), {}),
                             ("libm loop", serial_libm, {}), (uname, ufunc, {"out": out})):
            args = xs if kw else (*xs, out)
            ns = cpu_ns_per_element(f, args, n, repeat, **kw)
            print(f"{name:9s} {label:24s} {ns:8.3f} {need / ns:11.1f}x")
        sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--dtype", default="float32,float64")
    ap.add_argument("--only", default="", help="comma-separated function names")
    ap.add_argument("--bandwidth", type=float, default=0.0,
                    help="GB/s for the compute section (default: the triad measured here)")
    opts = ap.parse_args(argv)
    numba.set_num_threads(opts.threads)
    n, rng = opts.n, np.random.default_rng(0)
    print(f"xbench mathlib benchmark: n = {n} elements, {opts.threads} threads (numpy/scipy ufuncs: 1 "
          f"thread), median of {opts.repeat}")

    for dtype in opts.dtype.split(","):
        size = np.dtype(dtype).itemsize
        a = rng.uniform(-1, 1, n).astype(dtype)
        b, out = np.empty_like(a), np.empty_like(a)
        b[:] = a
        t_copy = median_time(copy, (a, out), opts.repeat)
        t_triad = median_time(triad, (a, b, out, 0.5), opts.repeat)
        bw_copy = 3 * size * n / t_copy / 1e9          # read + write + write-allocate
        bw_triad = 4 * size * n / t_triad / 1e9
        print(f"\n{dtype}: copy {bw_copy:.1f} GB/s, triad {bw_triad:.1f} GB/s (traffic incl. write-allocate)")
        print(f"{'function':9s} {'variant':24s} {'ms':>8s} {'GB/s':>7s} {'% copy':>7s} {'vs libm':>8s}")
        names = [f for (f, d) in FUNCTIONS if d == dtype]
        if opts.only:
            names = [f for f in names if f in opts.only.split(",")]
        for name in names:
            fn = FUNCTIONS[name, dtype]
            lo, hi = DOMAIN.get(name, (-10.0, 10.0))
            xs = [rng.uniform(lo, hi, n).astype(dtype) for _ in range(fn.arity)]
            if name == "pow":
                xs[1] = rng.uniform(-4, 4, n).astype(dtype)
            traffic = (fn.arity + 2) * size * n
            # time for the same traffic at the copy loop's speed, measured again next to each function
            # so that the ratio survives load changes on a shared machine
            t_floor = median_time(copy, (a, out), opts.repeat) * (fn.arity + 2) / 3
            uname, ufunc = UFUNC[name]
            rows = [
                (f"xbench {fn.symbol}", median_time(compiled_loop(name, dtype), (*xs, out), opts.repeat)),
                (f"libm loop ({LIBM[name].__name__})", median_time(LIBM[name], (*xs, out), opts.repeat)),
                (uname, median_time(ufunc, tuple(xs), opts.repeat, out=out)),
            ]
            t_libm = rows[1][1]
            for label, t in rows:
                print(f"{name:9s} {label:24s} {t * 1e3:8.2f} {traffic / t / 1e9:7.1f} {100 * t_floor / t:6.0f}%"
                      f" {t_libm / t:7.1f}x")
            sys.stdout.flush()
        compute_section(dtype, names, opts.bandwidth or bw_triad, opts.repeat)


if __name__ == "__main__":
    main()

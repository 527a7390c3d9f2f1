"""Predicted against measured time of the core operators, three sizes each, on this machine's CPU (and on a CUDA
GPU when there is one).

    python benchmarks/predict_vs_measure.py [--quick] [--no-recalibrate] [--ops softmax,matmul] [--budget N]

The local CPU is calibrated first, in the same run (peaks, bandwidths, cache geometry: `xb.calibrate`; then the
cpu model's micro-benchmarks: call and parallel-region overheads, per-element costs of the scalar functions the
operators use, the BLAS rate, one-thread bandwidths), so the constants and the measurements see the same machine
state. Nothing in the model is fitted to the operators below. Each operator's time is the median of the timing
protocol (`xbench.profile.bench`); the prediction uses the loop-IR counts and the simulated cache traffic of the
same program. The summary is the median absolute percentage error |predicted - measured| / measured.

On a machine with a CUDA GPU the same operators are timed there (inputs on the device, L2 flushed before each
launch, CUDA events around the launch) and compared with the prediction for the matching target (h100, h200,
a100 by the device's name).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import xbench as xb
from xbench.hw import predict as P
from xbench.hw import traces as T
from xbench.hw.cachesim import Hierarchy
from xbench.hw.target import get_target
from xbench.profile.timing import bench

rng = np.random.default_rng(0)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def cases(quick: bool):
    """(operator name, label, args) for three sizes of each core operator."""
    rows = (32, 256, 2048) if quick else (64, 512, 4096)
    D = 1024
    out = []
    for n in rows:
        out.append(("softmax", f"{n}x{D}", (f32(n, D),)))
        out.append(("layer_norm", f"{n}x{D}", (f32(n, D), (D,), f32(D), f32(D))))
        out.append(("rms_norm", f"{n}x{D}", (f32(n, D), (D,), f32(D))))
        out.append(("gelu", f"{n}x{D}", (f32(n, D),)))
        out.append(("bias_gelu", f"{n}x{D}", (f32(n, D), f32(D))))
        out.append(("cumsum", f"{n}x{D}", (f32(n, D), 1)))
    for n in ((96, 256, 512) if quick else (128, 384, 768)):
        out.append(("matmul", f"{n}^3", (f32(n, n), f32(n, n))))
    for b, s in (((2, 64), (4, 128), (8, 256)) if quick else ((4, 64), (8, 128), (8, 384))):
        q = f32(b, s, 64)
        out.append(("scaled_dot_product_attention", f"{b}x{s}x64", (q, f32(b, s, 64), f32(b, s, 64))))
    for n, c, hw in (((1, 8, 16), (2, 16, 32), (4, 32, 32)) if quick else ((1, 16, 32), (4, 32, 32), (8, 64, 32))):
        out.append(("conv2d", f"{n}x{c}x{hw}x{hw} k3 ->{2 * c}", (f32(n, c, hw, hw), f32(2 * c, c, 3, 3))))
    for n in ((2, 8, 32) if quick else (4, 16, 64)):
        x = f32(n, 32, 64, 64)
        out.append(("max_pool2d", f"{n}x32x64x64 k2", (x, 2)))
        out.append(("avg_pool2d", f"{n}x32x64x64 k2", (x, 2)))
    for n, v in (((256, 1000), (2048, 10000), (8192, 30000)) if quick else
                 ((1024, 1000), (8192, 30000), (32768, 50000))):
        idx = rng.integers(0, v, n)
        out.append(("embedding", f"{n} of {v}x256", (idx, f32(v, 256))))
    return out


def predict(op, args, target, model, budget):
    p = op.lower(*args)
    data = P.program_data(p, op.arrays(*args))
    art = op.compile("cpu", *args)
    sched = {k.name: dict(k.schedule) for k in art.kernels}
    lay = T.layout(p)
    traces = [T.cpu_trace(p, k, target, schedule=sched[k.name], lay=lay, data=data) for k in p.kernels]
    t0 = time.perf_counter()
    h = Hierarchy.from_target(target)
    caches = T.simulate_program(traces, h, cores=target.compute_units, budget=budget,
                                footprint=T.footprint_trace(p, lay, h.levels[-1].line_bytes))
    sim_s = time.perf_counter() - t0
    counts = P.program_counts(p, data)
    pred = P.predict_program(p, target, counts=counts, caches=caches, schedules=sched, model=model)
    return art, pred, sim_s, sum(c.simulated for c in caches)


def gpu_section(items, budget) -> None:
    try:
        from xbench.backends.cuda import device
        if device.mode() != "gpu":
            print("\nno CUDA GPU here: the GPU comparison is skipped")
            return
        cuda = device.cuda_module()
        name = cuda.get_current_device().name.decode() if isinstance(cuda.get_current_device().name, bytes) \
            else str(cuda.get_current_device().name)
    except Exception as e:
        print(f"\nthe GPU comparison is skipped: {e}")
        return
    key = next((k for k in ("h200", "h100", "a100") if k in name.lower()), None)
    if key is None:
        print(f"\nGPU {name}: no target file for it; the GPU comparison is skipped")
        return
    target = get_target(key)
    flush = cuda.device_array(256 << 20, np.uint8)
    print(f"\n{name} (target {key}): predicted vs measured (L2 flushed before each launch)")
    errs = []
    for opname, label, args in items:
        op = xb.ops.get(opname)
        art = op.compile("cuda", *args, cc=f"sm_{target.compute_capability[0]}{target.compute_capability[1]}")
        p = art.program
        data = P.program_data(p, op.arrays(*args))
        res = {k.name: dict(k.resources) for k in art.kernels}
        lay = T.layout(p)
        trs = [T.gpu_trace(p, k, target, resources=res.get(k.name), lay=lay, data=data) for k in p.kernels]
        l1 = target.level("l1")
        carve = max([int(r.get("blocks_per_sm", 0)) * int(r.get("smem_allocated_bytes", 0)) for r in res.values()]
                    + [0])
        h = Hierarchy.from_target(target, granularity="sector", shared_mem_carveout=min(carve, l1.size_bytes // 2))
        caches = T.simulate_program(trs, h, budget=budget, warm=False, flush=True)
        pred = P.predict_program(p, target, caches=caches, resources=res, data=data)
        b = art.device_args(*op.arrays(*args))
        art.launch(b)
        cuda.synchronize()
        times = []
        for _ in range(20):
            flush[:] = 0
            start, end = cuda.event(), cuda.event()
            start.record()
            art.launch(b)
            end.record()
            end.synchronize()
            times.append(cuda.event_elapsed_time(start, end))
        m = statistics.median(times)
        err = abs(pred.time_ms - m) / m * 100
        errs.append(err)
        print(f"  {opname:30s} {label:24s} measured {m:9.4f} ms  predicted {pred.time_ms:9.4f} ms  "
              f"error {err:6.1f} %")
    if errs:
        print(f"  median absolute error on {key}: {statistics.median(errs):.1f} % over {len(errs)} cases")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes and a quick calibration")
    ap.add_argument("--no-recalibrate", action="store_true", help="use the cached calibration")
    ap.add_argument("--ops", default="", help="comma-separated operator names (default: all)")
    ap.add_argument("--budget", type=int, default=2_000_000, help="simulated accesses per program")
    ap.add_argument("--threads", type=int, default=0, help="numba threads (default: all); 1 avoids waiting on a "
                    "busy second core in every parallel region when the machine is shared")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="the statistic of the timing samples compared (calibration uses the same protocol)")
    a = ap.parse_args()
    if a.threads:
        import numba
        numba.set_num_threads(a.threads)
        try:                                   # the BLAS libraries' own threads too (numpy's and SciPy's)
            import scipy.linalg.cython_blas  # noqa: F401 - loads the BLAS numba calls
            from threadpoolctl import threadpool_limits
            limits = threadpool_limits(a.threads)  # noqa: F841 - in force for the whole run
        except ImportError:
            print("threadpoolctl is not installed: BLAS keeps its own thread count")
    items = cases(a.quick)
    if a.ops:
        keep = set(a.ops.split(","))
        items = [c for c in items if c[0] in keep]
    t0 = time.perf_counter()
    target = xb.calibrate(force=not a.no_recalibrate, quick=a.quick, verbose=False)
    fns = set()
    for opname, _, args in items:
        op = xb.ops.get(opname)
        for c in P.program_counts(op.lower(*args)):
            fns |= set(c.functions)
    model = P.calibrate_cpu_model(target, sorted(fns), force=not a.no_recalibrate)
    print(f"{target.full_name}: {target.compute_units} cores, fp32 {target.peak_flops('float32') / 1e9:.1f} "
          f"GFLOP/s, DRAM {target.bandwidth('dram') / 1e9:.1f} GB/s (triad, write-allocate counted); "
          f"calibrated in {time.perf_counter() - t0:.0f} s")
    print(f"cpu model ({model.threads} threads): call {model.call_us:.2f} us, parallel region "
          f"{model.parallel_us:.1f} us, run {model.run_us:.1f}"
          f" us, access {model.c_access_ns:.3f} ns, BLAS fp32 {model.blas_flops['float32'] / 1e9:.1f} GFLOP/s\n")
    print(f"{'operator':30s} {'size':24s} {'measured ms':>12s} {'spread':>7s} {'predicted':>10s} {'error':>7s}  "
          f"bound (sim accesses, s)")
    errors: dict[str, list[float]] = {}
    steady: list[float] = []
    rates = []
    for opname, label, args in items:
        op = xb.ops.get(opname)
        art, pred, sim_s, simulated = predict(op, args, target, model, a.budget)
        arrays = op.arrays(*args)
        art.run(*arrays)
        t = bench(lambda art=art, arrays=arrays: art.run(*arrays))
        measured = t.median_ms if a.stat == "median" else t.min_ms
        err = (pred.time_ms - measured) / measured * 100
        errors.setdefault(opname, []).append(abs(err))
        if not t.noisy:
            steady.append(abs(err))
        if sim_s > 0:
            rates.append(simulated / sim_s)
        bounds = ",".join(sorted({k.bound for k in pred.kernels}))
        print(f"{opname:30s} {label:24s} {measured:12.4f} {t.spread * 100:6.0f}% {pred.time_ms:10.4f} "
              f"{err:+6.0f}%  {bounds} ({simulated:,}, {sim_s:.2f})" + ("  noisy" if t.noisy else ""), flush=True)
    allerr = [e for v in errors.values() for e in v]
    print("\nmedian absolute error per operator: " +
          ", ".join(f"{k} {statistics.median(v):.0f} %" for k, v in errors.items()))
    print(f"median absolute error over {len(allerr)} cases: {statistics.median(allerr):.1f} %  (target: under 30 %)")
    if steady:
        print(f"  over the {len(steady)} cases whose timing was not noisy (quartile spread <= 10 %): "
              f"{statistics.median(steady):.1f} %")
    if rates:
        print(f"cache simulation incl. trace generation: median {statistics.median(rates) / 1e6:.2f} M accesses/s")
    gpu_section(items, a.budget)


if __name__ == "__main__":
    main()

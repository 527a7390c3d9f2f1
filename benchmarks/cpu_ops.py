"""xbench-cpu against numpy, PyTorch eager and torch.compile, in one process, one after the other.

    .venv/bin/python benchmarks/cpu_ops.py [--quick] [--only softmax,matmul1024] [--no-compile]

For each operator: the median time of each contender (xbench's timing protocol: warm-up, repeated samples,
median and spread, noisy runs flagged), the ratio of each peer's time to xbench's (>1 means xbench is faster),
and xbench's % of this machine's limit measured in the same run. Row-wise and elementwise ops are priced at the
memory bandwidth (a STREAM triad on all cores, counting the bytes memory really moves, write-allocate reads
included; xbench's traffic is counted the same way: reads, writes and the write-allocate read of every output
line its ordinary stores write), contractions at peak FLOP/s (xbench's FMA kernel on all cores). Work is counted
twice where the algorithm differs from the definition: *nominal* (the operator's own FLOP: 2·N·K·C·H·W·9 for a
3x3 convolution) and *executed* (what the chosen algorithm does: Winograd F(2x2, 3x3) multiplies 16 times per
2x2 output tile and channel pair, 4/9 of the nominal products); the % limit is of executed work, the nominal
rate is shown beside it as an effective rate. The limits are the best of many short runs (noise on a shared
host only slows a run), measured at the start and again at the end; the higher is used, and a gap between the
two is reported. No honest kernel can be above 100 % of its limit: one that is means the limit or the count is
wrong, and is flagged.
Then the compile-time story per operator, each in a new process after the runtime's once-per-process start
(timed apart): cold compile (empty cache) and warm start (the cache the cold run left).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import textwrap

import ml_dtypes
import numpy as np

import xbench as xb
from xbench.backends import get as get_backend
from xbench.profile.timing import bench

ops = xb.ops
rng = np.random.default_rng(0)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- the cases: (name, xbench callable, numpy callable, torch callable factory, bytes moved, flops) ----------

def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps) * w + b


def _np_rmsnorm(x, w, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def _np_gelu(x):
    from scipy.special import erf
    return 0.5 * x * (1 + erf(x * np.float32(0.70710678)))


def _np_attention(q, k, v):
    s = q @ np.swapaxes(k, -1, -2) * np.float32(1 / math.sqrt(q.shape[-1]))
    return _np_softmax(s) @ v


def _np_conv2d(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))     # n c h w r s
    return np.einsum("nchwrs,kcrs->nkhw", win, w, optimize=True)


def cases(quick: bool):
    n = 1024 if quick else 4096
    x, w, b = f32(n, n), f32(n), f32(n)
    rowbytes = 3 * x.nbytes          # read x, write the output, and the write-allocate read of its lines
    out = []
    out.append(("softmax", lambda: ops.softmax(x), lambda: _np_softmax(x),
                lambda t: (lambda tx: (lambda: t.softmax(tx, -1)))(t.from_numpy(x)), rowbytes, 0))
    out.append(("layernorm", lambda: ops.layer_norm(x, n, w, b), lambda: _np_layernorm(x, w, b),
                lambda t: (lambda tx, tw, tb: (lambda: t.nn.functional.layer_norm(tx, (n,), tw, tb)))(
                    t.from_numpy(x), t.from_numpy(w), t.from_numpy(b)), rowbytes, 0))
    out.append(("rmsnorm", lambda: ops.rms_norm(x, n, w), lambda: _np_rmsnorm(x, w),
                lambda t: (lambda tx, tw: (lambda: t.nn.functional.rms_norm(tx, (n,), tw)))(
                    t.from_numpy(x), t.from_numpy(w)), rowbytes, 0))
    out.append(("gelu", lambda: ops.gelu(x), lambda: _np_gelu(x),
                lambda t: (lambda tx: (lambda: t.nn.functional.gelu(tx)))(t.from_numpy(x)), rowbytes, 0))
    out.append(("bias_gelu", lambda: ops.bias_gelu(x, b), lambda: _np_gelu(x + b),
                lambda t: (lambda tx, tb: (lambda: t.nn.functional.gelu(tx + tb)))(t.from_numpy(x),
                                                                                    t.from_numpy(b)),
                rowbytes, 0))
    for m in ((256, 512) if quick else (1024, 2048)):
        a, c = f32(m, m), f32(m, m)
        out.append((f"matmul{m}", (lambda a, c: lambda: ops.mm(a, c))(a, c), (lambda a, c: lambda: a @ c)(a, c),
                    (lambda a, c: lambda t: (lambda ta, tc: (lambda: t.mm(ta, tc)))(t.from_numpy(a),
                                                                                  t.from_numpy(c)))(a, c),
                    3 * a.nbytes, 2 * m ** 3))
    m = 512 if quick else 2048            # bfloat16 operands, float32 sums (autocast's matmul); numpy widens them
    a, c = f32(m, m).astype(ml_dtypes.bfloat16), f32(m, m).astype(ml_dtypes.bfloat16)
    out.append((f"matmul{m}_bf16", (lambda a, c: lambda: ops.mm(a, c))(a, c),
                (lambda a, c: lambda: a.astype(np.float32) @ c.astype(np.float32))(a, c),
                (lambda a, c: lambda t: (lambda ta, tc: (lambda: t.mm(ta, tc)))(
                    t.from_numpy(a.view(np.int16)).view(t.bfloat16), t.from_numpy(c.view(np.int16)).view(t.bfloat16)))(
                    a, c), 3 * a.nbytes, 2 * m ** 3))
    bb, hh, ss, dd = (2, 4, 256, 64) if quick else (8, 8, 512, 64)
    q, k, v = f32(bb, hh, ss, dd), f32(bb, hh, ss, dd), f32(bb, hh, ss, dd)
    out.append(("attention", lambda: ops.scaled_dot_product_attention(q, k, v), lambda: _np_attention(q, k, v),
                lambda t: (lambda tq, tk, tv: (lambda: t.softmax(tq @ tk.transpose(-1, -2) * (1 / math.sqrt(dd)),
                                                                  -1) @ tv))(
                    t.from_numpy(q), t.from_numpy(k), t.from_numpy(v)),
                4 * q.nbytes, 4 * bb * hh * ss * ss * dd))
    nb = 2 if quick else 8
    xi, wc = f32(nb, 64, 56, 56), f32(64, 64, 3, 3)
    out.append(("conv2d", lambda: ops.conv2d(xi, wc, None, 1, 1), lambda: _np_conv2d(xi, wc),
                lambda t: (lambda tx, tw: (lambda: t.nn.functional.conv2d(tx, tw, None, 1, 1)))(
                    t.from_numpy(xi), t.from_numpy(wc)),
                2 * xi.nbytes + wc.nbytes, 2 * nb * 64 * 56 * 56 * 64 * 9))
    return out


def _llc() -> int:
    """Bytes of the last-level cache (a row-wise op moving less than twice this runs partly from cache)."""
    from xbench.hw.calibrate import read_caches
    return max(c["size"] for c in read_caches())


def executed_flops(name: str, flops: float) -> tuple[float, str]:
    """(FLOP the algorithm xbench chose executes, what it is) for a case whose nominal FLOP are `flops`."""
    if name != "conv2d":
        return flops, ""
    nb = 2 if _QUICK else 8
    xi, wc = np.zeros((nb, 64, 56, 56), np.float32), np.zeros((64, 64, 3, 3), np.float32)
    art = ops.conv2d.compile("cpu", xi, wc, None, 1, 1)
    window = next((k.schedule.get("window") for k in art.kernels if "window" in k.schedule), None)
    if window != "winograd":
        return flops, f"window={window}: the nominal products"
    tiles = nb * -(-56 // 2) * -(-56 // 2)
    return 2.0 * 16 * 64 * 64 * tiles, "Winograd F(2x2,3x3): 16 products per tile and channel pair (GEMMs only)"


_QUICK = False


# ---- machine limits, measured in this run -------------------------------------------------------------

def limit_flops(name: str, peak: float) -> float:
    """The FLOP/s limit of a contraction: the float32 FMA peak, or for bfloat16 operands the rate of the unit the
    bfloat16 GEMM runs on (`xbench.hw.calibrate._matrix_peaks`: AMX's or vdpbf16ps's, from the ISA), where
    this CPU has one."""
    if not name.endswith("_bf16"):
        return peak
    from xbench.hw.calibrate import _matrix_peaks, cpu_facts
    facts = cpu_facts()
    hz = facts["mhz"] * 1e6 if facts["mhz"] else peak / facts["cores"] / 32
    return _matrix_peaks(facts["isa"], facts["cores"], hz, {"value": peak}).get("bfloat16", {}).get(
        "tensor", {}).get("value", peak)


def machine_limits() -> tuple[float, float]:
    """(bytes/s of a STREAM triad, float32 FLOP/s of an FMA kernel or a GEMM) on all cores, measured now with xbench's
    calibration code: the best of many short runs (a busy host only slows a run down)."""
    from xbench.hw.calibrate import measure_gemm, measure_peaks, measure_triad
    threads = os.cpu_count() or 1
    # 3 x 64 MiB, well past the last-level cache; on one thread too: where other work holds a core, a second
    # thread mostly waits, and one core alone moves nearly all the bandwidth (~50 of ~60 GB/s on Zen 5)
    bw = max(measure_triad(t, 1 << 23, 20)[2] for t in dict.fromkeys((threads, 1)))
    # a BLAS GEMM's rate is a floor under the peak (the FMA kernel runs narrow where LLVM prefers short vectors)
    peak = max(measure_peaks(threads, 20, 0.02)["float32"][2], measure_gemm(5)["float32"])
    return bw, peak


# ---- the default schedule across sizes ----------------------------------------------------------------

def schedule_sweep(sizes=(64, 128, 192, 256, 384, 512, 768, 1024)) -> None:
    """softmax at n x n: the default schedule against the serial and the parallel one, alternately (medians of
    three rounds), and whether a smaller input is ever slower than a larger one by default."""
    print("\ndefault parallel/serial choice: softmax n x n float32, Artifact.run, medians of 3 alternating rounds")
    print(f"  {'n':>5s}  {'default':>7s}  {'time':>9s}  {'serial':>9s}  {'parallel':>9s}")
    times = []
    for n in sizes:
        x = f32(n, n)
        arts = {}
        be = get_backend("cpu")
        kernels = ops.softmax.lower(x).kernels
        for how in ("default", "serial", "parallel"):
            # the backend's default schedule itself (op.compile would take a tuned one from the database)
            arts[how] = ops.softmax.compile("cpu", x, schedule={
                k.name: {**be.default_schedule(k), **({} if how == "default" else {"parallel": how == "parallel"})}
                for k in kernels})
            arts[how].run(x)
        got = {h: [] for h in arts}
        for _ in range(3):
            for h, a in arts.items():
                got[h].append(bench(lambda a=a: a.run(x), max_total_s=0.2).median_ms)
        med = {h: float(np.median(v)) * 1e3 for h, v in got.items()}
        par = arts["default"].kernels[0].schedule.get("parallel")
        times.append(med["default"])
        print(f"  {n:5d}  {'parallel' if par else 'serial':>8s} {med['default']:7.1f} us  {med['serial']:6.1f} us  "
              f"{med['parallel']:6.1f} us")
    worse = [f"{a}->{b}" for (a, ta), (b, tb) in zip(zip(sizes, times), zip(sizes[1:], times[1:])) if ta > tb * 1.05]
    print("  a smaller input is never slower than a larger one by default" if not worse else
          "  slower than the next larger size: " + ", ".join(worse))


# ---- compile times ------------------------------------------------------------------------------------

_COLD = textwrap.dedent("""
    import json, sys, time, numpy as np
    import xbench as xb
    sys.path.insert(0, {bench_dir!r})
    from cpu_ops import cases
    case = [c for c in cases({quick}) if c[0] == {name!r}][0]
    one = np.ones(3, np.float32)
    t0 = time.perf_counter(); xb.ops.neg(one); start = time.perf_counter() - t0     # the runtime's start
    t0 = time.perf_counter(); kept = case[1](); first = time.perf_counter() - t0
    # the first result is kept, and the host allocator keeps no blocks (XBENCH_HOST_POOL_MB=0), so both calls
    # write fresh pages for outputs and temporaries: the difference is loading or compiling the code
    t0 = time.perf_counter(); case[1](); second = time.perf_counter() - t0
    print(json.dumps({{"start_s": start, "first_call_s": first - second}}))
""")


def compile_times(names, quick: bool, repeats: int = 3) -> dict[str, tuple[float, float, float]]:
    """Per operator, medians over `repeats` fresh caches: (cold compile s, warm load s, the runtime's start in
    the warm process s)."""
    out = {}
    for name in names:
        code = _COLD.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), quick=quick, name=name)
        samples = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as cache:
                env = {**os.environ, "XBENCH_CACHE_DIR": cache, "XBENCH_HOST_POOL_MB": "0"}
                runs = []
                for _ in range(2):
                    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
                    if res.returncode:
                        raise RuntimeError(res.stderr[-2000:])
                    runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
                samples.append((runs[0]["first_call_s"], runs[1]["first_call_s"], runs[1]["start_s"]))
        out[name] = tuple(float(np.median(col)) for col in zip(*samples))
    return out


# ---- main ---------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes minutes)")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold/warm compile measurements")
    ap.add_argument("--no-sweep", action="store_true", help="skip the default schedule's size sweep")
    args = ap.parse_args()
    try:
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
    except ImportError:
        torch = None
    import threadpoolctl
    blas = threadpoolctl.threadpool_info()
    print(f"machine: {os.cpu_count()} cores; numpy BLAS: "
          + ", ".join(f"{b['internal_api']} {b.get('version')} ({b.get('architecture')})" for b in blas)
          + f"; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    print(f"peers: numpy {np.__version__}" + (f", torch {torch.__version__} eager" + ("" if args.no_compile
                                                                                  else " and torch.compile")
                                               if torch else " (torch not installed: no PyTorch peers)"))
    global _QUICK
    _QUICK = args.quick
    bw, peak = machine_limits()
    print(f"limits measured now (best of 20 short runs): memory bandwidth {bw / 1e9:.1f} GB/s (triad on all cores or "
          f"one, write-allocate counted), peak float32 {peak / 1e9:.0f} GFLOP/s")
    only = {s for s in args.only.split(",") if s}
    rows = []
    results = []
    header = f"{'op':12s} {'xbench':>18s} {'numpy':>18s} {'torch':>18s} {'compile':>18s}  " \
             f"{'vs np':>6s} {'vs eager':>8s} {'vs comp':>8s}  {'% limit':>16s}"
    print("\n" + header + "\n" + "-" * len(header))
    for name, xb_fn, np_fn, torch_fn, nbytes, flops in cases(args.quick):
        if only and name not in only:
            continue
        xb_fn()
        t_xb = bench(xb_fn)
        t_np = bench(np_fn)
        t_te = t_tc = None
        if torch is not None:
            eager = torch_fn(torch)
            t_te = bench(eager)
            if not args.no_compile:
                compiled = torch.compile(eager)
                compiled()
                t_tc = bench(compiled)
        executed, how = executed_flops(name, flops)
        results.append((name, t_xb.min_ms, flops, executed, how, nbytes))
        pct = (executed / (t_xb.median_ms * 1e-3) / limit_flops(name, peak) if flops
               else nbytes / (t_xb.median_ms * 1e-3) / bw) * 100
        limit = f"{pct:5.1f}% {'peak' if flops else 'bw'}" if flops or nbytes >= 2 * _llc() else "(in cache)"

        def cell(t):
            return f"{t.median_ms:9.3f} ms{'~' if t and t.noisy else ' '}" if t else f"{'-':>12s}"

        def ratio(t):
            return f"{t.median_ms / t_xb.median_ms:6.2f}x" if t else f"{'-':>7s}"

        print(f"{name:12s} {cell(t_xb):>18s} {cell(t_np):>18s} {cell(t_te):>18s} {cell(t_tc):>18s}  "
              f"{ratio(t_np):>6s} {ratio(t_te):>8s} {ratio(t_tc):>8s}  {limit:>16s}")
        if executed != flops:
            eff = flops / (t_xb.median_ms * 1e-3)
            print(f"{'':12s} work executed {executed / 1e9:.2f} GFLOP of {flops / 1e9:.2f} nominal ({how}); "
                  f"effective rate {eff / 1e9:.0f} GFLOP/s = {eff / peak:.0%} of peak by nominal work")
        rows.append(name)
    print("(~ marks a noisy timing: spread over 10 % of the median; ratios are peer time / xbench time, so > 1 "
          "means xbench is faster; % limit is of the triad bandwidth (bw) for row-wise ops, with xbench's bytes "
          "counted as the triad's are (not shown where the data fit in the last-level cache), and of peak FLOP/s "
          "(peak) of executed work for contractions)")
    bw2, peak2 = machine_limits()
    print(f"\nlimits measured again at the end: bandwidth {bw2 / 1e9:.1f} GB/s ({bw2 / bw - 1:+.0%}), peak "
          f"{peak2 / 1e9:.0f} GFLOP/s ({peak2 / peak - 1:+.0%})")
    bw, peak = max(bw, bw2), max(peak, peak2)
    over = []
    for name, best_ms, flops, executed, _, nbytes in results:
        if not flops and nbytes < 2 * _llc():
            continue               # cache-resident: the memory triad is not its limit
        frac = executed / (best_ms * 1e-3) / limit_flops(name, peak) if flops else nbytes / (best_ms * 1e-3) / bw
        if frac > 1.0:
            over.append(f"{name} {frac:.0%}")
    print("check: no operator's fastest run is above its limit (the higher of the two measurements)" if not over
          else "FLAGGED above the limit (the limit or the work count is wrong): " + ", ".join(over))
    if not args.no_sweep:
        schedule_sweep()
    if not args.no_cold:
        print("\ncompile: first call minus second call in a new process, with an empty cache (cold) and with the "
              "cache the cold run left (warm), medians of 3 fresh caches, after the runtime's start (numba's registries, the BLAS bindings, "
              "xbench's code generator: once per process, timed as the first call of a 3-element neg from the "
              "cache)")
        for name, (cold, warm, start) in compile_times(rows, args.quick).items():
            print(f"  {name:12s} cold {cold:6.2f} s   warm {warm * 1e3:7.1f} ms   runtime start {start:5.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

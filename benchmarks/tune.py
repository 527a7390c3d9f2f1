"""Default schedule vs tuned schedule on the cpu backend, with the tuned speed against the peers of cpu_ops.py.

    .venv/bin/python benchmarks/tune.py [--quick] [--budget 32] [--no-compile]

For matmul 1024, softmax and layernorm 4096x4096 and the ResNet conv2d: the time of the default schedule, the
time of the schedule `xb.tune` finds (both measured side by side after tuning), how long tuning took, how many
candidates were measured / pruned / rejected, the tuned time against numpy, PyTorch eager and torch.compile,
and its % of this machine's limit measured in the same run (as in cpu_ops.py).
Tuning runs in a cache directory of its own, so earlier results do not shortcut it.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--budget", type=int, default=32, help="candidates per kernel (xb.tune's default)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (it takes minutes)")
    args = ap.parse_args()
    os.environ["XBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="xbench-tune-")
    from cpu_ops import _np_conv2d, _np_layernorm, _np_softmax, machine_limits

    import xbench as xb
    from xbench.profile.timing import bench

    rng = np.random.default_rng(0)
    n = 1024 if args.quick else 4096
    m = 256 if args.quick else 1024
    nb = 2 if args.quick else 8
    x, w = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    a, b = rng.standard_normal((m, m)).astype(np.float32), rng.standard_normal((m, m)).astype(np.float32)
    xi, wc = rng.standard_normal((nb, 64, 56, 56)).astype(np.float32), rng.standard_normal((64, 64, 3, 3)).astype(
        np.float32)
    rowbytes = 2 * x.nbytes
    # (name, operator, its arguments, numpy, torch callable factory, bytes moved, flops)
    cases = [
        (f"matmul{m}", xb.ops.mm, (a, b), lambda: a @ b,
         lambda t: (lambda ta, tb: lambda: t.mm(ta, tb))(t.from_numpy(a), t.from_numpy(b)), 3 * a.nbytes, 2 * m ** 3),
        ("softmax", xb.ops.softmax, (x,), lambda: _np_softmax(x),
         lambda t: (lambda tx: lambda: t.softmax(tx, -1))(t.from_numpy(x)), rowbytes, 0),
        ("layernorm", xb.ops.layer_norm, (x, n, w, w), lambda: _np_layernorm(x, w, w),
         lambda t: (lambda tx, tw: lambda: t.nn.functional.layer_norm(tx, (n,), tw, tw))(t.from_numpy(x),
                                                                                        t.from_numpy(w)),
         rowbytes, 0),
        ("conv2d", xb.ops.conv2d, (xi, wc, None, 1, 1), lambda: _np_conv2d(xi, wc),
         lambda t: (lambda tx, tw: lambda: t.nn.functional.conv2d(tx, tw, None, 1, 1))(t.from_numpy(xi),
                                                                                      t.from_numpy(wc)),
         2 * xi.nbytes + wc.nbytes, 2 * nb * 64 * 56 * 56 * 64 * 9),
    ]
    try:
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
    except ImportError:
        torch = None
    bw, peak = machine_limits()
    print(f"limits measured now: memory bandwidth {bw / 1e9:.1f} GB/s (triad), peak float32 {peak / 1e9:.0f} GFLOP/s")
    print(f"{'op':10s} {'default':>11s} {'tuned':>11s} {'speedup':>8s} {'tune s':>7s} {'measured':>8s} "
          f"{'pruned':>6s} {'rejected':>8s} {'vs numpy':>9s} {'vs eager':>9s} {'vs comp':>9s} {'% limit':>8s}")
    for name, op, call, np_fn, torch_fn, nbytes, flops in cases:
        res = xb.tune(op, *call, budget=args.budget, progress=False)
        default = op.compile("cpu", *call, schedule={k.kernel: k.default for k in res.kernels})
        tuned = op.compile("cpu", *call, schedule=res.best)
        arrays = op.arrays(*call)
        td, tb = [], []
        for _ in range(3):                       # side by side, interleaved
            td.append(bench(lambda: default.run(*arrays)).median_ms)
            tb.append(bench(lambda: tuned.run(*arrays)).median_ms)
        d, t = sorted(td)[1], sorted(tb)[1]
        counts = res.counts()
        peers = [np_fn]
        if torch is not None:
            eager = torch_fn(torch)
            peers.append(eager)
            if not args.no_compile:
                compiled = torch.compile(eager)
                compiled()
                peers.append(compiled)
        ratios = [f"{bench(fn).median_ms / t:8.2f}x" for fn in peers] + [f"{'-':>9s}"] * (3 - len(peers))
        pct = (flops / (t * 1e-3) / peak if flops else nbytes / (t * 1e-3) / bw) * 100
        print(f"{name:10s} {d:8.3f} ms {t:8.3f} ms {d / t:7.2f}x {res.seconds:7.1f} {counts.get('measured', 0):8d} "
              f"{counts.get('pruned', 0):6d} {counts.get('rejected', 0):8d} {ratios[0]} {ratios[1]} "
              f"{ratios[2]} {pct:7.1f}%")
        for k in res.kernels:
            print(f"    {k.kernel}: {k.best}")
    print("(ratios: peer time / tuned xbench time, > 1 means xbench is faster; % limit: of the triad bandwidth "
          "for row-wise ops, of peak FLOP/s for contractions)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

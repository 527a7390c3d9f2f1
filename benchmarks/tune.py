"""Default schedule vs tuned schedule on the cpu backend, with the tuned speed against the peers of cpu_ops.py.

    .venv/bin/python benchmarks/tune.py [--quick] [--budget 24]

For matmul 1024, softmax and layernorm 4096x4096 and the ResNet conv2d: the time of the default schedule, the
time of the schedule `xb.tune` finds (both measured side by side after tuning), how long tuning took, how many
candidates were measured / pruned / rejected, and the tuned time against numpy and PyTorch eager.
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
    ap.add_argument("--budget", type=int, default=24)
    args = ap.parse_args()
    os.environ["XBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="xbench-tune-")
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
    cases = [
        (f"matmul{m}", xb.ops.mm, (a, b), {}, lambda: a @ b, "mm"),
        ("softmax", xb.ops.softmax, (x,), {}, lambda: _np_softmax(x), "softmax"),
        ("layernorm", xb.ops.layer_norm, (x, n, w, w), {}, lambda: _np_layernorm(x, w), "layernorm"),
        ("conv2d", xb.ops.conv2d, (xi, wc, None, 1, 1), {}, None, "conv2d"),
    ]
    try:
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
        tt = {"mm": (lambda ta, tb: lambda: torch.mm(ta, tb))(torch.from_numpy(a), torch.from_numpy(b)),
              "softmax": (lambda tx: lambda: torch.softmax(tx, -1))(torch.from_numpy(x)),
              "layernorm": (lambda tx, tw: lambda: torch.nn.functional.layer_norm(tx, (n,), tw, tw))(
                  torch.from_numpy(x), torch.from_numpy(w)),
              "conv2d": (lambda tx, tw: lambda: torch.nn.functional.conv2d(tx, tw, None, 1, 1))(
                  torch.from_numpy(xi), torch.from_numpy(wc))}
    except ImportError:
        tt = {}
    print(f"{'op':10s} {'default':>11s} {'tuned':>11s} {'speedup':>8s} {'tune s':>7s} {'measured':>8s} "
          f"{'pruned':>6s} {'rejected':>8s} {'vs numpy':>9s} {'vs torch':>9s}")
    for name, op, call, kw, np_fn, tkey in cases:
        res = xb.tune(op, *call, budget=args.budget, progress=False, **kw)
        default = op.compile("cpu", *call, schedule={k.kernel: k.default for k in res.kernels}, **kw)
        tuned = op.compile("cpu", *call, schedule=res.best, **kw)
        arrays = op.arrays(*call, **kw)
        td, tb = [], []
        for _ in range(3):                       # side by side, interleaved
            td.append(bench(lambda: default.run(*arrays)).median_ms)
            tb.append(bench(lambda: tuned.run(*arrays)).median_ms)
        d, t = sorted(td)[1], sorted(tb)[1]
        counts = res.counts()
        peer_np = f"{bench(np_fn).median_ms / t:8.2f}x" if np_fn else f"{'-':>9s}"
        peer_t = f"{bench(tt[tkey]).median_ms / t:8.2f}x" if tkey in tt else f"{'-':>9s}"
        print(f"{name:10s} {d:8.3f} ms {t:8.3f} ms {d / t:7.2f}x {res.seconds:7.1f} {counts.get('measured', 0):8d} "
              f"{counts.get('pruned', 0):6d} {counts.get('rejected', 0):8d} {peer_np} {peer_t}")
        for k in res.kernels:
            print(f"    {k.kernel}: {k.best}")
    print("(ratios: peer time / tuned xbench time, > 1 means xbench is faster)")
    return 0


def _np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _np_layernorm(x, w, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    return xc / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps) * w + w


if __name__ == "__main__":
    sys.exit(main())

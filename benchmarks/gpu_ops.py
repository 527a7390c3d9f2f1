"""xbench-cuda against PyTorch (cuBLAS / cuDNN / its own CUDA kernels) on the GPU of this machine.

    .venv/bin/python benchmarks/gpu_ops.py [--quick] [--only softmax,matmul1024] [--tf32]

The operators and sizes of benchmarks/cpu_ops.py: softmax, layernorm, rmsnorm, GELU and bias+GELU on
4096 x 4096 float32; matmul 1024 and 2048; attention B8 H8 S512 D64; conv2d 3x3, 64 -> 64 channels, 56 x 56,
batch 8. Each contender is timed with xbench's protocol (warm-up, repeated samples, median and spread, noisy
runs flagged) around `launch(); cuda.synchronize()`, on device-resident inputs (no host copies in the timed
region). Printed per operator: both medians, PyTorch's time over xbench's (> 1: xbench is faster), xbench's %
of the GPU's peak from its target description (float32 FLOP/s of the CUDA cores for contractions, HBM
bandwidth for the others), the largest difference from PyTorch's result, and ptxas registers / theoretical
occupancy of xbench's kernels. PyTorch's TF32 paths are switched off unless --tf32 (xbench computes in
float32 on the CUDA cores). Without a CUDA GPU the script says so and exits 0.
"""
from __future__ import annotations

import argparse
import math
import sys

import numpy as np

import xbench as xb
from xbench.backends.cuda import device
from xbench.profile.timing import bench

ops = xb.ops
rng = np.random.default_rng(0)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def cases(quick: bool):
    """(name, operator, args, kwargs, torch function of the same tensors, bytes moved, flops)."""
    n = 1024 if quick else 4096
    x, w, b = f32(n, n), f32(n), f32(n)
    rowbytes = 2 * x.nbytes
    out = [
        ("softmax", ops.softmax, (x,), {}, lambda t, x: t.softmax(x, -1), rowbytes, 0),
        ("layernorm", ops.layer_norm, (x, n, w, b), {},
         lambda t, x, n, w, b: t.nn.functional.layer_norm(x, (n,), w, b), rowbytes, 0),
        ("rmsnorm", ops.rms_norm, (x, n, w), {}, lambda t, x, n, w: t.nn.functional.rms_norm(x, (n,), w),
         rowbytes, 0),
        ("gelu", ops.gelu, (x,), {}, lambda t, x: t.nn.functional.gelu(x), rowbytes, 0),
        ("bias_gelu", ops.bias_gelu, (x, b), {}, lambda t, x, b: t.nn.functional.gelu(x + b), rowbytes, 0),
    ]
    for m in ((256, 512) if quick else (1024, 2048)):
        a, c = f32(m, m), f32(m, m)
        out.append((f"matmul{m}", ops.mm, (a, c), {}, lambda t, a, c: t.mm(a, c), 3 * a.nbytes, 2 * m ** 3))
    bb, hh, ss, dd = (2, 4, 256, 64) if quick else (8, 8, 512, 64)
    q, k, v = f32(bb, hh, ss, dd), f32(bb, hh, ss, dd), f32(bb, hh, ss, dd)
    out.append(("attention", ops.scaled_dot_product_attention, (q, k, v), {},
                lambda t, q, k, v: t.nn.functional.scaled_dot_product_attention(q, k, v),
                4 * q.nbytes, 4 * bb * hh * ss * ss * dd))
    nb = 2 if quick else 8
    xi, wc = f32(nb, 64, 56, 56), f32(64, 64, 3, 3)
    out.append(("conv2d", ops.conv2d, (xi, wc, None, 1, 1), {},
                lambda t, x, w, b, s, p: t.nn.functional.conv2d(x, w, b, s, p),
                2 * xi.nbytes + wc.nbytes, 2 * nb * 64 * 56 * 56 * 64 * 9))
    return out


def target_for(name: str):
    """The target description of the detected GPU (by its marketing name), or None."""
    from xbench.hw.target import get_target
    low = name.lower()
    for key in ("h200", "h100", "a100"):
        if key in low:
            return get_target(key)
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--tf32", action="store_true", help="let PyTorch use TF32 tensor cores for float32")
    args = ap.parse_args()

    if device.mode() != "gpu" or not device.gpu_present():
        print("benchmarks/gpu_ops.py needs a CUDA GPU: none is visible here (the cuda backend runs in numba's "
              "simulator on this machine, which says nothing about GPU speed). Nothing to measure.")
        return 0
    cuda = device.cuda_module()
    name = device.device_name() or "unknown GPU"
    cc = device.device_cc()
    target = target_for(name)
    peak = target.peak_flops("float32", unit="vector") if target else None
    bw = target.bandwidth("hbm") if target else None
    print(f"GPU: {name} (sm_{cc[0]}{cc[1]}); target description: {target.name if target else 'none'}"
          + (f" (float32 {peak / 1e12:.1f} TFLOP/s, HBM {bw / 1e12:.2f} TB/s)" if target else ""))
    try:
        import torch
        if not torch.cuda.is_available():
            print(f"PyTorch {torch.__version__} has no CUDA here: xbench is timed alone")
            torch = None
    except ImportError:
        print("PyTorch is not installed: xbench is timed alone")
        torch = None
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        print(f"peer: PyTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN "
              f"{torch.backends.cudnn.version()}), TF32 {'on' if args.tf32 else 'off'}")

    only = {s for s in args.only.split(",") if s}
    header = (f"{'op':11s} {'xbench':>13s} {'torch':>13s} {'torch/xb':>9s} {'% peak':>7s} {'max diff':>9s}  "
              "kernels (registers, theoretical occupancy)")
    print("\n" + header + "\n" + "-" * len(header))
    for case, op, op_args, kw, torch_fn, nbytes, flops in cases(args.quick):
        if only and case not in only:
            continue
        art = op.compile("cuda", *op_args, **kw)
        bufs = art.device_args(*op.arrays(*op_args, **kw))
        art.launch(bufs)
        cuda.synchronize()
        t_xb = bench(lambda: (art.launch(bufs), cuda.synchronize()))
        ours = art.outputs(bufs)[0]
        t_pt, diff = None, float("nan")
        if torch is not None:
            dev = [torch.from_numpy(a).cuda() if isinstance(a, np.ndarray) else a for a in op_args]
            ref = torch_fn(torch, *dev)
            torch.cuda.synchronize()
            t_pt = bench(lambda: (torch_fn(torch, *dev), torch.cuda.synchronize()))
            diff = float(np.max(np.abs(ours.astype(np.float64) - ref.cpu().numpy())))
        sec = t_xb.median_ms * 1e-3
        limit = (peak if flops else bw)
        pct = ((flops if flops else nbytes) / sec / limit * 100) if limit else math.nan
        kern = ", ".join(f"{k.name} {k.resources.get('registers', '?')}r "
                         f"{k.resources.get('theoretical_occupancy', math.nan):.0%}" for k in art.kernels)

        def cell(t):
            return f"{t.median_ms:9.3f} ms{'~' if t.noisy else ' '}" if t else f"{'-':>12s}"

        ratio = f"{t_pt.median_ms / t_xb.median_ms:8.2f}x" if t_pt else f"{'-':>9s}"
        print(f"{case:11s} {cell(t_xb):>13s} {cell(t_pt):>13s} {ratio:>9s} {pct:6.1f}% {diff:9.2e}  {kern}",
              flush=True)
    print("(~ marks a noisy timing: spread over 10 % of the median; % peak is of float32 FLOP/s for matmul, "
          "attention and conv2d, of HBM bandwidth for the others)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

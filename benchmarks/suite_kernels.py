"""Where a suite workload's xbench time goes: every kernel of every graph it compiles, timed on its own.

The workload's ATen graphs and their inputs are captured as the bridge sees them (`xbench.torch.bisect.capture`:
forward, and backward for training), each graph is compiled as the bridge compiles it (one `GraphOp`), and the
cpu artifact's `kernel_runners` time each kernel over the buffers of a full run (median of repeats). Printed per
graph: the whole program's time, then the kernels that take most of it, with their rates (the hardware model's
flop and compulsory byte counts over the median wall time), what they fuse (the ops of their origin), their kind
and schedule, and their share.

    python benchmarks/suite_kernels.py bert [--size bench] [--top 12] [--repeats 7] [--precision bfloat16]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch


def _median_ms(fn, repeats: int) -> tuple[float, float]:
    """Median wall and mean CPU (all the process's threads) milliseconds of `fn()`: on a loaded machine the wall
    time of a short kernel is mostly the wait for a core; CPU time here is accounted by the scheduler's tick
    (4 ms steps), so a short call's CPU time is a sampled count whose mean, not median, estimates it."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        t, c = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t) * 1e3)
        cpu.append((time.process_time() - c) * 1e3)
    return statistics.median(wall), statistics.fmean(cpu)


def profile(name: str, size: str, repeats: int, top: int, precision: str) -> None:
    from xbench.hw.predict import kernel_counts
    from xbench.suite.engines import autocast, inputs
    from xbench.suite.workloads import WORKLOADS, build, dynamo_settings
    from xbench.torch.bisect import capture
    from xbench.torch.graph import GraphOp
    from xbench.torch.products import batch_products
    w = WORKLOADS[name]
    model, batch = build(name, size)
    model.train(w.mode == "train")
    args = inputs(batch, "infer" if w.mode != "train" else "train")
    if w.mode == "decode":
        args = {"input_ids": batch["input_ids"]}
    torch._dynamo.reset()
    with dynamo_settings(w), autocast(precision):
        graphs = capture(model, (), args, backward=w.mode == "train")
    total = 0.0
    for g in graphs:
        batch_products(g.gm)                       # as the bridge does before compiling
        op = GraphOp(g.gm, f"profile_{g.name}", "cpu")
        try:
            call, arrays = op.arguments(g.args)
            c = op.compiled(g.args, call)
        except Exception as exc:
            print(f"{g.name}: xbench could not compile it: {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        whole, whole_cpu = _median_ms(lambda c=c, arrays=arrays: c.artifact.run(*arrays), repeats)
        runners = c.artifact.kernel_runners(*arrays)
        kernels = {k.name: k for k in c.program.kernels}
        schedules = {k.name: dict(k.schedule or {}) for k in getattr(c.artifact, "kernels", ())}
        both = {n: _median_ms(fn, repeats) for n, fn in runners.items()}
        times = {n: cpu for n, (_, cpu) in both.items()}
        total += whole
        s = sum(times.values())
        print(f"\n{g.name}: {len(times)} kernels, whole program {whole:.3f} ms wall, {whole_cpu:.3f} ms CPU "
              f"(kernels one by one {s:.3f} ms CPU); kernels by CPU time:")
        for n, ms in sorted(times.items(), key=lambda kv: -kv[1])[:top]:
            k = kernels.get(n)
            counts = kernel_counts(c.program, k) if k else None
            rate = (f"{counts.total_flops / both[n][0] * 1e-6:6.0f} GFLOP/s {counts.bytes / both[n][0] * 1e-6:5.1f} GB/s"
                    if counts and both[n][0] > 0 else "")
            origin = "+".join(k.origin[:6]) + ("..." if k and len(k.origin) > 6 else "") if k else ""
            sched = schedules.get(n, {})
            knobs = ", ".join(f"{a}={b}" for a, b in sched.items() if a in ("impl", "parallel", "window", "opt"))
            shape = "x".join(str(a.extent) for a in k.outer) if k else ""
            print(f"  {n:24s} {ms:8.3f} ms {100 * ms / s:5.1f}%  (wall {both[n][0]:.3f} ms, {rate})  {k.kind if k else '':11s} "
                  f"[{shape}] {origin}"
                  + (f"  ({knobs})" if knobs else ""))
    print(f"\nall graphs: {total:.3f} ms of xbench programs per call")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload")
    p.add_argument("--size", default="bench", choices=("tiny", "small", "bench"))
    p.add_argument("--precision", default="float32", choices=("float32", "bfloat16"))
    p.add_argument("--repeats", type=int, default=25)
    p.add_argument("--top", type=int, default=12)
    a = p.parse_args(argv)
    profile(a.workload, a.size, a.repeats, a.top, a.precision)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Peak activation memory of a training step, float32 against bfloat16 autocast.

Measured on one warm step's forward and backward (the optimizer's update excluded), above what was allocated
before it (weights, their gradients — zeroed in place, not freed — and optimizer state):

- **torch's allocator**: the profiler's memory records (`profile_memory=True`), each allocation and free with the
  total allocated after it; the peak of that total above its value when the step began.
- **xbench's allocator**: the cpu backend's results and temporaries are numpy arrays (blocks of its host pool,
  small arrays from numpy), which numpy reports to `tracemalloc`; the peak of the traced total. The pool keeps
  freed blocks for reuse, which would hide a step's allocations, so it is emptied and keeps none during the
  measured step (`measure_here`: the suite measures the runs it has just timed; `in_child`: a child process
  with the pool's cache off, `XBENCH_HOST_POOL_MB=0`). An xbench step's peak is the two added (an upper bound: the two
  allocators need not peak at the same moment; torch's share is the glue around xbench's programs).
- **saved for backward**: the distinct storages autograd keeps between forward and backward (its saved-tensor
  hooks), other than the weights and inputs: the activations themselves, the same measure for every engine.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tracemalloc

import torch

from .engines import Run, autocast
from .workloads import WORKLOADS, build, dynamo_settings


def _allocation_peak(prof) -> int:
    """The profiled region's peak of torch's cpu allocations, above what was allocated when it began. The
    profiler's running total counts every allocation made while any profile was on, so what an earlier
    profiled step left alive is in it from the start."""
    from torch._C._profiler import _EventType

    def walk(events):
        for e in events:
            yield e
            yield from walk(e.children)
    allocs = sorted((e for e in walk(prof.profiler.kineto_results.experimental_event_tree())
                     if e.tag == _EventType.Allocation and str(e.extra_fields.device) == "cpu"),
                    key=lambda e: e.start_time_ns)
    if not allocs:
        return 0
    base = int(allocs[0].extra_fields.total_allocated) - int(allocs[0].extra_fields.alloc_size)
    return max(int(e.extra_fields.total_allocated) for e in allocs) - base


def measure(run: Run) -> dict:
    """One warm training step's forward and backward of `run` (already stepped at least once)."""
    from torch.profiler import ProfilerActivity, profile
    # kineto's default log level writes two lines to stderr per profile, through the suite's progress line
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    before = {p.untyped_storage().data_ptr() for p in run.base.parameters()}
    before |= {v.untyped_storage().data_ptr() for v in run.args.values() if isinstance(v, torch.Tensor)}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor):
        s = t.untyped_storage()
        if s.data_ptr() not in before:
            saved[s.data_ptr()] = s.nbytes()
        return t

    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    try:
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast(run.precision):
                out = run.compiled(**run.args)
            out.loss.backward()
        numpy_peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    run.opt.zero_grad(set_to_none=False)
    torch_peak = _allocation_peak(prof)
    peak = torch_peak + (numpy_peak if run.engine == "xbench" else 0)
    return {"engine": run.engine, "precision": run.precision, "saved_bytes": sum(saved.values()),
            "torch_peak_bytes": torch_peak, "numpy_peak_bytes": numpy_peak, "peak_bytes": peak}


def measure_here(run: Run) -> dict:
    """`measure` in this process: xbench's host pool emptied first and keeping no freed block during the step."""
    from ..backends.cpu.runtime import POOL
    POOL.clear()
    limit, POOL.limit = POOL.limit, 0
    try:
        return measure(run)
    finally:
        POOL.limit = limit


def measure_workload(name: str, size: str, engines=("eager", "xbench"), precisions=("float32", "bfloat16")) -> list:
    w = WORKLOADS[name]
    if w.mode != "train":
        return []
    model, batch = build(name, size)
    out = []
    with dynamo_settings(w):
        for precision in precisions:
            for engine in engines:
                run = Run(w, engine, precision, copy.deepcopy(model), batch, size)
                run.step()
                run.step()
                out.append({"workload": name, "size": size, **measure(run)})
    return out


def in_child(names: list[str], size: str, engines=("eager", "xbench"), timeout: float = 1800) -> list[dict]:
    """`measure_workload` for each name in a child process with xbench's pool cache off (see the docstring)."""
    env = dict(os.environ, XBENCH_HOST_POOL_MB="0")
    cmd = [sys.executable, "-m", "xbench.suite.memory", "--size", size, "--engines", ",".join(engines),
           ",".join(names)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"the memory measurement failed ({' '.join(cmd)}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m xbench.suite.memory", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workloads")
    p.add_argument("--size", default="tiny")
    p.add_argument("--engines", default="eager,xbench")
    args = p.parse_args(argv)
    rows = []
    for name in args.workloads.split(","):
        rows += measure_workload(name, args.size, tuple(args.engines.split(",")))
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

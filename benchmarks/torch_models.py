"""Real models through the torch bridge against torch eager and torch.compile (Inductor), in one process.

For each model: the first call's compile time (a training step, then an inference call, each from empty
caches: xbench's and Inductor's), then training steps (forward, backward, SGD) and inference calls timed
alternately between the three, medians with their spread; then a second process that builds the same model and
makes its first xbench call from the caches the first filled (Dynamo's own capture time shown apart).

    python benchmarks/torch_models.py [--models bert,resnet] [--size small] [--repeats 15]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

MODELS = ["bert", "gpt2", "vit", "resnet", "mobilenet_v2", "dlrm"]


def _step(model, batch, opt):
    out = model(**batch)
    out.loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def _infer(model, batch):
    with torch.no_grad():
        model(**batch)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _spread(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4) if len(xs) >= 4 else [min(xs), 0, max(xs)]
    return f"{statistics.median(xs) * 1e3:8.2f} ms  [{q[0] * 1e3:.2f}-{q[2] * 1e3:.2f}]"


def warm_start(name: str, size: str) -> dict:
    """Run in a second process: the first xbench training step from the caches, split into Dynamo/AOT capture
    and xbench's own work (probe, trace, lowering, loading compiled code)."""
    import xbench.torch as xt
    from xbench.suite.workloads import build
    model, batch = build(name, size)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    t0 = time.perf_counter()
    with xt.recording() as session:
        _step(torch.compile(model, backend="xbench"), batch, opt)
    total = time.perf_counter() - t0
    own = sum(g.probe_ms for g in session.graphs) + sum(c["trace_ms"] + c["compile_ms"] for g in session.graphs
                                                        for p in g.partitions for c in p.compiles)
    hits = all(c["cache_hit"] for g in session.graphs for p in g.partitions for c in p.compiles)
    return {"total_s": total, "xbench_s": own / 1e3, "capture_s": total - own / 1e3, "all_from_cache": hits}


def bench(name: str, size: str, repeats: int, inductor: bool) -> dict:
    import xbench.torch as xt
    from xbench.suite.workloads import build
    base, batch = build(name, size)
    copies = {"eager": base, "xbench": copy.deepcopy(base)}
    if inductor:
        copies["inductor"] = copy.deepcopy(base)
    recording = xt.recording()
    session = recording.__enter__()                 # every graph the xbench copy compiles, to count its calls
    compiled = {"eager": copies["eager"], "xbench": torch.compile(copies["xbench"], backend="xbench")}
    if inductor:
        compiled["inductor"] = torch.compile(copies["inductor"])
    opts = {k: torch.optim.SGD(m.parameters(), lr=1e-3) for k, m in copies.items()}
    first = {k: _timed(lambda k=k: _step(compiled[k], batch, opts[k])) for k in compiled}
    for m in copies.values():
        m.eval()
    first_inf = {k: _timed(lambda k=k: _infer(compiled[k], batch)) for k in compiled}
    times: dict[str, dict[str, list[float]]] = {"train": {k: [] for k in compiled}, "infer": {k: [] for k in compiled}}
    for mode in ("train", "infer"):
        for m in copies.values():
            m.train(mode == "train")
        for k in compiled:                                           # one warm call each before timing
            _step(compiled[k], batch, opts[k]) if mode == "train" else _infer(compiled[k], batch)
        for _ in range(repeats):
            for k in compiled:                                       # alternating: drift hits all alike
                fn = (lambda k=k: _step(compiled[k], batch, opts[k])) if mode == "train" else \
                    (lambda k=k: _infer(compiled[k], batch))
                before = _xbench_calls(session) if k == "xbench" else 0
                times[mode][k].append(_timed(fn))
                if k == "xbench" and _xbench_calls(session) == before:
                    raise RuntimeError(f"{name} {mode}: the xbench model ran no xbench operator (Dynamo fell back)")
    recording.__exit__(None, None, None)
    return {"first_train_s": first, "first_infer_s": first_inf, "times": times}


def _xbench_calls(session) -> int:
    return sum(p.calls for g in session.graphs for p in g.partitions)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--size", default="small", choices=("tiny", "small", "bench"))
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--no-inductor", action="store_true")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--warm-start", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.warm_start:
        print(json.dumps(warm_start(args.warm_start, args.size)))
        return 0
    # three copies of one model, each in training and inference, share Dynamo's per-function cache of graphs
    torch._dynamo.config.recompile_limit = 64
    torch._dynamo.config.accumulated_recompile_limit = 1024
    caches = tempfile.mkdtemp(prefix="xbench-bench-")
    os.environ.setdefault("XBENCH_CACHE_DIR", os.path.join(caches, "xbench"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(caches, "inductor")   # Inductor starts cold too
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, size {args.size}, "
          f"{args.repeats} alternating repeats; caches in {caches}")
    results = {}
    for name in args.models.split(","):
        r = bench(name, args.size, args.repeats, not args.no_inductor)
        out = subprocess.run([sys.executable, __file__, "--warm-start", name, "--size", args.size],
                             capture_output=True, text=True, env=dict(os.environ), check=True)
        r["warm"] = json.loads(out.stdout.strip().splitlines()[-1])
        results[name] = r
        print(f"\n{name} ({args.size})")
        for mode in ("train", "infer"):
            t = r["times"][mode]
            line = "  ".join(f"{k} {_spread(v)}" for k, v in t.items())
            e = statistics.median(t["eager"])
            ratios = ", ".join(f"{statistics.median(v) and e / statistics.median(v):.2f}x eager"
                               + (f" / {statistics.median(t['inductor']) / statistics.median(v):.2f}x inductor"
                                  if "inductor" in t else "") for k, v in t.items() if k == "xbench")
            print(f"  {mode:5s}  {line}\n         xbench: {ratios}")
        fmt = ", ".join(f"{k} {v:.1f} s" for k, v in r["first_train_s"].items() if k != "eager")
        fmt_i = ", ".join(f"{k} {v:.1f} s" for k, v in r["first_infer_s"].items() if k != "eager")
        w = r["warm"]
        print(f"  first call, cold caches: training step {fmt}; inference {fmt_i}")
        print(f"  second process, first training step: {w['total_s']:.2f} s = Dynamo/AOT capture "
              f"{w['capture_s']:.2f} s + xbench {w['xbench_s']:.2f} s ({'all' if w['all_from_cache'] else 'not all'}"
              f" from the cache)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

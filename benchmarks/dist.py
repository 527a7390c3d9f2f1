"""Distributed measurements on this machine (gloo over loopback): the alpha-beta calibration with held-out
sizes, the hidden-communication fraction on the BERT-like and DLRM-like workloads (and predicted for the
cluster files), step times per communication hook, the full accuracy gate, recovery times, and the
parallel-strategy search. Medians and spread ((max - min) / median) everywhere; configurations alternate.

    .venv/bin/python benchmarks/dist.py [--quick] [--only calibrate,overlap,hooks,gate,recovery,search]

On 2 cores, 4 processes are oversubscribed: read 4-rank times as what they are. Nothing here is asserted.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time

SECTIONS = ("calibrate", "overlap", "hooks", "gate", "recovery", "search")


def _spread(v: list[float]) -> float:
    m = statistics.median(v)
    return (max(v) - min(v)) / m if m > 0 else 0.0


def calibrate_section(quick: bool) -> None:
    from xbench.dist.calibrate import calibrate

    for world in (2, 4):
        fit, rows, _ = calibrate(world, repeats=5 if quick else 15, save=False)
        print(f"\n## gloo over loopback, {world} ranks: alpha {fit.alpha * 1e6:.1f} us per step, bandwidth "
              f"{fit.bandwidth / 1e9:.2f} GB/s (fitted on {len(fit.fit_sizes)} sizes, RMS relative error "
              f"{fit.residual:.0%})")
        print(f"{'collective':<11s} {'bytes':>10s} {'measured':>11s} {'spread':>7s} {'predicted':>11s} {'error':>7s}")
        for r in rows:
            print(f"{r.get('collective', 'allreduce'):<11s} {r['bytes']:>10d} {r['measured_s'] * 1e3:>9.3f}ms "
                  f"{r['spread']:>7.0%} {r['predicted_s'] * 1e3:>9.3f}ms {r['error']:>+7.0%}")
        held = [abs(r["error"]) for r in rows if "collective" not in r]
        print(f"held-out AllReduce sizes: median |error| {statistics.median(held):.0%}, max {max(held):.0%}")


def overlap_section(quick: bool) -> None:
    from xbench.dist.launch import run
    from xbench.dist.overlap import measure_job
    from xbench.dist.predict import predict_step
    from xbench.dist.topology import Topology

    print("\n## hidden communication, measured (2 gloo ranks, bucket cap 0.25 MB)")
    print(f"{'workload':<9s} {'params':>9s} {'buckets':>7s} {'compute':>15s} {'comm alone':>15s} {'overlapped':>15s} "
          f"{'blocking':>15s} {'hidden':>7s} {'timeline':>8s} {'control':>7s} {'sim':>5s}")
    for w in ("bert", "dlrm"):
        r = run(measure_job, 2, args=(w, 6 if quick else 20), timeout=900)[0]
        med, sp = r["median_s"], r["spread"]
        cells = " ".join(f"{med[k] * 1e3:>8.2f}ms ±{sp[k]:>4.0%}" for k in ("compute", "communication", "overlapped",
                                                                             "blocking"))
        print(f"{w:<9s} {r['params']:>9d} {len(r['buckets']):>7d} {cells} {r['hidden_measured']:>7.0%} "
              f"{r['hidden_timeline']:>8.0%} {r['hidden_blocking']:>7.0%} {r['hidden_predicted']:>5.0%}")
    print("hidden = (compute + comm alone - overlapped) / comm alone; timeline: 1 - comm still running after the last "
          "bucket was produced / comm alone; control: hidden for a hook that waits (nothing can hide); sim: the "
          "timeline simulator fed with the measured bucket-ready and per-bucket times")
    print("\n## hidden communication, predicted for the cluster files (bert_base, dlrm)")
    for c in ("dgx-a100", "dgx-h100", "atlas-800t-a2", "hetero-h100-910b"):
        for n in (8, 128, 1024):
            t = Topology.from_cluster(c, accelerators=n)
            cells = []
            for m in ("bert_base", "dlrm"):
                s = predict_step(m, t)
                cells.append(f"{m} {s.hidden_fraction:>4.0%} of {s.comm_s * 1e3:6.2f} ms")
            print(f"  {c:<17s} x{n:<5d} " + "   ".join(cells))


def hooks_job(rank: int, world: int, rounds: int) -> dict:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from xbench.dist import workloads as W
    from xbench.dist.compress import CompressionState, compression_hook, phase_groups
    from xbench.dist.hier import HierarchicalAllReduce, flat_allreduce_hook, hierarchical_hook
    from xbench.dist.topology import Topology

    topo = Topology.detect(ranks_per_node=2)
    flat_group = dist.new_group(list(range(world)))
    hier = HierarchicalAllReduce(topo, mode="hier")
    groups = phase_groups()
    configs = {"DDP default": None, "flat async": (flat_group, flat_allreduce_hook),
               "hierarchical": (hier, hierarchical_hook)}
    for s, f in (("fp16", "two-phase"), ("int8", "two-phase"), ("int4", "two-phase"), ("int4", "all-gather")):
        configs[f"{s} {f}"] = (CompressionState(s, f, groups=groups), compression_hook)
    data = W.bert_data(1024)
    models = {}
    for name, hook in configs.items():
        torch.manual_seed(0)
        m = DDP(W.bert_like(hidden=128, layers=2, ffn=512), bucket_cap_mb=1)
        if hook is not None:
            m.register_comm_hook(*hook)
        models[name] = (m, torch.optim.SGD(m.parameters(), lr=1e-3))
    g = torch.Generator().manual_seed(rank)
    times = {k: [] for k in configs}
    for r in range(rounds + 2):
        order = list(configs) if r % 2 == 0 else list(configs)[::-1]
        for name in order:
            m, opt = models[name]
            x, y = data.batch(torch.randint(0, len(data), (16,), generator=g))
            dist.barrier()
            t0 = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(*x), y).backward()
            opt.step()
            if r >= 2:
                times[name].append(time.perf_counter() - t0)
    params = sum(p.numel() for p in models["DDP default"][0].parameters())
    return {"times": times, "params": params}


def hooks_section(quick: bool) -> None:
    from xbench.dist.launch import run

    r = run(hooks_job, 4, args=(4 if quick else 12,), ranks_per_node=2, timeout=1200)[0]
    print(f"\n## step time per communication hook: BERT-like ({r['params']} parameters), 4 gloo ranks as 2 x 2, "
          "batch 16 per rank")
    base = statistics.median(r["times"]["DDP default"])
    for name, v in r["times"].items():
        print(f"  {name:<20s} {statistics.median(v) * 1e3:8.2f} ms  ±{_spread(v):4.0%}  "
              f"{statistics.median(v) / base:5.2f}x of DDP's default")


def gate_section(quick: bool) -> None:
    from xbench.dist.gate import run_gate

    for seed in ((0,) if quick else (0, 1, 2)):
        r = run_gate(100 if quick else 400, seed=seed)         # 400: every seed past the knee of its curve
        print(f"\n## accuracy gate, seed {seed}\n" + r.table())


def recovery_section(quick: bool) -> None:
    from xbench.dist.recovery import run_job

    reps = []
    for _ in range(1 if quick else 3):
        with tempfile.TemporaryDirectory() as d:
            rep = run_job(d, steps=12, every=4, kill_rank=1, kill_at=6, timeout=300)
            if rep.returncode:
                print(rep.output)
            reps.append(rep.recovery)
    print(f"\n## recovery under torchrun --max-restarts (2 ranks, SIGKILL on rank 1), {len(reps)} runs")
    for k in ("detection_s", "restart_s", "spawn_s", "startup_s", "load_s", "lost_steps", "lost_s", "total_s"):
        v = [r[k] for r in reps]
        unit = "" if k == "lost_steps" else " s"
        print(f"  {k:<12s} median {statistics.median(v):.3f}{unit}  (min {min(v):.3f}, max {max(v):.3f})")


def search_section(quick: bool) -> None:
    from xbench.dist.search import Space, compare, format_compare

    for model, cluster, n in (("gpt-13b", "dgx-h100", 256), ("gpt-13b", "atlas-800t-a2", 128)):
        space = Space.for_model(model, cluster, n)
        print("\n## " + format_compare(compare(space, seeds=(0, 1, 2) if quick else (0, 1, 2, 3, 4)), space))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help=f"comma-separated sections of {','.join(SECTIONS)}")
    a = ap.parse_args()
    chosen = a.only.split(",") if a.only else list(SECTIONS)
    for s in chosen:
        if s not in SECTIONS:
            print(f"unknown section {s!r}; choose from {', '.join(SECTIONS)}", file=sys.stderr)
            return 2
    for s in chosen:
        t0 = time.time()
        globals()[f"{s}_section"](a.quick)
        print(f"({s}: {time.time() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

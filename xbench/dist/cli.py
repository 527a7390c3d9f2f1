"""`python -m xbench dist <command>`: predict (the suite's models on the cluster files), search (parallel
strategies for a transformer), calibrate (alpha-beta of gloo on loopback), gate (the int4 accuracy gate),
clusters (the cluster files with their numbers and sources)."""
from __future__ import annotations

import argparse
import json
import sys


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x)


def _names(text: str | None) -> list[str] | None:
    return [x for x in text.split(",") if x] if text else None


def _predict(a: argparse.Namespace) -> int:
    from . import predict

    if a.json:
        rows = predict.table(_names(a.models), _names(a.clusters), _ints(a.accelerators))
        with open(a.json, "w") as f:
            json.dump({"rows": rows, "claims": predict.claims()}, f, indent=1)
    print(predict.main_predict(_names(a.clusters), _ints(a.accelerators), _names(a.models), not a.no_claims))
    return 0


def _search(a: argparse.Namespace) -> int:
    from .search import Space, compare, format_compare

    space = Space.for_model(a.model, a.cluster, a.accelerators)
    print(format_compare(compare(space, seeds=tuple(range(a.seeds))), space))
    return 0


def _calibrate(a: argparse.Namespace) -> int:
    from .calibrate import calibrate

    fit, rows, _ = calibrate(a.world, repeats=a.repeats)
    print(f"gloo on loopback, {a.world} ranks: alpha {fit.alpha * 1e6:.1f} us per step, bandwidth "
          f"{fit.bandwidth / 1e9:.2f} GB/s (fit on {len(fit.fit_sizes)} sizes, RMS relative error {fit.residual:.0%})")
    print(f"{'collective':<11s} {'bytes':>10s} {'measured':>10s} {'spread':>7s} {'predicted':>10s} {'error':>7s}")
    for r in rows:
        print(f"{r.get('collective', 'allreduce'):<11s} {r['bytes']:>10d} {r['measured_s'] * 1e3:>8.3f}ms "
              f"{r['spread']:>7.0%} {r['predicted_s'] * 1e3:>8.3f}ms {r['error']:>+7.0%}")
    return 0


def _gate(a: argparse.Namespace) -> int:
    from .gate import run_gate

    r = run_gate(a.steps)
    print(r.table())
    return 0 if r.passed else 1


def _clusters(a: argparse.Namespace) -> int:
    from .topology import Topology, list_clusters

    for name in _names(a.names) or list_clusters():
        print(Topology.from_cluster(name, accelerators=a.accelerators).describe())
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="xbench dist", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("predict", help="predicted step time, communication efficiency and the seeds' claims")
    q.add_argument("--clusters", help="comma-separated cluster files (default: all)")
    q.add_argument("--accelerators", default="8,64,128,512,1024")
    q.add_argument("--models", help="comma-separated models of xbench/dist/models.toml (default: all)")
    q.add_argument("--json", help="also write the rows and claims to this file")
    q.add_argument("--no-claims", action="store_true")
    q.set_defaults(fn=_predict)
    q = sub.add_parser("search", help="exhaustive, random and RL parallel-strategy search")
    q.add_argument("--model", default="gpt-13b")
    q.add_argument("--cluster", default="dgx-h100")
    q.add_argument("--accelerators", type=int, default=256)
    q.add_argument("--seeds", type=int, default=5)
    q.set_defaults(fn=_search)
    q = sub.add_parser("calibrate", help="fit alpha and beta of gloo on loopback; predicted vs measured")
    q.add_argument("--world", type=int, default=2)
    q.add_argument("--repeats", type=int, default=15)
    q.set_defaults(fn=_calibrate)
    q = sub.add_parser("gate", help="the int4 accuracy gate (DLRM-like, 2 gloo processes)")
    q.add_argument("--steps", type=int, default=200)
    q.set_defaults(fn=_gate)
    q = sub.add_parser("clusters", help="the cluster files, their numbers and sources")
    q.add_argument("names", nargs="?")
    q.add_argument("--accelerators", type=int, default=None)
    q.set_defaults(fn=_clusters)
    a = p.parse_args(argv)
    return a.fn(a)


if __name__ == "__main__":
    sys.exit(main())

"""`python -m xbench suite`: the cross-platform benchmark suite.

    python -m xbench suite                          the full suite (bench sizes; about half an hour here)
    python -m xbench suite --quick                  tiny sizes, eager against xbench, float32 (a minute or two)
    python -m xbench suite --only bert,dlrm --targets h100,ascend-910b --json out.json --html out.html
    python -m xbench suite --merge a.json b.json --json all.json --html all.html     (runs from other machines)

Prints a progress line, then the tables (measured, predicted, the accuracy gate, memory, variable-length BERT)
and the issue's targets; `--json` writes the results in the documented schema (docs/suite.md), `--html` a report
with the cross-platform chart. Exits 1 when xbench or the suite failed somewhere (the tables list where), 0 when
everything ran or only torch itself could not run a peer engine on this machine (listed apart).
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import replace
from pathlib import Path

from . import results

# A process has one OpenMP runtime (torch's libgomp, loaded here; numba's parallel loops and torch's MKL, which
# xbench's GEMMs call, bind to it), which reads OMP_WAIT_POLICY once, when it loads. torch loads it here with the
# user's settings (libgomp's default: idle threads spin a while, then sleep), as in any script that imports torch
# first: eager, Inductor and xbench run as their users run them. With PASSIVE, eager's parallel regions each waited
# for a sleeping thread to wake, and its steps took 1.6x as long (median of the 24 runs; 2.8x on ResNet-50).
results.torch_wait_policy = os.environ.get("OMP_WAIT_POLICY", "") if "torch" not in sys.modules else None
import torch  # noqa: E402,F401

from .engines import ENGINES, PRECISIONS  # noqa: E402
from .predict import REFERENCE, TARGETS  # noqa: E402


def _list(text: str) -> tuple:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m xbench suite", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny sizes, eager against xbench, float32, 3 repeats")
    p.add_argument("--only", type=_list, default=(), help="workloads, comma-separated (default: all twelve)")
    p.add_argument("--targets", type=_list, default=TARGETS, help=f"prediction targets (default {','.join(TARGETS)})")
    p.add_argument("--reference", default=REFERENCE, help=f"the platform ratios are taken to (default {REFERENCE})")
    p.add_argument("--size", choices=("tiny", "small", "bench"), help="workload size (default bench; quick: tiny)")
    p.add_argument("--engines", type=_list, help=f"measured engines (default {','.join(ENGINES)})")
    p.add_argument("--precisions", type=_list, help=f"default {','.join(PRECISIONS)}")
    p.add_argument("--repeats", type=int, help="alternating repeats per run (default 10; quick: 3)")
    p.add_argument("--budget", type=float, help="seconds of timed samples per run past which it stops at 5 "
                   "samples (default 30; 0: every run takes all its repeats)")
    p.add_argument("--gate", type=_list, help="gate backends (default cpu,cuda,ascend; quick: cpu); 'none' skips")
    p.add_argument("--gate-steps", type=int, help="loss-curve steps of the gate on every backend (default 10 on cpu "
                   "and a GPU, 2 on the CUDA simulator and the Ascend twin)")
    p.add_argument("--no-memory", action="store_true", help="skip the peak activation memory measurement")
    p.add_argument("--no-varlen", action="store_true", help="skip the variable-length BERT stream")
    p.add_argument("--requests", type=int, help="requests in the variable-length stream (default 200; quick: 20)")
    p.add_argument("--no-bisect", action="store_true", help="do not bisect gate failures")
    p.add_argument("--no-published", action="store_true",
                   help="skip lowering and predicting the published sizes (ResNet-50 at 224 px, BERT-base)")
    p.add_argument("--cold", action="store_true", help="fresh compile caches (xbench's and Inductor's)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--html", help="write an HTML report here")
    p.add_argument("--merge", nargs="+", metavar="FILE", help="merge result files instead of running")
    p.add_argument("--no-progress", action="store_true")
    return p


def options_from(args: argparse.Namespace):
    from .runner import SuiteOptions, quick
    o = quick(SuiteOptions()) if args.quick else SuiteOptions()
    changes: dict = {"only": args.only, "targets": args.targets, "reference": args.reference}
    for name, value in (("size", args.size), ("engines", args.engines), ("precisions", args.precisions),
                        ("repeats", args.repeats), ("varlen_requests", args.requests)):
        if value is not None:
            changes[name] = value
    if args.budget is not None:
        changes["budget_s"] = args.budget or None
    if args.gate is not None:
        changes["gate_backends"] = () if args.gate == ("none",) else args.gate
    if args.gate_steps is not None:
        changes["gate_steps"] = {b: args.gate_steps for b in ("cpu", "cuda", "ascend")}
    if args.no_memory:
        changes["memory"] = False
    if args.no_varlen:
        changes["varlen"] = False
    if args.no_bisect:
        changes["bisect"] = False
    if args.no_published:
        changes["published"] = False
    if args.cold:
        changes["cold"] = True
    return replace(o, **changes)


def main(argv: list[str] | None = None) -> int:
    from .report import html, table
    from .results import Results, merge
    args = parser().parse_args(argv)
    if args.merge:
        res = merge(*(Results.load(f) for f in args.merge))
    else:
        from .runner import run_suite
        try:
            options = options_from(args)
            options.workloads()
        except ValueError as exc:
            print(f"xbench suite: {exc}", file=sys.stderr)
            return 2
        command = "python -m xbench suite " + " ".join(shlex.quote(a) for a in (argv or []))
        res = run_suite(options, command=command.strip(), progress=not args.no_progress, save_to=args.json)
    print(table(res))
    if args.json:
        res.save(args.json)
        print(f"\nresults: {args.json}")
    if args.html:
        Path(args.html).write_text(html(res))
        print(f"report: {args.html}")
    return 1 if res.own_errors else 0        # torch failing a peer here is reported, not xbench's failure


if __name__ == "__main__":
    sys.exit(main())

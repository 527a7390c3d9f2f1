"""`python -m xbench fuzz`: differential fuzzing of the compiler from the command line."""
from __future__ import annotations

import argparse
import os
import sys

from .run import BACKENDS, CUDA_MAX_ELEMENTS, Fuzzer, operator_seed


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="xbench fuzz",
        description="Random well-typed operators run on the reference and every backend; a disagreement is "
                    "shrunk to a minimal operator and saved as a regression test.")
    p.add_argument("--minutes", type=float, default=5.0, help="how long to run (default 5)")
    p.add_argument("--count", type=int, default=None, help="stop after this many operators instead")
    p.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated (default cpu,cuda,ascend)")
    p.add_argument("--seed", type=int, default=0, help="operator i is generated from (seed, i)")
    p.add_argument("--start", type=int, default=0, help="the first operator's number")
    p.add_argument("--save", default="fuzz-findings", help="folder for the regression tests of findings")
    p.add_argument("--json", default=None, help="write the statistics and every finding to this JSON file")
    p.add_argument("--shrink-seconds", type=float, default=120.0, help="time to shrink each finding (0: none)")
    p.add_argument("--cuda-max-elements", type=int, default=CUDA_MAX_ELEMENTS,
                   help="largest value the cuda simulator is given (it runs every thread in Python)")
    p.add_argument("--nice", type=int, default=0, help="niceness of the process running the backends")
    p.add_argument("--show", type=int, metavar="I", default=None,
                   help="print operator I of --seed (its source and inputs) and exit")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    from .. import backends as registry
    unknown = [b for b in backends if b not in registry.names()]
    if unknown:
        print(f"xbench fuzz: unknown backend(s) {', '.join(unknown)}; installed: {', '.join(registry.names())}",
              file=sys.stderr)
        return 2
    if args.show is not None:
        import numpy as np

        from .gen import Generator
        prog = Generator(np.random.default_rng(args.seed)).program(operator_seed(args.seed, args.show))
        print(prog.source("code"))
        for i in prog.inputs:
            print(f"# {i.name} = {i.recipe.code()}")
        return 0
    fz = Fuzzer(backends, seed=args.seed, save=args.save, shrink_s=args.shrink_seconds, nice=args.nice,
                cuda_max_elements=args.cuda_max_elements, log=lambda s: print(s, flush=True))
    print(f"fuzzing {', '.join(backends)} against the reference for "
          + (f"{args.count} operators" if args.count else f"{args.minutes:g} min") + f" (seed {args.seed})",
          flush=True)
    try:
        fz.fuzz(minutes=None if args.count else args.minutes, count=args.count, start=args.start)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        fz.close()
    print()
    print(fz.summary())
    if args.json:
        fz.write_json(os.path.abspath(args.json))
    return 1 if any(not f.duplicate_of for f in fz.findings) else 0

"""`python -m xbench <command>`: demo (the quick-start story in a terminal), coverage (the library grid),
backends (what is installed and usable here), cache (where the caches live, and clearing them), fuzz
(differential fuzzing of the compiler), dist (distributed training: predictions, strategy search, calibration),
suite (the cross-platform benchmark suite)."""
from __future__ import annotations

import argparse
import shutil
import sys


def _demo(args) -> int:
    from .demo import main
    return main(quick=args.quick)


def _backends(args) -> int:
    from . import backends
    for name in backends.names():
        notes: list[str] = []
        try:
            be = backends.get(name)
            # doctor(): whether a default compile works (the tools it calls answer), beyond being installed
            ok, why, *rest = be.doctor() if hasattr(be, "doctor") else be.available()
            notes = list(rest[0]) if rest else []
        except Exception as exc:  # a broken plugin must not hide the others
            ok, why = False, f"{type(exc).__name__}: {exc}"
        print(f"{name:10s} {'ok ' if ok else 'no '} {why}")
        for note in notes:
            print(f"{'':14s} {note}")
    return 0


def _cache(args) -> int:
    from .config import cache_dir
    root = cache_dir()
    if args.clear:
        shutil.rmtree(root, ignore_errors=True)
        print(f"cleared {root}")
    else:
        print(root)
    return 0


def _coverage(args) -> int:
    try:
        from .library.coverage import main
    except ImportError:
        print("the coverage grid needs the library harness (xbench.library)", file=sys.stderr)
        return 2
    return main(args.rest)


def _fuzz(args) -> int:
    from .fuzz.cli import main
    return main(args.rest)


def _dist(args) -> int:
    from .dist.cli import main
    return main(args.rest)


def _suite(args) -> int:
    from .suite.cli import main
    return main(args.rest)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["coverage"]:            # its options go to the grid's own parser, untouched
        return _coverage(argparse.Namespace(rest=argv[1:]))
    if argv[:1] == ["fuzz"]:
        return _fuzz(argparse.Namespace(rest=argv[1:]))
    if argv[:1] == ["dist"]:
        return _dist(argparse.Namespace(rest=argv[1:]))
    if argv[:1] == ["suite"]:
        return _suite(argparse.Namespace(rest=argv[1:]))
    parser = argparse.ArgumentParser(prog="xbench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="the quick-start story, printed in the terminal")
    p.add_argument("--quick", action="store_true", help="small sizes, fewer steps")
    p.set_defaults(fn=_demo)
    p = sub.add_parser("backends", help="installed backends and whether they run here")
    p.set_defaults(fn=_backends)
    p = sub.add_parser("cache", help="print the cache directory (or --clear it)")
    p.add_argument("--clear", action="store_true")
    p.set_defaults(fn=_cache)
    p = sub.add_parser("coverage", help="operator x backend x dtype verification grid")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(fn=_coverage)
    p = sub.add_parser("fuzz", help="random operators on every backend against the reference (--help for more)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(fn=_fuzz)
    p = sub.add_parser("dist", help="distributed training: predict, search, calibrate, gate (--help for more)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(fn=_dist)
    p = sub.add_parser("suite", help="the benchmark suite: 12 workloads measured, predicted, gated (--help for more)")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(fn=_suite)
    args = parser.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())

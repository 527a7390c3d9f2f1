"""A user's session, run as a child process by the fault tests: compile and run a few operators on each backend
asked for (optionally tuning them), check every result against numpy, and print one JSON line per step.

    python child.py --backends cpu,ascend,cuda --seeds 0,1 [--tune]

Exit status 0 when every step gave the right values; a step that raised prints its error. A process killed by a
signal (SIGBUS, SIGSEGV from a damaged cache entry) shows as a negative status in the parent.
"""

import argparse
import json
import sys
import traceback

import numpy as np


def say(**kw) -> None:
    print(json.dumps(kw), flush=True)


def operators(seed: int):
    import xbench as xb
    from xbench import Tensor

    c = 1.0 + seed                       # a constant of its own: each seed is a program of its own

    @xb.tensor_op
    def affine(x: Tensor["N", "D"]):
        return x * c + 1.0

    @xb.tensor_op
    def softmax(x: Tensor["N", "D"]):
        e = xb.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def np_softmax(x):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    return [(f"affine{seed}", affine, lambda x: x * np.float32(c) + 1), (f"softmax{seed}", softmax, np_softmax)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", default="cpu")
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--tune", action="store_true")
    args = ap.parse_args()
    import xbench as xb
    xb.set_log_level("INFO")
    say(started=True)
    bad = 0
    x = np.random.default_rng(0).standard_normal((8, 24)).astype(np.float32)
    for seed in (int(s) for s in args.seeds.split(",")):
        for name, op, ref in operators(seed):
            for backend in args.backends.split(","):
                say(step=f"{name}/{backend}")
                try:
                    got = op.run(x, backend=backend)
                    ok = bool(np.allclose(got, ref(x), rtol=1e-4, atol=1e-6))
                    say(op=name, backend=backend, ok=ok)
                except Exception as exc:   # reported, and the session goes on with the next step
                    ok = False
                    say(op=name, backend=backend, ok=False, error=f"{type(exc).__name__}: {exc}",
                        trace=traceback.format_exc()[-1500:])
                bad += not ok
            if args.tune:
                say(step=f"tune {name}")
                try:
                    xb.tune(op, x, budget=3, progress=False)
                    got = op.run(x)          # with the tuned schedule, from the database
                    ok = bool(np.allclose(got, ref(x), rtol=1e-4, atol=1e-6))
                    say(op=name, backend="cpu (tuned)", ok=ok)
                except Exception as exc:
                    ok = False
                    say(op=name, backend="tune", ok=False, error=f"{type(exc).__name__}: {exc}")
                bad += not ok
    say(done=True, bad=bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""The fuzzer in CI: a fixed seed, a fixed number of random operators on every backend, no finding allowed.

A failure names each operator; `python -m xbench fuzz --seed 18 --start I --count 1` reproduces operator I,
shrinks it and saves it as a regression test. Bounded in wall time too (the machine running the suite is shared
by other test files): operators not reached by then are not run, and the test says how many were.
"""
import time

from xbench.fuzz.gen import Options
from xbench.fuzz.run import Fuzzer

SEED = 18
COUNT = 60
SECONDS = 150


def test_random_operators_agree_with_the_reference_on_every_backend():
    lines = []
    fz = Fuzzer(("cpu", "cuda", "ascend"), seed=SEED, save=None, shrink_s=0, log=lines.append,
                options=Options(big=0.05))
    t0 = time.monotonic()
    try:
        for i in range(COUNT):
            if time.monotonic() - t0 > SECONDS:
                break
            fz.one(i)
    finally:
        fz.close()
        fz.stats.seconds = time.monotonic() - t0
    s = fz.stats
    print(fz.summary())
    assert s.operators + s.rejected >= 10, f"only {s.operators} operators ran in {SECONDS} s"
    assert s.per_backend.get("ascend", {}).get("tried", 0) > 0 and s.per_backend.get("cuda", {}).get("tried", 0) > 0
    found = fz.findings
    assert not found, "\n".join(f"operator {f.operator}: {f.backend} {f.kind}: {f.message.splitlines()[0]}\n"
                                f"{f.source}" for f in found)

"""Sessions killed with SIGKILL at random points of their compiles (numba, g++, the precompiled header) and of
tuning (candidates, database writes) leave nothing that loads wrong: the next session runs every operator
right and the cache audits sound. The kill points are drawn from XBENCH_FAULT_SEED (printed on failure)."""
import random
import signal
import subprocess
import time

from .helpers import SEED, audit, child_cmd, child_env, explain, lines, results, run_child

ROUNDS = 4


def _kill_at_random(cache, rng, seeds: str) -> tuple[float, str]:
    """Start a session on `cache`, SIGKILL it a random time after xbench is imported; (delay, its last step)."""
    proc = subprocess.Popen(child_cmd("cpu,ascend", seeds, tune=True), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=child_env(cache))
    first = proc.stdout.readline()                          # {"started": true}: xbench imported
    assert "started" in first, first
    delay = rng.uniform(0.0, 5.0)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    steps = [d["step"] for d in lines(out) if "step" in d]
    return delay, steps[-1] if steps else "(before the first step)"


def test_sessions_killed_mid_compile_and_mid_tuning_leave_a_sound_cache(tmp_path):
    cache = tmp_path / "cache"
    rng = random.Random(f"{SEED}-kill")
    kills = []
    for r in range(ROUNDS):                                 # new programs each round: every kill lands in work
        kills.append(_kill_at_random(cache, rng, str(r)))
    where = f"seed {SEED}, killed at {[(round(d, 2), s) for d, s in kills]}"
    assert audit(cache) == [], where                       # no torn entry, whatever was interrupted
    # the user's work goes on: every operator of every killed session, compiled or loaded, right
    rc, out, err = run_child(cache, "cpu,ascend", ",".join(str(r) for r in range(ROUNDS)), tune=True)
    assert rc == 0, f"{where}\n{explain(rc, out, err)}"
    got = results(out)
    assert len(got) == ROUNDS * 2 * 3 and all(got.values()), where     # 2 operators on 2 backends, and tuned
    assert audit(cache) == [], where

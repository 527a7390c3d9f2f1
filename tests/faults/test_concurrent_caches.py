"""Sessions sharing one fresh cache at the same time (a notebook, a test run and a tuning script on one machine):
each gets right results, each Ascend library is built once (the others wait for it and load it), tuning
records from all of them land in one database, and the cache audits sound."""
import re
import sqlite3
import subprocess

from .helpers import audit, child_cmd, child_env, explain, lines, results

SESSIONS = 3


def test_concurrent_sessions_on_one_fresh_cache(tmp_path):
    cache = tmp_path / "cache"
    procs = [subprocess.Popen(child_cmd("cpu,ascend", "0", tune=i < 2), stdout=subprocess.PIPE,    # two tune
                              stderr=subprocess.PIPE, text=True, env=child_env(cache)) for i in range(SESSIONS)]
    done = [(p, *p.communicate(timeout=300)) for p in procs]
    built: dict[str, int] = {}
    for p, out, err in done:
        assert p.returncode == 0, explain(p.returncode, lines(out), err)
        got = results(lines(out))
        assert len(got) in (2 * 2, 2 * 3) and all(got.values()), got
        for name in re.findall(r"ascend twin: compiled (\S+\.so)", err):
            built[name] = built.get(name, 0) + 1
    libraries = sorted(p.name for p in (cache / "ascend").glob("*.so"))
    assert len(libraries) == 2 and sorted(built) == libraries         # affine and softmax
    assert set(built.values()) == {1}, built                          # built once, by whichever came first
    assert audit(cache) == []
    with sqlite3.connect(cache / "tune" / "tuning.sqlite") as c:
        assert c.execute("SELECT COUNT(*) FROM best").fetchone()[0] == 2    # one best per tuned kernel

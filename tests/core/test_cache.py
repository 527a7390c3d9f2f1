"""The compile cache: content-addressed files written atomically, reused across processes."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench.cache import atomic_write, digest, write_once


def test_atomic_write_leaves_nothing_behind_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "entry.py"
    atomic_write(target, "old = 1\n")

    def crash(src, dst):
        raise KeyboardInterrupt("killed mid-write")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, "new = 2\n" * 1000)
    monkeypatch.undo()
    assert target.read_text() == "old = 1\n"               # the old entry is intact
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.py"]   # no stray temporary


def test_write_once_keeps_an_identical_entry_and_heals_a_damaged_one(tmp_path):
    target = tmp_path / "k.py"
    assert write_once(target, "a = 1\n")
    mtime = target.stat().st_mtime_ns
    assert not write_once(target, "a = 1\n") and target.stat().st_mtime_ns == mtime
    target.write_text("a = 1\ngarbage(")                   # damaged by hand
    assert write_once(target, "a = 1\n") and target.read_text() == "a = 1\n"


def test_digest_is_stable_and_sensitive():
    assert digest("x", {"b": 1, "a": 2}) == digest("x", {"a": 2, "b": 1})
    assert digest("x", 1) != digest("x", 2)


def test_cache_key_covers_program_and_schedule(tmp_path, monkeypatch):
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path))

    @xb.tensor_op
    def scale(x: Tensor["N"]):
        return x * 3

    x = np.ones(1 << 21, np.float32)         # parallel by default (the cost model: 2^21 evaluations pay a launch)
    a = scale.compile("cpu", x)
    b = scale.compile("cpu", x, schedule={"k0_elementwise": {"parallel": False}})
    c = scale.compile("cpu", np.ones(7, np.float32))
    files = {a.resources["file"], b.resources["file"], c.resources["file"]}
    assert len(files) == 3 and all(os.path.dirname(f) == str(tmp_path / "cpu") for f in files)
    np.testing.assert_array_equal(b.run(x)[0], x * 3)


def test_a_damaged_cache_entry_is_rewritten_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path))

    @xb.tensor_op
    def plus_one(x: Tensor["N"]):
        return x + 1

    x = np.arange(5, dtype=np.float32)
    path = plus_one.compile("cpu", x).resources["file"]
    with open(path, "w") as f:
        f.write("def run(x):\n    return [x * 0]\n")      # what a torn or edited file could contain

    @xb.tensor_op
    def plus_one(x: Tensor["N"]):
        return x + 1

    code = textwrap.dedent("""
        import numpy as np, xbench as xb
        from xbench import Tensor
        @xb.tensor_op
        def plus_one(x: Tensor["N"]):
            return x + 1
        print(plus_one(np.arange(5, dtype=np.float32)).tolist())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "XBENCH_CACHE_DIR": str(tmp_path)}, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_second_process_loads_machine_code_from_cache(tmp_path):
    code = textwrap.dedent("""
        import json, time, numpy as np, xbench as xb
        x = np.random.rand(256, 512).astype(np.float32)
        xb.ops.softmax.lower(x)
        t0 = time.perf_counter()
        art = xb.ops.softmax.compile("cpu", x)
        ms = (time.perf_counter() - t0) * 1e3
        task = art.module._xb_task                      # the module's parallel loops, run as tasks
        print(json.dumps({"file_existed": art.cache_hit, "numba_cache_hits": task.cache_hits, "ms": ms}))
    """)
    env = {**os.environ, "XBENCH_CACHE_DIR": str(tmp_path)}
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                      check=True).stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert runs[0]["file_existed"] is False and runs[0]["numba_cache_hits"] == 0
    assert runs[1]["file_existed"] is True and runs[1]["numba_cache_hits"] >= 1

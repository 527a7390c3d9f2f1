"""A cache directory that cannot be used (a file, read-only, a full disk) gives a warning naming the problem and
the fix, and the session compiles into a temporary folder instead; writes that still fail are CacheErrors that
say why. Before: raw NotADirectoryError / PermissionError on every call, and "numba could not compile" on a
full disk."""
import os
import stat
import warnings

import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench.config import cache_root
from xbench.errors import CacheError, CacheWarning

from .helpers import explain, full_disk_prefix, read_only_prefix, results, run_child, small_files


def _scaled(k: float):
    @xb.tensor_op
    def scaled(x: Tensor["N"]):
        return x * k
    return scaled


@pytest.mark.parametrize("where", ["file", "below a file"])
def test_a_file_where_the_cache_should_be(tmp_path, monkeypatch, where):
    f = tmp_path / "not-a-folder"
    f.write_text("a file")
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(f if where == "file" else f / "xbench"))
    x = np.arange(4, dtype=np.float32)
    with pytest.warns(CacheWarning, match=r"is not usable \(a file stands where the folder should be\).*"
                                          r"XBENCH_CACHE_DIR") as rec:
        np.testing.assert_array_equal(_scaled(3.0)(x), x * 3)          # the work goes on
    assert rec[0].filename == __file__                                 # the warning points at the user's line
    assert f.read_text() == "a file" and cache_root() != f
    with warnings.catch_warnings():
        warnings.simplefilter("error")                                 # said once, not on every call
        np.testing.assert_array_equal(_scaled(4.0)(x), x * 4)


def test_a_read_only_cache(tmp_path):
    cache = tmp_path / "cache"
    rc, out, err = run_child(cache, "cpu")                             # a cache that was built, then frozen
    assert rc == 0, explain(rc, out, err)
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    prefix = read_only_prefix(cache)
    if prefix is None:                                                 # not root: permission bits do it
        for p in [cache, *cache.rglob("*")]:
            if p.is_dir():
                p.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        rc, out, err = run_child(cache, "cpu,ascend", "0,1", prefix=prefix)
    finally:
        for p in [cache, *cache.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
    assert rc == 0, explain(rc, out, err)
    assert all(results(out).values()) and len(results(out)) == 8
    assert "is not usable (it cannot be written" in err and "CacheWarning" in err
    assert "PermissionError" not in err and "Traceback" not in err
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == before


def test_a_full_disk(tmp_path):
    cache = tmp_path / "full"
    cache.mkdir()
    prefix = full_disk_prefix(cache)
    if prefix is None:     # no tmpfs to fill here: no file may grow past 2 KiB, so no folder is usable at all
        rc, out, err = run_child(cache, "cpu", preexec_fn=small_files())
        steps = [d for d in out if "ok" in d]
        assert steps and all(d["error"].startswith("CacheError: xbench: the cache directory") and
                             "no room" in d["error"] and "nor is a temporary folder" in d["error"]
                             for d in steps), explain(rc, out, err)
        return
    # a better place exists (the temporary folder): the session moves there and goes on
    rc, out, err = run_child(cache, "cpu,ascend", prefix=prefix)
    assert rc == 0, explain(rc, out, err)
    assert all(results(out).values()) and len(results(out)) == 4
    assert "is not usable (only 0 MiB free)" in err or "is not usable (it cannot be written: No space" in err
    # nowhere better (the temporary folder is on the full disk too): whatever does not fit fails with a
    # CacheError saying so and what to do, the rest runs; numba's own cache writes only cost keeping the code
    rc, out, err = run_child(cache, "cpu,ascend", prefix=prefix, TMPDIR=str(cache))
    steps = [d for d in out if "ok" in d]
    assert len(steps) == 4, explain(rc, out, err)
    for d in steps:
        assert d["ok"] or (d["error"].startswith("CacheError: xbench: cannot write") and
                           "No space left on device" in d["error"] and "XBENCH_CACHE_DIR" in d["error"]), d
    assert any(d["ok"] for d in steps) and not all(d["ok"] for d in steps)
    assert "numba could not compile" not in err + str(out)


def test_write_failures_are_cache_errors_that_say_why(tmp_path):
    from xbench.cache import atomic_write
    blocker = tmp_path / "f"
    blocker.write_text("x")
    with pytest.raises(CacheError, match=r"cannot write .*f/entry") as err:
        atomic_write(blocker / "entry", b"data")
    assert isinstance(err.value, OSError) and "XBENCH_CACHE_DIR" in err.value.hint
    assert str(err.value).startswith("xbench: cannot write")          # not OSError's "[Errno 20] ..."
    if os.geteuid() != 0:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        with pytest.raises(CacheError, match="Permission denied"):
            atomic_write(ro / "entry", b"data")

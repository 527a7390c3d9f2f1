"""Damaged cache entries of every kind are found on load and rebuilt: the next session runs, right, and leaves
the cache sound. Before: a truncated Ascend library killed every run with SIGBUS (flipped bytes: SIGSEGV), a
damaged tuning.sqlite failed every operator call, a damaged numba index, .pyc, .ptx or ptxas .json failed for
good."""
import importlib.util
import random
import signal
from pathlib import Path

import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench import cache as C

from .helpers import KINDS, SEED, audit, copy_cache, damage, entries, explain, results, run_child

BACKENDS = "cpu,ascend,cuda"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A cache holding an entry of every kind: the child compiled on every backend and tuned."""
    cache = tmp_path_factory.mktemp("built") / "cache"
    rc, out, err = run_child(cache, BACKENDS, tune=True)
    assert rc == 0, explain(rc, out, err)
    for module in entries(cache, "cpu module"):       # bytecode an older xbench (plain imports) left beside
        pyc = Path(importlib.util.cache_from_source(str(module)))
        pyc.parent.mkdir(exist_ok=True)
        pyc.write_bytes(importlib.util.MAGIC_NUMBER + b"\0" * 12 + b"\xe3" * 64)
    missing = [k for k in KINDS if not entries(cache, k)]
    assert not missing, f"the session left no {missing} entries to damage"
    assert audit(cache) == []
    return cache


@pytest.mark.parametrize("how", ["truncate or overwrite", "flip"])
def test_every_damaged_entry_is_rebuilt_and_the_session_goes_on(built, tmp_path, how):
    cache = copy_cache(built, tmp_path / "cache")
    rng = random.Random(f"{SEED}-{how}")
    damaged = {}
    for kind in KINDS:
        for i, p in enumerate(entries(cache, kind)):
            damage(p, how if how == "flip" else ("truncate", "garbage")[(i + len(kind)) % 2], rng)
            damaged[p] = (kind, p.read_bytes())
    assert {k for k, _ in damaged.values()} == set(KINDS)
    rc, out, err = run_child(cache, BACKENDS)         # its first call finds the tuning database damaged
    assert rc >= 0, f"killed by {signal.Signals(-rc).name} (seed {SEED})\n{err[-3000:]}"
    assert rc == 0, explain(rc, out, err)
    got = results(out)
    assert len(got) == 2 * 3 and all(got.values()), got               # every operator on every backend
    assert "is damaged" in err                                          # the user is told what was rebuilt
    # what the session used was rebuilt and is sound; damaged entries it never asked for (the tuning candidates
    # of the first session) stay as they were, and are checked when asked for
    assert audit(cache, unused={p: raw for p, (_, raw) in damaged.items()}) == [], f"seed {SEED}"
    rebuilt = {kind for p, (kind, raw) in damaged.items() if p.exists() and p.read_bytes() != raw}
    expect = set(KINDS) - {"python bytecode"}
    if how == "flip" and not audit(cache / "tune"):
        expect.discard("tuning database")   # bytes flipped where SQLite keeps nothing it checks: still sound
    assert rebuilt >= expect, f"never rebuilt: {expect - rebuilt}"


def test_a_sealed_entry_that_does_not_check_out_is_never_loaded(tmp_path):
    p = tmp_path / "e.bin"
    C.store(p, b"payload")
    assert C.load(p) == b"payload" and p.read_bytes().startswith(b"payload")   # the format stays the entry's own
    raw = bytearray(p.read_bytes())
    raw[2] ^= 1
    p.write_bytes(bytes(raw))
    assert C.load(p) is None and not p.exists()                         # damaged: removed, to be rebuilt
    p.write_bytes(b"x" * 10)
    assert C.load(p) is None and not p.exists()                         # shorter than a trailer
    C.store(p, b"ok")
    assert C.verify(p)
    with open(p, "r+b") as f:
        f.truncate(p.stat().st_size - 1)
    assert not C.verify(p) and not p.exists()


def test_a_damaged_tuning_database_costs_tuned_schedules_not_the_call(tmp_path, monkeypatch):
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path))

    @xb.tensor_op
    def twice(x: Tensor["N"]):
        return x * 2

    x = np.arange(6, dtype=np.float32)
    db = tmp_path / "tune" / "tuning.sqlite"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)   # a torn header and garbage pages
    np.testing.assert_array_equal(twice(x), x * 2)                     # was sqlite3.DatabaseError on every call
    assert (tmp_path / "tune" / "tuning.sqlite.damaged").exists()
    rows = list(xb.tuning_db().entries())                              # a fresh database, usable
    assert rows == []


def test_a_tuned_schedule_damaged_in_its_values_costs_only_that_schedule(tmp_path, monkeypatch):
    """SQLite checks its pages, not the values in them: a stored schedule whose bytes changed into values the
    kernel's knobs do not allow is passed over with a warning, and the call runs with the default."""
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path))

    @xb.tensor_op
    def thrice(x: Tensor["N"]):
        return x * 3

    x = np.arange(6, dtype=np.float32)
    (kernel,) = thrice.lower(x).kernels
    from xbench.tune.db import default_target, kernel_key
    db = xb.tuning_db()
    db.set_best(kernel_key(kernel, "cpu", default_target("cpu")), {"parallel": "trve"}, 1.0, 2.0, False)
    np.testing.assert_array_equal(thrice(x), x * 3)                    # was a ScheduleError on every call


def test_numba_cache_files_load_only_sound_and_for_their_own_key(tmp_path):
    from xbench.backends.cpu.numba_cache import CheckedCacheFile
    f = CheckedCacheFile(cache_path=str(tmp_path), filename_base="mod.fn-1.py311", source_stamp=(1.0, 10))
    f.save(("sig-a",), {"code": "a"})
    assert f.load(("sig-a",)) == {"code": "a"}
    index = f._load_index()                        # another process's index, naming this data for its key
    f._save_index({("sig-b",): index[("sig-a",)]})
    assert f.load(("sig-b",)) is None              # not sig-a's machine code under sig-b's name
    (data,) = tmp_path.glob("*.nbc")
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    data.write_bytes(bytes(raw))
    f._save_index(index)
    assert f.load(("sig-a",)) is None and not data.exists()    # damaged: a miss, removed, compiled again
    (tmp_path / "mod.fn-1.py311.nbi").write_bytes(b"\x80\x04garbage")
    assert f._load_index() == {}

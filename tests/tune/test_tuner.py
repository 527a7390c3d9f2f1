"""The auto-tuner: search, verification of candidates, pruning, the database, resume, automatic use."""
import json
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import xbench as xb
from xbench import backends
from xbench.backends import Artifact, KernelInfo
from xbench.ir.schedule import Knob, Schedule
from xbench.tune import tuner as T
from xbench.tune.db import TuningDB, tuned_schedules

rng = np.random.default_rng(2)


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path))


class ToyBackend:
    """A backend without hardware here: it runs through numpy, predicts time from a formula with a known
    optimum, corrupts results when the `broken` knob is set, and forbids tiles over 64 (a hard limit)."""
    name = "toy"
    default_target = "toy-chip"

    def available(self):
        return True, "numpy"

    def knobs(self, kernel):             # a plugin written before knobs took the program
        return {"tile": Knob("tile", (8, 16, 32, 64, 128), 8), "unroll": Knob("unroll", (1, 2, 4, 8), 1),
                "broken": Knob("broken", (False, True), False)}

    def default_schedule(self, kernel):
        return Schedule(tile=8, unroll=1, broken=False)

    def check(self, program, kernel, schedule):
        return "tile exceeds 64 KiB of scratch" if schedule["tile"] > 64 else None

    def compile(self, program, schedules, **options):
        return ToyArtifact(self.name, program, "toy", [KernelInfo(k.name, k.kind, "", schedules[k.name])
                                                      for k in program.kernels], predicted=True)


class ToyArtifact(Artifact):
    def run(self, *arrays):
        from xbench.backends.reference import evaluate
        outs = [o.astype(np.float32) for o in evaluate(self.program.graph, *arrays)]
        if any(k.schedule["broken"] for k in self.kernels):
            outs = [o + 1 for o in outs]
        return outs

    def predict_ms(self, kernel, target):
        s = next(k.schedule for k in self.kernels if k.name == kernel)
        return 1.0 + abs(np.log2(s["tile"]) - 5) + abs(np.log2(s["unroll"]) - 2) * 0.5   # best: tile 32, unroll 4


@pytest.fixture
def toy():
    backends.register(ToyBackend())
    yield
    backends._loaded.pop("toy", None)


def test_exhaustive_finds_the_optimum_rejects_wrong_numbers_and_prunes(toy):
    x = rng.standard_normal((16, 32)).astype(np.float32)
    res = xb.tune(xb.ops.softmax, x, backend="toy", budget=100, workers=1, progress=False)
    k = res.kernels[0]
    assert res.predicted and "(predicted)" in res.table()
    assert k.best == {"tile": 32, "unroll": 4, "broken": False}
    assert k.best_ms == pytest.approx(1.0) and k.default_ms == pytest.approx(1.0 + 2 + 1)
    counts = res.counts()
    assert counts["pruned"] == 1 * 4 * 2                 # tile 128 never compiled
    assert counts["rejected"] == 4 * 4                   # every broken candidate
    assert all("outside tolerance" in c.message for c in k.candidates if c.status == "rejected")
    fig = res.heatmap("tile", "unroll")
    assert fig.grid_values.shape == (4, 4)                 # pruned tiles are absent
    assert fig.grid_values[2, 2] == pytest.approx(1.0)     # unroll 4 (row 2) x tile 32 (column 2)
    assert fig.grid_values[0, 0] == pytest.approx(4.0)


def test_guided_search_beats_random_on_a_small_budget(toy):
    x = rng.standard_normal((8, 8)).astype(np.float32)
    res = xb.tune(xb.ops.softmax, x, backend="toy", budget=10, strategy="guided", workers=1, progress=False,
                  restrict={"k0_row": {"broken": (False,)}})
    assert res.kernels[0].best_ms <= 1.5                 # within one step of the optimum in 10 of 16 candidates


def test_database_resume_export_import_and_automatic_use(toy, tmp_path):
    x = rng.standard_normal((16, 32)).astype(np.float32)
    calls = []
    real = T._evaluate

    def interrupted(run, kernel, config, best_ms=None):
        if len(calls) == 5:
            raise KeyboardInterrupt
        calls.append(config)
        return real(run, kernel, config, best_ms)

    T._evaluate = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            xb.tune(xb.ops.softmax, x, backend="toy", budget=100, workers=1, progress=False)
    finally:
        T._evaluate = real
    res = xb.tune(xb.ops.softmax, x, backend="toy", budget=100, workers=1, progress=False)
    reused = [c for c in res.kernels[0].candidates if c.reused]
    assert len(reused) == 5 and [c.config for c in reused] == calls
    # the best schedule is used automatically from now on
    art = xb.ops.softmax.compile("toy", x)
    assert dict(art.schedules["k0_row"]) == res.best["k0_row"]
    # export, then import into an empty database
    db = xb.tuning_db()
    path = tmp_path / "shared.json"
    assert db.export(path) == 1
    other = TuningDB(tmp_path / "other.sqlite")
    assert other.import_(path) == 1
    assert [e["config"] for e in other.entries()] == [res.best["k0_row"]]


def test_concurrent_writers(tmp_path):
    code = textwrap.dedent(f"""
        import sys
        from xbench.tune.db import TuningDB
        db = TuningDB({str(tmp_path / 'c.sqlite')!r})
        for i in range(200):
            db.record("k", {{"w": int(sys.argv[1]), "i": i}}, "measured", float(i))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(w)]) for w in range(3)]
    assert [p.wait() for p in procs] == [0, 0, 0]
    assert len(TuningDB(tmp_path / "c.sqlite").measured("k")) == 600


@pytest.mark.parametrize("where", ["a table's name in the schema", "a stored value"])
def test_text_that_is_not_utf8_is_damage_and_the_database_starts_afresh(tmp_path, where, caplog):
    """A flipped byte in text SQLite hands back (a schema name quoted in its error, a value) surfaces as Python's
    UnicodeDecodeError, not as SQLite's 'malformed': it is damage like any other (CI met the first on its way to
    `PRAGMA journal_mode`, and every operator call failed)."""
    path = tmp_path / "t.sqlite"
    db = TuningDB(path)
    db.set_best("k", {"tile": 8}, 1.0, 2.0, False)
    db._local.conn.close()
    raw = bytearray(path.read_bytes())
    if where == "a stored value":
        i = raw.find(b'{"tile": 8}') + 2
    else:
        i = raw.find(b"tablebestbest") + 5          # the 'name' column of the table's schema record
    raw[i] = 0xFF
    path.write_bytes(bytes(raw))
    again = TuningDB(path)
    assert again.best("k") is None                  # the damaged database was set aside: nothing tuned, no error
    assert "is damaged" in caplog.text and path.with_name("t.sqlite.damaged").exists()
    again.set_best("k", {"tile": 16}, 1.0, 2.0, False)
    assert again.best("k") == {"tile": 16}


def test_cpu_tuning_measures_verifies_and_is_used():
    x = rng.standard_normal((64, 256)).astype(np.float32)
    res = xb.tune(xb.ops.softmax, x, backend="cpu", budget=4, workers=2, progress=False)
    k = res.kernels[0]
    assert not res.predicted and all(c.status == "measured" for c in k.candidates)
    assert len(k.candidates) == 4 and k.best_ms > 0
    assert tuned_schedules(xb.ops.softmax.lower(x), "cpu") == {"k0_row": k.best}
    np.testing.assert_allclose(xb.ops.softmax(x), xb.ops.softmax.run(x, backend="reference"), rtol=1e-5)
    fig = res.plot()
    assert len(fig.axes[0].lines) >= 2
    assert json.dumps(res.best)


def test_convolution_space_multiplies_panels_only_with_the_packed_window():
    """`panel` splits the packed (im2col) operand: with the shifted or Winograd window the same code would be
    compiled again, so those combinations are pruned before compiling, with the reason."""
    from xbench.tune import space as S
    x, w = np.ones((2, 3, 12, 7), np.float32), np.ones((4, 3, 3, 3), np.float32)
    prog = xb.ops.conv2d.lower(x, w, None, padding=1)
    sp = S.build(xb.backends.get("cpu"), prog, prog.kernels[-1])
    assert sp.configs and all(c["window"] == "pack" or c["panel"] == 0 for c in sp.configs)
    assert {c["window"] for c in sp.configs} == {"shift", "pack", "winograd"}
    assert all("packed window" in why for c, why in sp.pruned if c["panel"] and c["window"] != "pack")
    assert any(c["window"] == "winograd" and c["panel"] for c, _ in sp.pruned)


def test_a_candidate_far_slower_than_the_best_is_timed_once():
    """After the default, a schedule whose first run takes over `SLOW` times the best so far is recorded from
    that run with a message, not timed through the whole protocol (a dot per output point, against BLAS)."""
    from threadpoolctl import threadpool_limits
    a = rng.standard_normal((256, 256)).astype(np.float32)
    with threadpool_limits(1, "blas"):     # a multithreaded BLAS on a busy host can take 20x its time
        res = xb.tune(xb.ops.mm, a, a, backend="cpu", budget=8, workers=1, progress=False,
                      restrict={"k0_contract": {"impl": ("blas", "points"), "parallel": (False,)}})
    cands = res.kernels[0].candidates
    default, slow = cands[0], [c for c in cands if c.config["impl"] == "points"]
    assert default.config["impl"] == "blas" and default.message == "" and default.spread is not None
    assert slow and all("not timed further" in c.message and c.spread is None for c in slow)
    assert all(c.time_ms > T.SLOW * default.time_ms for c in slow) and res.kernels[0].best["impl"] == "blas"


def test_a_paired_time_is_the_ratio_to_the_default_in_the_defaults_milliseconds():
    """The default sleeps 2 ms and was timed at 10 ms at the start of the search; a candidate that sleeps 4 ms is
    twice the default, so 20 ms in those units, whatever the two sleeps actually took now."""
    class Run:
        ref, ref_ms = staticmethod(lambda: time.sleep(0.002)), 10.0

    ms, spread = T._paired(Run, lambda: time.sleep(0.004))
    assert 17.0 < ms < 21.0 and spread < 0.2

"""The fuzzer's parts: a deterministic generator, an oracle that judges what is well defined and only that, a
worker that survives crashes and hangs, a shrinker, and regression tests that run."""
import importlib.util

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.fuzz.gen import Generator
from xbench.fuzz.oracle import expected, judge
from xbench.fuzz.program import Input, Program, Stmt
from xbench.fuzz.regress import write_test
from xbench.fuzz.run import Finding, operator_seed
from xbench.fuzz.shrink import shrink
from xbench.fuzz.values import Recipe, literal
from xbench.fuzz.worker import Worker


def test_operator_i_of_a_seed_is_always_the_same_and_traces():
    a = [Generator(np.random.default_rng(5)).program(operator_seed(5, i)).source("code") for i in range(30)]
    b = [Generator(np.random.default_rng(5)).program(operator_seed(5, i)).source("code") for i in range(30)]
    assert a == b and len(set(a)) == 30
    g = Generator(np.random.default_rng(0))
    dtypes = set()
    for i in range(60):
        prog = g.program(operator_seed(0, i))
        graph = prog.operator().trace(*prog.arrays())
        dtypes |= {v.dtype for v in graph.vars()}
    assert not g.frontend
    assert {"float16", "bfloat16", "float32", "int8", "uint8", "int64", "bool"} <= dtypes


def test_recipes_write_themselves_as_the_numpy_code_that_makes_them():
    r = Recipe((3, 4), "float32", "wide", 7, (-5.0, 5.0), ((2, np.nan), (5, -0.0)))
    ns = {"np": np}
    exec("def _put(a, at, values):\n    a = a.copy()\n    a.reshape(-1)[at] = values\n    return a\n"
         "def _wide(rng, shape, lo, hi):\n    return np.where(rng.random(shape) < 0.5, -1.0, 1.0) * "
         "10.0 ** rng.uniform(lo, hi, shape)\n", ns)
    made = eval(r.code(), ns)
    np.testing.assert_array_equal(made, r.make())
    assert np.isnan(made.reshape(-1)[2]) and np.signbit(made.reshape(-1)[5])
    lit = literal(np.array([[1, -2]], np.int8))
    assert eval(lit.code(), ns).tolist() == [[1, -2]] and eval(lit.code(), ns).dtype == np.int8


@xb.tensor_op
def fragile(x: Tensor):
    return xb.floor(x * 3.0), xb.exp(x) * 0.0, x + 1.0


def test_the_oracle_judges_only_what_rounding_cannot_decide():
    """floor(x * 3) at x = 1/3 (float32 x is 0.33333334: 3x rounds to 1.0 in float32, to 1.0000000298 in
    float64) and exp(100.25) * 0 (inf * 0 in float32, 0 in float64) are not judged; x + 1 is."""
    x = np.array([1 / 3, 0.25, 100.25], np.float32)
    exp = expected(fragile.trace(x), [x])
    assert exp.masks[0].tolist() == [False, True, True]
    assert exp.masks[1].tolist() == [True, True, False]
    assert exp.masks[2].all()
    good = [np.floor(x * np.float32(3)), np.array([0, 0, np.nan], np.float32), x + 1]
    assert judge(exp, good).ok
    bad = [good[0], good[1], x + 2]
    assert not judge(exp, bad).ok


def test_the_worker_reports_crashes_and_hangs_and_carries_on():
    src = "import os, time\nimport xbench as xb\nfrom xbench import Tensor\n\n@xb.tensor_op\n" \
          "def fuzz_op(a: Tensor):\n    return a * 2\n"
    w = Worker()
    try:
        a = np.arange(3, dtype=np.float32)
        ok = w.run(src, {}, [a], "reference", 120)
        assert ok.kind == "ok" and ok.outputs[0].tolist() == [0.0, 2.0, 4.0]
        crash = w.run(src.replace("return a * 2", "os.kill(os.getpid(), 11)"), {}, [a], "reference", 120)
        assert crash.kind == "crash" and "SIGSEGV" in crash.error
        hang = w.run(src.replace("return a * 2", "time.sleep(60)"), {}, [a], "reference", 2)
        assert hang.kind == "hang"
        again = w.run(src, {}, [a], "reference", 120)
        assert again.kind == "ok" and w.starts == 3
        err = w.run(src.replace("return a * 2", "return a.nope"), {}, [a], "reference", 120)
        assert err.kind == "error" and "AttributeError" in err.error
    finally:
        w.close()


def _program() -> Program:
    a = Input("a", (4,), "float32", Recipe((4,), "float32", "normal", 1, (1.0,)))
    stmts = [Stmt("t0", "a * 2", ("a",), (4,), "float32"), Stmt("t1", "xb.sin(t0)", ("t0",), (4,), "float32"),
             Stmt("t2", "t1 + a", ("t1", "a"), (4,), "float32"), Stmt("t3", "xb.exp(a)", ("a",), (4,), "float32")]
    return Program([a], {}, stmts, ["t2", "t3"], seed=3)


def test_shrinking_keeps_what_fails_and_nothing_else():
    def fails(p: Program) -> bool:
        p.operator().trace(*p.arrays())
        return "xb.sin" in p.body()

    small, tried = shrink(_program(), fails, budget_s=60)
    assert tried > 0
    assert len(small.stmts) == 1 and small.stmts[0].text.startswith("xb.sin(") and small.outputs == ["t1"]
    assert len(small.inputs) == 1


def test_a_saved_finding_is_a_test_that_runs(tmp_path):
    prog = _program()
    f = Finding("cpu", "wrong", "output 0: 1 of 4 values differ", 12, prog.source("code"), signature="abc123")
    path = write_test(str(tmp_path), prog, f, seed=3)
    spec = importlib.util.spec_from_file_location("saved", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with open(path) as fh:
        assert "--seed 3` (operator 12): wrong on cpu" in fh.read()
    mod.test_cpu_abc123()          # cpu agrees with the reference on this one: the saved test passes


@xb.tensor_op
def overflowing_products(a: Tensor, b: Tensor):
    return a @ b


def test_products_that_may_overflow_are_not_judged():
    """-3e38 * 1.36 is -inf in float32 unless a fused multiply-add keeps it: with an inf term in the same sum the
    answer is NaN or inf by the backend's arithmetic, and the oracle judges neither."""
    a = np.array([[np.inf, -3e38, 1.0], [1.0, 2.0, 3.0]], np.float32)
    b = np.array([[4.75], [1.36], [2.0]], np.float32)
    exp = expected(overflowing_products.trace(a, b), [a, b])
    assert exp.masks[0].tolist() == [[False], [True]]

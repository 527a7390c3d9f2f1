"""Operator packages (entry-point group `xbench.ops`) and hardware-target packages (`xbench.targets`) are plugins:
installing one is all it takes. The example package under examples/ is pip-installed by this file into a
directory of its own and checked in a child process whose path includes it, so that the test processes running
beside this one (and their exact lists of operators and targets) never see it. The loading machinery itself is
also checked in this process with entry points made up here (broken packages, names already taken)."""
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import xbench as xb
from xbench import ops
from xbench.hw import target as T

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "examples" / "xbench-example-plugin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example package pip-installed (quietly, without dependencies) into a fresh folder; built from a copy
    so the source tree stays clean."""
    work = tmp_path_factory.mktemp("plugin")
    src = work / "src"
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = work / "site"
    base = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check",
            "--target", str(target), str(src)]
    done = subprocess.run(base[:4] + ["--no-build-isolation"] + base[4:], capture_output=True, text=True)
    if done.returncode != 0:         # no setuptools in this environment: let pip fetch the build backend
        done = subprocess.run(base, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (target / "xbench_example" / "targets" / "l4.toml").is_file()
    return target


def child(target: Path, module: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(target), str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.setdefault("XBENCH_CACHE_DIR", os.environ.get("XBENCH_CACHE_DIR", ""))
    done = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith("XBENCH-PLUGIN-CHECKS "))
    return json.loads(line.split(" ", 1)[1])


@pytest.fixture(scope="module")
def checks(installed) -> dict:
    return child(installed, "tests.compat.plugin_checks")


def test_an_installed_operator_package_adds_its_operators(checks):
    assert checks["load_errors"] == {}
    assert checks["listed"] == ["squareplus", "axpby"]
    assert checks["info"]["squareplus"] == ["xbench-example-plugin", "xbench_example.ops", "activation"]
    assert checks["info"]["axpby"][0] == "xbench-example-plugin"
    assert checks["squareplus_error"] < 1e-6 and checks["axpby_error"] < 1e-6


def test_plugin_operators_are_verified_on_the_librarys_grid(checks):
    cells = checks["grid"]
    columns = {(op, b) for op, b, *_ in cells}
    assert columns == {(op, b) for op in ("squareplus", "axpby") for b in ("reference", "cpu", "torch", "grad")}
    assert {d for _, b, d, *_ in cells if b == "cpu"} == {"float32", "float16", "float64"}
    failed = [c for c in cells if c[3] != "pass"]
    assert not failed, failed
    slow = checks["slow_grid"]
    assert {(op, b) for op, b, *_ in slow} == {(op, b) for op in ("squareplus", "axpby") for b in ("cuda", "ascend")}
    assert all(c[3] == "pass" for c in slow), slow
    assert checks["cli_exit"] == 0 and "squareplus" in checks["cli_text"]


def test_an_installed_target_package_adds_its_targets(checks):
    assert "l4" in checks["targets"] and {"a100", "h100", "cpu-local"} <= set(checks["targets"])
    l4 = checks["l4"]
    assert l4["kind"] == "gpu" and l4["cc"] == [8, 9]
    assert l4["peak_f16_tensor"] == 121e12 and l4["dram"] == 300e9
    assert "L4 datasheet" in l4["source"] and l4["origin"].endswith("l4.toml")


# ---- the loading machinery, with entry points made up here -------------------------------------------------

class FakeEntryPoint:
    def __init__(self, name: str, obj=None, error: Exception | None = None):
        self.name, self.value, self.dist = name, f"fake:{name}", None
        self._obj, self._error = obj, error

    def load(self):
        if self._error is not None:
            raise self._error
        return self._obj


@pytest.fixture
def clean_registry():
    xb.ops.list()                                     # the library is loaded, so collisions are seen
    before, errors = dict(ops.INFO), dict(ops.LOAD_ERRORS)
    yield
    for n in set(ops.INFO) - set(before):
        ops.INFO.pop(n)
        ops.REGISTRY.pop(n, None)
    ops.LOAD_ERRORS.clear()
    ops.LOAD_ERRORS.update(errors)


def test_a_plugin_function_registers_operators(clean_registry):
    def register_mine():
        @ops.register("unary", name="compat_test_twice", samples=lambda d, s: [], dtypes=("float32",))
        def twice(x: xb.Tensor):
            return x * 2

    got = ops.load_plugins([FakeEntryPoint("mine", register_mine)])
    assert got == ["compat_test_twice"]
    assert ops.info("compat_test_twice").plugin == "mine"
    np.testing.assert_array_equal(xb.ops.compat_test_twice(np.ones(3, np.float32)), 2)


def test_a_broken_plugin_is_reported_without_hiding_the_others(clean_registry):
    with pytest.warns(RuntimeWarning, match="operator package 'broken'.*ModuleNotFoundError"):
        got = ops.load_plugins([FakeEntryPoint("broken", error=ModuleNotFoundError("no module named 'nothing'"))])
    assert got == [] and "plugin broken" in ops.LOAD_ERRORS
    assert "abs" in xb.ops.list()


def test_a_plugin_cannot_take_a_library_name(clean_registry):
    def steal():
        @ops.register("unary", name="abs", samples=lambda d, s: [])
        def my_abs(x: xb.Tensor):
            return x

    with pytest.warns(RuntimeWarning, match="registered twice"):
        ops.load_plugins([FakeEntryPoint("thief", steal)])
    assert "registered twice" in ops.LOAD_ERRORS["plugin thief"]
    assert ops.info("abs").plugin == "" and ops.info("abs").module.startswith("xbench.ops.")


def test_target_plugins_are_loaded_checked_and_never_shadow_builtins(tmp_path):
    good = tmp_path / "good"
    good.mkdir()
    shutil.copy(PACKAGE / "xbench_example" / "targets" / "l4.toml", good / "l4.toml")
    clash = tmp_path / "clash"
    clash.mkdir()
    shutil.copy(T.TARGETS_DIR / "h100.toml", clash / "h100.toml")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        found = T.plugin_targets([FakeEntryPoint("good", lambda: good), FakeEntryPoint("clash", str(clash)),
                                  FakeEntryPoint("broken", error=ImportError("nope"))])
    assert set(found) == {"l4"} and found["l4"][0] == good / "l4.toml"
    messages = " ".join(str(x.message) for x in w)
    assert "target 'h100'" in messages and "already defined" in messages and "'broken'" in messages
    assert T.load_target_file(found["l4"][0]).peak_flops("float32") == 30.3e12
    bad = tmp_path / "bad"
    bad.mkdir()
    text = re.sub(r"(?m)^boost_hz = .*$", "boost_hz = 2.04e9", (good / "l4.toml").read_text())
    (bad / "nosource.toml").write_text(text.replace('name = "l4"', 'name = "nosource"'))
    path = T.plugin_targets([FakeEntryPoint("bad", bad)])["nosource"][0]
    with pytest.raises(T.TargetError, match="clock.boost_hz = 2040000000.0 has no source"):
        T.load_target_file(path)

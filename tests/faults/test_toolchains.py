"""Hanging and failing toolchains (fake g++ and ptxas first on PATH): every tool call ends within its limit with
an error that names the tool and the way out, the hung tool is killed, and `python -m xbench backends` tells
the truth. Before: a hanging g++ stalled xbench forever, a g++ failing --version gave a raw CalledProcessError,
a hanging ptxas a raw TimeoutExpired after 330 s, and without ptxas `cuda ok` while op.run(backend="cuda")
failed with no way to skip PTX."""
import subprocess
import sys
import time

import numpy as np
import pytest

import xbench as xb
from xbench import Tensor
from xbench.backends.ascend.twin import TwinCompileError
from xbench.errors import BackendError
from xbench.toolchain import ToolError, ToolTimeout

from .helpers import alive, fake_tool

LIMIT = "2"


def _op(k: float):
    @xb.tensor_op
    def shifted(x: Tensor["N"]):
        return x + k
    return shifted


@pytest.fixture
def fake_path(tmp_path, monkeypatch):
    """A folder put first on PATH, and a tool time limit of 2 s."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    monkeypatch.setenv("XBENCH_TOOL_TIMEOUT", LIMIT)
    return folder


def _backends(env_path: str, **env) -> dict[str, str]:
    import os
    out = subprocess.run([sys.executable, "-m", "xbench", "backends"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PATH": env_path, "XBENCH_TOOL_TIMEOUT": LIMIT, **env}).stdout
    rows: dict[str, str] = {}
    name = None
    for line in out.splitlines():
        if line[:1].strip():
            name = line.split()[0]
            rows[name] = line
        elif name:
            rows[name] += "\n" + line
    return rows


def test_a_hanging_gxx_is_stopped_and_named(fake_path, tmp_path):
    fake_tool(fake_path, "g++", version=None, work="HANG")
    x = np.arange(4, dtype=np.float32)
    t0 = time.perf_counter()
    with pytest.raises(BackendError, match=r"(?s)ascend.*not available.*g\+\+ did not finish `--version` within 2 s"):
        _op(1.5).run(x, backend="ascend")
    assert time.perf_counter() - t0 < 15
    assert not alive(fake_path / "g++.pid")                      # killed, not left hanging

    fake_tool(fake_path, "g++", version="g++ (fake) 12.2.0", work="HANG")   # answers, then hangs compiling
    t0 = time.perf_counter()
    with pytest.raises(ToolTimeout, match=r"g\+\+ did not finish .* within 2 s and was stopped") as err:
        _op(2.5).run(x, backend="ascend")
    assert time.perf_counter() - t0 < 15
    assert "XBENCH_TOOL_TIMEOUT" in err.value.hint
    assert not alive(fake_path / "g++.pid")
    np.testing.assert_array_equal(_op(2.5).run(x, backend="cpu"), x + 2.5)  # the other backends go on


def test_a_gxx_failing_version_makes_ascend_unavailable_with_its_output(fake_path):
    fake_tool(fake_path, "g++", version=None, work="true")
    (fake_path / "g++").write_text("#!/bin/sh\necho 'g++: error: license server unreachable' >&2\nexit 3\n")
    with pytest.raises(BackendError, match=r"(?s)g\+\+ at .* failed `--version` \(exit 3\).*license server"):
        _op(3.5).run(np.ones(3, np.float32), backend="ascend")
    rows = _backends(f"{fake_path}:/usr/bin:/bin")
    assert rows["ascend"].split()[1] == "no" and "failed `--version` (exit 3)" in rows["ascend"]
    assert rows["cpu"].split()[1] == "ok"


def test_a_gxx_that_fails_compiling_shows_its_message_and_caches_nothing(fake_path, tmp_path, monkeypatch):
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path / "cache"))
    fake_tool(fake_path, "g++", version="g++ (fake) 12.2.0",
              work="echo 'cc1plus: internal compiler error: Segmentation fault' >&2; exit 4")
    with pytest.raises(TwinCompileError, match="internal compiler error"):
        _op(4.5).run(np.ones(3, np.float32), backend="ascend")
    assert not list((tmp_path / "cache" / "ascend").glob("*.so"))


def test_a_hanging_ptxas_is_stopped_with_the_way_out(fake_path):
    # another version than the real one: its resources are not in the cache, so it is run
    fake_tool(fake_path, "ptxas", version="Cuda compilation tools, release 99.0, V99.0.1", work="HANG")
    t0 = time.perf_counter()
    with pytest.raises(ToolTimeout, match=r"ptxas did not finish assembling PTX for sm_\d+ within 2 s") as err:
        _op(5.5).compile("cuda", np.ones(3, np.float32))
    assert time.perf_counter() - t0 < 60                          # was a raw TimeoutExpired after 330 s
    assert "XBENCH_CUDA_PTX=0" in err.value.hint
    assert not alive(fake_path / "ptxas.pid")


def test_a_ptxas_failing_or_silent_is_an_error_that_names_it(fake_path):
    fake_tool(fake_path, "ptxas", version=None, work="true")
    (fake_path / "ptxas").write_text("#!/bin/sh\nexit 2\n")
    with pytest.raises(ToolError, match=r"ptxas at .* failed `--version` \(exit 2\) and printed nothing"):
        _op(6.5).compile("cuda", np.ones(3, np.float32))
    fake_tool(fake_path, "ptxas", version="Cuda compilation tools, release 99.0, V99.0.2", work="exit 0")
    with pytest.raises(BackendError, match="printed no resource usage"):
        _op(6.5).compile("cuda", np.ones(3, np.float32))


def test_cuda_runs_without_ptxas_when_told_and_backends_says_so(fake_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(fake_path / "no-cuda"))     # no ptxas on PATH, nor in a toolkit
    x = np.arange(5, dtype=np.float32)
    with pytest.raises(BackendError, match=r"(?s)ptxas .* was not found.*XBENCH_CUDA_PTX=0"):
        _op(7.5).run(x, backend="cuda")
    monkeypatch.setenv("XBENCH_CUDA_PTX", "0")
    np.testing.assert_array_equal(_op(7.5).run(x, backend="cuda"), x + 7.5)
    art = _op(7.5).compile("cuda", x)
    assert art.ptx == {} and "registers" not in art.kernels[0].resources
    monkeypatch.delenv("XBENCH_CUDA_PTX")

    path = f"{fake_path}:/usr/bin:/bin"
    no = _backends(path, CUDA_HOME=str(fake_path / "no-cuda"))["cuda"]
    assert no.split()[1] == "no" and "ptxas" in no and "XBENCH_CUDA_PTX=0" in no     # was "cuda ok"
    told = _backends(path, CUDA_HOME=str(fake_path / "no-cuda"), XBENCH_CUDA_PTX="0")["cuda"]
    assert told.split()[1] == "ok" and "PTX resources: off" in told

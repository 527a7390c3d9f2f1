"""Runs the extension's jest suite (`jlpm test`) so `make test` covers the TypeScript logic too."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXTENSION = Path(__file__).resolve().parents[2] / "extension"
# Suites that must exist and run; a renamed or deleted spec file fails here instead of passing quietly.
SUITES = {"bridge", "magic", "protocol", "store", "viewmodel"}


def _jlpm() -> list[str]:
    local = Path(sys.executable).with_name("jlpm")
    if local.exists():
        return [str(local)]
    found = shutil.which("jlpm")
    assert found, "jlpm not found: install JupyterLab (pip install -e .[lab]) to run the extension tests"
    return [found]


@pytest.mark.timeout(900)
def test_jest_suite(tmp_path: Path) -> None:
    env = dict(os.environ, CI="true", PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    if not (EXTENSION / "node_modules" / ".bin" / "jest").exists():
        subprocess.run([*_jlpm(), "install", "--immutable"], cwd=EXTENSION, env=env, check=True)
    report = tmp_path / "jest.json"
    proc = subprocess.run([*_jlpm(), "test", "--json", f"--outputFile={report}"], check=False, cwd=EXTENSION,
                          env=env, capture_output=True, text=True, timeout=600)
    assert report.exists(), f"jest wrote no report:\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(report.read_text())
    failures = [
        f"{Path(suite['name']).name} > {' > '.join(t['ancestorTitles'] + [t['title']])}:\n"
        + "\n".join(t["failureMessages"])
        for suite in result["testResults"]
        for t in suite["assertionResults"]
        if t["status"] != "passed"
    ]
    failures += [f"{Path(s['name']).name}: {s['message']}" for s in result["testResults"] if s["status"] != "passed"
                 and not s["assertionResults"]]
    assert not failures, "\n\n".join(failures)
    ran = {Path(s["name"]).name.split(".")[0] for s in result["testResults"]}
    assert ran == SUITES
    assert result["numPassedTests"] == result["numTotalTests"] >= 30
    assert proc.returncode == 0, proc.stderr[-4000:]

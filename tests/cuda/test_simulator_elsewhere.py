"""The simulator's own tests (xbench's block scheduler, the guard on long simulated runs) in a child process with
the simulator on (`NUMBA_ENABLE_CUDASIM=1`, which a user may set as well). On a machine with a CUDA GPU this is
where they run (this process runs kernels on the GPU); without one they also run in this process, and here again,
so the route a GPU machine takes is checked on every machine (about 10 s)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("module", ["test_simulator.py", "test_sim_guard.py"])
def test_the_simulator_modules_pass_in_a_process_with_the_simulator_on(module):
    path = Path(__file__).with_name(module)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
                         env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}, capture_output=True, text=True,
                         timeout=600, cwd=path.parents[2])
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0 and "passed" in summary and "skipped" not in summary, run.stdout[-4000:]

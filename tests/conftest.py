import os
import sys
import tempfile

import pytest

# Tests compile into a cache of their own unless one is given (CI sets XBENCH_CACHE_DIR through the Makefile).
os.environ.setdefault("XBENCH_CACHE_DIR", os.path.join(tempfile.gettempdir(), "xbench-test-cache"))
# Test files run side by side on every core: OpenMP threads that spin at barriers while the other processes hold
# the cores would turn each parallel kernel call into milliseconds of waiting.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(autouse=True)
def _cold_dynamo():
    """Every test starts from empty Dynamo caches: graphs an earlier test compiled for the same model class and
    backend, or a recompile limit it reached, would otherwise change what this one compiles and records."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()
    yield

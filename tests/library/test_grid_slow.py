"""The coverage grid on the slow backends in CI: cuda (numba's simulator) and ascend (the CPU twin) on a small
deterministic subset, with the same rules as test_grid.py (no failure, every unsupported cell with its reason)."""
import pytest

from xbench import backends
from xbench.library import coverage

from .test_grid import WORKERS, _check, _write

SLOW = [b for b in ("cuda", "ascend") if b in backends.names()]


# Compiling is what costs on these two (numba's simulator, g++ per Ascend program): the first tiny sample per
# cell, in float32 (and float16 on cuda); the other dtypes are in the full grid and the backends' own tests.
SLOW_DTYPES = {"cuda": ["float32", "float16"], "ascend": ["float32"]}


@pytest.mark.parametrize("backend", SLOW)
def test_library_grid_on_the_slow_backends_subset(backend):
    grid = coverage.run(backends=[backend], slow_shapes="tiny", slow_limit=1, dtypes=SLOW_DTYPES[backend],
                        torch=False, grad=False, progress=False, workers=WORKERS)
    _write(grid, f"coverage-{backend}")
    _check(grid, set())
    ran = [c for c in grid.cells if c.status == "pass"]
    assert ran, f"no operator ran on {backend}"

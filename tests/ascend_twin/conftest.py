"""Builds the hand-written test kernels once per session (in parallel; g++ results are cached)."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from xbench.backends.ascend import twin

KERNELS = Path(__file__).parent / "kernels"


@pytest.fixture(scope="session")
def libs() -> dict[str, twin.TwinLibrary]:
    names = ("vector", "rules", "matmul")
    with ThreadPoolExecutor(len(names)) as pool:
        futures = {n: pool.submit(twin.build, (KERNELS / f"{n}.cpp").read_text(), name=f"test-twin-{n}")
                   for n in names}
        return {n: f.result() for n, f in futures.items()}

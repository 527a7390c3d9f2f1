import pytest


@pytest.fixture(scope="session")
def launch():
    """`xbench.dist.run`, bounded: every job here has a deadline and kills its processes when it passes."""
    from xbench.dist.launch import run
    return run

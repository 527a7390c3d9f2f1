"""An example xbench plugin: operators (`xbench_example.ops`, entry point `xbench.ops`) and a hardware target
(`targets/`, entry point `xbench.targets`)."""
from pathlib import Path


def targets() -> Path:
    """The folder of this package's target files."""
    return Path(__file__).parent / "targets"

"""Verification of the operator library: the harness (`harness.check`) and the coverage grid
(`coverage.run`, `python -m xbench coverage`, `xb.coverage()`)."""
from .coverage import Grid, run
from .harness import Cell, check

__all__ = ["Cell", "Grid", "check", "run"]

"""Verification of the operator library: the harness (`harness.check`) and the coverage grid
(`coverage.run`, `python -m xbench coverage`, `xb.coverage()`)."""
from .coverage import Grid, coverage, run
from .harness import Cell, check

__all__ = ["Cell", "Grid", "check", "coverage", "run"]

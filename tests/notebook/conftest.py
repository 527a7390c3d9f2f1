from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from IPython.core.interactiveshell import ExecutionResult, InteractiveShell
from IPython.utils.capture import CapturedIO, capture_output

from xbench.notebook.registry import registry
from xbench.notebook.runner import Settings


@dataclass
class Ran:
    result: ExecutionResult
    io: CapturedIO

    @property
    def error(self) -> BaseException | None:
        return self.result.error_before_exec or self.result.error_in_exec

    @property
    def displayed(self) -> list[Any]:
        """The objects the cell displayed (their reprs are in io.outputs)."""
        return [o for o in self.io.outputs]


@pytest.fixture(scope="session")
def ip() -> InteractiveShell:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "xbench")
    return shell


@pytest.fixture
def magics(ip: InteractiveShell) -> Any:
    return ip.magics_manager.registry["XbenchMagics"]


@pytest.fixture(autouse=True)
def fresh_session(ip: InteractiveShell) -> Iterator[None]:
    registry().clear()
    m = ip.magics_manager.registry["XbenchMagics"]
    m.defaults = Settings()
    yield
    registry().clear()


def run_cell(ip: InteractiveShell, source: str) -> Ran:
    with capture_output() as io:
        result = ip.run_cell(source, store_history=True)
    return Ran(result, io)

"""The coverage grid in CI: every library operator in every dtype it declares on the reference over the quick
shape set, cross-checked against PyTorch, and its gradients against finite differences and torch.autograd
(each gradient operator also compiled and verified on cpu once); on cpu, samples of the same set as
CPU_RUNS says (compiling each shape is the cost: the whole set is `python -m xbench coverage --quick`). cuda
(numba's simulator) and ascend (the CPU twin) are in test_grid_slow.py. Operators are checked in two processes.

Zero failures are allowed, except the ones listed in KNOWN below: each is a defect named with where it lives,
and each must still fail on the reference grid (when it is fixed, its entry has to go). Every
"unsupported" cell must say why. The grids are written to test-output/ as markdown for people to read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from xbench import ops
from xbench.library import coverage

OUT = Path(__file__).resolve().parents[2] / "test-output"
WORKERS = 2


@dataclass(frozen=True)
class Known:
    backend: str        # regex on the column
    sample: str         # regex on the failing sample's repr
    reason: str         # regex on the failure message
    why: str            # where the defect is and what it is
    op: str = ".*"      # regex on the operator name


KNOWN: list[Known] = []


def _known(cell) -> bool:
    return bool(cell.failed) and all(_matching(cell, f) for f in cell.failed)


def _matching(cell, failure) -> list[Known]:
    return [k for k in KNOWN if re.fullmatch(k.op, cell.op) and re.fullmatch(k.backend, cell.backend)
            and re.search(k.sample, failure["sample"]) and re.search(k.reason, failure["reason"])]


def _report(cells) -> str:
    lines = []
    for c in cells:
        lines.append(f"{c.op} on {c.backend} ({c.dtype}): {c.reason}\n    sample {c.sample}")
        lines += [f"    also {f['sample']}: {f['reason'][:160]}" for f in c.failed[1:4]]
    return "\n".join(lines)


def _check(grid, used: set[int]) -> None:
    assert not grid.load_errors, "library modules failed to import:\n" + "\n".join(
        f"{m}: {e}" for m, e in grid.load_errors.items())
    unknown = [c for c in grid.failures if not _known(c)]
    assert not unknown, f"{len(unknown)} failing cells:\n" + _report(unknown)
    for c in grid.failures:
        for f in c.failed:
            used.update(id(k) for k in _matching(c, f))
    silent = [c for c in grid.unsupported if not c.reason.strip()]
    assert not silent, "unsupported without a reason: " + ", ".join(f"{c.op}/{c.backend}/{c.dtype}" for c in silent)
    assert not [c for c in grid.cells if c.status not in ("pass", "fail", "unsupported")]


def _write(grid, name: str) -> None:
    OUT.mkdir(exist_ok=True)
    grid.save(OUT / f"{name}.md")
    grid.save(OUT / f"{name}.json")


def test_library_grid_on_the_reference_with_torch_and_gradients():
    grid = coverage.run(backends=["reference"], shapes="quick", limit={"grad": 1}, progress=False, workers=WORKERS)
    _write(grid, "coverage-reference")
    used: set[int] = set()
    _check(grid, used)
    # the reference takes every dtype an operator declares: nothing there may be "unsupported"
    declined = [c for c in grid.unsupported if c.backend == "reference"]
    assert not declined, _report(declined)
    # every operator is compared with PyTorch or says why not; every differentiable one had its gradient checked
    for name in grid.ops:
        torch_cells = [c for c in grid.cells if c.op == name and c.backend == "torch"]
        assert torch_cells and all(c.status != "unsupported" or c.reason for c in torch_cells)
        inf = ops.info(name)
        if inf.grad and "float64" in inf.dtypes:
            assert grid.cell(name, "grad", "float64").status in ("pass", "fail"), name
    stale = [k.why for k in KNOWN if id(k) not in used and any(re.fullmatch(k.backend, b) for b in grid.backends)]
    assert not stale, "these known failures no longer fail; remove them from KNOWN:\n" + "\n".join(stale)
    assert len(grid.ops) >= 200


# cpu: float32 with two samples per cell, the other storage paths (16-bit floats kept as bits, int32, bool) with
# one; float64 and int64 share the float32 and int32 code and are left to the full grid.
CPU_RUNS = [(["float32"], 2), (["float16", "bfloat16", "int32", "bool"], 1)]


@pytest.mark.parametrize(("dtypes", "samples"), CPU_RUNS, ids=["float32", "other-dtypes"])
def test_library_grid_on_cpu(dtypes, samples):
    grid = coverage.run(backends=["cpu"], dtypes=dtypes, shapes="quick", limit=samples, torch=False, grad=False,
                        progress=False, workers=WORKERS)
    _write(grid, f"coverage-cpu-{dtypes[0]}")
    _check(grid, set())
    declined = [c for c in grid.unsupported if c.backend == "cpu"]
    assert not declined, _report(declined)
    assert len(grid.ops) >= 200

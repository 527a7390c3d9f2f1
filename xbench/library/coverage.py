"""The coverage grid: operator x backend x dtype -> pass, fail (worst error) or unsupported (reason).

    python -m xbench coverage --quick --category unary --backends cpu,reference --out grid.md
    xb.coverage(categories=["unary"], backends=["cpu"], shapes="quick")

Columns are the backends (every installed one by default; one that is not available here gets
"unsupported (its reason)" cells), plus `torch` (the reference against PyTorch) and `grad` (gradients against
finite differences and torch.autograd, float64). The slow backends (cuda in numba's simulator, the Ascend
twin) run the `tiny` shape set unless told otherwise. Every run is saved as JSON under
`cache_dir("coverage")`.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import multiprocessing
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field

from ..cache import atomic_write
from ..config import cache_dir
from ..dtypes import SHORT
from ..ops import SHAPES, ShapeSet, info
from ..ops import list as op_list
from .harness import PSEUDO, Cell, check, iter_cells

SLOW_BACKENDS = ("cuda", "ascend")
DTYPE_ORDER = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")
_SYMBOL = {"pass": "✓", "fail": "✗", "unsupported": "·"}


@dataclass
class Grid:
    """The result of a coverage run."""

    cells: list[Cell]
    backends: list[str]
    shapes: dict[str, str]
    seconds: float = 0.0
    meta: dict = field(default_factory=dict)
    load_errors: dict[str, str] = field(default_factory=dict)    # library modules that failed to import

    @property
    def failures(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "fail"]

    @property
    def unsupported(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "unsupported"]

    @property
    def passed(self) -> list[Cell]:
        return [c for c in self.cells if c.status == "pass"]

    def cell(self, op: str, backend: str, dtype: str) -> Cell | None:
        for c in self.cells:
            if (c.op, c.backend, c.dtype) == (op, backend, dtype):
                return c
        return None

    @property
    def ops(self) -> list[str]:
        seen: dict[str, None] = {}
        for c in self.cells:
            seen.setdefault(c.op, None)
        return list(seen)

    @property
    def ok(self) -> bool:
        """No failing cell and no library module that failed to import."""
        return not self.failures and not self.load_errors

    def summary(self) -> str:
        n = len(self.cells)
        broken = f"; {len(self.load_errors)} library module(s) failed to import" if self.load_errors else ""
        return (f"{len(self.ops)} operators, {n} cells: {len(self.passed)} pass, {len(self.failures)} fail, "
                f"{len(self.unsupported)} unsupported ({self.seconds:.0f} s){broken}")

    # ---- renderings ----------------------------------------------------------------------------------
    def to_json(self) -> str:
        return json.dumps({"backends": self.backends, "shapes": self.shapes, "seconds": round(self.seconds, 1),
                           "meta": self.meta, "summary": self.summary(), "load_errors": self.load_errors,
                           "cells": [c.to_dict() for c in self.cells]}, indent=1)

    def to_csv(self) -> str:
        buf = io.StringIO()
        fields = list(Cell.__dataclass_fields__)
        w = csv.DictWriter(buf, fieldnames=fields)
        w.writeheader()
        for c in self.cells:
            w.writerow(c.to_dict())
        return buf.getvalue()

    def _dtypes_of(self, op: str) -> list[str]:
        ds = {c.dtype for c in self.cells if c.op == op and c.backend not in ("grad",)}
        return [d for d in DTYPE_ORDER if d in ds]

    def to_markdown(self) -> str:
        cols = self.backends
        lines = ["# xbench library coverage\n", self.summary() + "\n",
                 "| operator | category | dtype | " + " | ".join(cols) + " |",
                 "|---|---|---|" + "---|" * len(cols)]
        for op in self.ops:
            cat = info(op).category
            for d in self._dtypes_of(op):
                row = []
                for b in cols:
                    c = self.cell(op, b, "float64" if b == "grad" else d)
                    if b == "grad" and d != "float64":
                        c = None
                    row.append("" if c is None else _md_cell(c))
                lines.append(f"| `{op}` | {cat} | {d} | " + " | ".join(row) + " |")
        if self.load_errors:
            lines += ["", "## Library modules that failed to import", ""]
            lines += [f"- `{m}`: {e.splitlines()[0]}" for m, e in self.load_errors.items()]
        if self.failures:
            lines += ["", "## Failures", ""]
            lines += [f"- `{c.op}` {c.backend} {c.dtype}: {c.reason} — sample {c.sample}" for c in self.failures]
        return "\n".join(lines) + "\n"

    def text(self, width: int = 14) -> str:
        """One line per operator: per column, one symbol per dtype (✓ pass, ✗ fail, · unsupported)."""
        dts = [d for d in DTYPE_ORDER if any(c.dtype == d for c in self.cells)]
        head = f"{'operator':28s} " + " ".join(f"{b:>{width}s}" for b in self.backends)
        out = [f"dtypes per column: {' '.join(SHORT[d] for d in dts)}   (✓ pass  ✗ fail  · unsupported  "
               "- not taken)", head, "-" * len(head)]
        index = {(c.op, c.backend, c.dtype): c for c in self.cells}
        for op in self.ops:
            parts = []
            for b in self.backends:
                if b == "grad":
                    c = index.get((op, b, "float64"))
                    s = "-" if c is None else _SYMBOL[c.status]
                else:
                    s = "".join(_SYMBOL[index[(op, b, d)].status] if (op, b, d) in index else "-" for d in dts)
                parts.append(f"{s:>{width}s}")
            out.append(f"{op:28s} " + " ".join(parts))
        out.append("")
        out.append(self.summary())
        for m, e in self.load_errors.items():
            out.append(f"library module {m!r} failed to import: {e.splitlines()[0]}")
        if self.failures:
            out.append("\nfailures:")
            for c in self.failures:
                out.append(f"  {c.op} on {c.backend} ({c.dtype}): {c.reason}\n      sample {c.sample}")
        reasons: dict[tuple[str, str], list[str]] = {}
        for c in self.unsupported:
            reasons.setdefault((c.backend, c.reason), []).append(f"{c.op}/{SHORT.get(c.dtype, c.dtype)}")
        if reasons:
            out.append("\nunsupported, by reason:")
            for (b, r), where in sorted(reasons.items()):
                shown = ", ".join(where[:8]) + (f", ... ({len(where)} cells)" if len(where) > 8 else "")
                out.append(f"  {b}: {r}\n      {shown}")
        return "\n".join(out)

    def save(self, path) -> str:
        from pathlib import Path
        path = Path(path)
        suffix = path.suffix.lower()
        data = {".json": self.to_json, ".csv": self.to_csv, ".md": self.to_markdown,
                ".markdown": self.to_markdown, ".txt": self.text}.get(suffix)
        if data is None:
            raise ValueError(f"--out {path}: write a .json, .csv, .md or .txt file")
        atomic_write(path, data())
        return str(path)

    def __repr__(self) -> str:
        return f"<Grid {self.summary()}>"

    def _repr_markdown_(self) -> str:
        return self.to_markdown()


def _md_cell(c: Cell) -> str:
    if c.status == "pass":
        return "pass"
    if c.status == "fail":
        if c.error == c.error and c.error != float("inf"):
            return f"**fail** ({c.error:.2g}, {c.ratio:.2g}x tol)"
        return "**fail** (error)"
    return f"unsupported ({c.reason.replace('|', '/')})"


def default_backends() -> list[str]:
    from .. import backends
    return list(backends.names())


def select_ops(ops: Iterable[str] | None = None, categories: Iterable[str] | None = None) -> list[str]:
    """Operator names (one per operator, not aliases) by name or category, in category order."""
    names = op_list(aliases=False)
    if ops:
        want = list(ops)
        missing = [n for n in want if n not in op_list()]
        if missing:
            info(missing[0])               # raises with a did-you-mean
        names = [info(n).name for n in want]
    if categories:
        cats = set(categories)
        names = [n for n in names if info(n).category in cats]
    return names


def run(ops: Iterable[str] | None = None, categories: Iterable[str] | None = None,
        backends: Sequence[str] | None = None, dtypes: Iterable[str] | None = None,
        shapes: str | ShapeSet = "full", slow_shapes: str | ShapeSet = "tiny",
        limit: int | dict[str, int] | None = None, slow_limit: int | None = None,
        torch: bool = True, grad: bool = True, progress: bool = True, save: bool = True,
        workers: int = 1) -> Grid:
    """Run the grid. `shapes`: the shape set for reference/cpu; `slow_shapes`: for cuda and ascend;
    `limit` / `slow_limit`: at most that many samples per cell (spread over the set; `limit` may be a dict
    by column, e.g. {"cpu": 2} keeps every sample on the reference and PyTorch columns); `workers`: processes
    that check operators side by side (compiling is the cost, so this scales with cores)."""
    t0 = time.perf_counter()
    names = select_ops(ops, categories)
    cols = list(backends) if backends else default_backends()
    cols = [b for b in cols if b not in PSEUDO]
    if torch:
        cols.append("torch")
    if grad:
        cols.append("grad")
    sets = {b: (slow_shapes if b in SLOW_BACKENDS else shapes) for b in cols}
    sets = {b: SHAPES[v] if isinstance(v, str) else v for b, v in sets.items()}
    shape_of = {b: v.name for b, v in sets.items()}
    limit_of = {b: slow_limit if b in SLOW_BACKENDS else limit.get(b) if isinstance(limit, dict) else limit
                for b in cols}
    want = set(dtypes) if dtypes else None
    total = sum(1 for _ in iter_cells(names, cols, want, shape_of))
    by_op: dict[str, list[Cell]] = {}
    done = 0

    def report(cells: list[Cell]) -> None:
        nonlocal done
        for c in cells:
            done += 1
            if progress:
                print(f"[{done}/{total}] {c.op} {c.backend} {c.dtype}: {c.short()[:100]} ({c.seconds:.1f} s)",
                      file=sys.stderr, flush=True)

    if workers > 1 and len(names) > 1:
        ctx = multiprocessing.get_context("spawn")     # numba and torch do not survive a fork
        with ProcessPoolExecutor(min(workers, len(names)), mp_context=ctx) as pool:
            futures = {pool.submit(_op_cells, n, cols, want, sets, limit_of): n for n in names}
            for f in as_completed(futures):
                by_op[futures[f]] = f.result()
                report(by_op[futures[f]])
    else:
        for n in names:
            by_op[n] = _op_cells(n, cols, want, sets, limit_of)
            report(by_op[n])
    cells = [c for n in names for c in by_op[n]]
    from ..ops import LOAD_ERRORS
    grid = Grid(cells, cols, shape_of, time.perf_counter() - t0,
                {"ops": len(names), "limit": limit, "slow_limit": slow_limit, "workers": workers},
                dict(LOAD_ERRORS))
    if save:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = cache_dir("coverage") / f"grid-{stamp}.json"
        atomic_write(path, grid.to_json())
        atomic_write(cache_dir("coverage") / "latest.json", grid.to_json())
        grid.meta["saved"] = str(path)
    return grid


def _op_cells(name: str, cols: list[str], dtypes: set[str] | None, sets: dict[str, ShapeSet],
              limit_of: dict[str, int | None]) -> list[Cell]:
    """Every cell of one operator's row (the unit of work of a worker)."""
    return [check(n, backend, dtype, sets[backend], limit_of[backend])
            for n, backend, dtype in iter_cells([name], cols, dtypes, {b: v.name for b, v in sets.items()})]


def coverage(ops: Iterable[str] | None = None, categories: Iterable[str] | None = None,
             backends: Sequence[str] | None = None, dtypes: Iterable[str] | None = None,
             shapes: str | ShapeSet = "quick",
             **kwargs) -> Grid:
    """The library's coverage grid (see `run`); the notebook shows it as a markdown table."""
    kwargs.setdefault("progress", True)
    return run(ops, categories, backends, dtypes, shapes, **kwargs)


def _csv(s: str | None) -> list[str] | None:
    return [x.strip() for x in s.split(",") if x.strip()] if s else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m xbench coverage", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--category", "--categories", dest="categories", help="comma-separated categories")
    p.add_argument("--ops", help="comma-separated operator names")
    p.add_argument("--backends", help="comma-separated backends (default: every installed one)")
    p.add_argument("--dtypes", help="comma-separated dtypes (default: every dtype each operator takes)")
    p.add_argument("--quick", action="store_true", help="the quick shape set (same as --shapes quick)")
    p.add_argument("--shapes", choices=sorted(SHAPES), default="full", help="shape set for reference and cpu")
    p.add_argument("--slow-shapes", choices=sorted(SHAPES), default="tiny", help="shape set for cuda and ascend")
    p.add_argument("--limit", type=int, help="at most this many samples per cell")
    p.add_argument("--slow-limit", type=int, help="at most this many samples per cell on cuda and ascend")
    p.add_argument("--no-torch", action="store_true", help="leave out the PyTorch cross-check")
    p.add_argument("--no-grad", action="store_true", help="leave out the gradient check")
    p.add_argument("--workers", type=int, default=1, help="check operators in this many processes")
    p.add_argument("--out", help="also write the grid to FILE (.json, .csv, .md or .txt)")
    p.add_argument("--list", action="store_true", help="list the operators and their categories, then stop")
    argv = list(argv or [])
    a = p.parse_args(argv[1:] if argv[:1] == ["--"] else argv)
    if a.list:
        for n in select_ops(_csv(a.ops), _csv(a.categories)):
            i = info(n)
            alias = f" (also {', '.join(i.aliases)})" if i.aliases else ""
            print(f"{i.category:14s} {n}{alias}")
        return 0
    grid = run(_csv(a.ops), _csv(a.categories), _csv(a.backends), _csv(a.dtypes),
               "quick" if a.quick else a.shapes, a.slow_shapes, a.limit, a.slow_limit,
               torch=not a.no_torch, grad=not a.no_grad, workers=a.workers)
    print(grid.text())
    print(f"saved {grid.meta.get('saved')}", file=sys.stderr)
    if a.out:
        print(f"wrote {grid.save(a.out)}", file=sys.stderr)
    return 0 if grid.ok else 1

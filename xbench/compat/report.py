"""`xb.compat.report`: the migration's cost as a number. Lines of the legacy kernel, the device functions it
calls and its launch code, against lines of the xbench version; and the backends the lifted operator now runs
on, each checked against the original kernel on the same inputs.

    r = xb.compat.report(op, launch=launch_saxpy)
    r.legacy_lines, r.xbench_lines, [b.backend for b in r.backends if b.ok]
"""
from __future__ import annotations

import ast
import html
import inspect
import textwrap
import time
from dataclasses import asdict, dataclass, field

from ..errors import BackendError, XbenchError
from .source import code_lines, source_of

BACKENDS = ("cpu", "cuda", "ascend")


@dataclass
class BackendRun:
    backend: str
    status: str                    # matches | differs | unsupported (the backend declines) | unavailable | fails
    max_abs_error: float = 0.0
    message: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "matches"


@dataclass
class MigrationReport:
    name: str
    kernel: str
    kernel_lines: int
    device_lines: int
    launch_lines: int | None              # None: no launch code was given
    xbench_lines: int
    source: str
    inputs: str
    backends: list[BackendRun] = field(default_factory=list)
    device_functions: list[str] = field(default_factory=list)

    @property
    def legacy_lines(self) -> int:
        return self.kernel_lines + self.device_lines + (self.launch_lines or 0)

    @property
    def runs_on(self) -> list[str]:
        return [b.backend for b in self.backends if b.ok]

    @property
    def ratio(self) -> float:
        return self.legacy_lines / max(self.xbench_lines, 1)

    def _legacy_parts(self) -> str:
        parts = [f"kernel {self.kernel_lines}"]
        if self.device_lines:
            parts.append(f"device functions {self.device_lines}")
        parts.append(f"launch {self.launch_lines}" if self.launch_lines is not None else "launch code not given")
        return ", ".join(parts)

    def _backend_text(self, b: BackendRun) -> str:
        mark = {"matches": "✓", "differs": "✗", "unsupported": "·", "unavailable": "·", "fails": "✗"}[b.status]
        return f"{b.backend} {mark}"

    def text(self) -> str:
        lines = [f"{self.name}: lifted from the numba.cuda kernel {self.kernel}",
                 f"  legacy: {self.legacy_lines:3d} lines ({self._legacy_parts()})",
                 f"  xbench: {self.xbench_lines:3d} lines ({_fewer(self.ratio)})",
                 "  runs on: " + "   ".join(self._backend_text(b) for b in self.backends)
                 + f"   (each against the kernel on {self.inputs})"]
        for b in self.backends:
            if not b.ok and b.message:
                lines.append(f"    {b.backend}: {b.status}: {b.message}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<MigrationReport {self.name}: {self.legacy_lines} -> {self.xbench_lines} lines, runs on " \
               f"{', '.join(self.runs_on) or 'nothing'}>"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["legacy_lines"] = self.legacy_lines
        d["runs_on"] = self.runs_on
        return d

    def _repr_html_(self) -> str:
        return Migration([self])._repr_html_()


class Migration(list):
    """Reports of several kernels, shown as one table."""

    def text(self) -> str:
        w = max([len(r.name) for r in self] + [12])
        head = f"{'kernel':{w}s} {'legacy':>7s} {'xbench':>7s} {'ratio':>6s}  runs on (checked against the kernel)"
        rows = [head, "-" * len(head)]
        for r in self:
            rows.append(f"{r.name:{w}s} {r.legacy_lines:7d} {r.xbench_lines:7d} {r.ratio:5.1f}x  "
                        + "  ".join(r._backend_text(b) for b in r.backends))
        total_l = sum(r.legacy_lines for r in self)
        total_x = sum(r.xbench_lines for r in self)
        rows.append("-" * len(head))
        rows.append(f"{'total':{w}s} {total_l:7d} {total_x:7d} {total_l / max(total_x, 1):5.1f}x")
        notes = [f"  {r.name} on {b.backend}: {b.status}: {b.message}" for r in self for b in r.backends
                 if not b.ok and b.message]
        return "\n".join(rows + (["", "not run or not matching:"] + notes if notes else []))

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return self.text()

    def _repr_html_(self) -> str:
        cells = ["<table><thead><tr><th>kernel</th><th>legacy lines</th><th>of which launch</th><th>xbench lines"
                 "</th><th>fewer</th>" + "".join(f"<th>{b}</th>" for b in self._backends()) + "</tr></thead><tbody>"]
        for r in self:
            by = {b.backend: b for b in r.backends}
            cols = []
            for name in self._backends():
                b = by.get(name)
                cols.append("<td></td>" if b is None else
                            f"<td title='{html.escape(b.message)}'>{html.escape(r._backend_text(b))}</td>")
            launch = "—" if r.launch_lines is None else str(r.launch_lines)
            cells.append(f"<tr><td><code>{html.escape(r.name)}</code></td><td>{r.legacy_lines}</td><td>{launch}</td>"
                         f"<td>{r.xbench_lines}</td><td>{r.ratio:.1f}x</td>{''.join(cols)}</tr>")
        cells.append("</tbody></table>")
        return "".join(cells)

    def _backends(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self:
            for b in r.backends:
                seen.setdefault(b.backend, None)
        return list(seen)


def report(ops, launch=None, backends=BACKENDS, inputs: dict | None = None):
    """A `MigrationReport` for a lifted operator (or a `Migration` table for a list of them). `launch`: the legacy
    launch code to count (default: the `launch=` given to from_cuda; for a list, a dict by operator name);
    `inputs`: the operator's arguments to check each backend on (default: the example it was verified on)."""
    if isinstance(ops, (list, tuple)):
        return Migration(report(op, launch=launch.get(op.name) if isinstance(launch, dict) else launch,
                                backends=backends, inputs=inputs) for op in ops)
    from .lift import LiftedOperator
    from .verify import describe
    op = ops
    if not isinstance(op, LiftedOperator):
        raise XbenchError(f"report() takes operators made by xb.compat.from_cuda, got {type(op).__name__}",
                          hint="op = xb.compat.from_cuda(kernel, out='out'); xb.compat.report(op)")
    src = op.spec.src
    kernel_lines = code_lines("".join(src.text_lines))
    devices = _device_functions(src)
    device_lines = sum(code_lines("".join(source_of(f).text_lines)) for f in devices)
    launch = launch if launch is not None else op.spec.launch
    launch_lines = None
    if launch is not None:
        try:
            launch_lines = code_lines(textwrap.dedent(inspect.getsource(launch)))
        except (OSError, TypeError):
            launch_lines = None
    args = dict(inputs if inputs is not None else op.example or {})
    runs = _runs(op, backends, args)
    return MigrationReport(op.name, src.name, kernel_lines, device_lines, launch_lines, code_lines(op.source),
                           op.source, describe(args), runs, [getattr(f, "__name__", str(f)) for f in devices])


def _runs(op, backends, args: dict) -> list[BackendRun]:
    """Each backend against the kernel on `args` (the kernel run once for all of them)."""
    from ..backends import get
    out: dict[str, BackendRun] = {}
    ready = []
    for b in backends:
        try:
            ok, why = get(b).available()
        except XbenchError as exc:
            ok, why = False, exc.message
        if ok:
            ready.append(b)
        else:
            out[b] = BackendRun(b, "unavailable", message=why)
    for b in ready:
        t0 = time.perf_counter()
        try:
            checks = op.check(**args, backends=(b,))
        except BackendError as exc:
            out[b] = BackendRun(b, "unsupported", message=exc.message, seconds=time.perf_counter() - t0)
            continue
        except XbenchError as exc:
            out[b] = BackendRun(b, "fails", message=exc.message, seconds=time.perf_counter() - t0)
            continue
        bad = [c for c in checks if not c.ok]
        err = max((c.max_abs_error for c in checks), default=0.0)
        out[b] = BackendRun(b, "differs" if bad else "matches", err, "; ".join(c.message for c in bad),
                            round(time.perf_counter() - t0, 3))
    return [out[b] for b in backends]


def _fewer(ratio: float) -> str:
    return f"{ratio:.1f}x fewer" if ratio >= 1 else f"{1 / ratio:.1f}x more"


def _device_functions(src, seen: set | None = None) -> list:
    """Device functions (and numba.jit or plain Python functions) the kernel calls, transitively."""
    seen = set() if seen is None else seen
    out = []
    for n in ast.walk(src.tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            try:
                f = src.resolve(n.func.id)
            except KeyError:
                continue
            py = getattr(f, "py_func", f)
            if inspect.isfunction(py) and py not in seen and py is not src.py:
                seen.add(py)
                out.append(f)
                out.extend(_device_functions(source_of(f), seen))
    return out

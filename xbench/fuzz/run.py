"""The fuzzing loop: generate, trace, judge, run every backend in the worker, shrink and save what fails."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from ..errors import XbenchError
from .gen import Generator, Options
from .oracle import Expected, expected, judge
from .program import Program
from .shrink import shrink
from .worker import Outcome, Worker

BACKENDS = ("cpu", "cuda", "ascend")
# numba's CUDA simulator runs every thread in Python: past a few thousand elements an operator takes minutes
CUDA_MAX_ELEMENTS = 4096
OPTIONS = {"cuda": {"ptx": False}}


@dataclass
class Finding:
    backend: str
    kind: str                 # wrong | error | crash | hang | frontend | reference
    message: str
    operator: int
    source: str
    minimal: str = ""
    path: str = ""
    signature: str = ""
    duplicate_of: str = ""
    shrink_steps: int = 0


@dataclass
class Stats:
    operators: int = 0
    rejected: int = 0
    judged_elements: int = 0
    total_elements: int = 0
    per_backend: dict = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, backend: str, kind: str) -> None:
        d = self.per_backend.setdefault(backend, {"tried": 0, "ok": 0, "wrong": 0, "error": 0, "unsupported": 0,
                                                  "crash": 0, "hang": 0})
        d["tried"] += 1
        d[kind] += 1


def operator_seed(seed: int, i: int) -> int:
    return int(np.random.SeedSequence([seed, i]).generate_state(1)[0])


class Fuzzer:
    def __init__(self, backends=BACKENDS, seed: int = 0, save: str | None = None, shrink_s: float = 120.0,
                 nice: int = 0, log: Callable[[str], None] = print, options: Options | None = None,
                 cuda_max_elements: int = CUDA_MAX_ELEMENTS, timeout: float = 240.0, cache_dir: str | None = None):
        self.backends = tuple(backends)
        self.seed = seed
        self.save = save
        self.shrink_s = shrink_s
        self.log = log
        self.gen = Generator(np.random.default_rng(seed), options or Options())
        self.cuda_max = cuda_max_elements
        self.timeout = timeout
        self._own_cache = cache_dir is None
        self.cache_dir = cache_dir or tempfile.mkdtemp(prefix="xbench-fuzz-cache-")
        self.worker = Worker(self.cache_dir, nice=nice)
        self.stats = Stats()
        self.findings: list[Finding] = []
        self._signatures: dict[str, str] = {}
        self._frontend_seen = 0

    def close(self) -> None:
        self.worker.close()
        if self._own_cache:
            shutil.rmtree(self.cache_dir, ignore_errors=True)

    # ---- one operator ---------------------------------------------------------------------------------
    def prepare(self, prog: Program):
        """(graph, arrays, expected): the traced program, its inputs and the reference's judgement."""
        op = prog.operator()
        arrays = prog.arrays()
        graph = op.trace(*arrays)
        return graph, arrays, expected(graph, arrays)

    def eligible(self, backend: str, prog: Program, graph) -> bool:
        if backend == "cuda":
            biggest = max([v.size for v in graph.vars()] + [0])
            return biggest <= self.cuda_max
        return True

    def run_backend(self, prog: Program, arrays, backend: str) -> Outcome:
        return self.worker.run(prog.source(), prog.const_values(), arrays, backend, self.timeout,
                               OPTIONS.get(backend))

    def verdict(self, out: Outcome, exp: Expected) -> tuple[str, str]:
        if out.kind != "ok":
            return out.kind, out.error
        v = judge(exp, out.outputs)
        return ("ok", "") if v.ok else ("wrong", v.message)

    def check(self, prog: Program, backends=None) -> dict[str, tuple[str, str]]:
        """{backend: (kind, message)} for one program (kind ok, wrong, error, unsupported, crash, hang)."""
        graph, arrays, exp = self.prepare(prog)
        res = {}
        for b in backends or self.backends:
            if self.eligible(b, prog, graph):
                res[b] = self.verdict(self.run_backend(prog, arrays, b), exp)
        return res

    # ---- the loop -------------------------------------------------------------------------------------
    def fuzz(self, minutes: float | None = None, count: int | None = None, start: int = 0) -> Stats:
        t0 = time.monotonic()
        deadline = t0 + 60 * minutes if minutes else None
        last = t0
        i = start
        try:
            while (deadline is None or time.monotonic() < deadline) and (count is None or i < start + count):
                self.one(i)
                i += 1
                if time.monotonic() - last > 30 or (count is not None and i == start + count):
                    last = time.monotonic()
                    self.log(self.progress(time.monotonic() - t0))
        finally:
            self.stats.seconds = time.monotonic() - t0
        return self.stats

    def one(self, i: int) -> None:
        prog = self.gen.program(operator_seed(self.seed, i))
        self._record_frontend(i)
        stage = "language"
        try:
            op = prog.operator()
            arrays = prog.arrays()
            graph = op.trace(*arrays)
            stage = "reference"
            exp = expected(graph, arrays)
        except XbenchError:
            self.stats.rejected += 1
            return
        except Exception as exc:                       # tracing or the reference broke: a finding too
            self._found(Finding(stage, "error", f"{type(exc).__name__}: {exc}", i, prog.source("code")), prog,
                        None)
            return
        self.stats.operators += 1
        self.stats.judged_elements += exp.judged
        self.stats.total_elements += exp.total
        for b in self.backends:
            if not self.eligible(b, prog, graph):
                continue
            kind, msg = self.verdict(self.run_backend(prog, arrays, b), exp)
            self.stats.count(b, kind)
            if kind not in ("ok", "unsupported"):
                self._found(Finding(b, kind, msg, i, prog.source("code")), prog, b)

    def _record_frontend(self, i: int) -> None:
        for text, tb in self.gen.frontend[self._frontend_seen:]:
            last = tb.strip().splitlines()[-1]
            f = Finding("language", "error", f"{last} (tracing `{text}`)", i, text, minimal=text,
                        signature=_signature("language", "error", last, text))
            if f.signature in self._signatures:
                f.duplicate_of = self._signatures[f.signature]
            else:
                self._signatures[f.signature] = f"operator {i}"
            self.findings.append(f)
            self.log(f"  [{i}] language: {last} while tracing `{text}`")
        self._frontend_seen = len(self.gen.frontend)

    def _found(self, f: Finding, prog: Program, backend: str | None) -> None:
        self.log(f"  [{f.operator}] {f.backend}: {f.kind}: {_first(f.message)}")
        minimal = prog
        first_error = _error_type(f.message)

        def fails(p: Program) -> bool:
            try:
                graph, arrays, exp = self.prepare(p)
            except XbenchError:
                return False
            except Exception as exc:
                return backend is None and type(exc).__name__ == first_error
            if backend is None or not self.eligible(backend, p, graph):
                return False
            kind, msg = self.verdict(self.run_backend(p, arrays, backend), exp)
            return kind == f.kind and (kind != "error" or _error_type(msg) == first_error)

        if self.shrink_s > 0:
            minimal, f.shrink_steps = shrink(prog, fails, self.shrink_s)
        f.minimal = minimal.source("code")
        f.signature = _signature(f.backend, f.kind, f.message, minimal.body())
        if f.signature in self._signatures:
            f.duplicate_of = self._signatures[f.signature]
            self.log(f"    the same as {f.duplicate_of}")
        else:
            self._signatures[f.signature] = f"operator {f.operator} on {f.backend}"
            if self.save:
                from .regress import write_test
                f.path = write_test(self.save, minimal, f, self.seed)
                self.log(f"    minimal operator ({len(minimal.stmts)} statement(s)) saved as {f.path}")
        self.findings.append(f)

    # ---- reporting ------------------------------------------------------------------------------------
    def progress(self, seconds: float) -> str:
        s = self.stats
        parts = [f"{int(seconds // 60)}m{int(seconds % 60):02d}s", f"{s.operators} operators"]
        for b, d in s.per_backend.items():
            bad = d["wrong"] + d["error"] + d["crash"] + d["hang"]
            parts.append(f"{b} {d['tried']}" + (f" ({bad} failing)" if bad else ""))
        unique = len({f.signature for f in self.findings})
        parts.append(f"{unique} distinct finding(s)")
        return "  ".join(parts)

    def summary(self) -> str:
        s = self.stats
        lines = [f"{s.operators} operators in {s.seconds / 60:.1f} min (seed {self.seed}); {s.rejected} refused by "
                 f"the language; {s.judged_elements} of {s.total_elements} output elements judged", "",
                 f"{'backend':8s} {'tried':>6s} {'ok':>6s} {'wrong':>6s} {'error':>6s} {'crash':>6s} {'hang':>5s} "
                 f"{'unsupported':>11s}"]
        for b, d in s.per_backend.items():
            lines.append(f"{b:8s} {d['tried']:6d} {d['ok']:6d} {d['wrong']:6d} {d['error']:6d} {d['crash']:6d} "
                         f"{d['hang']:5d} {d['unsupported']:11d}")
        distinct = [f for f in self.findings if not f.duplicate_of]
        if distinct:
            lines += ["", f"{len(distinct)} distinct finding(s):"]
            for f in distinct:
                n = 1 + sum(1 for g in self.findings if g.duplicate_of and g.signature == f.signature)
                lines.append(f"- {f.backend} {f.kind} x{n}: {_first(f.message)}" + (f"  [{f.path}]" if f.path else ""))
        return "\n".join(lines)

    def write_json(self, path: str) -> None:
        data = {"seed": self.seed, "backends": list(self.backends), "stats": asdict(self.stats),
                "findings": [asdict(f) for f in self.findings]}
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1, default=str)
        os.replace(tmp, path)


def _first(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) < 220 else line[:217] + "..."


def _error_type(msg: str) -> str:
    return msg.split(":", 1)[0] if msg else ""


def _signature(backend: str, kind: str, message: str, body: str) -> str:
    """The same bug found twice has the same signature: the backend, the kind, the error's type and the
    minimal body with names and numbers abstracted."""
    norm = re.sub(r"\b[a-zA-Z_]\w*\b", lambda m: m.group(0) if m.group(0).startswith(("xb", "axis")) or
                  len(m.group(0)) > 6 else "v", body)
    norm = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", norm)
    norm = re.sub(r"\s+", " ", norm)
    key = f"{backend}|{kind}|{_error_type(message) if kind == 'error' else ''}|{norm}"
    return hashlib.sha1(key.encode()).hexdigest()[:12]

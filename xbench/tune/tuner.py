"""`xb.tune(op, *arrays, backend="cpu", budget=...)`: find the best schedule of every kernel of an operator.

For each kernel: build its search space from the backend's knobs (pruned by hard limits), pick candidates with a
strategy, compile them (ahead, in worker processes where the backend supports it), check every candidate against
the reference before timing it (a candidate that changes the numbers is rejected and recorded as such), time the
kernel alone with the profiler's protocol, alternately with the default schedule (a time is the candidate's
ratio to the default, in the default's milliseconds, so a shared machine's drift cancels), re-measure the top few
side by side, and store everything in the tuning database. Backends without their hardware here are tuned against the performance predictor and labelled
"predicted" everywhere.
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .. import backends
from ..config import in_notebook, log
from ..errors import XbenchError
from ..profile.timing import bench, fmt_time
from ..verify import check, reference_outputs
from . import space as S
from .db import config_text, default_target, kernel_key, tuning_db
from .strategies import STRATEGIES


@dataclass
class Candidate:
    kernel: str
    config: dict[str, Any]
    status: str                      # measured | predicted | rejected | failed | pruned
    time_ms: float | None = None
    spread: float | None = None
    message: str = ""
    reused: bool = False             # taken from the database, not evaluated in this run

    def row(self) -> dict:
        return {"kernel": self.kernel, **self.config, "status": self.status, "time_ms": self.time_ms,
                "message": self.message}


@dataclass
class KernelResult:
    kernel: str
    default: dict[str, Any]
    best: dict[str, Any]
    default_ms: float | None
    best_ms: float | None
    candidates: list[Candidate] = field(default_factory=list)
    pruned: int = 0

    @property
    def speedup(self) -> float | None:
        return self.default_ms / self.best_ms if self.default_ms and self.best_ms else None


@dataclass
class TuneResult:
    op: str
    backend: str
    target: str
    predicted: bool
    kernels: list[KernelResult]
    seconds: float

    @property
    def best(self) -> dict[str, dict[str, Any]]:
        """The best schedule per kernel (pass as `schedule=` to run/compile; `op(...)` uses it by itself)."""
        return {k.kernel: k.best for k in self.kernels}

    @property
    def default_ms(self) -> float:
        return sum(k.default_ms or 0 for k in self.kernels)

    @property
    def best_ms(self) -> float:
        return sum(k.best_ms or 0 for k in self.kernels)

    @property
    def speedup(self) -> float:
        return self.default_ms / self.best_ms if self.best_ms else 1.0

    @property
    def candidates(self) -> list[Candidate]:
        return [c for k in self.kernels for c in k.candidates]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for c in self.candidates:
            out[c.status] = out.get(c.status, 0) + 1
        out["pruned"] = sum(k.pruned for k in self.kernels)
        return out

    def table(self) -> str:
        label = " (predicted)" if self.predicted else ""
        lines = [f"tuned {self.op} on {self.backend} ({self.target}){label} in {self.seconds:.1f} s: "
                 f"{self.default_ms:.3f} ms -> {self.best_ms:.3f} ms ({self.speedup:.2f}x); "
                 + ", ".join(f"{v} {k}" for k, v in self.counts().items())]
        for k in self.kernels:
            lines.append(f"  {k.kernel}: default {_ms(k.default_ms)} -> best {_ms(k.best_ms)}  {k.best}")
            for c in sorted(k.candidates, key=lambda c: (c.time_ms is None, c.time_ms or 0)):
                extra = f"  {c.message}" if c.message else ""
                lines.append(f"    {c.status:9s} {_ms(c.time_ms):>12s}  {c.config}{extra}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_pandas(self):
        import pandas as pd
        return pd.DataFrame([c.row() for c in self.candidates])

    def plot(self, kernel: str | None = None):
        from ..viz.tuning import candidates_figure
        return candidates_figure(self, kernel)

    def heatmap(self, x: str, y: str, kernel: str | None = None):
        from ..viz.tuning import heatmap_figure
        return heatmap_figure(self, x, y, kernel)


def _ms(v: float | None) -> str:
    return f"{v:.3f} ms" if v is not None else "-"


class Progress:
    """A progress line (terminal) or bar (Jupyter) showing candidates done and the best time so far."""

    def __init__(self, total: int, label: str, enabled: bool = True):
        self.total, self.label, self.done, self.best = total, label, 0, None
        self.enabled = enabled
        self.widget = None
        if enabled and in_notebook():
            import ipywidgets as w
            from IPython.display import display
            self.bar = w.IntProgress(min=0, max=max(total, 1), description="tuning")
            self.text = w.HTML()
            self.widget = w.HBox([self.bar, self.text])
            display(self.widget)

    def update(self, time_ms: float | None, predicted: bool) -> None:
        self.done += 1
        if time_ms is not None and (self.best is None or time_ms < self.best):
            self.best = time_ms
        best = f"best so far {fmt_time(self.best).strip()}{' (predicted)' if predicted else ''}" if self.best \
            else "no valid candidate yet"
        if not self.enabled:
            return
        if self.widget is not None:
            self.bar.value = self.done
            self.text.value = f"{self.label}: {self.done}/{self.total} &nbsp; {best}"
        else:
            sys.stderr.write(f"\r{self.label}: {self.done}/{self.total}  {best}   ")
            sys.stderr.flush()

    def finish(self, best_ms: float | None, predicted: bool) -> None:
        """End on the kernel's final best time (the table's: the top few re-measured side by side), so the bar
        never shows a time the result does not have."""
        self.best = best_ms
        if not self.enabled:
            return
        label = " (predicted)" if predicted else " (re-measured)"
        best = f"best {fmt_time(best_ms).strip()}{label}" if best_ms is not None else "no valid candidate"
        if self.widget is not None:
            self.bar.value = self.bar.max
            self.text.value = f"{self.label}: {self.done}/{self.total} &nbsp; {best}"
        else:
            sys.stderr.write(f"\r{self.label}: {self.done}/{self.total}  {best}   ")
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.widget is None:
            sys.stderr.write("\n")


def _measurable(backend: str, art) -> bool:
    return not getattr(art, "predicted", False) and hasattr(art, "kernel_runners")


def _predict(art, kernel: str, target: str) -> float | None:
    """Predicted time of one kernel on `target`: the artifact's own model if it has one, else the predictor."""
    own = getattr(art, "predict_ms", None)
    if own is not None:
        return own(kernel, target)
    try:
        from ..hw.predict import predict_kernel_ms
    except ImportError as exc:
        raise XbenchError("tuning a backend without its hardware needs the performance predictor "
                          "(xbench.hw.predict)") from exc
    return predict_kernel_ms(art, kernel, target)


@dataclass
class _Run:
    """What every step of one tuning run needs."""
    op: Any
    args: tuple
    kwargs: dict
    backend: str
    be: Any
    target: str
    arrays: list
    refs: list
    predicted: bool
    current: dict
    budget: int
    strategy: str
    top: int
    resume: bool
    progress: bool
    seed: int
    pool: Any
    program: Any
    ref: Any = None                  # the kernel's default schedule, which measured candidates are timed against
    ref_ms: float = 0.0              # its time at the start of the kernel's search


def tune(op, *args, backend: str = "cpu", budget: int = 32, strategy: str = "auto", target: str | None = None,
         kernels: list[str] | None = None, restrict: dict[str, dict[str, tuple]] | None = None, top: int = 3,
         workers: int | None = None, resume: bool = True, progress: bool = True, seed: int = 0,
         **kwargs) -> TuneResult:
    """Tune the schedule of every kernel of `op` at the shapes of `args` on `backend`.

    budget: candidates evaluated per kernel; strategy: "exhaustive", "random", "guided" or "auto" (exhaustive when
    the space fits the budget); target: the hardware the time is for ("cpu-local" for measured cpu runs; e.g.
    "h100" / "ascend-910b" for predicted ones); kernels: tune only these; restrict: {kernel: {knob: choices}}
    narrows a space; workers: processes compiling ahead (default: the machine's cores from 4, else
    in-process); resume: reuse candidates
    already in the database (an interrupted search picks up where it stopped).
    """
    t_start = time.perf_counter()
    be = backends.get(backend)
    program = op.lower(*args, **kwargs)
    arrays = op.arrays(*args, **kwargs)
    default_art = op.compile(backend, *args, **kwargs)
    if workers is None:
        # each compiling worker is a fresh Python importing numba: it pays off from 4 cores (on 2: softmax with
        # 8 candidates took 33 s with 2 workers, 11 s in-process)
        workers = os.cpu_count() if (os.cpu_count() or 1) >= 4 else 1
    run = _Run(op, args, kwargs, backend, be,
               target or default_target(backend),
               arrays, reference_outputs(program.graph, arrays), not _measurable(backend, default_art),
               {k.name: dict(be.default_schedule(k)) for k in program.kernels}, budget, strategy, top, resume,
               progress, seed, _pool(be, workers), program)
    results = []
    try:
        for k in program.kernels:
            if kernels is None or k.name in kernels:
                results.append(_tune_kernel(run, k, (restrict or {}).get(k.name)))
    finally:
        if run.pool is not None:
            run.pool.shutdown(cancel_futures=True)
    op.forget_artifacts()
    return TuneResult(op.name, backend, run.target, run.predicted, results, time.perf_counter() - t_start)


def _tune_kernel(run: _Run, k, restrict) -> KernelResult:
    db = tuning_db()
    sp = S.build(run.be, run.program, k, restrict)
    key = kernel_key(k, run.backend, run.target)
    known = db.measured(key) if run.resume else {}
    strat = run.strategy if run.strategy != "auto" else ("exhaustive" if sp.size <= run.budget else "guided")
    if strat not in STRATEGIES:
        raise XbenchError(f"unknown tuning strategy {strat!r}", hint=f"use one of {', '.join(STRATEGIES)}")
    bar = Progress(min(run.budget, sp.size), f"{run.op.name}/{k.name}", run.progress)
    cands: list[Candidate] = []
    meta = {"op": run.op.name, "kernel": k.name, "backend": run.backend, "target": run.target}

    def evaluate(config: dict) -> float | None:
        r = known.get(config_text(config))
        if r is not None:
            c = Candidate(k.name, config, r["status"], r["time_ms"], r["spread"], r["message"] or "", True)
        else:
            best = min((c.time_ms for c in cands if c.status == "measured"), default=None)
            c = _evaluate(run, k.name, config, best)
            db.record(key, config, c.status, c.time_ms, c.spread, run.predicted, c.message, **meta)
        cands.append(c)
        ok = c.status in ("measured", "predicted")
        bar.update(c.time_ms if ok else None, run.predicted)
        return c.time_ms if ok else None

    if not run.predicted:
        run.ref = _runner(run, k.name, sp.configs[0])
        run.ref_ms = bench(run.ref).median_ms
    order = STRATEGIES[strat](sp, run.budget, evaluate, seed=run.seed)
    if strat in ("exhaustive", "random"):
        chosen = list(order)
        _precompile(run, k.name, chosen, known)
        for config in chosen:
            evaluate(config)
    else:
        for _ in order:       # guided: the strategy measures through `evaluate` itself, one step at a time
            pass
    valid = [c for c in cands if c.status in ("measured", "predicted")]
    if not valid:
        bar.close()
        raise XbenchError(f"no candidate schedule of {k.name} passed verification",
                          hint="the rejected candidates are in the result and in xb.tuning_db()")
    top = sorted(valid, key=lambda c: c.time_ms)[:run.top]
    top = [c for c in top if c.time_ms <= SLOW * top[0].time_ms]           # not the ones timed once
    if not run.predicted and len(top) > 1:
        _remeasure(run, k.name, top)
    default = next((c for c in cands if c.config == sp.configs[0] and c.time_ms is not None), None)
    best = min(valid, key=lambda c: c.time_ms)
    bar.finish(best.time_ms, run.predicted)
    bar.close()
    run.current[k.name] = best.config
    default_ms = default.time_ms if default else None
    db.set_best(key, best.config, best.time_ms, default_ms, run.predicted, **meta)
    log.info("tuned %s/%s: %s", run.op.name, k.name, best.config)
    return KernelResult(k.name, dict(sp.configs[0]), best.config, default_ms, best.time_ms, cands, len(sp.pruned))


def _schedule_for(current: dict, kernel: str, config: dict) -> dict:
    sched = {name: dict(cfg) for name, cfg in current.items()}
    sched[kernel] = dict(config)
    return sched


# a candidate whose first two runs each take this many times the best time so far is not timed further
SLOW = 3.0


def _evaluate(run: _Run, kernel: str, config: dict, best_ms: float | None = None) -> Candidate:
    try:
        art = run.op.compile(run.backend, *run.args, schedule=_schedule_for(run.current, kernel, config),
                             **run.kwargs)
    except XbenchError as exc:
        return Candidate(kernel, config, "failed", message=exc.message)
    try:
        cmp = check(art, run.arrays, run.refs)
    except Exception as exc:  # a schedule that crashes at run time is a rejected candidate, not a crash
        return Candidate(kernel, config, "failed", message=f"{type(exc).__name__}: {exc}".splitlines()[0])
    bad = [c for c in cmp if not c.ok]
    if bad:
        return Candidate(kernel, config, "rejected", message=bad[0].message)
    if run.predicted:
        return Candidate(kernel, config, "predicted", _predict(art, kernel, run.target))
    fn = art.kernel_runners(*run.arrays)[kernel]
    if best_ms is not None:
        once = float("inf")
        for _ in range(2):              # the faster of two runs, so that one hiccup does not cut a candidate
            t0 = time.perf_counter()
            fn()
            once = min(once, (time.perf_counter() - t0) * 1e3)
            if once <= SLOW * best_ms:
                break
        if once > SLOW * best_ms:
            return Candidate(kernel, config, "measured", once, None,
                             f"one run: over {SLOW:g}x the best so far ({best_ms:.3g} ms), not timed further")
    ms, spread = _paired(run, fn)
    return Candidate(kernel, config, "measured", ms, spread)


# rounds of a paired timing: the candidate and the default schedule alternately, a short `bench` each
PAIRS = 5


def _paired(run: _Run, fn) -> tuple[float, float]:
    """A candidate's time as its median ratio to the default schedule, timed alternately with it (D C D C ...),
    times the default's time at the start of the search: a drift of a shared machine between one candidate and
    the next then moves both sides of each ratio alike. Returns (ms, spread of the ratios)."""
    if run.ref is None:
        t = bench(fn)
        return t.median_ms, t.spread
    ratios = []
    for _ in range(PAIRS):
        ref = bench(run.ref, warmup=1, samples=3).median_ms
        ratios.append(bench(fn, warmup=1, samples=3).median_ms / ref)
    q = statistics.quantiles(ratios, n=4)
    mid = statistics.median(ratios)
    return mid * run.ref_ms, (q[2] - q[0]) / mid


def _runner(run: _Run, kernel: str, config: dict):
    return run.op.compile(run.backend, *run.args, schedule=_schedule_for(run.current, kernel, config),
                          **run.kwargs).kernel_runners(*run.arrays)[kernel]


def _remeasure(run: _Run, kernel: str, top: list[Candidate]) -> None:
    """Time the best few again with the default schedule, interleaved (D A B C D A B C ...), so slow drift of the
    machine hits them alike; each one's time is its ratio to the default, in the units of `_paired`."""
    runners = [run.ref] + [_runner(run, kernel, c.config) for c in top]
    samples: list[list[float]] = [[] for _ in runners]
    for _ in range(5):
        for i, fn in enumerate(runners):
            samples[i].append(bench(fn, warmup=1, samples=3).median_ms)
    ref = statistics.median(samples[0])
    for c, ts in zip(top, samples[1:]):
        c.time_ms = statistics.median(ts) / ref * run.ref_ms


def _pool(be, workers: int):
    if workers <= 1 or not hasattr(be, "prepare"):
        return None
    return cf.ThreadPoolExecutor(max_workers=workers)


_WARM = "import json, sys, importlib; m = importlib.import_module(sys.argv[1]); m.warm(json.loads(sys.stdin.read()))"


def _precompile(run: _Run, kernel: str, configs: list[dict], known: dict) -> None:
    """Compile candidates in worker processes into the backend's on-disk cache, so the timing loop only loads."""
    if run.pool is None:
        return
    from ..ir.schedule import Schedule
    program = run.op.lower(*run.args, **run.kwargs)
    jobs = []
    for config in configs:
        if config_text(config) in known:
            continue
        sched = _schedule_for(run.current, kernel, config)
        try:
            jobs.append(run.be.prepare(program, {n: Schedule(v) for n, v in sched.items()}))
        except XbenchError:
            continue
    module = type(run.be).__module__

    def warm(job):
        from .. import toolchain
        try:
            res = toolchain.run([sys.executable, "-c", _WARM, module], tool="a precompile worker",
                                what="compiling a candidate", input=json.dumps(job), env=os.environ.copy())
        except toolchain.ToolError as exc:   # the candidate compiles again in the main process
            log.debug("precompile failed: %s", exc.message)
            return
        if res.returncode:   # the candidate fails again in the main process, with its message recorded
            log.debug("precompile failed: %s", res.stderr[-500:])

    list(run.pool.map(warm, jobs))

"""The suite's run: every selected workload measured, predicted and gated, into one `Results` document.

Per workload, in one process: each engine and precision gets its own copy of the model; the first calls
(compilation) are timed one by one, then the runs alternate (`timing.alternate`); each xbench run's recorded
graphs are priced on the prediction targets (`predict`); the accuracy gate runs the workload at the gate size on
each gate backend (`gate`), and a failure is bisected to its operator (`xbench.torch.bisect`). A training
workload's runs, just timed (eager, Inductor, xbench), then measure one step's peak activation memory
(`memory`: warm, so nothing is compiled again for it). Last, the variable-length BERT stream (`varlen`). A failure is recorded (`Results.errors`) and the run goes on with the rest.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field, replace

import torch

from ..backends.cpu.runtime import release
from ..config import environ, in_notebook
from . import engines as E
from .gate import STEPS, gate
from .predict import REFERENCE, TARGETS, count_programs, phase_calls, predict_phase
from .results import Results
from .timing import alternate, first_call
from .workloads import WORKLOADS, dynamo_settings

PRIMARY = {"train": "samples_per_s", "infer": "latency_ms", "decode": "tokens_per_s"}


# Loss-curve steps of the gate on a simulated backend (the CUDA simulator without a GPU, the Ascend twin): each
# training step of a tiny model there takes seconds to minutes, and ten of them per workload put the full suite
# past its 40 minutes; the float32 loss curve is checked over ten steps on cpu and on a real GPU. An inference
# workload is gated there on the inference it is measured in (outputs only): MobileNetV2's two training steps
# alone took the CUDA simulator over 15 minutes.
SIMULATED_STEPS = 2


def simulated_backends() -> set:
    from ..backends.cuda.device import mode
    return {"ascend"} | ({"cuda"} if mode() != "gpu" else set())


def default_gate_steps() -> dict:
    return {b: SIMULATED_STEPS if b in simulated_backends() else STEPS for b in ("cpu", "cuda", "ascend")}


@dataclass(frozen=True)
class SuiteOptions:
    only: tuple = ()                          # workload names (default: all twelve)
    size: str = "bench"
    engines: tuple = E.ENGINES
    precisions: tuple = E.PRECISIONS
    targets: tuple = TARGETS                  # prediction targets
    reference: str = REFERENCE
    repeats: int = 10
    budget_s: float | None = 30.0             # per run: past this many seconds of samples, stop at timing.LEAST
    gate_backends: tuple = ("cpu", "cuda", "ascend")
    gate_size: str = "tiny"
    gate_steps: dict = field(default_factory=lambda: default_gate_steps())
    bisect: bool = True
    memory: bool = True
    varlen: bool = True
    varlen_requests: int = 200
    varlen_size: str = ""                     # default: the suite's size
    cold: bool = False                        # fresh compile caches for xbench and Inductor
    published: bool = True                    # lower and predict the workloads' published sizes
    quick: bool = False

    def workloads(self) -> list[str]:
        names = list(self.only) or list(WORKLOADS)
        unknown = [n for n in names if n not in WORKLOADS]
        if unknown:
            import difflib
            hints = [difflib.get_close_matches(n, WORKLOADS, n=1) for n in unknown]
            raise ValueError(f"unknown workload(s) {', '.join(unknown)}"
                             + "".join(f" (did you mean {h[0]!r}?)" for h in hints if h)
                             + f"; there are {', '.join(WORKLOADS)}")
        return names


def quick(options: SuiteOptions | None = None, **changes) -> SuiteOptions:
    """The quick mode: tiny sizes, eager against xbench (no Inductor: its first compile alone takes minutes here),
    float32, three repeats, the gate on cpu with 3 steps, a short stream; predictions as in the full suite."""
    base = options or SuiteOptions()
    return replace(base, size="tiny", engines=("eager", "xbench"), precisions=("float32",), repeats=3,
                   gate_backends=("cpu",), gate_steps={"cpu": 3}, memory=False, varlen_requests=20, published=False,
                   quick=True,
                   **changes)


class Progress:
    """A line on stderr (terminal) or a bar (Jupyter) over the suite's stages."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.enabled, self.t0 = total, 0, enabled, time.perf_counter()
        self.bar = None
        if enabled and in_notebook():
            import ipywidgets as w
            from IPython.display import display
            self.bar, self.text = w.IntProgress(min=0, max=max(total, 1), description="suite"), w.HTML()
            display(w.HBox([self.bar, self.text]))

    def note(self, what: str, advance: bool = False) -> None:
        if advance:
            self.done += 1
        if not self.enabled:
            return
        line = f"[{self.done}/{self.total}] {what}  ({time.perf_counter() - self.t0:.0f} s)"
        if self.bar is not None:
            self.bar.value, self.text.value = self.done, line
        else:
            sys.stderr.write("\r" + line[:110].ljust(110))
            sys.stderr.flush()

    def close(self) -> None:
        if self.enabled and self.bar is None:
            sys.stderr.write("\n")


@contextlib.contextmanager
def _cold_caches(enabled: bool):
    if not enabled:
        yield
        return
    root = tempfile.mkdtemp(prefix="xbench-suite-")
    try:
        with environ({"XBENCH_CACHE_DIR": os.path.join(root, "xbench"),
                      "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor")}):
            yield
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Clock:
    """Seconds spent per kind of stage over the whole run (first calls, timed repeats, gates, ...)."""

    def __init__(self, into: dict):
        self.spent = into

    @contextlib.contextmanager
    def __call__(self, stage: str):
        t = time.perf_counter()
        try:
            yield
        finally:
            self.spent[stage] = round(self.spent.get(stage, 0.0) + time.perf_counter() - t, 1)


def run_suite(options: SuiteOptions, *, command: str = "", progress: bool = True,
              save_to: str | None = None) -> Results:
    """Run the suite; with `save_to`, the results so far are written there after every stage, so a run that is
    stopped keeps what it measured."""
    names = options.workloads()
    res, run = Results.new_run(command, {k: v for k, v in asdict(options).items()})
    pub = [n for n in names if WORKLOADS[n].published] if options.published else []
    stages = len(names) * (1 + len(options.gate_backends)) + int(options.varlen) + len(pub)
    bar = Progress(stages, progress)
    clock = Clock(res.runs[run].setdefault("stages", {}))
    t0 = time.perf_counter()

    def keep() -> None:
        res.runs[run]["seconds"] = round(time.perf_counter() - t0, 1)
        if save_to:
            res.save(save_to)
        torch._dynamo.reset()
        release()          # each workload's models and kernels are gone: give their memory back before the next
    import torch._dynamo
    with _cold_caches(options.cold), torch._dynamo.config.patch(cache_size_limit=64):
        for name in names:
            bar.note(f"{name}: measuring")
            _measure(res, run, name, options, bar, clock)
            bar.note(f"{name}: measured", advance=True)
            for backend in options.gate_backends:
                bar.note(f"{name}: gate on {backend}")
                with clock(f"gate on {backend}"):
                    _gate(res, run, name, backend, options)
                bar.note(f"{name}: gate on {backend} done", advance=True)
            keep()
        for name in pub:
            bar.note(f"{name}: lowering its published size")
            with clock("published sizes"):
                _published(res, run, name, options, bar)
            bar.note(f"{name}: published size predicted", advance=True)
            keep()
        if options.varlen:
            bar.note("variable-length BERT")
            with clock("variable-length stream"):
                _varlen(res, run, options, bar)
            bar.note("variable-length done", advance=True)
    bar.close()
    keep()
    return res


def _error(res: Results, run: str, workload: str, stage: str, engine: str, exc: BaseException) -> None:
    msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    res.errors.append({"run": run, "workload": workload, "stage": stage, "engine": engine, "error": msg,
                       "where": "".join(traceback.format_exception(exc)[-3:])[-1500:]})


def _measure(res: Results, run: str, name: str, o: SuiteOptions, bar: Progress, clock: Clock) -> None:
    w = WORKLOADS[name]
    base = dict(workload=name, domain=w.domain, mode=w.mode, size=o.size)
    try:
        runs = E.runs(w, o.size, o.engines, o.precisions)
    except Exception as exc:
        _error(res, run, name, "build", "", exc)
        return
    with dynamo_settings(w):
        alive, first_rows = [], {}
        for r in runs:
            bar.note(f"{name}: first call {r.name}")
            inductor = _inductor_cache()
            try:
                with clock(f"first calls ({r.engine})"):
                    fc = first_call(r.step)
            except Exception as exc:
                _error(res, run, name, "first call", r.name, exc)
                continue
            alive.append(r)
            cached = _cache_state(r, inductor)
            first_rows[r.name] = res.add(
                run, **base, precision=r.precision, platform="cpu", engine=r.engine, source="measured",
                metric="first_call_s", value=round(fc.wall_s, 3), unit="s",
                detail={"cpu_s": round(fc.cpu_s, 3), **({"cache": cached} if cached else {})})
        try:
            with clock("timed repeats"):
                timings = alternate({r.name: r.step for r in alive}, o.repeats, warmup=1, budget_s=o.budget_s,
                                    progress=lambda s: bar.note(f"{name}: {s}"))
        except Exception as exc:
            _error(res, run, name, "timing", "", exc)
            return
        finally:
            for r in alive:        # a graph compiled after the first call: its time is in no first call
                if sum(r.compiles[1:]):
                    first_rows[r.name]["detail"]["recompiled_graphs"] = sum(r.compiles[1:])
        if o.memory and w.mode == "train":
            bar.note(f"{name}: peak activation memory")
            with clock("memory"):
                _memory(res, run, name, alive)
    for r in alive:
        samples = w.batch_size(r.batch)
        phases = timings[r.name]
        for phase, t in phases.items():
            if phase.endswith(":cpu"):
                continue
            cpu = phases.get(f"{phase}:cpu")
            for metric, value, unit in _phase_metrics(w.mode, phase, t.median_ms, samples, r.tokens):
                per = value / t.median_ms if unit == "ms" and t.median_ms else 1.0     # per decode step
                stats = dict(q1=round(t.q1_ms * per, 4), q3=round(t.q3_ms * per, 4), samples=t.samples,
                             noisy=t.noisy) if unit == "ms" else {}
                if stats and cpu is not None:
                    stats["detail"] = {"cpu_ms": round(cpu.median_ms * per, 4)}
                res.add(run, **base, precision=r.precision, platform="cpu", engine=r.engine, source="measured",
                        metric=metric, value=value, unit=unit, **stats)
        if r.engine == "xbench":
            with clock("predictions"):
                _predict(res, run, base, r, o, samples)


def _inductor_cache() -> tuple[int, int]:
    """Inductor's FX graph cache so far in this process: hits, misses."""
    from torch._dynamo.utils import counters
    return counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"]


def _cache_state(r: E.Run, inductor_before: tuple[int, int]) -> str:
    """Where a first call's compiled code came from: xbench's modules, or Inductor's graphs."""
    if r.engine == "inductor":
        (h0, m0), (h1, m1) = inductor_before, _inductor_cache()
        hits, total = h1 - h0, h1 - h0 + m1 - m0
    else:
        compiles = [c for s in r.sessions.values() for g in s.session.graphs for p in g.partitions
                    for c in p.compiles]
        hits, total = sum(bool(c["cache_hit"]) for c in compiles), len(compiles)
    if not total:
        return ""
    return "all from the cache" if hits == total else "cold" if hits == 0 else f"{hits} of {total} from the cache"


def _phase_metrics(mode: str, phase: str, ms: float, samples: int, tokens: int) -> list[tuple[str, float, str]]:
    if mode == "decode":
        steps = max(tokens // max(samples, 1), 1)
        if phase == "prefill":
            return [("prefill_ms", round(ms, 4), "ms")]
        return [("decode_ms_per_token", round(ms / steps, 4), "ms"),
                ("tokens_per_s", round(tokens / (ms / 1e3), 2), "tokens/s")]
    metric = "step_ms" if mode == "train" else "latency_ms"
    return [(metric, round(ms, 4), "ms"), ("samples_per_s", round(samples / (ms / 1e3), 2), "samples/s")]


def _predict(res: Results, run: str, base: dict, r: E.Run, o: SuiteOptions, samples: int) -> None:
    params = sum(p.numel() for p in r.base.parameters() if p.requires_grad) if r.mode == "train" else 0
    per_target: dict[str, dict[str, float]] = {}
    for phase, rec in r.sessions.items():
        calls = phase_calls(rec.session, r.calls.get(phase))
        try:
            counts = count_programs(c.program for c, _ in calls)
        except Exception as exc:
            _error(res, run, base["workload"], f"predict {phase}", "", exc)
            continue
        for target in dict.fromkeys((*o.targets, o.reference)):
            try:
                p = predict_phase(rec.session, target, parameters=params if phase == "step" else 0, calls=calls,
                                  counts=counts)
            except Exception as exc:
                _error(res, run, base["workload"], f"predict {phase}", target, exc)
                continue
            ms = p.seconds * 1e3
            detail = {"kernels": p.kernels, "flops": p.flops, "bytes": p.bytes, "bounds": p.bounds,
                      "fallback_ops": p.fallback_ops, "optimizer_ms": round(p.optimizer_s * 1e3, 6)}
            for metric, value, unit in _phase_metrics(r.mode, phase, ms, samples, r.tokens):
                per_target.setdefault(target, {})[metric] = value
                if target in o.targets:
                    res.add(run, **base, precision=r.precision, platform=target, engine="xbench",
                            source="predicted", metric=metric, value=value, unit=unit,
                            **({"detail": detail} if unit == "ms" else {}))
            if target in o.targets:
                for metric, value in (("pct_peak_compute", p.pct_peak_compute),
                                      ("pct_peak_bandwidth", p.pct_peak_bandwidth)):
                    res.add(run, **base, precision=r.precision, platform=target, engine="xbench",
                            source="predicted", metric=f"{metric}_{phase}" if r.mode == "decode" else metric,
                            value=round(value, 4), unit="%")
    primary = PRIMARY[r.mode]
    ref = per_target.get(o.reference, {}).get(primary)
    for target in o.targets:
        v = per_target.get(target, {}).get(primary)
        if v and ref:
            ratio = ref / v if primary == "latency_ms" else v / ref      # > 1: faster than the reference
            res.add(run, **base, precision=r.precision, platform=target, engine="xbench", source="predicted",
                    metric="ratio_to_reference", value=round(ratio, 4), unit="x",
                    detail={"reference": o.reference, "of": primary})


def _published(res: Results, run: str, name: str, o: SuiteOptions, bar: Progress) -> None:
    """Predictions at the workload's published size: its graphs captured on torch, lowered, not compiled."""
    from .predict import lower_model, predict_programs
    w = WORKLOADS[name]
    for precision in o.precisions:
        try:
            model, batch = w.published(0)
            model.train(True)
            with dynamo_settings(w), E.autocast(precision):
                lowered = lower_model(model, batch,
                                      progress=lambda s, q=precision: bar.note(f"{name} ({q}): {s}"))
        except Exception as exc:
            _error(res, run, name, f"published size ({precision})", "xbench", exc)
            continue
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        samples = w.batch_size(batch)
        base = dict(workload=name, domain=w.domain, mode="train", size="published", precision=precision,
                    engine="xbench", source="predicted")
        per: dict[str, float] = {}
        hardware: dict[str, float] = {}       # every kernel at its roofline bound
        programs = [x.program for x in lowered]
        try:
            counts = count_programs(programs)
        except Exception as exc:
            _error(res, run, name, f"published size ({precision}) predict", "", exc)
            continue
        for target in dict.fromkeys((*o.targets, o.reference)):
            try:
                p = predict_programs(programs, target, parameters=params, counts=counts)
                hardware[target] = samples / predict_programs(programs, target, parameters=params, counts=counts,
                                                              bound=True).seconds
            except Exception as exc:
                _error(res, run, name, f"published size ({precision}) predict", target, exc)
                continue
            per[target] = samples / p.seconds
            if target not in o.targets:
                continue
            detail = {"kernels": p.kernels, "flops": p.flops, "bytes": p.bytes, "bounds": p.bounds, "batch": samples,
                      "optimizer_ms": round(p.optimizer_s * 1e3, 6), "notes": p.notes,
                      "model": (w.published.__doc__ or "").strip()}
            res.add(run, **base, platform=target, metric="step_ms", value=round(p.seconds * 1e3, 4), unit="ms",
                    detail=detail)
            res.add(run, **base, platform=target, metric="samples_per_s", value=round(per[target], 2),
                    unit="samples/s")
            res.add(run, **base, platform=target, metric="pct_peak_compute", value=round(p.pct_peak_compute, 4),
                    unit="%")
            res.add(run, **base, platform=target, metric="pct_peak_bandwidth", value=round(p.pct_peak_bandwidth, 4),
                    unit="%")
        for metric, by in (("ratio_to_reference", per), ("hardware_ratio_to_reference", hardware)):
            ref = by.get(o.reference)
            for target in o.targets:
                if ref and by.get(target):
                    res.add(run, **base, platform=target, metric=metric, value=round(by[target] / ref, 4), unit="x",
                            detail={"reference": o.reference, "of": "samples_per_s"})


def _gate(res: Results, run: str, name: str, backend: str, o: SuiteOptions) -> None:
    w = WORKLOADS[name]
    simulated = backend in simulated_backends()
    steps = 0 if w.mode == "infer" and simulated else o.gate_steps.get(backend, STEPS)
    # the simulator runs the kernels; assembling their PTX for registers (which the gate does not read) took a
    # fifth to a half of each simulated gate's time
    ptx = {"XBENCH_CUDA_PTX": "0"} if simulated and backend == "cuda" and "XBENCH_CUDA_PTX" not in os.environ else {}
    with environ(ptx):
        g = gate(w, backend, o.gate_size, steps)
        if not g.ok and not g.not_run and o.bisect:        # a wrong value or a backend failure: find the op
            g.bisect = _bisect(name, backend, o.gate_size)
    res.gate.append({"run": run, **g.to_dict()})


def _bisect(name: str, backend: str, size: str) -> dict:
    from ..torch.bisect import bisect
    from .workloads import build
    w = WORKLOADS[name]
    model, batch = build(name, size)
    try:
        with dynamo_settings(w):
            return bisect(model, batch, target=backend).to_dict()
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def _memory(res: Results, run: str, name: str, runs: list[E.Run]) -> None:
    """Peak activation memory of one training step of each run just timed (`memory.measure_here`)."""
    from .memory import measure_here
    w = WORKLOADS[name]
    for r in runs:
        try:
            m = measure_here(r)
        except Exception as exc:
            _error(res, run, name, "memory", r.name, exc)
            continue
        common = dict(workload=name, domain=w.domain, mode="train", size=r.size, precision=m["precision"],
                      platform="cpu", engine=m["engine"], source="measured")
        res.add(run, **common, metric="peak_activation_bytes", value=m["peak_bytes"], unit="B",
                detail={"torch_peak_bytes": m["torch_peak_bytes"], "numpy_peak_bytes": m["numpy_peak_bytes"]})
        res.add(run, **common, metric="saved_activation_bytes", value=m["saved_bytes"], unit="B")


def _varlen(res: Results, run: str, o: SuiteOptions, bar: Progress) -> None:
    from . import varlen
    try:
        v = varlen.run(o.varlen_size or o.size, o.varlen_requests,
                       progress=lambda s: bar.note(f"variable-length BERT: {s}"))
    except Exception as exc:
        _error(res, run, "bert", "variable-length", "xbench", exc)
        return
    res.varlen.append({"run": run, **v.to_dict()})


__all__ = ["PRIMARY", "SuiteOptions", "quick", "run_suite", "torch"]

"""What a `%%tensorop` cell and `xb.explore` do with one operator: make inputs from its annotations, compile it
for each backend, check each against the float64 reference, time what runs on this machine, profile when asked,
and turn the outcome into a registry record. No compiler logic lives here: everything goes through the public
`Operator`, `xb.verify`, the timing protocol and (when present) `xb.profile` / `xb.roofline`.
"""
from __future__ import annotations

import io
import math
import time
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import BackendError, XbenchError
from ..lang.operator import Operator
from ..profile.checks import (  # noqa: F401 (inputs from annotations, re-exported for the notebook layer)
    DEFAULT_SIZES,
    SEED,
    Check,
    InputError,
    Inputs,
    default_size,
    make_inputs,
    random_array,
)
from ..profile.timing import Timing, bench

SOURCE_ORDER = ("cpu", "cuda", "ascend")
DEFAULT_BUDGET = 16        # candidates per kernel of `%%tensorop --tune`
STRATEGIES = ("auto", "exhaustive", "random", "guided")
TARGET_KIND = {"cuda": "gpu", "ascend": "npu"}     # which --targets a backend without hardware here is tuned for


# ---- settings ---------------------------------------------------------------------------------------------------

def installed_backends() -> list[str]:
    """Every installed backend except the float64 reference, cpu / cuda / ascend first."""
    from ..backends import names
    found = [n for n in names() if n != "reference"]
    return sorted(found, key=lambda n: (SOURCE_ORDER.index(n) if n in SOURCE_ORDER else len(SOURCE_ORDER), n))


@dataclass
class Settings:
    """Options of one run (from `%%tensorop` flags over the `%xbench` session defaults)."""

    backends: list[str] | None = None          # None: installed_backends()
    sizes: dict[str, int] = field(default_factory=dict)
    dtype: str = "float32"
    targets: list[str] | None = None           # None: the profiler's default
    profile: bool = False
    show: str | None = None
    tune: bool = False
    budget: int = DEFAULT_BUDGET
    strategy: str = "auto"

    def backend_list(self) -> list[str]:
        return list(self.backends) if self.backends else installed_backends()


# ---- inputs from annotations ------------------------------------------------------------------------------------

def tensor_params(op: Operator) -> tuple[list[str], list[str]]:
    """(tensor parameters, parameters %%tensorop cannot fill: neither annotated with Tensor[...] dims nor
    defaulted)."""
    tensors, missing = [], []
    for name, p in op.signature.parameters.items():
        spec = op.params.get(name)
        if spec is not None and spec.dims is not None:
            tensors.append(name)
        elif p.default is p.empty:
            missing.append(name)
    return tensors, missing


def unknown_sizes(ops: Iterable[Operator], sizes: Mapping[str, int]) -> list[str]:
    """Names in `sizes` that no operator's annotations use (most likely a typo)."""
    used: set[str] = set()
    for op in ops:
        for spec in op.params.values():
            if spec is not None and spec.dims is not None:
                used.update(d.name for d in spec.dims if d is not Ellipsis and not isinstance(d, int))
    return [n for n in sizes if n not in used]


# ---- one backend ------------------------------------------------------------------------------------------------

@dataclass
class BackendResult:
    backend: str
    status: str                           # pass | fail | error
    artifact: Any = None
    max_abs_error: float | None = None
    tolerance: tuple[float, float] | None = None   # (rtol, atol) of the worst output
    timing: Timing | None = None           # this cell's own timing of Artifact.run (without --profile)
    measured_ms: float | None = None       # the measured time: from `timing`, or the profile's time_ms
    noisy: bool = False
    message: str | None = None            # why it failed, or a note (checked at smaller sizes)
    traceback: str | None = None
    checked_dims: dict[str, int] | None = None     # dims of the check when they differ from the compile's
    check: Check | None = None             # the check against the reference (sizes, comparisons, loop trips)

    @property
    def checked_at(self) -> str:
        """'N=37, D=41': the sizes the error was measured at."""
        c = self.check
        if c is None or not c.dims:
            return "—"
        return ", ".join(f"{k}={v}" for k, v in c.dims.items())

    @property
    def predicted(self) -> bool:
        return bool(getattr(self.artifact, "predicted", False))

    @property
    def time_ms(self) -> float | None:
        return self.measured_ms

    @property
    def registers(self) -> int | None:
        res = getattr(self.artifact, "resources", None) or {}
        value = res.get("registers_max")
        return int(value) if isinstance(value, (int, np.integer)) else None

    @property
    def ub_bytes(self) -> int | None:
        res = getattr(self.artifact, "resources", None) or {}
        for key in ("ub_bytes", "ub_total"):
            value = res.get(key)
            if isinstance(value, (int, np.integer)):
                return int(value)
        launches = res.get("launches")
        totals = [ln["ub_total"] for ln in launches if isinstance(ln, Mapping) and "ub_total" in ln] \
            if isinstance(launches, list) else []
        return int(max(totals)) if totals else None


def _short(exc: BaseException) -> str:
    if isinstance(exc, XbenchError):
        text = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
    else:
        text = f"{type(exc).__name__}: {exc}"
    return text.removeprefix("xbench: ")


def _format_tb(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def run_backend(op: Operator, inputs: Inputs, backend: str, dtype: str = "float32", *, measure: bool = True,
                given: Sequence[str] | None = None) -> BackendResult:
    """Compile `op` for `backend` at the inputs' shapes, check it against the reference (`xbench.profile.checks`:
    a simulated backend at sizes of its own, every dim distinct, `given` naming the dims the user sized), and time
    `Artifact.run` when the backend runs on this machine."""
    from ..profile.checks import check

    try:
        art = op.compile(backend, *inputs.args, **inputs.kwargs)
    except Exception as exc:  # a backend that fails shows its error in its own tab
        return BackendResult(backend, "error", message=_short(exc), traceback=_format_tb(exc))
    result = BackendResult(backend, "pass", artifact=art)
    try:
        result.check = check(op, inputs.args, inputs.kwargs, backend, artifact=art,
                             given=list(given) if given is not None else
                             [d for d in inputs.dims if d not in inputs.defaulted], dtype=dtype)
    except Exception as exc:
        result.status, result.message, result.traceback = "error", _short(exc), _format_tb(exc)
        return result
    c = result.check
    if c.resized:
        result.checked_dims = c.dims
    result.max_abs_error = c.max_abs_error
    worst = max(c.comparisons, key=lambda x: x.rtol) if c.comparisons else None
    result.tolerance = (worst.rtol, worst.atol) if worst is not None else None
    bad = [(i, x) for i, x in enumerate(c.comparisons) if not x.ok]
    if bad:
        result.status = "fail"
        i, x = bad[0]
        result.message = (f"output {i}: " if len(c.comparisons) > 1 else "") + x.message
        return result
    if c.once:
        result.message = "ran once: " + ", ".join(f"{lp.kernel} {lp.loop}" for lp in c.once)
    if measure and not art.predicted:
        arrays = op.arrays(*inputs.args, **inputs.kwargs)
        try:
            result.timing = bench(lambda: art.run(*arrays), warmup=1, samples=5, min_sample_s=0.005,
                                  max_total_s=0.3)
            result.measured_ms, result.noisy = result.timing.median_ms, result.timing.noisy
        except Exception as exc:
            result.status, result.message, result.traceback = "error", _short(exc), _format_tb(exc)
    return result


# ---- the profiler and the roofline, as they land ----------------------------------------------------------------

def profiler() -> Callable[..., Any] | None:
    """`xb.profile` when this xbench has one."""
    import xbench
    fn = getattr(xbench, "profile", None)
    return fn if callable(fn) else None


def roofline_fn() -> Callable[..., Any] | None:
    import xbench
    fn = getattr(xbench, "roofline", None)
    return fn if callable(fn) else None


PROFILER_MISSING = "profiler not available: this xbench has no xb.profile yet"
ROOFLINE_MISSING = "roofline not available: this xbench has no xb.roofline yet"


@dataclass
class ProfileResult:
    report: Any = None
    error: str | None = None
    traceback: str | None = None
    roofline_svg: str | None = None          # every target on one chart (`xbench.viz.roofline.roofline_svg`)
    roofline_error: str | None = None
    roofline_targets: list[str] = field(default_factory=list)


def roofline_detail_svg(profile: ProfileResult, target: str | None) -> str:
    """The SVG of the profile's roofline: every target (`target` None) or one in detail."""
    from ..viz.roofline import roofline, roofline_svg
    fig = roofline(profile.report, targets=profile.roofline_targets or None, target=target)
    return roofline_svg(fig)


def figure_png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, metadata={"Software": None})
    try:
        import matplotlib.pyplot as plt
        plt.close(fig)
    except Exception:  # a figure made without pyplot has nothing to close
        pass
    return buf.getvalue()


def run_profile(op: Operator, inputs: Inputs, backends: list[str], targets: list[str] | None,
                checks: Mapping[str, Check] | None = None) -> ProfileResult:
    """`xb.profile` of the call, with the cell's own checks against the reference (`checks`: the Metrics tab then
    reports the errors the Summary does, at the same sizes)."""
    prof = profiler()
    if prof is None:
        return ProfileResult(error=PROFILER_MISSING)
    out = ProfileResult()
    kwargs: dict[str, Any] = {"backends": backends}
    if checks:
        kwargs["checks"] = dict(checks)
    if targets:
        kwargs["targets"] = targets
    try:
        out.report = prof(op, *inputs.args, **inputs.kwargs, **kwargs)
    except Exception as exc:
        out.error, out.traceback = _short(exc), _format_tb(exc)
        return out
    if roofline_fn() is None:
        out.roofline_error = ROOFLINE_MISSING
        return out
    try:
        out.roofline_targets = list(targets) if targets else \
            list(dict.fromkeys(m.target for m in out.report.records if m.target))
        out.roofline_svg = roofline_detail_svg(out, None)
    except Exception as exc:
        out.roofline_error = _short(exc)
    return out


# ---- tuning -----------------------------------------------------------------------------------------------------

@dataclass
class TuningOutcome:
    """`xb.tune` of one operator on one backend, as a `%%tensorop --tune` cell ran it: the TuneResult, or why
    there is none."""

    backend: str
    target: str | None                    # None: the backend's default target
    budget: int | None                    # None: not known (a result of xb.tune shown with TuningView)
    strategy: str | None
    result: Any = None                    # xbench.tune.TuneResult
    error: str | None = None
    traceback: str | None = None

    @property
    def predicted(self) -> bool:
        return bool(getattr(self.result, "predicted", False))


def tuning_target(backend: str, targets: Sequence[str] | None) -> str | None:
    """The first of `targets` of the kind `backend` generates code for (cuda: a GPU, ascend: an NPU); None (the
    backend's default target) when none is, and always for a backend timed on this machine."""
    kind = TARGET_KIND.get(backend)
    if kind is None or not targets:
        return None
    from ..hw import get_target
    return next((t for t in targets if get_target(t).kind == kind), None)


def call_args(op: Operator, inputs: Inputs) -> tuple[list[Any], dict[str, Any]]:
    """The inputs as positional arguments in signature order (so a parameter named like an option of `xb.tune`,
    e.g. `target`, cannot clash), keyword arguments only after a parameter left to its default."""
    args: list[Any] = list(inputs.args)
    kwargs: dict[str, Any] = {}
    gap = False
    for name, p in list(op.signature.parameters.items())[len(args):]:
        if name not in inputs.kwargs:
            gap = True
        elif gap or p.kind is p.KEYWORD_ONLY:
            kwargs[name] = inputs.kwargs[name]
        else:
            args.append(inputs.kwargs[name])
    return args, kwargs


def run_tuning(op: Operator, inputs: Inputs, backend: str, budget: int = DEFAULT_BUDGET, strategy: str = "auto",
               targets: Sequence[str] | None = None, progress: bool = True) -> TuningOutcome:
    """Tune every kernel of `op` on `backend` at the shapes of `inputs` (`xb.tune`; the best schedules go to the
    tuning database, so `op(...)` uses them from now on). A failure is kept in the outcome, not raised."""
    from ..tune import tune

    out = TuningOutcome(backend, tuning_target(backend, targets), budget, strategy)
    args, kwargs = call_args(op, inputs)
    try:
        out.result = tune(op, *args, backend=backend, budget=budget, strategy=strategy, target=out.target,
                          progress=progress, **kwargs)
    except Exception as exc:  # e.g. no candidate passed verification: shown in the Tuning tab
        out.error, out.traceback = _short(exc), _format_tb(exc)
    return out


# ---- one operator -----------------------------------------------------------------------------------------------

@dataclass
class OperatorResult:
    op: Operator
    inputs: Inputs
    dtype: str
    graph_text: str
    loops_text: str
    backends: dict[str, BackendResult]
    profile: ProfileResult | None = None
    seconds: float = 0.0
    tuning: TuningOutcome | None = None
    program: Any = None                   # the loop IR (xbench.ir.kernel.Program)

    @property
    def dims(self) -> dict[str, int]:
        return dict(self.inputs.dims)

    @property
    def report(self) -> Any:
        """The profile Report (`--profile`), or None."""
        return self.profile.report if self.profile is not None else None

    def kernel_sources(self) -> dict[str, str]:
        """The kernels alone (no module preamble) per backend, for reading backends side by side."""
        return {name: "\n\n".join(k.source for k in r.artifact.kernels)
                for name, r in self.backends.items() if r.artifact is not None and r.artifact.kernels}

    def sources(self) -> dict[str, str]:
        """Generated text per kind (cpu, cuda, ptx, ascend, or any other backend's name) that exists."""
        out: dict[str, str] = {}
        for name, r in self.backends.items():
            if r.artifact is None:
                continue
            out[name] = r.artifact.source
            if name == "cuda" and getattr(r.artifact, "ptx", None):
                out["ptx"] = ptx_text(r.artifact.ptx)
        return out

    def record(self) -> dict[str, Any]:
        """The registry record (see `xbench.notebook.registry`)."""
        from .registry import SOURCE_KINDS
        backends = {}
        for name, r in self.backends.items():
            time_ms, target = r.time_ms, None
            if time_ms is None and r.predicted:
                found = predicted_time(self.profile, name)
                time_ms, target = found if found else (None, None)
            backends[name] = {
                "status": r.status,
                "time_ms": time_ms,
                "max_abs_error": r.max_abs_error,
                "message": r.message,
                "registers_per_thread": r.registers,
                "ub_bytes": r.ub_bytes,
                "predicted": r.predicted,
                "target": target,
            }
        # the fastest measured time: a predicted one (another machine's) is never ranked against it
        timed = [(v["time_ms"], k) for k, v in backends.items()
                 if v["status"] == "pass" and v["time_ms"] is not None and not v["predicted"]]
        best = {"backend": min(timed)[1], "time_ms": min(timed)[0]} if timed else None
        return {
            "name": self.op.name,
            "signature": signature(self.op),
            "dims": self.dims,
            "backends": backends,
            "best": best,
            "sources": {k: v for k, v in self.sources().items() if k in SOURCE_KINDS},
        }


def failed_record(previous: Mapping[str, Any], message: str) -> dict[str, Any]:
    """The registry record of an operator whose cell raised when run again: every backend an error with the
    message, no time, no sources (what it showed before is no longer what the cell defines)."""
    backends = {b: {"status": "error", "time_ms": None, "max_abs_error": None, "message": message,
                    "registers_per_thread": None, "ub_bytes": None, "predicted": bool(r.get("predicted")),
                    "target": None} for b, r in previous["backends"].items()}
    return {"name": previous["name"], "signature": previous["signature"], "dims": dict(previous["dims"]),
            "backends": backends, "best": None, "sources": {}}


def _measured_from(profile: ProfileResult, backend: str, result: BackendResult) -> None:
    """Take the profile's measured time of `backend` when this cell did not time it."""
    if profile.report is None or result.measured_ms is not None or result.status != "pass":
        return
    for m in profile.report.filter("time_ms", backend=backend, source="measured"):
        if isinstance(m.value, (int, float)) and math.isfinite(m.value):
            result.measured_ms, result.noisy = float(m.value), "noisy" in m.note
            return


def predicted_time(profile: ProfileResult | None, backend: str) -> tuple[float, str] | None:
    """(ms, target): the profile's predicted time of `backend` on the first target it was predicted for."""
    report = profile.report if profile is not None else None
    if report is None or not hasattr(report, "filter"):
        return None
    for m in report.filter("predicted_time_ms", backend=backend):
        if isinstance(m.value, (int, float)) and math.isfinite(m.value):
            return float(m.value), str(m.target)
    return None


def signature(op: Operator) -> str:
    return f"{op.name}{op.signature_text()}"


def ptx_text(ptx: Mapping[str, str]) -> str:
    if len(ptx) == 1:
        return next(iter(ptx.values()))
    return "\n".join(f"// ---- {name} ----\n{text}" for name, text in ptx.items())


def steps(settings: Settings) -> list[str]:
    """The steps `evaluate` reports, in order (a progress bar's length)."""
    return ["inputs", "trace", *settings.backend_list(), *(["profile"] if settings.profile else []),
            *(["tune"] if settings.tune else [])]


def evaluate(op: Operator, settings: Settings, *, progress: Callable[[str, str], None] | None = None
             ) -> OperatorResult:
    """Everything a `%%tensorop` cell shows about one operator. Raises the user's error (an XbenchError naming
    their line) when the operator cannot be traced; a backend's own failure is kept in its result.
    `progress(step, what)` is told each step (one of `steps(settings)`) and what it does."""
    t0 = time.perf_counter()
    step = progress or (lambda key, what: None)
    step("inputs", f"{op.name}: making inputs")
    inputs = make_inputs(op, settings.sizes, settings.dtype)
    step("trace", f"{op.name}: tracing and lowering at {', '.join(f'{k}={v}' for k, v in inputs.dims.items())}")
    graph = op.trace(*inputs.args, **inputs.kwargs)
    program = op.lower(*inputs.args, **inputs.kwargs)
    results: dict[str, BackendResult] = {}
    for backend in settings.backend_list():
        step(backend, f"{op.name}: compiling {len(program.kernels)} kernel(s) "
                      f"({', '.join(k.name for k in program.kernels)}) for {backend}, then checking it against the "
                      f"float64 reference")
        try:
            from ..backends import get
            ok, why = get(backend).available()
            if not ok:
                raise BackendError(f"backend {backend!r} is not available here: {why}")
        except Exception as exc:
            results[backend] = BackendResult(backend, "error", message=_short(exc), traceback=_format_tb(exc))
            continue
        # with --profile the profiler times each backend (once is enough)
        results[backend] = run_backend(op, inputs, backend, settings.dtype,
                                       measure=not (settings.profile and profiler() is not None))
    profile = None
    if settings.profile:
        targets = ", ".join(settings.targets) if settings.targets else "the default targets"
        step("profile", f"{op.name}: profiling on {', '.join(b for b, r in results.items() if r.status == 'pass')}"
                        f" and predicting for {targets}")
        ran = [b for b, r in results.items() if r.status == "pass"]
        checks = {b: r.check for b, r in results.items() if r.check is not None}
        profile = run_profile(op, inputs, ran, settings.targets, checks)
        for b, r in results.items():
            _measured_from(profile, b, r)
    tuning = None
    if settings.tune:
        backend = settings.backend_list()[0]
        step("tune", f"{op.name}: tuning the schedule on {backend}")
        first = results[backend]
        if first.status != "pass":
            tuning = TuningOutcome(backend, tuning_target(backend, settings.targets), settings.budget,
                                   settings.strategy, error=f"not tuned: the {backend} backend did not pass "
                                   f"({first.status}: {first.message})")
        else:
            tuning = run_tuning(op, inputs, backend, settings.budget, settings.strategy, settings.targets)
    return OperatorResult(op, inputs, settings.dtype, graph.text(), program.text(), results, profile,
                          time.perf_counter() - t0, tuning, program)

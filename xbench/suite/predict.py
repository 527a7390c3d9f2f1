"""Predicted speed on hardware this machine does not have, from the kernels a workload actually compiled to.

Every xbench run of a workload records the graphs the bridge compiled (`xbench.torch.recording`), per phase of
its mode (`step`, or `prefill` and `decode`). Each graph's xbench program (its loop-IR kernels, at the shapes
the workload ran) is priced by the hardware model, `xbench.hw.predict.predict_program`, on each target: the
phase's predicted time is the sum over its programs. The training step adds its optimizer update (SGD with
momentum runs on torch, not compiled: priced at its memory traffic, five float32 arrays the size of the
parameters, over the target's bandwidth). Ops that ran on torch as fallbacks are not priced: their count is
kept beside the prediction. Everything here is *predicted*: the model's own assumptions
(`xbench.hw.predict.ASSUMPTIONS`) apply, the cuda backend's kernels run on CUDA cores (no tensor cores).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..hw.target import TargetError, get_target

TARGETS = ("h100", "a100", "ascend-910b")
REFERENCE = "a100"


@dataclass
class PhasePrediction:
    """One phase of a workload (a training step, an inference, a prefill, one decode step) on one target."""
    target: str
    seconds: float
    kernels: int
    flops: float
    bytes: float
    compute_s: float                      # the flops at the target's peak for their dtype and unit
    memory_s: float                       # the bytes at the target's memory bandwidth
    bounds: dict[str, int] = field(default_factory=dict)    # kernels per dominant model term
    fallback_ops: int = 0                 # ops that ran on torch: not priced
    optimizer_s: float = 0.0

    @property
    def pct_peak_compute(self) -> float:
        return 100.0 * self.compute_s / self.seconds if self.seconds else 0.0

    @property
    def pct_peak_bandwidth(self) -> float:
        return 100.0 * self.memory_s / self.seconds if self.seconds else 0.0


def compiled_programs(session) -> list:
    """Every specialisation (`Compiled`: artifact and program) of every partition a recording session holds."""
    out = []
    for g in session.graphs:
        for p in g.partitions:
            out.extend(p._cache.values())
    return out


def fallback_ops(session) -> int:
    return sum(len(g.fallbacks) for g in session.graphs)


def _peak(target, dtype: str, unit: str) -> float:
    for args in ((dtype, unit), (dtype,), ("float32",)):
        try:
            return target.peak_flops(*args)
        except TargetError:
            continue
    raise TargetError(f"{target.name} has no peak for {dtype}")


def predict_phase(session, target: str, *, parameters: int = 0) -> PhasePrediction:
    """The predicted time of one call of the graphs `session` recorded, on `target` (plus an optimizer step
    over `parameters` float32 parameters when given)."""
    from ..hw.predict import predict_program, program_counts
    t = get_target(target)
    seconds = flops = nbytes = compute = memory = 0.0
    kernels = 0
    bounds: dict[str, int] = {}
    bw = t.bandwidth("memory")
    for c in compiled_programs(session):
        counts = program_counts(c.program)
        pred = predict_program(c.program, t, counts=counts)
        seconds += pred.time_s
        kernels += len(pred.kernels)
        for k in pred.kernels:
            bounds[k.bound] = bounds.get(k.bound, 0) + 1
        for kc in counts:
            nbytes += kc.bytes
            memory += kc.bytes / bw
            for (dt, unit), f in kc.flops.items():
                flops += f
                compute += f / _peak(t, dt, unit)
    opt = 0.0
    if parameters:
        opt = 5 * 4 * parameters / bw          # SGD with momentum: read p, g, m; write p, m
        seconds += opt
        nbytes += 5 * 4 * parameters
        memory += opt
    return PhasePrediction(target, seconds, kernels, flops, nbytes, compute, memory, bounds,
                           fallback_ops(session), opt)

"""Predicted speed on hardware this machine does not have, from the kernels a workload actually compiled to.

Every xbench run of a workload records the graphs the bridge compiled (`xbench.torch.recording`), per phase of
its mode (`step`, or `prefill` and `decode`). Each graph's xbench program (its loop-IR kernels, at the shapes
the workload ran) is priced by the hardware model, `xbench.hw.predict.predict_program`, on each target: the
phase's predicted time is the sum over the programs its last run called, each as often as it ran (a decode
phase runs its graph once per token; a graph Dynamo compiled again no longer runs). The training step adds its optimizer update (SGD with
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
    notes: list[str] = field(default_factory=list)

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


def phase_calls(session, calls: list | None = None) -> list:
    """(specialisation, times it ran) of one run of a phase: `calls` as a `Run` recorded them (a decode phase
    calls its graph once per token; a graph Dynamo compiled again no longer runs), by default every
    specialisation `session` recorded, once."""
    return calls if calls is not None else [(c, 1) for c in compiled_programs(session)]


def count_programs(programs) -> list:
    """Each program's kernel counts (`xbench.hw.predict.program_counts`): the same on every target, so counted
    once for all of them (at bench sizes the counting is most of a prediction's time)."""
    from ..hw.predict import program_counts
    return [program_counts(p) for p in programs]


def predict_phase(session, target: str, *, parameters: int = 0, calls: list | None = None,
                  counts: list | None = None) -> PhasePrediction:
    """The predicted time of one run of a phase on `target` (`phase_calls`), plus an optimizer step over
    `parameters` float32 parameters when given; `counts`: `count_programs` of its programs, if already counted."""
    calls = phase_calls(session, calls)
    return predict_programs([c.program for c, _ in calls], target, parameters=parameters,
                            fallbacks=fallback_ops(session), times=[n for _, n in calls], counts=counts)


def predict_programs(programs, target: str, *, parameters: int = 0, fallbacks: int = 0,
                     bound: bool = False, times: list[int] | None = None, counts: list | None = None) -> PhasePrediction:
    """The predicted time of running each of `programs` once (or `times[i]` times) on `target` (see the
    module's docstring); `counts`: `count_programs(programs)`, if already counted.

    `bound`: each kernel at its roofline bound instead (its launch, plus its flops at the target's listed peak on
    their unit, contractions on the matrix unit, or its compulsory bytes at the memory bandwidth, whichever is
    longer): what the chip allows for this work, whoever writes the kernels. xbench's own kernels on a GPU run
    their contractions on CUDA cores; comparing chips through them compares code generators, not hardware."""
    from ..hw.predict import launch_time, predict_program, roofline_time
    t = get_target(target)
    seconds = flops = nbytes = compute = memory = 0.0
    kernels = 0
    bounds: dict[str, int] = {}
    bw = t.bandwidth("memory")
    programs = list(programs)
    for program, n, kcs in zip(programs, times or [1] * len(programs), counts if counts is not None else count_programs(programs)):
        if bound:
            for kc in kcs:
                body = roofline_time(kc, t)
                seconds += n * (launch_time(t) + body)
                key = "launch" if launch_time(t) > body else "memory" if kc.bytes / bw >= body else "compute"
                bounds[key] = bounds.get(key, 0) + n
            kernels += n * len(kcs)
        else:
            pred = predict_program(program, t, counts=kcs)
            seconds += n * pred.time_s
            kernels += n * len(pred.kernels)
            for k in pred.kernels:
                bounds[k.bound] = bounds.get(k.bound, 0) + n
        for kc in kcs:
            nbytes += n * kc.bytes
            memory += n * kc.bytes / bw
            for (dt, unit), f in kc.flops.items():
                flops += n * f
                compute += n * f / _peak(t, dt, unit)
    opt = 0.0
    if parameters:
        opt = 5 * 4 * parameters / bw          # SGD with momentum: read p, g, m; write p, m
        seconds += opt
        nbytes += 5 * 4 * parameters
        memory += opt
    p = PhasePrediction(target, seconds, kernels, flops, nbytes, compute, memory, bounds, fallbacks, opt)
    if compute > seconds:
        p.notes.append(f"above {target}'s listed peak: the model prices some work on a unit faster than the peak the "
                       f"target file lists for its dtype (e.g. float32 contractions on a matrix unit)")
    return p


# ---- at sizes this machine does not run through xbench ------------------------------------------------------

@dataclass
class Lowered:
    """One xbench partition of a captured graph, lowered (not compiled) at the shapes it was captured with."""
    graph: str
    kind: str
    program: object


def _partition_inputs(name: str, split, args: list) -> list:
    """(name, submodule, its inputs) of every xbench partition of a split graph, from one pass over it in which
    every node gives stand-ins of its recorded value (zeros of its shape): nothing is computed."""
    import torch.fx as fx

    from ..torch.bisect import graph_outputs, stand_in
    found = []

    class Recorder(fx.Interpreter):
        def call_module(self, target, a, kwargs):
            sub = self.fetch_attr(target)
            if str(target).startswith("xbench_"):
                found.append((f"{name}.{target}", sub, list(a)))
            outs = graph_outputs(sub)
            return outs[0] if len(outs) == 1 and not _returns_tuple(sub) else tuple(outs)

        def run_node(self, n):
            if n.op == "call_function" and "val" in n.meta:        # an op left on torch
                return stand_in(n.meta["val"])
            return super().run_node(n)
    Recorder(split).run(*args)
    return found


def _returns_tuple(gm) -> bool:
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return isinstance(out.args[0], (tuple, list))


def lower_model(model, inputs: dict, *, backward: bool = True, progress=None) -> list[Lowered]:
    """The xbench programs the bridge would compile for `model(**inputs)` (and its loss's backward), lowered to
    loop-IR kernels without compiling them: the model is traced once to capture its ATen graphs and their
    inputs' shapes (`xbench.torch.bisect.capture`, computing nothing), each graph is partitioned as the bridge
    partitions it, and each partition is traced and lowered at its captured shapes. For predicting sizes too
    large to run on xbench here, or on torch in reasonable time (bfloat16 on a CPU without bfloat16 instructions)."""
    import torch.fx as fx

    from ..runtime import runtime
    from ..torch.bisect import capture
    from ..torch.graph import GraphOp
    from ..torch.partition import partitions, probe
    from ..torch.products import batch_products
    out = []
    for g in capture(model, (), inputs, backward, compute=False):
        batch_products(g.gm)
        unsupported = probe(g.gm)
        parts: list[tuple[str, fx.GraphModule, list]] = []
        if not unsupported:
            parts.append((g.name, g.gm, g.args))
        else:
            parts += _partition_inputs(g.name, partitions(g.gm, unsupported), g.args)
        for name, gm, args in parts:
            if progress:
                progress(f"lowering {name}")
            op = GraphOp(gm, f"lowered_{name.replace('.', '_')}", "cpu")
            call, _ = op.arguments(args)
            spec, _ = runtime.specialize(op.operator, tuple(call), {}, None)
            out.append(Lowered(name, g.kind, spec.program()))
    return out

"""Collectors: each adds metric records to a profile (as Kernel Tuner's observers add columns to a result).

A collector is an object with a `name`, `applies(ctx) -> str | None` (None when it applies, else the reason
it does not) and `collect(ctx) -> Iterable[Metric]`. The profiler runs every collector that applies; the
`Context` computes shared things once (artifacts, reference outputs, counts, cache simulations, predictions)
and remembers why something failed, so each metric that depends on it says "unavailable: <reason>".
"""
from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..hw.target import Target, get_target
from .report import Metric, unavailable
from .roof import pct_of_roofline

SIM_POINTS_LIMIT = 1 << 14       # outer points x stage length above which the CUDA simulator is not run


class Collector(Protocol):
    name: str

    def applies(self, ctx: Context) -> str | None: ...

    def collect(self, ctx: Context) -> Iterable[Metric]: ...


class Failed(Exception):
    """Something a metric needs could not be obtained; the message is the reason shown."""


def backend_for(target: Target) -> str:
    return {"cpu": "cpu", "gpu": "cuda", "npu": "ascend"}[target.kind]


def cc_of(target: Target) -> str | None:
    return f"sm_{target.compute_capability[0]}{target.compute_capability[1]}" if target.compute_capability else None


@dataclass
class Context:
    """Everything collectors share for one profiled call; values are computed on first use."""

    op: Any
    args: tuple
    kwargs: dict
    backends: tuple[str, ...]
    target_names: tuple[str, ...]
    timing: bool = True
    budget: int = 2_000_000
    schedule: Mapping | None = None
    options: dict = field(default_factory=dict)
    _memo: dict = field(default_factory=dict)

    # ---- memo ------------------------------------------------------------------------------------------
    def _get(self, key, make):
        if key not in self._memo:
            try:
                self._memo[key] = (True, make())
            except Failed as e:
                self._memo[key] = (False, str(e))
            except Exception as e:  # a backend or tool that fails: shown as the metric's reason
                self._memo[key] = (False, f"{type(e).__name__}: {str(e).replace('xbench: ', '').splitlines()[0]}")
        ok, v = self._memo[key]
        if not ok:
            raise Failed(v)
        return v

    # ---- the operator ----------------------------------------------------------------------------------
    @property
    def program(self):
        return self._get("program", lambda: self.op.lower(*self.args, **self.kwargs))

    @property
    def graph(self):
        return self._get("graph", lambda: self.op.trace(*self.args, **self.kwargs))

    @property
    def arrays(self) -> list[np.ndarray]:
        return self._get("arrays", lambda: self.op.arrays(*self.args, **self.kwargs))

    @property
    def data(self) -> dict[str, np.ndarray]:
        from ..hw.predict import program_data
        return self._get("data", lambda: program_data(self.program, self.arrays))

    @property
    def counts(self):
        from ..hw.predict import program_counts
        return self._get("counts", lambda: program_counts(self.program, self.data))

    def reference(self) -> list[np.ndarray]:
        def make():
            from ..backends import get
            return get("reference").compile(self.program).run_exact(*self.arrays)
        return self._get("reference", make)

    def target(self, name: str) -> Target:
        return self._get(("target", name), lambda: get_target(name))

    @property
    def targets(self) -> list[Target]:
        out = []
        for n in self.target_names:
            try:
                out.append(self.target(n))
            except Failed:
                continue
        return out

    # ---- artifacts -------------------------------------------------------------------------------------
    def artifact(self, backend: str, target: Target | None = None):
        """The compiled artifact of `backend` (cuda: for the target's compute capability)."""
        cc = cc_of(target) if backend == "cuda" and target is not None else None

        def make():
            from ..backends import get
            be = get(backend)
            ok, why = be.available()
            if not ok:
                raise Failed(f"backend {backend!r} is not available here: {why}")
            opts = {"cc": cc} if cc else {}
            sched = (self.schedule or {}).get(backend) if self.schedule and backend in self.schedule else \
                self.schedule if backend == "cpu" else None
            t0 = time.perf_counter()
            art = self.op.compile(backend, *self.args, schedule=sched, **opts, **self.kwargs)
            art_ms = (time.perf_counter() - t0) * 1e3
            return art, art_ms
        return self._get(("artifact", backend, cc), make)[0]

    def outputs(self, backend: str, target: Target | None = None) -> list[np.ndarray]:
        def make():
            art = self.artifact(backend, target)
            if backend == "cuda" and getattr(art, "predicted", False):
                work = sum(k.points() * max([_stage_len(s) for s in k.stages] + [1]) for k in self.program.kernels)
                if work > SIM_POINTS_LIMIT and not self.options.get("simulate_cuda", False):
                    raise Failed(f"no CUDA GPU here and {work:,} point-iterations are too many for numba's CUDA "
                                 f"simulator (limit {SIM_POINTS_LIMIT:,}; pass simulate_cuda=True to run it anyway)")
            return [np.asarray(o) for o in art.run(*self.arrays)]
        key = ("outputs", backend, cc_of(target) if backend == "cuda" and target is not None else None)
        return self._get(key, make)

    def check(self, backend: str, target: Target | None = None):
        """The check of a simulated backend of an annotated operator at sizes of its own (`checks.check`), or the
        one given in options["checks"]; None when the backend is compared at the call's arrays (`outputs`)."""
        given = (self.options.get("checks") or {}).get(backend)
        if given is not None:
            return given

        def make():
            from . import checks
            art = self.artifact(backend, target)
            if not getattr(art, "predicted", False) or checks.call_dims(self.op, self.args, self.kwargs) is None:
                return None
            return checks.check(self.op, self.args, self.kwargs, backend, artifact=art)
        key = ("check", backend, cc_of(target) if backend == "cuda" and target is not None else None)
        return self._get(key, make)

    def timing_of(self, backend: str):
        from .timing import bench

        def make():
            art = self.artifact(backend)
            if getattr(art, "predicted", False):
                what = {"cuda": "numba's CUDA simulator (no CUDA GPU here)",
                        "ascend": "the Ascend C CPU twin (no NPU here)"}.get(backend, "a simulator")
                raise Failed(f"the {backend} backend runs on {what}, whose run time says nothing about the "
                             f"hardware; see predicted_time_ms")
            arrays = self.arrays
            if backend == "cuda" and hasattr(art, "device_args") and hasattr(art, "launch"):
                # on the GPU: the kernels alone, on device-resident inputs, synchronised after each launch
                from numba import cuda
                b = art.device_args(*arrays)

                def once() -> None:
                    art.launch(b)
                    cuda.synchronize()
                once()
                return bench(once, **self.options.get("bench", {}))
            art.run(*arrays)
            return bench(lambda: art.run(*arrays), **self.options.get("bench", {}))
        return self._get(("timing", backend), make)

    # ---- simulation and prediction ---------------------------------------------------------------------
    def kernel_resources(self, target: Target) -> dict[str, dict]:
        """Per-kernel resources of the artifact that would run on `target` ({} when there is none); for the
        ascend backend with the twin's counters of a run under "counters"."""
        be = backend_for(target)
        if be == "cpu" or be not in self.backends:
            return {}
        try:
            art = self.artifact(be, target)
        except Failed:
            return {}
        out = {k.name: dict(k.resources) for k in art.kernels}
        if be == "ascend":
            with contextlib.suppress(Failed):
                self.outputs(be, target)            # a run fills the twin's counters
            runs = ((getattr(art, "last_counters", None) or {}).get("launches") or [])
            for name, r in out.items():
                r["counters"] = [cl for cl in runs if cl.get("kernel") == name]
        return out

    def schedules(self, target: Target) -> dict[str, Mapping]:
        be = backend_for(target)
        try:
            art = self.artifact(be, target)
        except Failed:
            return {}
        return {k.name: dict(k.schedule) for k in art.kernels}

    def caches(self, target: Target):
        def make():
            from ..hw import traces as T
            from ..hw.cachesim import Hierarchy
            if target.kind == "npu":
                raise Failed(f"{target.name} moves data through software-managed buffers (MTE); its traffic is "
                             f"reported as mte_bytes, not simulated as a cache")
            prog, data = self.program, self.data
            lay = T.layout(prog)
            traces = []
            if target.kind == "cpu":
                sched = self.schedules(target)
                for k in prog.kernels:
                    traces.append(T.cpu_trace(prog, k, target, schedule=sched.get(k.name), lay=lay, data=data))
                h = Hierarchy.from_target(target)
                cores = target.cpu.cores if target.cpu else target.compute_units
            else:
                res = self.kernel_resources(target)
                carve = 0
                for r in res.values():
                    carve = max(carve, int(r.get("blocks_per_sm", 0)) * int(r.get("smem_allocated_bytes", 0)))
                for k in prog.kernels:
                    traces.append(T.gpu_trace(prog, k, target, resources=res.get(k.name), lay=lay, data=data))
                l1 = target.level("l1")
                h = Hierarchy.from_target(target, granularity="sector",
                                          shared_mem_carveout=min(carve, (l1.size_bytes or 0) // 2))
                cores = target.compute_units
            gpu = target.kind == "gpu"      # GPU profilers flush the caches between kernels; CPU timings run warm
            foot = None if gpu else T.footprint_trace(prog, lay, h.levels[-1].line_bytes)
            return T.simulate_program(traces, h, cores=cores, budget=self.budget, warm=not gpu, flush=gpu,
                                      footprint=foot)
        return self._get(("caches", target.name), make)

    def prediction(self, target: Target):
        def make():
            from ..hw.predict import predict_program
            try:
                caches = self.caches(target)
            except Failed:
                caches = None
            res = self.kernel_resources(target)
            return predict_program(self.program, target, counts=self.counts, caches=caches,
                                   schedules=self.schedules(target), resources=res, data=self.data,
                                   model=self.options.get("cpu_model") if target.kind == "cpu" else None)
        return self._get(("prediction", target.name), make)


def _stage_len(s) -> int:
    from ..hw.traces.points import _extent, _stage_axes
    return _extent(_stage_axes(s))


# ---- the collectors --------------------------------------------------------------------------------------

def _per_kernel(values: Mapping[str, Any]) -> dict[str, Any]:
    return dict(values) if len(values) > 1 else {}


class Counts:
    """flops, bytes, arithmetic_intensity — counted from the loop IR (operator level, per kernel)."""
    name = "counts"

    def applies(self, ctx: Context) -> str | None:
        return None

    def collect(self, ctx: Context) -> Iterable[Metric]:
        try:
            cs = ctx.counts
        except Failed as e:
            for n, u in (("flops", "FLOP"), ("bytes", "B"), ("arithmetic_intensity", "FLOP/B")):
                yield unavailable(n, str(e), unit=u, source="counted")
            return
        flops = {c.kernel: c.total_flops for c in cs}
        nbytes = {c.kernel: c.bytes for c in cs}
        tf, tb = sum(flops.values()), sum(nbytes.values())
        yield Metric("flops", tf, "FLOP", "counted", kernels=_per_kernel(flops),
                     note=", ".join(f"{d} {u}: {_g(v)}" for c in cs for (d, u), v in c.flops.items())
                     if len(cs) == 1 else "")
        yield Metric("bytes", tb, "B", "counted", kernels=_per_kernel(nbytes),
                     note="compulsory: distinct elements of global buffers read + written")
        ai = {c.kernel: (c.total_flops / c.bytes if c.bytes else math.inf) for c in cs}
        yield Metric("arithmetic_intensity", tf / tb if tb else math.inf, "FLOP/B", "counted",
                     kernels=_per_kernel(ai))


def _g(v: float) -> str:
    return f"{v:.3g}"


class Compile:
    """compile_ms per backend (and per compute capability for cuda)."""
    name = "compile"

    def applies(self, ctx: Context) -> str | None:
        return None

    def collect(self, ctx: Context) -> Iterable[Metric]:
        for be in ctx.backends:
            target = _first_target(ctx, be)
            try:
                art = ctx.artifact(be, target)
            except Failed as e:
                yield unavailable("compile_ms", str(e), unit="ms", backend=be, target=target and target.name)
                continue
            note = "from the compile cache" if art.cache_hit else ""
            yield Metric("compile_ms", float(art.compile_ms), "ms", "measured", be, target and target.name,
                         note=note)


def _first_target(ctx: Context, backend: str) -> Target | None:
    for t in ctx.targets:
        if backend_for(t) == backend:
            return t
    return None


class Accuracy:
    """max_abs_error, max_rel_error of each backend's outputs against the float64 reference."""
    name = "accuracy"

    def applies(self, ctx: Context) -> str | None:
        return None

    def collect(self, ctx: Context) -> Iterable[Metric]:
        from ..verify import compare, op_class, reduction_length
        for be in ctx.backends:
            target = _first_target(ctx, be)
            tname = target.name if target is not None else None
            try:
                done = ctx.check(be, target)
            except Failed as e:
                yield unavailable("max_abs_error", str(e), backend=be, target=tname)
                yield unavailable("max_rel_error", str(e), backend=be, target=tname)
                continue
            if done is not None:
                yield from _check_metrics(done, be, tname)
                continue
            try:
                outs = ctx.outputs(be, target)
                refs = ctx.reference()
                graph = ctx.graph
            except Failed as e:
                yield unavailable("max_abs_error", str(e), backend=be, target=tname)
                yield unavailable("max_rel_error", str(e), backend=be, target=tname)
                continue
            k, klass = reduction_length(graph), op_class(graph)
            limit = int(ctx.options.get("check_elements") or 0)
            comps, subset = [], []
            for o, r, v in zip(outs, refs, graph.outputs):
                if limit and o.size > limit and o.ndim >= 1 and o.shape == r.shape and o.shape[0] > 1:
                    step = -(-o.size // limit)          # every step-th row (of the leading axis)
                    o, r = o[::step], r[::step]
                    subset.append(f"{o.size:,} of {o.size * step:,} elements (every {step} rows)")
                comps.append(_compare(compare, o, r, v.dtype, k, klass))
            ok = all(c[0] for c in comps)
            note = "within tolerance" if ok else "; ".join(c[3] for c in comps if not c[0])
            if subset:
                note += "; compared on " + ", ".join(subset)
            per_out = {f"output {i}": c[1] for i, c in enumerate(comps)} if len(comps) > 1 else {}
            yield Metric("max_abs_error", max(c[1] for c in comps), "", "measured", be, tname,
                         kernels=per_out, note=note)
            yield Metric("max_rel_error", max(c[2] for c in comps), "", "measured", be, tname, note=note)


def _check_metrics(c, backend: str, target: str | None) -> Iterable[Metric]:
    """max_abs_error and max_rel_error of a `checks.Check` (the sizes it ran at in the note)."""
    bad = [x.message for x in c.comparisons if not x.ok]
    note = ("within tolerance" if not bad else "; ".join(bad)) + "; " + c.where()
    per_out = {f"output {i}": x.max_abs_error for i, x in enumerate(c.comparisons)} if len(c.comparisons) > 1 else {}
    yield Metric("max_abs_error", c.max_abs_error, "", "measured", backend, target, kernels=per_out, note=note)
    yield Metric("max_rel_error", c.max_rel_error, "", "measured", backend, target, note=note)


CHUNK = 1 << 20


def _compare(compare, out: np.ndarray, ref: np.ndarray, dtype: str, k: int, klass: str):
    """(ok, max abs error, max rel error, message) by `xbench.verify.compare`; a large output is compared in
    blocks of CHUNK elements (the errors are the same; a block's tolerance uses its own largest value, which is
    never looser, so a failing block is checked again on the whole output)."""
    if out.size <= 4 * CHUNK or out.shape != ref.shape:
        c = compare(out, ref, dtype, k, klass)
        return c.ok, c.max_abs_error, c.max_rel_error, c.message
    o, r = out.reshape(-1), ref.reshape(-1)
    parts = [compare(o[i:i + CHUNK], r[i:i + CHUNK], dtype, k, klass) for i in range(0, o.size, CHUNK)]
    if all(c.ok for c in parts):
        return True, max(c.max_abs_error for c in parts), max(c.max_rel_error for c in parts), ""
    c = compare(out, ref, dtype, k, klass)
    return c.ok, c.max_abs_error, c.max_rel_error, c.message


class Timing:
    """time_ms (median, quartiles), gflops, gbytes_per_s, pct_of_roofline — measured where the backend runs
    on its hardware (the cpu here; cuda on a GPU)."""
    name = "timing"

    def applies(self, ctx: Context) -> str | None:
        return None if ctx.timing else "timing=False"

    def collect(self, ctx: Context) -> Iterable[Metric]:
        for be in ctx.backends:
            target = _first_target(ctx, be)
            tname = target.name if target is not None else None
            try:
                t = ctx.timing_of(be)
                cs = ctx.counts
            except Failed as e:
                # gflops, gbytes_per_s and pct_of_roofline then come from the predicted time (Prediction)
                yield unavailable("time_ms", str(e), unit="ms", backend=be, target=tname)
                continue
            note = f"median of {t.samples} samples x {t.calls_per_sample} calls" + (" (noisy)" if t.noisy else "")
            if be == "cuda":
                note += "; kernels only, inputs on the device"
            yield Metric("time_ms", t.median_ms, "ms", "measured", be, tname, low=t.q1_ms, high=t.q3_ms, note=note)
            s = t.median_ms / 1e3
            flops = sum(c.total_flops for c in cs)
            nbytes = sum(c.bytes for c in cs)
            yield Metric("gflops", flops / s / 1e9, "GFLOP/s", "measured", be, tname)
            yield Metric("gbytes_per_s", nbytes / s / 1e9, "GB/s", "measured", be, tname,
                         note="compulsory bytes / time")
            if target is not None:
                yield pct_of_roofline(cs, target, s, "measured", be, warm=target.kind == "cpu")


class CudaResources:
    """registers_per_thread, spill_bytes, shared_mem_bytes, stack_bytes, occupancy_theoretical,
    occupancy_limiter — from ptxas and the occupancy calculator, per GPU target."""
    name = "cuda_resources"
    NAMES = (("registers_per_thread", ""), ("spill_bytes", "B"), ("shared_mem_bytes", "B"), ("stack_bytes", "B"),
             ("occupancy_theoretical", "%"), ("occupancy_limiter", ""))

    def applies(self, ctx: Context) -> str | None:
        return None

    def collect(self, ctx: Context) -> Iterable[Metric]:
        for t in ctx.targets:
            if t.kind != "gpu":
                continue
            if "cuda" not in ctx.backends:
                for n, u in self.NAMES:
                    yield unavailable(n, "the cuda backend was not asked for", unit=u, source="toolchain",
                                      backend="cuda", target=t.name)
                continue
            try:
                art = ctx.artifact("cuda", t)
                per = {k.name: dict(k.resources) for k in art.kernels}
                if not per or not all("registers" in r for r in per.values()):
                    raise Failed("the cuda artifact has no ptxas resources (compiled with ptx=False?)")
            except Failed as e:
                for n, u in self.NAMES:
                    yield unavailable(n, str(e), unit=u, source="toolchain", backend="cuda", target=t.name)
                continue
            arch = art.resources.get("cc", cc_of(t))
            ptxas = art.resources.get("ptxas", "")
            src = f"ptxas {ptxas} for {arch}" if ptxas else arch
            regs = {k: int(r["registers"]) for k, r in per.items()}
            yield Metric("registers_per_thread", max(regs.values()), "", "toolchain", "cuda", t.name,
                         kernels=_per_kernel(regs), note=src)
            spill = {k: int(r.get("spill_stores_bytes", 0)) + int(r.get("spill_loads_bytes", 0))
                     for k, r in per.items()}
            yield Metric("spill_bytes", sum(spill.values()), "B", "toolchain", "cuda", t.name,
                         kernels=_per_kernel(spill), note="spill stores + loads per thread")
            smem = {k: int(r.get("smem_bytes", 0)) for k, r in per.items()}
            yield Metric("shared_mem_bytes", max(smem.values()), "B", "toolchain", "cuda", t.name,
                         kernels=_per_kernel(smem), note="static shared memory per block")
            stack = {k: int(r.get("stack_frame_bytes", 0)) for k, r in per.items()}
            yield Metric("stack_bytes", max(stack.values()), "B", "toolchain", "cuda", t.name,
                         kernels=_per_kernel(stack))
            occ = {k: 100.0 * float(r["theoretical_occupancy"]) for k, r in per.items()}
            worst = min(per, key=lambda k: occ[k])
            yield Metric("occupancy_theoretical", occ[worst], "%", "toolchain", "cuda", t.name,
                         kernels=_per_kernel(occ), note=f"lowest kernel: {worst}" if len(per) > 1 else "")
            lim = {k: str(r.get("occupancy_limiter", "")) for k, r in per.items()}
            yield Metric("occupancy_limiter", lim[worst], "", "toolchain", "cuda", t.name, kernels=_per_kernel(lim))


class AscendResources:
    """ub_bytes, ub_utilization (the ascend backend's UB plan), mte_bytes, vector_cycles, cube_cycles (the CPU
    twin's counters of a run; estimated from the loop IR when the backend is not there)."""
    name = "ascend_resources"

    def applies(self, ctx: Context) -> str | None:
        return None

    def collect(self, ctx: Context) -> Iterable[Metric]:
        from ..hw.predict import ascend_counters
        for t in ctx.targets:
            if t.kind != "npu":
                continue
            why = None
            per: dict[str, dict] = {}
            if "ascend" not in ctx.backends:
                why = "the ascend backend was not asked for"
            else:
                try:
                    ctx.artifact("ascend", t)
                    per = ctx.kernel_resources(t)
                except Failed as e:
                    why = str(e)
            try:
                cs = ctx.counts
            except Failed as e:
                for n, u in (("ub_bytes", "B"), ("ub_utilization", "%"), ("mte_bytes", "B"),
                             ("vector_cycles", "cycles"), ("cube_cycles", "cycles")):
                    yield unavailable(n, str(e), unit=u, source="toolchain", backend="ascend", target=t.name)
                continue
            ks = {c.kernel: ascend_counters(c, t, per.get(c.kernel)) for c in cs}
            ub = {k: v["ub_bytes"] for k, v in ks.items()}
            if why is None and ub and all(v for v in ub.values()):
                cap = next((v["ub_budget"] for v in ks.values() if v["ub_budget"]), None) or \
                    (t.npu.ub_bytes if t.npu else 196608)
                yield Metric("ub_bytes", max(ub.values()), "B", "toolchain", "ascend", t.name,
                             kernels=_per_kernel(ub), note="Unified Buffer planned per core (queues and buffers)")
                util = {k: 100.0 * v / cap for k, v in ub.items()}
                yield Metric("ub_utilization", max(util.values()), "%", "toolchain", "ascend", t.name,
                             kernels=_per_kernel(util), note=f"of {cap:,} B")
            else:
                reason = why or "the ascend artifact does not report a UB plan"
                yield unavailable("ub_bytes", reason, unit="B", source="toolchain", backend="ascend", target=t.name)
                yield unavailable("ub_utilization", reason, unit="%", source="toolchain", backend="ascend",
                                  target=t.name)
            twin = all(k["source"] == "twin" for k in ks.values())
            src = "simulated" if twin else "predicted"
            note = "CPU twin counters" if twin else (f"estimated from the loop IR ({why})" if why else
                                                     "estimated from the loop IR (no twin counters)")
            mte = {k: v["totals"]["mte2_bytes"] + v["totals"]["mte3_bytes"] for k, v in ks.items()}
            yield Metric("mte_bytes", sum(mte.values()), "B", src, "ascend", t.name, kernels=_per_kernel(mte),
                         note=note + "; MTE2 (GM to UB) + MTE3 (UB to GM), all cores")
            vec = {k: v["totals"]["vec_instr"] for k, v in ks.items()}
            yield Metric("vector_cycles", sum(vec.values()), "cycles", src, "ascend", t.name,
                         kernels=_per_kernel(vec), note=note + "; 256-byte vector repeats, one per cycle, all cores")
            cube = {k: v["totals"]["cube_fractals"] for k, v in ks.items()}
            yield Metric("cube_cycles", sum(cube.values()), "cycles", src, "ascend", t.name,
                         kernels=_per_kernel(cube), note=note + "; 16x16xC0 fractals, one per cycle, all cores")


class CacheSim:
    """l1_hit_rate, l2_hit_rate (l3_hit_rate on CPUs), dram_bytes — simulated per target."""
    name = "cache"

    def applies(self, ctx: Context) -> str | None:
        return None if ctx.budget > 0 else "simulation disabled (budget=0)"

    def collect(self, ctx: Context) -> Iterable[Metric]:
        for t in ctx.targets:
            be = backend_for(t)
            names = [m.name for m in t.caches] or ["l2"]
            try:
                caches = ctx.caches(t)
            except Failed as e:
                for lv in names:
                    yield unavailable(f"{lv}_hit_rate", str(e), unit="%", source="simulated", backend=be,
                                      target=t.name)
                yield unavailable("dram_bytes", str(e), unit="B", source="simulated", backend=be, target=t.name)
                continue
            for lv in names:
                per = {}
                acc = hits = 0.0
                cis = []
                for kc in caches:
                    L = kc.level(lv)
                    per[kc.kernel] = 100.0 * L.hit_rate if L.accesses else math.nan
                    acc += L.accesses
                    hits += L.hit_rate * L.accesses if L.accesses and math.isfinite(L.hit_rate) else 0.0
                    if L.hit_rate_ci and L.accesses:
                        cis.append(L.hit_rate_ci * L.accesses)
                rate = 100.0 * hits / acc if acc else None
                ci = 100.0 * sum(cis) / acc if cis and acc else None
                note = _cache_note(caches)
                if rate is None:
                    yield Metric(f"{lv}_hit_rate", None, "%", "simulated", be, t.name,
                                 note=f"unavailable: no access reached {lv}")
                    continue
                yield Metric(f"{lv}_hit_rate", rate, "%", "simulated", be, t.name, kernels=_per_kernel(per),
                             low=None if ci is None else max(0.0, rate - ci),
                             high=None if ci is None else min(100.0, rate + ci), note=note)
            d = {kc.kernel: kc.dram_bytes for kc in caches}
            ci = sum(kc.dram_ci for kc in caches)
            total = sum(d.values())
            yield Metric("dram_bytes", total, "B", "simulated", be, t.name, kernels=_per_kernel(d),
                         low=max(0.0, total - ci) if ci else None, high=total + ci if ci else None,
                         note=f"{caches[0].memory_name} read + written; " + _cache_note(caches))


def _cache_note(caches: Sequence) -> str:
    exact = all(c.exact for c in caches)
    gran = ", ".join(sorted({c.granularity for c in caches}))
    if exact:
        how = "whole trace" + (" (warm: second run)" if any("second" in c.method for c in caches) else "")
    else:
        how = "; ".join(dict.fromkeys(n for c in caches for n in c.notes if n.startswith("sampled")))
    return f"{how}; {gran} accesses"


class Prediction:
    """predicted_time_ms per target (per kernel), and for targets not measured here: gflops, gbytes_per_s and
    pct_of_roofline of the predicted time."""
    name = "prediction"

    def applies(self, ctx: Context) -> str | None:
        return None

    def collect(self, ctx: Context) -> Iterable[Metric]:
        for t in ctx.targets:
            be = backend_for(t)
            try:
                p = ctx.prediction(t)
                cs = ctx.counts
            except Failed as e:
                yield unavailable("predicted_time_ms", str(e), unit="ms", source="predicted", backend=be,
                                  target=t.name)
                continue
            per = {k.kernel: k.time_ms for k in p.kernels}
            bounds = ", ".join(f"{k.kernel}: {k.bound}" for k in p.kernels)
            yield Metric("predicted_time_ms", p.time_ms, "ms", "predicted", be, t.name, kernels=_per_kernel(per),
                         note=f"{p.model}; bound by {bounds}")
            measured = be in ctx.backends and ctx.timing and _measured(ctx, be)
            if measured:
                continue
            s = p.time_s
            flops = sum(c.total_flops for c in cs)
            nbytes = sum(c.bytes for c in cs)
            yield Metric("gflops", flops / s / 1e9, "GFLOP/s", "predicted", be, t.name)
            yield Metric("gbytes_per_s", nbytes / s / 1e9, "GB/s", "predicted", be, t.name,
                         note="compulsory bytes / predicted time")
            yield pct_of_roofline(cs, t, s, "predicted", be, warm=t.kind == "cpu")


def _measured(ctx: Context, backend: str) -> bool:
    try:
        ctx.timing_of(backend)
        return True
    except Failed:
        return False


COLLECTORS: list[Collector] = [Counts(), Compile(), Accuracy(), Timing(), CudaResources(), AscendResources(),
                               CacheSim(), Prediction()]

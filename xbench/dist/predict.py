"""Distributed training at cluster scale, on paper: predicted step time of the suite's models on the cluster
files, communication efficiency, and what hierarchical algorithms, overlap and compression change.

One data-parallel training step of model M on N accelerators of cluster C:

- compute: 3 x forward FLOPs x batch / (the accelerator's bf16 tensor peak x an MFU assumption per model
  family) -- forward once, backward twice;
- gradient AllReduce: the dense parameters' float32 gradients in DDP's buckets (25 MiB, the first 1 MiB),
  each priced by the cluster's library model (alpha-beta `cost.choose` on NVIDIA clusters, HCCL's rules on
  Ascend, the FlagCX-style plan across chip types), overlapped with the backward pass (`overlap.predict`);
- embedding AllToAll (recommendation models): forward and backward, on the critical path;
- step = forward + max(backward, end of the last bucket's AllReduce) + AllToAll.

Communication efficiency is the gradient AllReduce's bus bandwidth (bytes x 2(p-1)/p / time) against the
links' theoretical bus bandwidth (`cost.peak_busbw`). Everything here is *predicted*; `provenance` says
from what. `claims()` sets the model against the figures the project's seeds quote.
"""
from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from . import cost, flagcx, hccl, overlap, schemes
from .cost import fmt_bytes, fmt_time
from .topology import Topology, TopologyError, _values

MODELS_FILE = Path(__file__).parent / "models.toml"
ACCELERATORS = (8, 64, 128, 512, 1024)
# model FLOP utilisation of a training step, per family. CNN: derived from MLPerf Training v1.0 DGX A100
# ResNet-50 (about 2,900 images/s per GPU: 3 x 8.18 GFLOP x 2900 / 312 TFLOP/s = 23 %); the others are model
# assumptions (large transformer runs report 40-55 %; recommendation models are bound by embedding traffic)
MFU = {"cnn": 0.23, "transformer": 0.45, "rnn": 0.25, "recommendation": 0.10}
MFU_SOURCE = ("MFU 23 % for CNNs (derived from MLPerf v1.0 ResNet-50 on A100); model assumptions 45 % transformers, "
              "25 % RNN, 10 % recommendation")
BUCKET = 25 << 20
FIRST_BUCKET = 1 << 20
LAYERS = 48                 # the dense parameters are spread over this many equal tensors for bucketing


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    dense_params: int
    forward_flops: float
    batch: int
    embedding_params: float = 0.0
    a2a_bytes_per_sample: int = 0
    sources: dict = field(default_factory=dict)
    uncertain: frozenset = frozenset()


@functools.cache
def models() -> MappingProxyType:
    """The suite's workloads at their published sizes (xbench/dist/models.toml)."""
    data = tomllib.loads(MODELS_FILE.read_text())
    out = {}
    for name, d in data.items():
        if name == "schema":
            continue
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        unc: set[str] = set()
        _values(d, "", str(MODELS_FILE), values, sources, unc)
        out[name] = ModelSpec(name, str(values["family"]), int(values["dense_params"]),
                              float(values["forward_flops"]), int(values["batch"]),
                              float(values.get("embedding_params", 0.0)), int(values.get("a2a_bytes_per_sample", 0)),
                              sources, frozenset(unc))
    return MappingProxyType(out)


def get_model(name: str) -> ModelSpec:
    m = models()
    if name not in m:
        import difflib
        close = difflib.get_close_matches(name, list(m), n=1)
        raise TopologyError(f"unknown model {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "") +
                            f"; known: {', '.join(m)}")
    return m[name]


# --- collective times on any cluster -----------------------------------------------------------------------

def allreduce_time(nbytes: float, topo: Topology, algorithm: str = "best") -> float:
    """One AllReduce of nbytes as the cluster's library would run it ('best'), or a flat ring ('ring')."""
    if nbytes <= 0 or topo.world_size <= 1:
        return 0.0
    if not topo.homogeneous:
        return flagcx.plan("allreduce", int(nbytes), topo).time
    if algorithm != "best":
        return cost.estimate("allreduce", int(nbytes), topo, algorithm).time
    if topo.ccl == "hccl":
        return hccl.choose("allreduce", int(nbytes), topo).time
    return cost.choose("allreduce", int(nbytes), topo).time


def all_to_all_time(nbytes: float, topo: Topology) -> float:
    if nbytes <= 0 or topo.world_size <= 1:
        return 0.0
    if not topo.homogeneous:
        return flagcx.plan("all_to_all", int(nbytes), topo).time
    return cost.choose("all_to_all", int(nbytes), topo).time


def _peak_flops(topo: Topology) -> float:
    """The slowest accelerator's bf16 tensor peak (a data-parallel step waits for the slowest rank)."""
    from ..hw.target import get_target

    return min(get_target(s.accelerator).peak_flops("bfloat16", "tensor") for s in topo.specs.values())


def _hbm_bandwidth(topo: Topology) -> float:
    from ..hw.target import get_target

    return min(get_target(s.accelerator).bandwidth("memory") for s in topo.specs.values())


def _peak_busbw(topo: Topology) -> float:
    """`cost.peak_busbw`; across chip types also the cross links' bound: the groups' partial sums must cross
    once, n over p_min pairs of ranks, i.e. busbw <= 2(p-1)/p x p_min x the cross link."""
    if topo.homogeneous:
        return cost.peak_busbw(topo)
    groups = topo.groups()
    p, p_min = topo.world_size, min(len(v) for v in groups.values())
    cross = cost.bus_factor("allreduce", p) * p_min * topo.cross.bandwidth
    return min([cost.peak_busbw(topo.subset(g)) for g in groups] + [cross])


@dataclass(frozen=True)
class StepPrediction:
    model: str
    cluster: str
    accelerators: int
    scheme: str
    algorithm: str
    compute_s: float
    forward_s: float
    comm_s: float               # gradient AllReduce, all buckets, as if alone
    exposed_s: float            # the part of it after the backward pass
    a2a_s: float
    codec_s: float
    step_s: float
    busbw: float
    peak_busbw: float
    buckets: int

    @property
    def efficiency(self) -> float:
        return self.busbw / self.peak_busbw if self.peak_busbw > 0 else 0.0

    @property
    def hidden_fraction(self) -> float:
        return 0.0 if self.comm_s <= 0 else 1.0 - self.exposed_s / self.comm_s

    @property
    def samples_per_s(self) -> float:
        return 0.0 if self.step_s <= 0 else 1.0 / self.step_s

    @property
    def provenance(self) -> str:
        return f"predicted (alpha-beta / vendor models with {self.cluster} links; {MFU_SOURCE})"


def predict_step(model: str | ModelSpec, topo: Topology, scheme: str = "fp32", algorithm: str = "best",
                 overlap_comm: bool = True, bucket_bytes: int = BUCKET) -> StepPrediction:
    """One data-parallel training step of `model` on `topo` (see the module docstring)."""
    m = get_model(model) if isinstance(model, str) else model
    p = topo.world_size
    peak = _peak_flops(topo) * MFU[m.family]
    forward = m.forward_flops * m.batch / peak
    backward = 2 * forward
    grad_bytes = 4 * m.dense_params
    layer = [grad_bytes // LAYERS] * LAYERS
    s = schemes.scheme_name(scheme)

    def comm(n: float) -> float:
        if s == "fp32":
            return allreduce_time(n, topo, algorithm)
        # compressed two-phase: an all-to-all and an all-gather of the compressed buffer move what a ring
        # AllReduce of that size moves
        return allreduce_time(schemes.compressed_bytes(int(n // 4), s), topo, algorithm)

    tl = overlap.predict(layer, backward if overlap_comm else 0.0, comm, bucket_bytes, FIRST_BUCKET)
    codec = 0.0
    if s != "fp32":                             # compress, decompress + sum, compress, decompress: ~4 passes
        codec = 4 * (4 + schemes.BITS[s] / 8) * m.dense_params / _hbm_bandwidth(topo)
    a2a = 2 * all_to_all_time(m.a2a_bytes_per_sample * m.batch, topo) if m.a2a_bytes_per_sample else 0.0
    end = max(backward, tl.end_s) if overlap_comm else backward + tl.comm_s
    step = forward + end + a2a + codec
    exposed = max(0.0, end - backward)
    busbw = (grad_bytes * cost.bus_factor("allreduce", p) / tl.comm_s) if tl.comm_s > 0 else 0.0
    return StepPrediction(m.name, topo.name, p, s, algorithm, forward + backward, forward, tl.comm_s, exposed, a2a,
                          codec, step, busbw, _peak_busbw(topo), len(tl.starts))


def table(model_names: list[str] | None = None, clusters: list[str] | None = None,
          accelerators: tuple[int, ...] = ACCELERATORS) -> list[dict]:
    """One row per (cluster, accelerators, model): the step, its communication, and the effect of the flat
    ring (no hierarchy), no overlap and int4 compression."""
    from .topology import list_clusters

    rows = []
    for c in clusters or list_clusters():
        for n in accelerators:
            topo = Topology.from_cluster(c, accelerators=n)
            for name in model_names or list(models()):
                best = predict_step(name, topo)
                flat = predict_step(name, topo, algorithm="ring") if topo.homogeneous else None
                serial = predict_step(name, topo, overlap_comm=False)
                int4 = predict_step(name, topo, scheme="int4")
                rows.append({"cluster": c, "accelerators": n, "model": name, "step_s": best.step_s,
                             "compute_s": best.compute_s, "comm_s": best.comm_s, "exposed_s": best.exposed_s,
                             "a2a_s": best.a2a_s, "efficiency": best.efficiency, "hidden": best.hidden_fraction,
                             "flat_step_s": flat.step_s if flat else None,
                             "flat_efficiency": flat.efficiency if flat else None,
                             "no_overlap_step_s": serial.step_s, "int4_step_s": int4.step_s,
                             "int4_comm_s": int4.comm_s, "source": best.provenance})
    return rows


def format_table(rows: list[dict]) -> str:
    head = (f"{'cluster':<17s} {'N':>5s} {'model':<13s} {'step':>9s} {'compute':>9s} {'comm':>9s} {'hidden':>6s} "
            f"{'eff':>5s} {'flat ring':>9s} {'no ovl':>9s} {'int4':>9s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        flat = fmt_time(r["flat_step_s"]) if r["flat_step_s"] is not None else "-"
        lines.append(f"{r['cluster']:<17s} {r['accelerators']:>5d} {r['model']:<13s} {fmt_time(r['step_s']):>9s} "
                     f"{fmt_time(r['compute_s']):>9s} {fmt_time(r['comm_s']):>9s} {r['hidden']:>6.0%} "
                     f"{r['efficiency']:>5.0%} {flat:>9s} {fmt_time(r['no_overlap_step_s']):>9s} "
                     f"{fmt_time(r['int4_step_s']):>9s}")
    lines.append("step: predicted time of one data-parallel step; comm: gradient AllReduce alone; hidden: share of it "
                 "behind the backward pass; eff: its bus bandwidth / the links' theoretical; flat ring / no ovl / int4: "
                 "the step with a flat ring, without overlap, with int4 two-phase compression. " + MFU_SOURCE)
    return "\n".join(lines)


# --- NUMA-aware routing --------------------------------------------------------------------------------------

def numa_unaware(topo: Topology) -> Topology:
    """The same cluster with NIC traffic routed without regard to NUMA: half the accelerators use a NIC
    behind the other socket, so their rails share the socket link (per_node / 2 flows each way)."""
    spec = topo.spec
    if spec.socket is None:
        raise TopologyError(f"{topo.name} has no [links.socket] table; NUMA routing needs it")
    shared = spec.socket.achievable / max(1, spec.per_node // 2)
    bw = min(spec.inter.achievable, shared) / spec.inter.efficiency
    inter = replace(spec.inter, bandwidth=bw, latency=spec.inter.latency + spec.socket.latency)
    new = replace(spec, inter=inter)
    return replace(topo, specs=MappingProxyType({spec.cluster: new}))


# --- the seeds' claims --------------------------------------------------------------------------------------

def claims() -> list[dict]:
    """The figures the project's seeds quote, against what the model predicts, with the setting used."""
    out = []
    t128 = Topology.from_cluster("dgx-a100", accelerators=128)
    ratios = {}
    for n in (64 << 10, 1 << 20, 25 << 20, 1 << 30):
        ring = cost.estimate("allreduce", n, t128, "ring")
        best = cost.choose("allreduce", n, t128)
        ratios[n] = (best.efficiency / ring.efficiency, best.algorithm)
    best_n = max(ratios, key=lambda k: ratios[k][0])
    where = ", ".join(f"{fmt_bytes(n)} {r:.1f}x ({a})" for n, (r, a) in ratios.items())
    out.append({"claim": "3.2x more communication efficiency (topology-aware vs flat), 128 GPUs",
                "predicted": f"{ratios[best_n][0]:.1f}x at {fmt_bytes(best_n)}",
                "setting": f"dgx-a100 x128 AllReduce, best algorithm vs flat ring: {where}",
                "verdict": "reached for small and medium messages (latency-bound), not at large ones where every "
                           "algorithm is NIC-bound" if ratios[best_n][0] >= 3.2 else "not reached"})
    for c in ("dgx-a100", "dgx-h100"):
        t = Topology.from_cluster(c, accelerators=128)
        e = cost.choose("allreduce", 1 << 30, t)
        out.append({"claim": "98 % of theoretical bandwidth on 128 GPUs",
                    "predicted": f"{e.efficiency:.0%} ({e.algorithm}, busbw {e.busbw / 1e9:.0f} of "
                                 f"{e.peak_busbw / 1e9:.0f} GB/s)",
                    "setting": f"{c} x128, 1 GiB AllReduce",
                    "verdict": "not reached: bounded by the NICs' achievable share (efficiency in the cluster file)"
                    if e.efficiency < 0.98 else "reached"})
    for c in ("dgx-a100", "dgx-h100"):
        t = Topology.from_cluster(c, accelerators=128)
        aware = cost.choose("allreduce", 256 << 20, t)
        unaware = cost.choose("allreduce", 256 << 20, numa_unaware(t))
        gain = 1 - aware.time / unaware.time
        out.append({"claim": "22 % from NUMA-aware routing",
                    "predicted": f"{gain:.0%} less AllReduce time ({fmt_time(unaware.time)} -> {fmt_time(aware.time)})",
                    "setting": f"{c} x128, 256 MiB AllReduce, half the GPUs' NIC traffic across the socket link "
                               "when unaware (socket-link numbers are uncertain)",
                    "verdict": "consistent" if 0.15 <= gain <= 0.3 else ("larger" if gain > 0.3 else "smaller")})
    for form in ("two-phase", "all-gather"):
        r = schemes.ratio("int4", form, 1 << 24, 10_000)
        out.append({"claim": "75 % less bandwidth with 4-bit gradients at 10,000 cards",
                    "predicted": f"{1 - r:.1%} less" if r < 1 else f"{r:.0f}x more",
                    "setting": f"int4 {form}, 10,000 ranks, bytes per rank vs a float32 ring AllReduce",
                    "verdict": "consistent (more than 75 %)" if r <= 0.25 else "contradicted: the all-gather form "
                               "grows with the rank count"})
    return out


def format_claims(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        lines.append(f"- {r['claim']}\n    predicted: {r['predicted']}\n    setting:   {r['setting']}\n"
                     f"    verdict:   {r['verdict']}")
    return "\n".join(lines)


def savings_table(worlds=(2, 4, 8, 16, 32, 128, 1024, 10_000)) -> str:
    """Bytes on the wire per hook and world size against a float32 ring AllReduce."""
    lines = [f"{'scheme':<6s} {'form':<11s} " + " ".join(f"{'p=' + str(p):>8s}" for p in worlds) + "  loses from"]
    for s in ("fp16", "bf16", "int8", "int4"):
        for f in ("two-phase", "all-gather"):
            cells = " ".join(f"{schemes.ratio(s, f, 1 << 24, p):>7.3g}x" for p in worlds)
            lose = schemes.break_even(s) if f == "all-gather" else None
            lines.append(f"{s:<6s} {f:<11s} {cells}  {('p = ' + str(lose)) if lose else '-'}")
    lines.append("bytes per rank as a multiple of a float32 ring AllReduce's (below 1x: a saving of 1 - x); "
                 "int codes carry one int8 exponent per 256 values")
    return "\n".join(lines)


def main_predict(clusters: list[str] | None, accelerators: tuple[int, ...], model_names: list[str] | None,
                 show_claims: bool = True) -> str:
    parts = [format_table(table(model_names, clusters, accelerators))]
    parts.append("\nbytes on the wire per compression hook\n" + savings_table())
    if show_claims:
        parts.append("\nthe seeds' claims against the model\n" + format_claims(claims()))
    return "\n".join(parts)

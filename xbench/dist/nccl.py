"""NCCL's own performance model, the reference for NVIDIA clusters: `ncclTopoTuneModel` and
`ncclTopoGetAlgoTime` of NCCL's src/graph/tuning.cc (the 2.18 series), ring and tree x LL, LL128, Simple.

NCCL predicts time = latency + bytes / bandwidth per (algorithm, protocol) and runs the fastest. Bandwidths
start from what its topology search found (channels x GB/s per channel, kept in the cluster file's [nccl]
table) and are refined per protocol; latencies are a base per (algorithm, protocol) plus hardware latencies
per step for NVLink, PCI and the network. Constants below are NCCL's, unit for unit (us, GB/s). Not
modelled: CollNet, NVLS (NVLink SHARP), the tree-pattern factor and user overrides (NCCL_ALGO, NCCL_PROTO).

    >>> est = predict("allreduce", 1 << 30, Topology.from_cluster("dgx-a100", 128))
    >>> est.algorithm, est.protocol, est.time, est.why
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .cost import Bandwidths, collective_name, fmt_bytes, fmt_time
from .topology import Topology, TopologyError

PROTOCOLS = ("LL", "LL128", "Simple")
# baseLat[algorithm][protocol], us
BASE_LAT = {"tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4)}
# hwLat[hw][algorithm][protocol], us
HW_LAT = {"nvlink": {"tree": (0.6, 1.25, 28.0), "ring": (0.6, 1.9, 3.4)},
          "pci": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
          "net": {"tree": (5.0, 8.5, 28.0), "ring": (2.7, 4.0, 14.0)}}
# [Volta, Ampere, Hopper] x [1 node, 2 nodes, more]
LL_MAX_BWS = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0))
PER_CH_MAX_RING_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7))
PER_CH_MAX_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0))
PER_CH_MAX_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0))
# treeCorrectionFactor[protocol][log2(bytes / 64)], 64 B .. 256 MiB
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9))
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0}
SOURCE = "NCCL src/graph/tuning.cc (ncclTopoTuneModel, ncclTopoGetAlgoTime), 2.18 series"


@dataclass(frozen=True)
class Entry:
    algorithm: str
    protocol: str
    latency_us: float
    bandwidth_GBps: float       # algorithm bandwidth NCCL uses (bus bandwidth x ratio)
    time_us: float


@dataclass(frozen=True)
class NcclEstimate(Bandwidths):
    collective: str
    nbytes: int
    world: int
    nodes: int
    algorithm: str
    protocol: str
    time: float                 # s
    table: tuple[Entry, ...]
    why: str

    @property
    def provenance(self) -> str:
        return f"predicted ({SOURCE})"

    def __repr__(self) -> str:
        return (f"NcclEstimate({self.collective} {fmt_bytes(self.nbytes)} x{self.world}: {self.algorithm}/"
                f"{self.protocol} {fmt_time(self.time)}, busbw {self.busbw / 1e9:.1f} GB/s)")


def _log2i(n: int) -> int:
    return int(math.floor(math.log2(n))) if n >= 1 else 0


def tune(collective: str, topo: Topology) -> list[tuple[str, str, float, float]]:
    """(algorithm, protocol, latency us, bandwidth GB/s) as `ncclTopoTuneModel` sets them for `topo`."""
    c = collective_name(collective)
    if c == "all_to_all":
        raise TopologyError("NCCL runs AllToAll as grouped send/recv, outside its tuning model; use "
                            "xbench.dist.cost.choose('all_to_all', ...) instead")
    spec = topo.spec
    graph = spec.nccl
    if graph is None:
        raise TopologyError(f"{topo.name} has no [nccl] table (NCCL's model needs its topology-search inputs)")
    n_ranks, n_nodes = topo.world_size, topo.nodes
    if n_ranks <= 1:
        return []
    cc = graph.compute_capability[0] * 10 + graph.compute_capability[1]
    ci = 2 if cc >= 90 else 1 if cc >= 80 else 0
    i2 = n_nodes - 1 if n_nodes <= 2 else 2
    i1 = ci if n_nodes == 1 else (1 if graph.cpu_vendor == "amd" else 0)
    ll_max = LL_MAX_BWS[i1][i2]
    ppn = n_ranks / n_nodes
    if n_nodes == 1:
        n_ch, bw_intra, bw_inter = graph.channels_intra, graph.bw_intra, graph.bw_intra
    else:
        n_ch, bw_intra, bw_inter = graph.channels_inter, graph.bw_inter, graph.bw_inter
    intra_hw = "nvlink" if graph.intra_type == "nvlink" else "pci"
    nsteps = 2 * (n_ranks - 1) if c == "allreduce" else n_ranks - 1
    n_inter = (2 * n_nodes if n_nodes > 1 else 0) if c == "allreduce" else n_nodes - 1
    out = []
    for a in ("tree", "ring"):
        if a == "tree" and c != "allreduce":
            continue
        for pi, p in enumerate(PROTOCOLS):
            bw = bw_intra if n_nodes <= 2 else bw_inter
            bus = n_ch * bw
            if a == "ring" and p == "LL":
                bus = min(ll_max, bus * (0.25 if (n_nodes > 1 or c == "allreduce") else 1 / 3))
            if a == "ring" and p == "LL128":
                bus = min(bus * (0.7 if ppn < 2 else 0.92), n_ch * PER_CH_MAX_RING_LL128[ci][i2])
            if a == "tree":
                bus = min(bus * 0.92, n_ch * PER_CH_MAX_TREE[ci][i2])
            if a == "tree" and p == "LL":
                bus = min(bus / 3.8, ll_max)
            if a == "tree" and p == "LL128":
                bus = min(bus * (7 / 9 if n_nodes == 1 else 120 / 128), n_ch * PER_CH_MAX_TREE_LL128[ci][i2])
            ratio = n_ranks / nsteps if a == "ring" else 0.5
            lat = BASE_LAT[a][pi]
            intra_lat = HW_LAT[intra_hw][a][pi]
            inter_lat = HW_LAT["net"][a][pi]
            if a == "ring":
                overhead = 0.0
                if n_nodes > 1:
                    overhead = NET_OVERHEAD_US.get(graph.cpu_vendor, 1.0) * (3 if p == "Simple" else 1)
                intra_lat = max(intra_lat, overhead)
                lat += (nsteps - n_inter) * intra_lat + n_inter * inter_lat
            else:
                lat += 2 * ((n_ranks // n_nodes - 1) * intra_lat + _log2i(n_nodes) * inter_lat)
            out.append((a, p, lat, bus * ratio))
    return out


def predict(collective: str, nbytes: int, topo: Topology) -> NcclEstimate:
    """NCCL's choice of algorithm and protocol for `collective` of `nbytes`, and its predicted time."""
    c = collective_name(collective)
    spec = topo.spec
    n_ch_comm = 2 * (spec.nccl.channels_intra if topo.nodes == 1 else spec.nccl.channels_inter) if spec.nccl else 0
    entries = []
    for a, p, lat, bw in tune(c, topo):
        if bw <= 0:
            continue
        log_size = _log2i(int(nbytes) >> 6)
        if a == "tree" and log_size < 23:
            bw *= TREE_CORRECTION[PROTOCOLS.index(p)][log_size]
        if (a == "ring" and p == "Simple" and topo.nodes > 1 and c == "allreduce"
                and nbytes / (n_ch_comm * topo.world_size) >= 64):
            lat *= 1.4 if spec.nccl.compute_capability >= (8, 0) else 1.9      # plateau effect of ring
        entries.append(Entry(a, p, lat, bw, lat + nbytes / (1000.0 * bw)))
    if not entries:
        return NcclEstimate(c, int(nbytes), topo.world_size, topo.nodes, "none", "none", 0.0, (), "one rank")
    entries.sort(key=lambda e: e.time_us)
    best, second = entries[0], entries[1] if len(entries) > 1 else entries[0]
    part = "latency" if best.latency_us >= nbytes / (1000.0 * best.bandwidth_GBps) else "bandwidth"
    why = (f"{best.algorithm}/{best.protocol} {best.time_us:.1f} us beats {second.algorithm}/{second.protocol} "
           f"{second.time_us:.1f} us: {part}-bound ({best.latency_us:.1f} us latency, "
           f"{best.bandwidth_GBps:.1f} GB/s)")
    return NcclEstimate(c, int(nbytes), topo.world_size, topo.nodes, best.algorithm, best.protocol,
                        best.time_us * 1e-6, tuple(entries), why)

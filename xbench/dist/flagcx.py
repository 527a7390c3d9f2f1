"""Collectives across chip types, planned the way FlagCX does: each homogeneous group runs its vendor's
library (NCCL on GPUs, HCCL on NPUs), and the groups meet through point-to-point transfers over the fabric
both reach (FlagCX's C2C planner, flagcx/core/c2c_algo.cc: a collective becomes homogeneous parts plus
heterogeneous send/recv).

AllReduce of n bytes over groups A (pA ranks) and B (pB ranks):

1. ReduceScatter inside each group (vendor library): rank i of a group holds its group's sum of the i-th
   1/p_G of the buffer;
2. send/recv between the groups: every rank sends its chunk to the ranks of the other group whose chunks
   overlap it and adds what it receives (n/p_G bytes each way per rank), over the cross link;
3. AllGather inside each group.

The groups run steps 1 and 3 at the same time; step 2 waits for the slower group. `plan()` returns the steps
with their bytes, links and predicted times, set against the naive alternatives (a flat ring through every
rank, which crosses the slow link at every group boundary, and funnelling through one leader per group).

    >>> p = plan("allreduce", 256 << 20, Topology.from_cluster("hetero-h100-910b", accelerators=64))
    >>> print(p.table())
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import cost, hccl, nccl
from .cost import Bandwidths, collective_name, fmt_bytes, fmt_time
from .topology import Topology, TopologyError

SOURCE = "FlagCX-style plan (flagcx/core/c2c_algo.cc: homogeneous collectives + heterogeneous send/recv)"


@dataclass(frozen=True)
class Step:
    phase: int
    group: str                  # a group name, or 'cross'
    library: str                # nccl, hccl, p2p
    operation: str
    nbytes: float               # bytes per rank handed to the operation
    link: str
    time: float
    detail: str = ""


@dataclass(frozen=True)
class Plan(Bandwidths):
    collective: str
    nbytes: int
    world: int
    steps: tuple[Step, ...]
    time: float
    alternatives: dict
    why: str

    @property
    def provenance(self) -> str:
        return f"predicted ({SOURCE}, vendor models inside the groups)"

    def table(self) -> str:
        lines = [f"{self.collective} {fmt_bytes(self.nbytes)} over {self.world} ranks: {fmt_time(self.time)}"
                 f" ({self.provenance})",
                 f"  {'phase':>5s}  {'group':<16s} {'library':<7s} {'operation':<16s} {'bytes/rank':>11s} "
                 f"{'link':<22s} {'time':>9s}"]
        for s in self.steps:
            lines.append(f"  {s.phase:>5d}  {s.group:<16s} {s.library:<7s} {s.operation:<16s} "
                         f"{fmt_bytes(s.nbytes):>11s} {s.link:<22s} {fmt_time(s.time):>9s}  {s.detail}")
        for name, t in self.alternatives.items():
            lines.append(f"  instead: {name:<44s} {fmt_time(t):>9s} ({t / self.time:.2f}x)")
        lines.append(f"  {self.why}")
        return "\n".join(lines)


def _vendor(collective: str, nbytes: float, sub: Topology) -> tuple[float, str, str]:
    """(time, library, algorithm) of a collective inside one homogeneous group, by its vendor's model."""
    if sub.world_size <= 1:
        return 0.0, sub.spec.ccl, "none"
    lib = sub.spec.ccl
    if lib == "nccl" and sub.spec.nccl is not None and collective != "all_to_all":
        e = nccl.predict(collective, int(nbytes), sub)
        return e.time, "nccl", f"{e.algorithm}/{e.protocol}"
    if lib == "hccl":
        h = hccl.choose(collective, int(nbytes), sub)
        return h.time, "hccl", f"{h.level0}+{h.level1}"
    e = cost.choose(collective, int(nbytes), sub)
    return e.time, lib, e.algorithm


def plan(collective: str, nbytes: int, topo: Topology) -> Plan:
    """The FlagCX-style plan for `collective` on a heterogeneous `topo` (two or more node types)."""
    c = collective_name(collective)
    groups = topo.groups()
    if len(groups) < 2:
        raise TopologyError(f"{topo.name} is homogeneous; use xbench.dist.cost.choose for it")
    if topo.cross is None:
        raise TopologyError(f"{topo.name} has no [links.cross] table between its groups")
    subs = {g: topo.subset(g) for g in groups}
    cross = topo.cross
    steps: list[Step] = []
    n = float(nbytes)
    p_min = min(s.world_size for s in subs.values())
    # the cross exchange: each rank's share of the buffer goes to the other groups' owners of the same range
    if c == "allreduce":
        first, last, x_bytes = "reduce_scatter", "all_gather", n / p_min
    elif c == "reduce_scatter":
        first, last, x_bytes = "reduce_scatter", None, n / p_min
    elif c == "all_gather":
        first, last, x_bytes = None, "all_gather", n / topo.world_size
    else:
        first, last, x_bytes = "all_to_all", None, n * (topo.world_size - p_min) / topo.world_size
    times = {}
    if first:
        for g, sub in subs.items():
            size = n if c != "all_to_all" else n * sub.world_size / topo.world_size
            t, lib, alg = _vendor(first, size, sub)
            steps.append(Step(1, g, lib, first, size, f"{g} inside", t, alg))
            times.setdefault(1, []).append(t)
    peers = max(1, math.ceil(max(s.world_size for s in subs.values()) / p_min))
    x_time = peers * cross.latency + x_bytes * (len(groups) - 1) / cross.achievable
    steps.append(Step(2, "cross", "p2p", "send/recv", x_bytes * (len(groups) - 1), f"cross ({cross.kind})",
                      x_time, f"{peers} peer(s) per rank"))
    times[2] = [x_time]
    if last:
        for g, sub in subs.items():
            size = n if c == "allreduce" else n * sub.world_size / topo.world_size * (
                1 if c == "all_gather" else 1)
            t, lib, alg = _vendor(last, size, sub)
            steps.append(Step(3, g, lib, last, size, f"{g} inside", t, alg))
            times.setdefault(3, []).append(t)
    total = sum(max(v) for v in times.values())
    alternatives = {"flat ring through every rank (slow link at each boundary)": _flat_ring(c, n, topo, subs),
                    "one leader per group (funnel)": _funnel(c, n, topo, subs)}
    slower = max(subs, key=lambda g: max(s.time for s in steps if s.group == g) if any(
        s.group == g for s in steps) else 0)
    why = (f"the cross link carries {fmt_bytes(x_bytes)} per rank once; the groups' own libraries do the rest "
           f"({slower} is the slower group); {min(alternatives.values()) / total:.2f}x faster than the best "
           f"alternative")
    return Plan(c, int(nbytes), topo.world_size, tuple(steps), total, alternatives, why)


def _flat_ring(c: str, n: float, topo: Topology, subs: dict) -> float:
    p = topo.world_size
    rounds = 2 if c == "allreduce" else 1
    cross = topo.cross
    slowest = min([cross.achievable] + [s.spec.rail_bandwidth * s.spec.per_node / s.spec.nics * s.spec.nics
                                        for s in subs.values()])
    alpha = max([cross.latency] + [s.spec.inter.latency for s in subs.values()])
    if c == "all_to_all":
        return (p - 1) * alpha + (p - 1) / p * n / slowest
    return rounds * (p - 1) * alpha + rounds * (p - 1) / p * n / slowest


def _funnel(c: str, n: float, topo: Topology, subs: dict) -> float:
    """Reduce to one leader per group, leaders exchange the whole buffer, broadcast back."""
    inner = max(_vendor("allreduce" if c != "all_to_all" else "all_to_all", n, s)[0] for s in subs.values())
    cross = topo.cross
    return inner + cross.latency + n * (len(subs) - 1) / cross.achievable + inner / 2

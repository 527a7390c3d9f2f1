"""The collective cost model: latency-bandwidth (alpha-beta) time of a collective on a topology, per algorithm.

Formulas after Thakur, Rabenseifner & Gropp, "Optimization of Collective Communication Operations in MPICH"
(IJHPCA 2005), with per-link-class alpha and beta from the topology; the flat ring's latency counts intra- and
inter-node steps as NCCL's tuning model does (src/graph/tuning.cc). Sizes follow nccl-tests: `nbytes` is the
AllReduce buffer, the ReduceScatter input (all ranks' parts), the AllGather output, the AllToAll send buffer
of one rank. Algorithm bandwidth is nbytes / time; bus bandwidth is algbw x 2(p-1)/p (AllReduce) or (p-1)/p
(the others), the number nccl-tests prints and compares with the hardware.

    >>> t = Topology.from_cluster("dgx-a100", accelerators=128)
    >>> best = choose("allreduce", 1 << 30, t)
    >>> best.algorithm, best.time, best.busbw, best.why

Every estimate is labelled *predicted* with the links it used; an algorithm that cannot run on the topology
(hierarchical on one node) is left out of the candidates rather than given a time.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from .topology import Topology, TopologyError

COLLECTIVES = ("allreduce", "reduce_scatter", "all_gather", "all_to_all")
ALGORITHMS = ("ring", "tree", "rhd", "hier", "bruck", "pairwise", "mesh")
_ALIASES = {"all_reduce": "allreduce", "reducescatter": "reduce_scatter", "allgather": "all_gather",
            "alltoall": "all_to_all", "reduce-scatter": "reduce_scatter", "all-gather": "all_gather",
            "all-reduce": "allreduce", "all-to-all": "all_to_all"}
_CANDIDATES = {"allreduce": ("ring", "tree", "rhd", "hier"), "reduce_scatter": ("ring", "rhd", "hier"),
               "all_gather": ("ring", "rhd", "hier"), "all_to_all": ("pairwise", "bruck", "hier")}


def collective_name(name: str) -> str:
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in COLLECTIVES:
        raise TopologyError(f"unknown collective {name!r}; write one of {', '.join(COLLECTIVES)}")
    return key


def bus_factor(collective: str, world: int) -> float:
    """nccl-tests' busbw / algbw: 2(p-1)/p for AllReduce, (p-1)/p for ReduceScatter, AllGather, AllToAll."""
    c = collective_name(collective)
    if world <= 1:
        return 0.0
    return 2.0 * (world - 1) / world if c == "allreduce" else (world - 1) / world


class Bandwidths:
    """Algorithm and bus bandwidth (nccl-tests' convention) of an estimate's `collective` of `nbytes` over
    `world` ranks in `time` seconds."""

    @property
    def algbw(self) -> float:
        return self.nbytes / self.time if self.time > 0 else math.inf

    @property
    def busbw(self) -> float:
        return self.algbw * bus_factor(self.collective, self.world)


@dataclass(frozen=True)
class Estimate(Bandwidths):
    """One algorithm's predicted time for one collective."""

    collective: str
    algorithm: str
    nbytes: int
    world: int
    latency: float                      # the alpha part, s
    transfer: float                     # the beta part, s
    steps: int                          # alpha steps on the critical path
    bytes_per_rank: Mapping[str, float]  # bytes one rank sends over each link class (average over ranks)
    bound: str                          # the link class that bounds the transfer term
    peak_busbw: float                   # the links' theoretical bus bandwidth (nominal), bytes/s
    model: str = "alpha-beta"
    note: str = ""
    why: str = ""
    parts: tuple[Estimate, ...] = field(default=(), compare=False)

    @property
    def time(self) -> float:
        return self.latency + self.transfer

    @property
    def efficiency(self) -> float:
        """Bus bandwidth as a fraction of the links' theoretical bus bandwidth."""
        return self.busbw / self.peak_busbw if self.peak_busbw > 0 else 0.0

    @property
    def provenance(self) -> str:
        return f"predicted ({self.model})"

    def row(self) -> dict:
        return {"collective": self.collective, "algorithm": self.algorithm, "bytes": self.nbytes,
                "ranks": self.world, "time_s": self.time, "latency_s": self.latency, "transfer_s": self.transfer,
                "algbw_GBps": self.algbw / 1e9, "busbw_GBps": self.busbw / 1e9, "efficiency": self.efficiency,
                "bound": self.bound, "source": self.provenance, "why": self.why}

    def __repr__(self) -> str:
        return (f"Estimate({self.collective} {fmt_bytes(self.nbytes)} x{self.world} {self.algorithm}: "
                f"{fmt_time(self.time)}, busbw {self.busbw / 1e9:.1f} GB/s, {self.efficiency:.0%} of peak)")


def fmt_time(s: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n:.0f} B"


# --- the shape of a topology, as the formulas need it ------------------------------------------------------

@dataclass(frozen=True)
class _Shape:
    p: int
    nodes: int
    g: int
    a_i: float          # intra alpha
    b_i: float          # intra achievable bytes/s of one rank (to all peers together)
    b_i_peer: float     # intra achievable bytes/s to one peer
    mesh: bool
    a_x: float          # inter alpha
    b_rail: float       # inter achievable bytes/s of one rank (its share of the node's NICs)
    b_nics: float       # inter achievable bytes/s of a whole node
    peak_intra: float   # nominal, for efficiency
    peak_rail: float
    peak_nics: float
    intra_name: str
    inter_name: str


def _shape(topo: Topology) -> _Shape:
    if not topo.homogeneous:
        raise TopologyError(f"{topo.name} is heterogeneous; use xbench.dist.flagcx.plan(...) for it, or "
                            f"topo.subset(group) for one of its groups")
    spec = topo.spec
    g = topo.ranks_per_node or spec.per_node
    mesh = spec.intra.topology == "mesh"
    peer = spec.intra.achievable
    b_i = peer * max(g - 1, 1) if mesh else peer
    peak_i = spec.intra.bandwidth * (max(g - 1, 1) if mesh else 1)
    return _Shape(topo.world_size, topo.nodes, g, spec.intra.latency, b_i, peer, mesh, spec.inter.latency,
                  spec.inter.achievable * spec.nics / spec.per_node, spec.inter.achievable * spec.nics,
                  peak_i, spec.inter.bandwidth * spec.nics / spec.per_node, spec.inter.bandwidth * spec.nics,
                  f"intra ({spec.intra.kind})", f"inter ({spec.inter.kind})")


def _peak(s: _Shape) -> float:
    return s.peak_intra if s.nodes == 1 else min(s.peak_intra, s.peak_nics)


def peak_busbw(topo: Topology) -> float:
    """The theoretical bus bandwidth of the topology (nominal rates, no efficiency): the intra link for one
    node; else the smaller of the intra link and the node's NICs together, because every AllReduce algorithm
    must move 2(N-1)/N of the buffer through each node's NICs, which bounds busbw by their sum."""
    return _peak(_shape(topo))


def _est(c: str, alg: str, n: int, s: _Shape, lat: float, xfer: float, steps: int, per: dict, bound: str,
         note: str = "", parts: tuple = ()) -> Estimate:
    return Estimate(c, alg, n, s.p, lat, xfer, steps, {k: v for k, v in per.items() if v > 0}, bound, _peak(s),
                    note=note, parts=parts)


def _lg(x: int) -> int:
    return max(0, math.ceil(math.log2(x))) if x > 1 else 0


# --- the algorithms ------------------------------------------------------------------------------------------

def _ring(c: str, n: int, s: _Shape) -> Estimate:
    p, N = s.p, s.nodes
    if p == 1:
        return _est(c, "ring", n, s, 0.0, 0.0, 0, {}, "none")
    rounds = 2 if c == "allreduce" else 1
    steps = rounds * (p - 1)
    volume = rounds * (p - 1) / p * n                       # bytes each rank sends
    if c == "all_to_all":
        raise ValueError("ring all-to-all is the pairwise exchange")
    if N == 1:
        bw, bound = (s.b_i_peer if s.mesh else s.b_i), s.intra_name
        return _est(c, "ring", n, s, steps * s.a_i, volume / bw, steps, {s.intra_name: volume}, bound)
    inter_steps = rounds * N
    lat = (steps - inter_steps) * s.a_i + inter_steps * s.a_x
    # a ring per NIC (NCCL's channels): the node's NICs together carry the whole ring stream
    intra_bw = s.b_i_peer if s.mesh else s.b_i
    bw = min(intra_bw, s.b_nics)
    bound = s.inter_name if s.b_nics <= intra_bw else s.intra_name
    per = {s.intra_name: volume * (p - N) / p, s.inter_name: volume * N / p}
    return _est(c, "ring", n, s, lat, volume / bw, steps, per, bound,
                note=f"{N} node crossings per ring, one ring per NIC")


def _tree(c: str, n: int, s: _Shape) -> Estimate:
    p, N, g = s.p, s.nodes, s.g
    if p == 1:
        return _est(c, "tree", n, s, 0.0, 0.0, 0, {}, "none")
    if N == 1:
        lat, steps = 2 * (g - 1) * s.a_i, 2 * (g - 1)           # a chain inside the node (NCCL)
        bw, bound = (s.b_i_peer if s.mesh else s.b_i), s.intra_name
        return _est(c, "tree", n, s, lat, 2 * n / bw, steps, {s.intra_name: 2.0 * n}, bound,
                    note="chain inside the node, pipelined")
    lat = 2 * ((g - 1) * s.a_i + _lg(N) * s.a_x)
    steps = 2 * ((g - 1) + _lg(N))
    intra_bw = s.b_i_peer if s.mesh else s.b_i
    bw = min(intra_bw, s.b_nics)
    bound = s.inter_name if s.b_nics <= intra_bw else s.intra_name
    per = {s.intra_name: 2.0 * n * (g - 1) / g, s.inter_name: 2.0 * n / g}
    return _est(c, "tree", n, s, lat, 2 * n / bw, steps, per, bound,
                note="double binary tree between nodes, chain inside (NCCL), pipelined")


def _rhd(c: str, n: int, s: _Shape) -> Estimate:
    """Recursive halving (reduce-scatter) and doubling (all-gather), partners from far to near: with ranks
    numbered node by node, the first lg(nodes) steps cross nodes."""
    p = s.p
    if p == 1:
        return _est(c, "rhd", n, s, 0.0, 0.0, 0, {}, "none")
    p2 = 1 << int(math.floor(math.log2(p)))
    k = int(math.log2(p2))
    lat = xfer = 0.0
    per = {s.intra_name: 0.0, s.inter_name: 0.0}
    bound_time = {s.intra_name: 0.0, s.inter_name: 0.0}
    for step in range(1, k + 1):
        dist = p2 >> step
        chunk = n / (1 << step)
        inter = dist >= s.g and s.nodes > 1
        name = s.inter_name if inter else s.intra_name
        bw = s.b_rail if inter else (s.b_i_peer if s.mesh else s.b_i)
        lat += s.a_x if inter else s.a_i
        xfer += chunk / bw
        per[name] += chunk
        bound_time[name] += chunk / bw
    phases = 2 if c == "allreduce" else 1
    lat, xfer = lat * phases, xfer * phases
    per = {key: v * phases for key, v in per.items()}
    steps = k * phases
    note = "Rabenseifner: recursive halving then doubling" if c == "allreduce" else (
        "recursive halving" if c == "reduce_scatter" else "recursive doubling")
    if p2 != p:                                     # Thakur et al.: the extra ranks fold in first and out last
        fold = s.a_x if s.nodes > 1 else s.a_i
        bw = s.b_rail if s.nodes > 1 else s.b_i
        lat += 2 * fold if c == "allreduce" else fold
        xfer += (2 if c == "allreduce" else 1) * n / bw * (p - p2) / p
        steps += 2 if c == "allreduce" else 1
        note += f"; {p - p2} ranks outside the power of two fold in and out"
    bound = max(bound_time, key=bound_time.get)
    return _est(c, "rhd", n, s, lat, xfer, steps, per, bound, note=note)


def _inter_best(c: str, n: float, s: _Shape) -> Estimate:
    """The best flat algorithm among the `nodes` ranks of one rail (one rank per node)."""
    rail = _Shape(s.nodes, s.nodes, 1, s.a_x, s.b_rail, s.b_rail, False, s.a_x, s.b_rail, s.b_rail,
                  s.peak_rail, s.peak_rail, s.peak_rail, s.inter_name, s.inter_name)
    algs = [_ring, _rhd] + ([_tree] if c == "allreduce" else [])
    return min((f(c, int(n), rail) for f in algs), key=lambda e: e.time)


def _intra_phase(c: str, n: float, s: _Shape) -> tuple[float, float, float, str]:
    """(latency, transfer, bytes sent per rank, how) of an intra-node reduce-scatter or all-gather of n."""
    g = s.g
    if g == 1:
        return 0.0, 0.0, 0.0, "none"
    vol = (g - 1) / g * n
    if s.mesh:                                      # every peer at once over its own link (HCCL Mesh)
        return s.a_i, vol / s.b_i, vol, "mesh"
    return (g - 1) * s.a_i, vol / s.b_i, vol, "ring"


def _hier(c: str, n: int, s: _Shape) -> Estimate | None:
    if s.nodes == 1 or s.g == 1:
        return None
    if s.p != s.nodes * s.g:
        return None
    if c == "all_to_all":
        return _a2a_hier(n, s)
    g = s.g
    parts = []
    lat = xfer = 0.0
    per = {s.intra_name: 0.0, s.inter_name: 0.0}
    rs_l, rs_x, rs_v, how = _intra_phase("reduce_scatter", n, s)
    if c in ("allreduce", "reduce_scatter"):
        lat, xfer = lat + rs_l, xfer + rs_x
        per[s.intra_name] += rs_v
    inter_c = {"allreduce": "allreduce", "reduce_scatter": "reduce_scatter", "all_gather": "all_gather"}[c]
    inter = _inter_best(inter_c, n / g, s)
    parts.append(inter)
    lat, xfer = lat + inter.latency, xfer + inter.transfer
    per[s.inter_name] += sum(inter.bytes_per_rank.values())
    if c in ("allreduce", "all_gather"):
        ag_l, ag_x, ag_v, _ = _intra_phase("all_gather", n, s)
        lat, xfer = lat + ag_l, xfer + ag_x
        per[s.intra_name] += ag_v
    intra_time = (rs_x if c != "all_gather" else 0) + (rs_x if c != "reduce_scatter" else 0)
    bound = s.inter_name if inter.transfer >= intra_time else s.intra_name
    steps = inter.steps + (g - 1 if how == "ring" else 1) * (2 if c == "allreduce" else 1)
    phases = {"allreduce": "reduce-scatter inside, AllReduce of the shards between, all-gather inside",
              "reduce_scatter": "reduce-scatter inside, then between",
              "all_gather": "all-gather between, then inside"}[c]
    return _est(c, f"hier({inter.algorithm})", n, s, lat, xfer, steps, per, bound,
                note=f"{phases} ({how} inside, {inter.algorithm} between)", parts=tuple(parts))


def _pairwise(c: str, n: int, s: _Shape) -> Estimate:
    p, g = s.p, s.g
    if p == 1:
        return _est(c, "pairwise", n, s, 0.0, 0.0, 0, {}, "none")
    intra_v = (min(g, p) - 1) / p * n
    inter_v = (p - min(g, p)) / p * n
    t_i = intra_v / s.b_i
    t_x = inter_v / s.b_rail if inter_v > 0 else 0.0
    lat = (min(g, p) - 1) * s.a_i + (p - min(g, p)) * s.a_x
    bound = s.inter_name if t_x >= t_i else s.intra_name
    return _est(c, "pairwise", n, s, lat, max(t_i, t_x), p - 1, {s.intra_name: intra_v, s.inter_name: inter_v},
                bound, note="p-1 exchange steps; intra and inter transfers run concurrently")


def _bruck(c: str, n: int, s: _Shape) -> Estimate:
    p = s.p
    if p == 1:
        return _est(c, "bruck", n, s, 0.0, 0.0, 0, {}, "none")
    k = _lg(p)
    slow = s.nodes > 1
    a = s.a_x if slow else s.a_i
    bw = s.b_rail if slow else s.b_i
    name = s.inter_name if slow else s.intra_name
    return _est(c, "bruck", n, s, k * a, k * (n / 2) / bw, k, {name: k * n / 2}, name,
                note="lg p steps of half the buffer (Bruck et al. 1997); the slowest link on each")


def _a2a_hier(n: int, s: _Shape) -> Estimate:
    g, N = s.g, s.nodes
    # gather each node's data per destination node inside, exchange between nodes on the rails, scatter inside
    i_v = (g - 1) / g * n
    x_v = (N - 1) / N * n
    lat = 2 * (g - 1) * s.a_i + (N - 1) * s.a_x
    xfer = 2 * i_v / s.b_i + x_v / s.b_rail
    bound = s.inter_name if x_v / s.b_rail >= 2 * i_v / s.b_i else s.intra_name
    return _est("all_to_all", "hier", n, s, lat, xfer, 2 * (g - 1) + N - 1,
                {s.intra_name: 2 * i_v, s.inter_name: x_v}, bound,
                note="regroup by destination node inside, exchange on the rails, scatter inside")


_ALGS = {"ring": _ring, "tree": _tree, "rhd": _rhd, "hier": _hier, "pairwise": _pairwise, "bruck": _bruck}


def estimate(collective: str, nbytes: int, topo: Topology, algorithm: str) -> Estimate:
    """The predicted time of `collective` on `nbytes` with `algorithm` ('ring', 'tree', 'rhd', 'hier',
    'pairwise', 'bruck')."""
    c = collective_name(collective)
    alg = algorithm.strip().lower()
    if alg.startswith("hier"):
        alg = "hier"
    if alg not in _ALGS or alg not in _CANDIDATES[c]:
        raise TopologyError(f"{c} has no algorithm {algorithm!r} here; write one of {', '.join(_CANDIDATES[c])}")
    if nbytes < 0:
        raise TopologyError(f"nbytes = {nbytes}; write a size in bytes >= 0")
    s = _shape(topo)
    e = _ALGS[alg](c, int(nbytes), s)
    if e is None:
        raise TopologyError(f"hierarchical {c} needs several nodes with the same number of ranks; "
                            f"{topo!r} has {topo.nodes} node(s)")
    return e


def candidates(collective: str, nbytes: int, topo: Topology) -> list[Estimate]:
    """Every algorithm that can run `collective` on `topo`, fastest first."""
    c = collective_name(collective)
    s = _shape(topo)
    out = [e for e in (_ALGS[a](c, int(nbytes), s) for a in _CANDIDATES[c]) if e is not None]
    return sorted(out, key=lambda e: e.time)


def choose(collective: str, nbytes: int, topo: Topology) -> Estimate:
    """The fastest algorithm for `collective` of `nbytes` on `topo`, with `why` saying what decided it."""
    cands = candidates(collective, nbytes, topo)
    best = cands[0]
    return _with_why(best, cands)


def _with_why(best: Estimate, cands: list[Estimate]) -> Estimate:
    if len(cands) == 1 or best.world == 1:
        return replace(best, why=f"{best.algorithm}: the only algorithm that applies")
    second = cands[1]
    kind = "latency-bound" if best.latency >= best.transfer else "bandwidth-bound"
    if abs(second.latency - best.latency) >= abs(second.transfer - best.transfer):
        reason = (f"{best.steps} alpha steps against {second.steps} for {second.algorithm} "
                  f"({fmt_time(best.latency)} of latency vs {fmt_time(second.latency)})")
    else:
        mine = best.bytes_per_rank.get(best.bound, 0.0)
        theirs = second.bytes_per_rank.get(best.bound, 0.0)
        reason = (f"{fmt_bytes(mine)} per rank over {best.bound} against {fmt_bytes(theirs)} for "
                  f"{second.algorithm} ({fmt_time(best.transfer)} of transfer vs {fmt_time(second.transfer)})")
    why = (f"{best.algorithm} {fmt_time(best.time)} beats {second.algorithm} {fmt_time(second.time)} "
           f"({second.time / best.time:.2f}x); {kind}, decided by {reason}")
    return replace(best, why=why)


def sweep(collective: str, topo: Topology, sizes: list[int] | None = None) -> list[Estimate]:
    """`choose` over sizes (default 8 B .. 4 GiB, powers of 4)."""
    sizes = sizes or [8 << (2 * k) for k in range(15)]
    return [choose(collective, n, topo) for n in sizes]


def crossover(collective: str, topo: Topology, a: str, b: str, lo: int = 8, hi: int = 1 << 34) -> int | None:
    """The smallest message size (bytes, to within 1 %) from which algorithm `b` is at least as fast as `a`;
    None when it never is in [lo, hi] (or always is)."""
    def b_wins(n: int) -> bool:
        return estimate(collective, n, topo, b).time <= estimate(collective, n, topo, a).time

    if b_wins(lo) or not b_wins(hi):
        return None
    while hi / lo > 1.01:
        mid = int(math.sqrt(lo * hi))
        if b_wins(mid):
            hi = mid
        else:
            lo = mid
    return hi

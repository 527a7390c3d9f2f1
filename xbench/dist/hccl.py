"""HCCL's algorithm rules for Ascend clusters, priced with the alpha-beta model.

HCCL splits a collective in two levels (CANN environment-variable reference, HCCL_ALGO):

- level0, inside a server, is fixed by the topology (HCCL_ALGO accepts only "NA" for it): on an Atlas 800T A2
  the eight NPUs form an HCCS full mesh and HCCL runs Mesh (every peer at once, one link each).
- level1, between servers: ring, H-D_R (recursive halving-doubling), NHR (nonuniform hierarchical ring), NB
  (nonuniform Bruck), pipeline (intra- and inter-server links used at once, for large messages on multi-card
  servers). Documented defaults: on Atlas training products ring when the server count is not a power of
  two, else H-D_R; at level2 and in the A2 guidance, ring for at most 8 servers that are not a power of two,
  H-D_R otherwise, NHR/NB for many servers that are not a power of two.

    >>> plan = choose("allreduce", 256 << 20, Topology.from_cluster("atlas-800t-a2", 64))
    >>> plan.level0, plan.level1, plan.time, plan.why
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .cost import Bandwidths, _lg, _shape, collective_name, fmt_bytes, fmt_time
from .topology import Topology, TopologyError

SOURCE = ("CANN environment variable reference, HCCL_ALGO (hiascend.com envref_07_0079 / 07_0083): level0 "
          "fixed by topology, level1 ring / H-D_R / NHR / NB / pipeline and their documented defaults")
LEVEL1 = ("ring", "H-D_R", "NHR", "NB", "pipeline")
PIPELINE_CHUNKS = 8         # model assumption: chunks in flight in the pipeline algorithm


@dataclass(frozen=True)
class HcclEstimate(Bandwidths):
    collective: str
    nbytes: int
    world: int
    servers: int
    level0: str
    level1: str
    time: float
    intra_time: float
    inter_time: float
    rule: str                   # which documented rule picked level1
    why: str

    @property
    def provenance(self) -> str:
        return f"predicted (alpha-beta, {SOURCE})"

    def __repr__(self) -> str:
        return (f"HcclEstimate({self.collective} {fmt_bytes(self.nbytes)} x{self.world}: level0 {self.level0}, "
                f"level1 {self.level1}, {fmt_time(self.time)})")


def default_level1(servers: int) -> tuple[str, str]:
    """HCCL's documented default between servers, and the rule that gives it."""
    if servers <= 1:
        return "none", "one server: no level1"
    if servers & (servers - 1) == 0:
        return "H-D_R", f"{servers} servers, a power of two: H-D_R"
    if servers <= 8:
        return "ring", f"{servers} servers, not a power of two and at most 8: ring"
    return "NHR", f"{servers} servers, not a power of two and more than 8: NHR"


def _level1_time(alg: str, c: str, n: float, N: int, a: float, b: float) -> float:
    """Time of the inter-server phase on n bytes per rail of N servers."""
    rounds = 2 if c == "allreduce" else 1
    if N <= 1:
        return 0.0
    vol = rounds * (N - 1) / N * n
    if alg == "ring":
        return rounds * (N - 1) * a + vol / b
    if alg in ("H-D_R", "NHR"):
        p2 = 1 << int(math.floor(math.log2(N)))
        t = rounds * _lg(p2) * a + vol / b
        if p2 != N and alg == "H-D_R":             # extra fold-in/out traffic off the power of two
            t += rounds * (a + n / b * (N - p2) / N)
        return t
    if alg == "NB":
        k = _lg(N)
        return rounds * k * a + rounds * k * (n / 2) / b if c != "allreduce" else rounds * (k * a + vol / b)
    raise TopologyError(f"unknown HCCL level1 algorithm {alg!r}; write one of {', '.join(LEVEL1)}")


def estimate(collective: str, nbytes: int, topo: Topology, level1: str | None = None) -> HcclEstimate:
    """HCCL's two-level collective with `level1` (default: HCCL's documented default for the server count)."""
    c = collective_name(collective)
    if c == "all_to_all":
        level1 = level1 or "pairwise"
    s = _shape(topo)
    N, g = s.nodes, s.g
    level0 = "mesh" if s.mesh else "ring"
    rule = "given"
    if level1 is None:
        level1, rule = default_level1(N)
    rounds = 2 if c == "allreduce" else 1
    # level0: reduce-scatter / all-gather inside the server (mesh: every peer at once)
    if g > 1:
        per = (g - 1) / g * nbytes
        one = (s.a_i + per / s.b_i) if s.mesh else ((g - 1) * s.a_i + per / s.b_i)
        intra = rounds * one if c != "all_to_all" else one
    else:
        intra = 0.0
    shard = nbytes / g
    if c == "all_to_all":
        inter = (N - 1) * s.a_x + (N - 1) / N * nbytes / s.b_rail if N > 1 else 0.0
        time = intra + inter
    elif level1 == "pipeline":
        if N <= 1:
            raise TopologyError("the pipeline algorithm needs several servers")
        inter = _level1_time("ring", c, shard, N, s.a_x, s.b_rail)
        k = PIPELINE_CHUNKS
        lat_i = rounds * (s.a_i if s.mesh else (g - 1) * s.a_i)
        lat_x = rounds * (N - 1) * s.a_x
        # k chunks keep both levels busy at once; every chunk pays both levels' step latencies
        time = k * (lat_i + lat_x) + max(intra - lat_i, inter - lat_x) + min(intra - lat_i, inter - lat_x) / k
    elif level1 == "none":
        inter, time = 0.0, intra
    else:
        inter = _level1_time(level1, c, shard, N, s.a_x, s.b_rail)
        time = intra + inter
    why = (f"level0 {level0} ({'HCCS full mesh' if s.mesh else 'ring inside'}: {fmt_time(intra)}), level1 "
           f"{level1} ({rule}: {fmt_time(inter)})")
    return HcclEstimate(c, int(nbytes), s.p, N, level0, level1, time, intra, inter, rule, why)


def choose(collective: str, nbytes: int, topo: Topology) -> HcclEstimate:
    """HCCL's pick on an Atlas A2 cluster: the documented default between servers, or pipeline where it is
    faster (large messages, several cards per server), as the adaptive selection does."""
    default = estimate(collective, nbytes, topo)
    c = collective_name(collective)
    if default.servers <= 1 or c not in ("allreduce", "reduce_scatter", "all_gather") or _shape(topo).g < 2:
        return default
    pipe = estimate(collective, nbytes, topo, "pipeline")
    if pipe.time < default.time:
        from dataclasses import replace

        return replace(pipe, rule=f"pipeline beats the default {default.level1} ({fmt_time(default.time)}): "
                                  "large message on multi-card servers",
                       why=pipe.why.replace("(given", "(large message on multi-card servers"))
    return default


def all_level1(collective: str, nbytes: int, topo: Topology) -> list[HcclEstimate]:
    """Every level1 algorithm priced, fastest first (what HCCL_ALGO would let a user force)."""
    if topo.nodes <= 1:
        return [estimate(collective, nbytes, topo)]
    return sorted((estimate(collective, nbytes, topo, a) for a in LEVEL1), key=lambda e: e.time)

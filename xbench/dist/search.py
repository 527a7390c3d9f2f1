"""Parallel-strategy search: data, tensor and pipeline parallel degrees, micro-batches, activation
recomputation, DDP bucket size and gradient compression for a transformer on a cluster, priced by the cost
model -- exhaustively where the space is small, by random sampling, and by a reinforcement-learning policy.

The step model (Megatron-LM's accounting, Narayanan et al., SC 2021; activation memory after Korthikanti et
al., 2022): tensor parallelism inside a node (4 AllReduces of the activations per layer per micro-batch on
the intra-node link), 1F1B pipelining ((m + pp - 1) micro-batch slots, activations sent between stages),
data parallelism outermost (the stage's gradients AllReduced in buckets, overlapped with the last
micro-batch's backward pass, compressed if asked), and a memory check against the accelerator's HBM
(16 bytes per parameter for mixed-precision Adam plus activations). A plan that does not fit or does not
divide is infeasible.

    space = Space.for_model(GPT["gpt-13b"], "dgx-h100", 256)
    exhaustive(space), random_search(space, seed=0), reinforce(space, seed=0)
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from . import cost, overlap, schemes
from .topology import Topology

MFU = 0.5                   # model assumption: kernel efficiency of large transformer GEMMs at full size
HBM_USABLE = 0.9            # model assumption: share of HBM left for the model after the runtime's own


@dataclass(frozen=True)
class Transformer:
    name: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    batch: int              # global batch, sequences
    source: str = ""

    @property
    def params(self) -> float:
        return 12 * self.layers * self.hidden ** 2 + self.vocab * self.hidden

    @property
    def flops_per_iteration(self) -> float:
        """Narayanan et al. 2021, eq. (3) without recomputation: 72 B s L h^2 (1 + s/6h + V/16Lh)."""
        L, h, s, V, B = self.layers, self.hidden, self.seq, self.vocab, self.batch
        return 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))


GPT = MappingProxyType({
    "gpt-1.3b": Transformer("gpt-1.3b", 24, 2048, 16, 2048, 51200, 256,
                            "GPT-3 XL shape (Brown et al. 2020, Table 2.1): 24 layers, d_model 2048, 16 heads"),
    "gpt-13b": Transformer("gpt-13b", 40, 5120, 40, 2048, 51200, 512,
                           "GPT-3 13B shape (Brown et al. 2020, Table 2.1), d_model 5140 rounded to 5120"),
})

KNOBS = ("tp", "pp", "micro", "recompute", "bucket_mb", "compression")


@dataclass(frozen=True)
class Plan:
    tp: int
    pp: int
    micro: int
    recompute: bool
    bucket_mb: int
    compression: str

    def dp(self, n: int) -> int:
        return n // (self.tp * self.pp)

    def __str__(self) -> str:
        return (f"tp={self.tp} pp={self.pp} micro={self.micro} recompute={'on' if self.recompute else 'off'} "
                f"bucket={self.bucket_mb} MiB {self.compression}")


@dataclass(frozen=True)
class Result:
    plan: Plan
    step_s: float           # inf when infeasible
    why: str
    parts: dict = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return math.isfinite(self.step_s)


@dataclass
class Space:
    model: Transformer
    cluster: str
    accelerators: int
    choices: dict

    @classmethod
    def for_model(cls, model: Transformer | str, cluster: str, accelerators: int,
                  compression: tuple[str, ...] = ("fp32", "bf16", "int8", "int4")) -> Space:
        m = GPT[model] if isinstance(model, str) else model
        per_node = Topology.from_cluster(cluster).spec.per_node
        tps = [t for t in (1, 2, 4, 8) if t <= per_node and m.heads % t == 0 and accelerators % t == 0]
        pps = [p for p in range(1, m.layers + 1) if m.layers % p == 0 and p <= accelerators]
        return cls(m, cluster, accelerators, {"tp": tps, "pp": pps, "micro": [1, 2, 4, 8, 16, 32, 64],
                                              "recompute": [False, True], "bucket_mb": [1, 5, 25, 100],
                                              "compression": list(compression)})

    @property
    def size(self) -> int:
        return math.prod(len(v) for v in self.choices.values())

    def plans(self):
        for combo in itertools.product(*(self.choices[k] for k in KNOBS)):
            yield Plan(*combo)

    def plan_at(self, index: tuple[int, ...]) -> Plan:
        return Plan(*(self.choices[k][i] for k, i in zip(KNOBS, index)))


# --- the step model ---------------------------------------------------------------------------------------

def _dp_topology(cluster: str, dp: int, tp: int, pp: int) -> Topology:
    """The ranks of one data-parallel group (one rank per tensor-parallel shard), with each rank's own share
    of its node's NICs: tp innermost, then dp, then pp."""
    base = Topology.from_cluster(cluster)
    spec = base.spec
    g = max(1, min(dp, spec.per_node // tp))
    shaped = replace(spec, per_node=g, nics=max(1, round(spec.nics * g * tp / spec.per_node)))
    topo = Topology.from_cluster(cluster, accelerators=dp * tp)        # for its sources and name
    from .topology import Rank

    ranks = tuple(Rank(r, r // g, r % g, spec.cluster) for r in range(dp))
    return replace(topo, ranks=ranks, specs=MappingProxyType({spec.cluster: shaped}))


def evaluate(plan: Plan, space: Space) -> Result:
    """The predicted iteration time of `plan`, or inf and the reason it cannot run."""
    m, n = space.model, space.accelerators
    from ..hw.target import get_target

    base = Topology.from_cluster(space.cluster)
    spec = base.spec
    acc = get_target(spec.accelerator)
    tp, pp, micro = plan.tp, plan.pp, plan.micro
    if n % (tp * pp):
        return Result(plan, math.inf, f"tp x pp = {tp * pp} does not divide {n}")
    dp = n // (tp * pp)
    if m.batch % (dp * micro):
        return Result(plan, math.inf, f"global batch {m.batch} is not a multiple of dp x micro = {dp * micro}")
    b = m.batch // (dp * micro)
    # memory: mixed-precision Adam state + activations of the micro-batches in flight on the first stage
    state = 16 * m.params / (tp * pp)
    per_layer = m.seq * b * m.hidden * (10 + 24 / tp + 5 * m.heads * m.seq / (m.hidden * tp))
    if plan.recompute:
        per_layer = 2 * m.seq * b * m.hidden            # only each layer's input is kept
    act = per_layer * (m.layers / pp) * min(pp, micro)
    hbm = acc.memory.size_bytes * HBM_USABLE
    if state + act > hbm:
        return Result(plan, math.inf, f"needs {(state + act) / 2**30:.1f} GiB of {hbm / 2**30:.1f} GiB usable HBM")
    peak = acc.peak_flops("bfloat16", "tensor") * MFU
    flops = m.flops_per_iteration * (4 / 3 if plan.recompute else 1)
    t_mb = flops / n / micro / peak                     # one micro-batch on one stage, fwd + bwd
    # tensor parallel: 4 AllReduces of b s h bf16 activations per layer, inside the node
    t_tp = 0.0
    if tp > 1:
        tp_topo = Topology.from_cluster(space.cluster, accelerators=tp)
        t_tp = (m.layers / pp) * 4 * cost.choose("allreduce", 2 * b * m.seq * m.hidden, tp_topo).time
    # pipeline: activations between stages, over the inter-node link when a stage fills a node
    t_p2p = 0.0
    if pp > 1:
        link = spec.inter if dp * tp >= spec.per_node else spec.intra
        bw = link.achievable if link is spec.intra else spec.rail_bandwidth
        t_p2p = link.latency + 2 * b * m.seq * m.hidden / bw
    slots = micro + pp - 1
    pipeline = slots * (t_mb + t_tp + 2 * t_p2p)
    # data parallel: the stage's gradients, bucketed, overlapped with the last micro-batch's backward pass
    t_dp = exposed = codec = 0.0
    if dp > 1:
        topo = _dp_topology(space.cluster, dp, tp, pp)
        grads = 4 * m.params / (tp * pp)
        s = plan.compression

        def comm(nbytes: float) -> float:
            size = nbytes if s == "fp32" else schemes.compressed_bytes(int(nbytes // 4), s)
            return cost.choose("allreduce", int(size), topo).time

        layers = [int(grads // m.layers)] * m.layers
        tl = overlap.predict(layers, 2 / 3 * t_mb, comm, plan.bucket_mb << 20, min(1 << 20, plan.bucket_mb << 20))
        t_dp, exposed = tl.comm_s, max(0.0, tl.end_s - 2 / 3 * t_mb)
        if s != "fp32":
            codec = 4 * (4 + schemes.BITS[s] / 8) * m.params / (tp * pp) / acc.bandwidth("memory")
    step = pipeline + exposed + codec
    return Result(plan, step, "ok", {"dp": dp, "micro_batch": b, "pipeline_s": pipeline, "tp_s": slots * t_tp,
                                     "bubble": (pp - 1) / slots, "dp_comm_s": t_dp, "dp_exposed_s": exposed,
                                     "codec_s": codec, "memory_GiB": (state + act) / 2**30})


# --- the searches ------------------------------------------------------------------------------------------

@dataclass
class SearchRun:
    strategy: str
    best: Result
    evaluations: int            # distinct plans evaluated in all
    to_best: int                # distinct plans evaluated when the final best was first seen
    seconds: float
    seconds_to_best: float
    trace: list = field(default_factory=list)   # best step after each evaluation
    feasible: int = 0                           # feasible plans among those evaluated


class _Evaluator:
    def __init__(self, space: Space):
        self.space = space
        self.cache: dict[Plan, Result] = {}
        self.best: Result | None = None
        self.to_best = 0
        self.t0 = time.perf_counter()
        self.t_best = 0.0
        self.trace: list[float] = []

    def __call__(self, plan: Plan) -> Result:
        if plan in self.cache:
            return self.cache[plan]
        r = evaluate(plan, self.space)
        self.cache[plan] = r
        if self.best is None or r.step_s < self.best.step_s:
            self.best, self.to_best, self.t_best = r, len(self.cache), time.perf_counter() - self.t0
        self.trace.append(self.best.step_s)
        return r

    def run(self, strategy: str) -> SearchRun:
        return SearchRun(strategy, self.best, len(self.cache), self.to_best, time.perf_counter() - self.t0,
                         self.t_best, self.trace, sum(r.feasible for r in self.cache.values()))


def exhaustive(space: Space) -> SearchRun:
    ev = _Evaluator(space)
    for p in space.plans():
        ev(p)
    return ev.run("exhaustive")


def random_search(space: Space, budget: int | None = None, seed: int = 0, target: float | None = None) -> SearchRun:
    """Plans drawn uniformly without replacement; stops at `budget` distinct plans or on reaching `target`."""
    rng = np.random.default_rng(seed)
    ev = _Evaluator(space)
    order = rng.permutation(space.size)
    dims = [len(space.choices[k]) for k in KNOBS]
    for flat in order[:budget or space.size]:
        ev(space.plan_at(tuple(int(i) for i in np.unravel_index(flat, dims))))
        if target is not None and ev.best.step_s <= target:
            break
    return ev.run("random")


def reinforce(space: Space, budget: int | None = None, seed: int = 0, batch: int = 16, lr: float = 0.3,
              target: float | None = None) -> SearchRun:
    """REINFORCE (Williams 1992) with a factorised categorical policy, one softmax per knob; reward
    -log(step) for feasible plans, a penalty below the worst feasible one otherwise; the batch mean is the
    baseline. Stops at `budget` distinct plans or on reaching `target`."""
    rng = np.random.default_rng(seed)
    ev = _Evaluator(space)
    logits = [np.zeros(len(space.choices[k])) for k in KNOBS]
    budget = budget or space.size
    worst = None
    stall = 0
    while len(ev.cache) < budget and stall < 200:
        probs = [np.exp(l - l.max()) / np.exp(l - l.max()).sum() for l in logits]
        picks = [[int(rng.choice(len(p), p=p)) for p in probs] for _ in range(batch)]
        before = len(ev.cache)
        rewards = []
        for idx in picks:
            r = ev(space.plan_at(tuple(idx)))
            if r.feasible:
                worst = r.step_s if worst is None else max(worst, r.step_s)
                rewards.append(-math.log(r.step_s))
            else:
                rewards.append(None)
        floor = -math.log(worst) - 1.0 if worst is not None else -1.0
        rs = np.array([floor if x is None else x for x in rewards])
        adv = rs - rs.mean()
        if rs.std() > 0:
            adv /= rs.std()
        for idx, a in zip(picks, adv):
            for k, i in enumerate(idx):
                grad = -probs[k]
                grad[i] += 1.0
                logits[k] += lr * a * grad / batch
        stall = stall + 1 if len(ev.cache) == before else 0
        if target is not None and ev.best.step_s <= target:
            break
    return ev.run("reinforce")


def compare(space: Space, seeds: tuple[int, ...] = (0, 1, 2, 3, 4)) -> dict:
    """The three searches on one space: the exhaustive optimum, then random and RL run until they reach it
    (or the whole space), over several seeds: distinct evaluations and seconds to the best plan."""
    ex = exhaustive(space)
    target = ex.best.step_s * (1 + 1e-12)
    rnd = [random_search(space, seed=s, target=target) for s in seeds]
    rl = [reinforce(space, seed=s, target=target) for s in seeds]
    return {"space": space.size, "feasible": ex.feasible, "exhaustive": ex, "random": rnd, "reinforce": rl,
            "best": ex.best}


def format_compare(c: dict, space: Space) -> str:
    ex = c["exhaustive"]
    lines = [f"strategy search: {space.model.name} on {space.accelerators} x {space.cluster}, {space.size} plans "
             f"({c['feasible']} feasible)",
             f"  best plan: {ex.best.plan}  -> {ex.best.step_s * 1e3:.1f} ms per iteration (predicted)",
             f"             dp={ex.best.parts['dp']}, micro-batch {ex.best.parts['micro_batch']}, bubble "
             f"{ex.best.parts['bubble']:.0%}, DP comm {ex.best.parts['dp_comm_s'] * 1e3:.1f} ms "
             f"({ex.best.parts['dp_exposed_s'] * 1e3:.1f} ms exposed), {ex.best.parts['memory_GiB']:.1f} GiB",
             f"  {'strategy':<11s} {'evals to best (median, range)':>30s} {'seconds to best':>16s} {'best found':>11s}",
             f"  {'exhaustive':<11s} {ex.evaluations:>30d} {ex.seconds:>16.2f} {ex.best.step_s * 1e3:>9.1f}ms"]
    for name in ("random", "reinforce"):
        runs = c[name]
        evs = sorted(r.to_best for r in runs)
        secs = sorted(r.seconds_to_best for r in runs)
        med = evs[len(evs) // 2]
        lines.append(f"  {name:<11s} {f'{med} ({evs[0]}-{evs[-1]})':>30s} {secs[len(secs) // 2]:>16.2f} "
                     f"{min(r.best.step_s for r in runs) * 1e3:>9.1f}ms")
    rl_med = sorted(r.to_best for r in c["reinforce"])[len(c["reinforce"]) // 2]
    lines.append(f"  the seeds' claim: tuning time from two weeks to eight hours (42x); here RL reaches the optimum "
                 f"after {ex.evaluations / max(rl_med, 1):.1f}x fewer evaluations than exhaustive search")
    return "\n".join(lines)

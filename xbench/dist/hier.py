"""Topology-aware AllReduce from `torch.distributed` subgroups, usable as a DDP communication hook.

Two-level: reduce-scatter inside each node, AllReduce of the shards between nodes (one rail per local rank:
the ranks with the same local rank on every node), all-gather inside each node. Each rank then sends
(g-1)/g of the buffer twice over its node's links and only 2(N-1)/N of 1/g of it between nodes, against
2(p-1)/p spread over both for a flat ring. The cost model picks flat or hierarchical per message size
(`mode="auto"`), from the topology's link classes.

On gloo, torch's reduce-scatter sends the whole buffer (it is an AllReduce followed by a copy; measured with
`xbench.dist.wire`), so the intra-node reduce-scatter is done as an all-to-all of the parts and a local sum,
which moves (g-1)/g of the buffer as a reduce-scatter should. Other backends use their own reduce-scatter.

    state = HierarchicalAllReduce(Topology.detect(ranks_per_node=2))
    ddp.register_comm_hook(state, hierarchical_hook)
    fut = state.allreduce(t)          # sum over all ranks, asynchronous
"""

import time
from typing import Any

import torch
import torch.distributed as dist

from . import cost
from .futures import OrderedIssuer, completed, then, work_future
from .topology import Topology, TopologyError

MODES = ("auto", "hier", "flat")


class HierarchicalAllReduce:
    """Subgroups and state of the hierarchical AllReduce on `topology` (default: `Topology.detect()`).
    Constructing it is collective: every rank creates every subgroup, in the same order."""

    def __init__(self, topology: Topology | None = None, mode: str = "auto", native_reduce_scatter: bool | None = None):
        if mode not in MODES:
            raise ValueError(f"xbench: mode = {mode!r}; write one of {MODES}")
        self.topology = topology or Topology.detect()
        self.world = dist.get_world_size()
        self.rank = dist.get_rank()
        if self.topology.world_size != self.world:
            raise TopologyError(f"the topology has {self.topology.world_size} ranks but the process group has "
                                f"{self.world}; build it with Topology.detect() inside the job")
        self.mode = mode
        self.native_rs = (dist.get_backend() != "gloo") if native_reduce_scatter is None else native_reduce_scatter
        me = self.topology.ranks[self.rank]
        self.node, self.local_rank = me.node, me.local_rank
        self.flat_group = dist.new_group(list(range(self.world)))
        self.rs_group = self._mine(self.topology.intra_groups())
        self.rail_group = self._mine(self.topology.rails())
        self.ag_group = self._mine(self.topology.intra_groups())
        self.g = len(self.topology.intra_groups()[self.node])
        self.issuers = (OrderedIssuer(), OrderedIssuer())
        self.decisions: dict[str, int] = {"flat": 0, "hier": 0}
        self.timeline: list[tuple[Any, int, float, float]] = []

    def _mine(self, layout: list[list[int]]) -> Any:
        mine = None
        for ranks in layout:
            g = dist.new_group(ranks)
            if self.rank in ranks:
                mine = g
        return mine

    def __repr__(self) -> str:
        return f"HierarchicalAllReduce({self.topology!r}, mode={self.mode!r}, decisions={self.decisions})"

    def decide(self, nbytes: int) -> str:
        """'hier' or 'flat' for an AllReduce of nbytes: the mode, or in 'auto' the cost model's faster one."""
        if self.mode != "auto":
            return self.mode
        if self.topology.nodes == 1 or self.g == 1 or self.topology.ranks_per_node is None:
            return "flat"
        flat = cost.estimate("allreduce", nbytes, self.topology, "ring")
        hier = cost.estimate("allreduce", nbytes, self.topology, "hier")
        return "hier" if hier.time < flat.time else "flat"

    def allreduce(self, tensor: torch.Tensor, key: Any = None) -> torch.futures.Future:
        """A future of the sum of `tensor` over all ranks (a new tensor of the same shape); never waits."""
        flat = tensor.reshape(-1)
        n = flat.numel()
        choice = self.decide(n * flat.element_size())
        self.decisions[choice] += 1
        started = time.perf_counter()
        if self.world == 1:
            fut = completed(flat.clone())
        elif choice == "flat":
            buf = flat.clone()
            fut = then(work_future(dist.all_reduce(buf, group=self.flat_group, async_op=True)), lambda _: buf)
        else:
            fut = self._hier(flat)

        def finish(y: torch.Tensor) -> torch.Tensor:
            self.timeline.append((key, n, started, time.perf_counter()))
            return y.view_as(tensor)
        return then(fut, finish)

    def _hier(self, flat: torch.Tensor) -> torch.futures.Future:
        g, n = self.g, flat.numel()
        shard = -(-n // g)
        buf = torch.zeros(shard * g, dtype=flat.dtype)
        buf[:n] = flat
        t_rail, t_ag = self.issuers[0].ticket(), self.issuers[1].ticket()
        if self.native_rs:
            part = torch.empty(shard, dtype=flat.dtype)
            w = dist.reduce_scatter_single(part, buf, group=self.rs_group, async_op=True)
            f1 = then(work_future(w), lambda _: part)
        else:
            recv = torch.empty_like(buf)
            w = dist.all_to_all_single(recv, buf, group=self.rs_group, async_op=True)
            f1 = then(work_future(w), lambda _: recv.view(g, shard).sum(dim=0, dtype=flat.dtype))

        def rail(part: torch.Tensor) -> torch.futures.Future:
            def start() -> torch.futures.Future:
                w2 = dist.all_reduce(part, group=self.rail_group, async_op=True)
                return then(work_future(w2), lambda _: part)
            return self.issuers[0].submit(t_rail, start)

        def gather(part: torch.Tensor) -> torch.futures.Future:
            out = torch.empty(shard * g, dtype=flat.dtype)

            def start() -> torch.futures.Future:
                w3 = dist.all_gather_single(out, part, group=self.ag_group, async_op=True)
                return then(work_future(w3), lambda _: out[:n])
            return self.issuers[1].submit(t_ag, start)
        return then(then(f1, rail), gather)

    def predicted(self, nbytes: int) -> dict[str, cost.Estimate]:
        """The cost model's flat ring and hierarchical estimates for an AllReduce of nbytes here."""
        out = {"flat": cost.estimate("allreduce", nbytes, self.topology, "ring")}
        if self.topology.nodes > 1 and self.topology.ranks_per_node:
            out["hier"] = cost.estimate("allreduce", nbytes, self.topology, "hier")
        return out


def hierarchical_hook(state: HierarchicalAllReduce, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket averaged over ranks through the hierarchical AllReduce."""
    return then(state.allreduce(bucket.buffer(), bucket.index()), lambda t: t.div_(state.world))


def flat_allreduce_hook(group: Any, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: one asynchronous flat AllReduce per bucket (torch's default, as a baseline)."""
    buf = bucket.buffer()
    world = dist.get_world_size(group)
    w = dist.all_reduce(buf, group=group, async_op=True)
    return then(work_future(w), lambda _: buf.div_(world))

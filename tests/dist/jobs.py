"""What the spawned gloo processes of tests/dist run; each returns plain values the tests assert on."""
from __future__ import annotations

import time

import numpy as np
import torch
import torch.distributed as dist

from xbench.dist import schemes
from xbench.dist.compress import CompressionState, phase_groups
from xbench.dist.hier import HierarchicalAllReduce, flat_allreduce_hook, hierarchical_hook
from xbench.dist.topology import Topology
from xbench.dist.wire import WireCounter

SCHEME_FORMS = [("fp32", "two-phase"), ("fp16", "two-phase"), ("fp16", "all-gather"), ("bf16", "two-phase"),
                ("bf16", "all-gather"), ("int8", "two-phase"), ("int8", "all-gather"), ("int4", "two-phase"),
                ("int4", "all-gather")]


def _tiny_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 4))


def _ddp_params(hook_state, hook, rank: int, steps: int = 3) -> list[np.ndarray]:
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = DDP(_tiny_model(0), bucket_cap_mb=0.01)          # several buckets
    if hook is not None:
        model.register_comm_hook(hook_state, hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(16, 32, generator=g)
        y = torch.randn(16, 4, generator=g)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    return [p.detach().numpy().copy() for p in model.parameters()]


def hier_job(rank: int, world: int) -> dict:
    topo = Topology.detect(ranks_per_node=2)
    out: dict = {"topology": [(r.rank, r.node, r.local_rank) for r in topo.ranks], "nodes": topo.nodes,
                 "ranks_per_node": topo.ranks_per_node}
    hier = HierarchicalAllReduce(topo, mode="hier")

    class _Flat:                                  # the same subgroups, always flat
        def allreduce(self, t):
            hier.mode = "flat"
            try:
                return hier.allreduce(t)
            finally:
                hier.mode = "hier"
    flat_state = _Flat()
    rng = np.random.default_rng(rank)
    exact = {}
    for n, dtype in [(1, torch.int64), (1001, torch.int64), (4096, torch.int32), (777, torch.int64)]:
        t = torch.from_numpy(rng.integers(-1 << 20, 1 << 20, n)).to(dtype)
        a = hier.allreduce(t).wait()
        b = flat_state.allreduce(t).wait()
        exact[f"{n}-{dtype}"] = (bool(torch.equal(a, b)), a.dtype == dtype, list(a.shape))
    out["int_exact"] = exact
    xf = torch.from_numpy(rng.standard_normal(3333).astype(np.float32))
    a, b = hier.allreduce(xf).wait(), flat_state.allreduce(xf).wait()
    ref = [None] * world
    dist.all_gather_object(ref, xf.numpy())
    exact_sum = np.sum(np.stack(ref).astype(np.float64), axis=0)
    out["float_err"] = (float(np.abs(a.numpy() - exact_sum).max()), float(np.abs(b.numpy() - exact_sum).max()))
    # bytes per link class, measured by the kernel's TCP counters, against the model
    n = 1 << 18
    x = torch.ones(n)
    hier.allreduce(x).wait()
    flat_state.allreduce(x).wait()                 # connections of every subgroup are open now
    wc = WireCounter()
    bytes_by = {}
    for name, state in (("flat", flat_state), ("hier", hier)):
        with wc:
            state.allreduce(x).wait()
        bytes_by[name] = wc.by_link(topo)
    out["wire"] = bytes_by
    out["model"] = {name: {k.split(" ")[0]: v * world for k, v in est.bytes_per_rank.items()}
                    for name, est in hier.predicted(4 * n).items()}
    hier.decisions = {"flat": 0, "hier": 0}
    # DDP with the hierarchical hook against DDP with flat AllReduce
    out["ddp_hier"] = _ddp_params(hier, hierarchical_hook, rank)
    out["ddp_flat"] = _ddp_params(dist.new_group(list(range(world))), flat_allreduce_hook, rank)
    out["ddp_default"] = _ddp_params(None, None, rank)
    out["decisions"] = dict(hier.decisions)
    return out


def compression_job(rank: int, world: int) -> dict:
    rng = np.random.default_rng(10 + rank)
    n = 5000
    x = torch.from_numpy((rng.standard_normal(n) * np.logspace(-3, 1, n)).astype(np.float32))
    allx = [None] * world
    dist.all_gather_object(allx, x.numpy())
    mean = np.mean(np.stack(allx).astype(np.float64), axis=0)
    results = {}
    wc = WireCounter()
    groups = phase_groups()
    for scheme, form in SCHEME_FORMS:
        st = CompressionState(scheme, form, error_feedback=True, groups=groups)
        st.allreduce_mean(x, 0).wait()           # opens the phase groups' connections
        wc.refresh()
        with wc:
            y = st.allreduce_mean(x, 1).wait()
        measured = sum(wc.by_link(Topology.detect()).values())
        same = [None] * world
        dist.all_gather_object(same, y.numpy())
        results[f"{scheme}/{form}"] = {
            "identical": all(np.array_equal(same[0], s) for s in same),
            "max_err": float(np.abs(y.numpy().astype(np.float64) - mean).max()),
            "scale": float(np.abs(mean).max()),
            "measured": measured, "model": schemes.wire_bytes(scheme, form, n, world) * world,
            "state_bytes": st.bytes_sent / 2}
    # error feedback: the mean of the decoded results over K steps of a constant gradient approaches the truth
    ef = {}
    for on in (True, False):
        st = CompressionState("int4", "two-phase", error_feedback=on, groups=groups)
        acc = np.zeros(n)
        K = 8
        for _ in range(K):
            acc += st.allreduce_mean(x, 0).wait().numpy()
        ef[on] = float(np.abs(acc / K - mean).max())
    results["ef"] = ef
    results["nonblocking"] = _nonblocking(rank, groups)
    return results


def _nonblocking(rank: int, groups: tuple) -> dict:
    """Rank 1 joins the collectives late: a hook that waited would return a completed future."""
    out = {}
    x = torch.randn(5000)                        # the size compression_job compiled the codecs for
    states = {"int8/two-phase": CompressionState("int8", "two-phase", groups=groups),
              "fp16/all-gather": CompressionState("fp16", "all-gather", groups=groups),
              "hier": HierarchicalAllReduce(Topology.detect(ranks_per_node=2), mode="hier")}
    for st in states.values():                   # compile the codecs and open the connections first
        (st.allreduce(x) if isinstance(st, HierarchicalAllReduce) else st.allreduce_mean(x, 0)).wait()
    for name, st in states.items():
        dist.barrier()
        if rank == 1:
            time.sleep(1.0)
        fut = st.allreduce(x) if name == "hier" else st.allreduce_mean(x, 0)
        out[name] = fut.done()
        fut.wait()
    return out


def checkpoint_job(rank: int, world: int, root: str) -> dict:
    from pathlib import Path

    from torch.nn.parallel import DistributedDataParallel as DDP

    from xbench.dist.checkpoint import MANIFEST, ShardedLoader, Snapshotter, verify

    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = ShardedLoader(64, batch=4, rank=rank, world=world, seed=3)
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
    snap = Snapshotter(root, every=2, keep=3)
    saved = {}
    for step in range(1, 9):
        idx = loader.next()
        opt.zero_grad()
        model(x[idx]).pow(2).mean().backward()
        opt.step()
        torch.rand(1)                                            # the RNG moves too
        snap.step(step, model, opt, loader)
        if step % 2 == 0:
            saved[step] = {"params": [p.detach().clone() for p in model.parameters()],
                           "momentum": [opt.state[p]["momentum_buffer"].clone() for p in model.parameters()],
                           "loader": loader.state_dict(), "rng": torch.get_rng_state().clone()}
    snap.close()
    dist.barrier()
    out: dict = {"kept": sorted(p.name for p in Path(root).iterdir())}
    out["all_verified"] = all(verify(p)[0] for p in Path(root).iterdir())

    def restore() -> tuple[int, list[str], dict]:
        torch.manual_seed(99)
        m2 = DDP(torch.nn.Linear(8, 4))
        o2 = torch.optim.SGD(m2.parameters(), lr=0.1, momentum=0.9)
        l2 = ShardedLoader(64, batch=4, rank=rank, world=world, seed=3)
        s2 = Snapshotter(root, every=2)
        step = s2.load(m2, o2, l2)
        ref = saved[step]
        same = {"params": all(torch.equal(a, b) for a, b in zip(m2.parameters(), ref["params"])),
                "momentum": all(torch.equal(o2.state[p]["momentum_buffer"], b)
                                for p, b in zip(m2.parameters(), ref["momentum"])),
                "loader": l2.state_dict() == ref["loader"], "rng": torch.equal(torch.get_rng_state(), ref["rng"])}
        return step, list(s2.log), same

    out["intact"] = restore()
    dist.barrier()
    if rank == 0:                                                  # tear the newest: truncate a data file
        victim = max((f for f in (Path(root) / "step-00000008").iterdir() if f.suffix == ".distcp"),
                     key=lambda f: f.stat().st_size)
        victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    dist.barrier()
    out["truncated"] = restore()
    dist.barrier()
    if rank == 0:                                                  # a save that never committed
        (Path(root) / "step-00000006" / MANIFEST).unlink()
    dist.barrier()
    out["uncommitted"] = restore()
    return out


def measure_job(rank: int, world: int) -> dict:
    from xbench.dist.calibrate import measure_sweep
    from xbench.dist.overlap import measure_job as overlap_job

    return {"overlap": overlap_job(rank, world, "bert", steps=1),
            "sweep": measure_sweep(rank, world, [4096, 65536], repeats=2)}

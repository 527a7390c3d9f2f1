"""Small jobs for the tutorial and the docs, run through `xbench.dist.run` (they must live in a module)."""
from __future__ import annotations


def demo_job(rank: int, world: int, n: int = 100_000) -> dict:
    """On every rank: the topology it detects, one int4 two-phase AllReduce with error feedback measured on
    the wire against the model, and a few DDP steps of a tiny model with and without the int4 hook."""
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .compress import CompressionState, compression_hook
    from .schemes import wire_bytes
    from .topology import Topology
    from .wire import WireCounter

    topo = Topology.detect()
    g = torch.Generator().manual_seed(rank)
    x = torch.randn(n, generator=g)
    everyone: list = [None] * world
    dist.all_gather_object(everyone, x.numpy())
    exact = np.mean(np.stack(everyone), axis=0)
    state = CompressionState("int4", "two-phase", error_feedback=True)
    state.allreduce_mean(x, "warm-up").wait()
    wc = WireCounter()
    with wc:
        y = state.allreduce_mean(x, 0).wait()
    measured = sum(wc.by_link(topo).values())
    model = wire_bytes("int4", "two-phase", n, world) * world
    fp32 = wire_bytes("fp32", "ring", n, world) * world
    losses = {}
    for name in ("fp32", "int4 + EF"):
        torch.manual_seed(0)
        m = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)))
        if name != "fp32":
            m.register_comm_hook(CompressionState("int4", "two-phase"), compression_hook)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        data = torch.Generator().manual_seed(10 + rank)
        for _ in range(20):
            xb = torch.randn(32, 16, generator=data)
            loss = torch.nn.functional.mse_loss(m(xb), xb[:, :1] * 2)
            opt.zero_grad()
            loss.backward()
            opt.step()
        losses[name] = float(loss.detach())
    return {"topology": repr(topo), "max_error": float(np.abs(y.numpy() - exact).max()),
            "step": float(np.abs(exact).max()) / 7, "model_bytes": model, "fp32_bytes": fp32,
            "measured_over_model": measured / model, "losses": losses}

"""Distributed training on `torch.distributed`: topology, the collective cost model, topology-aware and
compressed gradient communication as DDP hooks, overlap, checkpoints and recovery under torchrun.

    import xbench as xb
    topo = xb.dist.Topology.from_cluster("dgx-h100", accelerators=128)
    xb.dist.choose("allreduce", 256 << 20, topo)          # algorithm, time, algbw/busbw, why
    ddp.register_comm_hook(xb.dist.HierarchicalAllReduce(xb.dist.Topology.detect(ranks_per_node=2)),
                           xb.dist.hierarchical_hook)
    ddp.register_comm_hook(xb.dist.CompressionState("int4", form="two-phase"), xb.dist.compression_hook)

The topology and the cost models need no torch; everything that talks (hooks, calibration, checkpoints,
launching processes) imports it on first use. Nothing below this layer imports it.
"""
from __future__ import annotations

import importlib
from typing import Any

from .cost import COLLECTIVES, Estimate, bus_factor, candidates, choose, crossover, estimate, peak_busbw, sweep
from .topology import Link, NodeSpec, Rank, Topology, TopologyError, list_clusters, load_cluster

_LAZY = {
    "nccl": None, "hccl": None, "flagcx": None, "codec": None, "predict": None, "search": None,
    "calibrate": None, "launch": None, "wire": None, "hier": None, "compress": None, "overlap": None,
    "workloads": None, "checkpoint": None, "recovery": None, "gate": None, "futures": None, "examples": None,
    "loader": None, "cli": None, "ShardedLoader": "loader", "run_gate": "gate", "run_job": "recovery",
    "predict_step": "predict", "claims": "predict",
    "HierarchicalAllReduce": "hier", "hierarchical_hook": "hier", "flat_allreduce_hook": "hier",
    "CompressionState": "compress", "compression_hook": "compress", "wire_bytes": "schemes", "schemes": None,
    "run": "launch", "LaunchError": "launch",
    "WireCounter": "wire",
    "Snapshotter": "checkpoint", "latest_snapshot": "checkpoint",
    "fit_alpha_beta": "calibrate", "measure_sweep": "calibrate",
    "hidden_fraction": "overlap", "simulate_overlap": "overlap",
    "plan": "flagcx",
}

__all__ = ["COLLECTIVES", "Estimate", "Link", "NodeSpec", "Rank", "Topology", "TopologyError", "bus_factor",
           "candidates", "choose", "crossover", "estimate", "list_clusters", "load_cluster", "peak_busbw",
           "sweep", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f".{_LAZY[name] or name}", __name__)
        return module if _LAZY[name] is None else getattr(module, name)
    raise AttributeError(f"module 'xbench.dist' has no attribute {name!r}")

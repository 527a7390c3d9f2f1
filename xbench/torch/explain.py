"""`xb.torch.explain(model, *args, **kwargs)`: what ran where, and why.

It runs the model once through the bridge (forward, and backward where the output is a loss that can be
differentiated) with a recording session, and asks Dynamo where the model's code broke into several graphs.
The result lists, for every ATen graph: its ops, the partitions xbench compiled (each one operator: its kernels,
trace and compile times, specialisations), and every op that ran on torch instead, with the reason and the
model's line.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import torch

from .backend import GraphRecord, Session, recording, xbench_backend


@dataclass
class Explanation:
    """The bridge's account of one model call."""
    session: Session
    graph_breaks: list[str] = field(default_factory=list)
    dynamo_graphs: int = 0
    ran_backward: bool = False

    @property
    def graphs(self) -> list[GraphRecord]:
        return self.session.graphs

    @property
    def fallbacks(self):
        return [f for g in self.graphs for f in g.fallbacks]

    @property
    def kernels(self) -> int:
        return sum(c["kernels"] for g in self.graphs for p in g.partitions for c in p.compiles)

    def to_dict(self) -> dict:
        return {
            "target": self.session.options.target,
            "dynamo_graphs": self.dynamo_graphs,
            "graph_breaks": list(self.graph_breaks),
            "graphs": [{
                "name": g.name, "kind": g.kind, "aten_ops": g.nodes, "distinct_ops": len(g.ops),
                "probe_ms": round(g.probe_ms, 1),
                "partitions": [{"name": p.name, "nodes": sum(n.op == "call_function" for n in p.gm.graph.nodes),
                                "compiles": p.compiles} for p in g.partitions],
                "fallbacks": [{"op": f.op, "node": f.node, "reason": f.reason, "where": f.where}
                              for f in g.fallbacks],
            } for g in self.graphs],
        }

    def __str__(self) -> str:
        s = self.session
        lines = [f"xbench bridge, target {s.options.target}: {self.dynamo_graphs} Dynamo graph(s) "
                 f"({len(self.graph_breaks)} graph break(s)), {len(self.graphs)} ATen graph(s), "
                 f"{sum(len(g.partitions) for g in self.graphs)} xbench operator(s), {self.kernels} kernel(s), "
                 f"{len(self.fallbacks)} op(s) on torch"]
        for why in self.graph_breaks:
            lines.append(f"  graph break: {why}")
        for g in self.graphs:
            nparts = len(g.partitions)
            lines.append("")
            lines.append(f"{g.name} ({g.kind}): {g.nodes} ATen ops of {len(g.ops)} kinds -> "
                         f"{nparts} xbench operator{'s' if nparts != 1 else ''}"
                         + (f", {len(g.fallbacks)} on torch" if g.fallbacks else ", nothing on torch"))
            for p in g.partitions:
                ops = sum(n.op == "call_function" for n in p.gm.graph.nodes)
                for c in p.compiles:
                    cache = ", from the cache" if c["cache_hit"] else ""
                    lines.append(f"  {p.name}: {ops} ops -> {c['kernels']} kernels; traced in {c['trace_ms']:.0f} ms, "
                                 f"compiled in {c['compile_ms']:.0f} ms{cache}  [inputs {c['shapes'][:80]}"
                                 f"{'...' if len(c['shapes']) > 80 else ''}]")
            for f in g.fallbacks:
                lines.append(f"  on torch: {f}")
            top = sorted(g.ops.items(), key=lambda kv: -kv[1])[:8]
            lines.append("  ops: " + ", ".join(f"{k.removeprefix('aten.').removesuffix('.default')} x{v}"
                                               for k, v in top) + (" ..." if len(g.ops) > 8 else ""))
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def _wants_backward(out) -> torch.Tensor | None:
    loss = getattr(out, "loss", None) if not isinstance(out, torch.Tensor) else out
    if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad:
        return loss
    return None


def explain(model, *args, options: dict | None = None, backward: bool | None = None, **kwargs) -> Explanation:
    """Run `model(*args, **kwargs)` once through the bridge and report what ran where, and why.

    `model` may be the plain module or function, or what `torch.compile(..., backend="xbench")` returned (its
    options are used unless `options=` is given). `backward`: also run the backward pass of the output's loss
    (default: when the output is, or has, a differentiable scalar `loss`)."""
    orig = getattr(model, "_orig_mod", model)
    if options is None:
        options = _options_of(model)
    with recording(options) as session:
        compiled = torch.compile(orig, backend=functools.partial(xbench_backend, options=options))
        out = compiled(*args, **kwargs)
        loss = _wants_backward(out) if backward is not False else None
        if backward and loss is None:
            raise ValueError("explain(backward=True): the model's output has no differentiable scalar loss")
        if loss is not None:
            loss.backward()
    breaks: list[str] = []
    graphs = session.dynamo_graphs
    try:
        info = torch._dynamo.explain(orig)(*args, **kwargs)
        breaks = [f"{r.reason}" + (f" ({r.user_stack[-1].filename}:{r.user_stack[-1].lineno})"
                                   if getattr(r, "user_stack", None) else "") for r in info.break_reasons]
        graphs = info.graph_count
    except Exception as exc:  # Dynamo's own account is extra detail: the bridge's record stands without it
        breaks = [f"(Dynamo's explain failed: {type(exc).__name__}: {exc})"]
    return Explanation(session, breaks, graphs, loss is not None)


def _options_of(model) -> dict | None:
    """The options a `torch.compile(..., backend="xbench", options=...)` result was compiled with."""
    callback = getattr(getattr(model, "dynamo_ctx", None), "callback", None)
    kwargs = getattr(callback, "kwargs", None) or {}
    return kwargs.get("options")

"""Which nodes of a captured graph xbench runs, and the partitions they form.

`probe` lowers every node once, on values shaped like the node's example inputs: a node whose op has no rule,
whose rule raises, or whose result's shape or dtype differs from ATen's is unsupported, with the reason (the
last two are xbench's bugs, and warned of). Its
output is stood in for by a value of ATen's shape, so the nodes after it are probed too. When every node is
supported the whole graph is one partition; otherwise torch's capability-based partitioner groups the
supported nodes into the largest partitions that do not depend on each other through a fallback.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.fx as fx
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from ..config import log
from ..errors import XbenchError
from ..lang.trace import Trace
from . import aten
from .graph import attribute, lower_node, meta_vars, node_location, same_types


@dataclass(frozen=True)
class Fallback:
    """A node that runs on torch, and why."""
    node: str
    op: str
    reason: str
    where: str
    defect: bool = False                # xbench's rule for the op raised or mistyped: a bug, not a missing op

    def __str__(self) -> str:
        return f"{self.op} ({self.node}): {self.reason}" + (f"  [{self.where}]" if self.where else "")


def probe(gm: fx.GraphModule, keep: tuple = ()) -> dict[fx.Node, Fallback]:
    """The graph's unsupported call_function nodes, each with its reason (`keep`: ATen ops kept on torch, by
    full name or packet)."""
    unsupported: dict[fx.Node, Fallback] = {}
    env: dict[fx.Node, object] = {}
    with Trace(f"probe {gm.__class__.__name__}"):
        token = aten._seed.set(lambda: meta_vars(_SEED))
        try:
            for node in gm.graph.nodes:
                if node.op in ("placeholder", "get_attr"):
                    env[node] = meta_vars(node.meta["val"] if "val" in node.meta else attribute(gm, node))
                elif node.op == "call_function":
                    t = aten.target_of(node.target)
                    if keep and {t.text, t.packet, f"aten.{t.packet}"} & set(keep):
                        got, why = None, "kept on torch (fallback_ops)"
                    else:
                        got, why = _lower(node, env)
                    if why is not None:
                        loc = node_location(node)
                        unsupported[node] = Fallback(node.name, t.text, why,
                                                     f"{loc.filename}:{loc.lineno}" if loc else "",
                                                     why.startswith((RULE_FAILED, RULE_MISTYPED)))
                        got = meta_vars(node.meta.get("val"))
                    env[node] = got
        finally:
            aten._seed.reset(token)
    return unsupported


RULE_FAILED = "xbench's rule for it failed"
RULE_MISTYPED = "xbench's rule for it returned the wrong type"


def _lower(node: fx.Node, env: dict):
    """(value, None) when the node lowers to values of ATen's shapes and dtypes, else (None, why)."""
    try:
        got = lower_node(node, env)
    except XbenchError as exc:                   # the library or the language refuses it, and says why
        return None, str(exc).splitlines()[0].removeprefix("xbench: ")
    except (TypeError, ValueError, IndexError, KeyError, AttributeError, NotImplementedError,
            ZeroDivisionError) as exc:
        # a rule that does not fit this call: the op stays on torch (never a wrong answer), and the reason names
        # the failure as xbench's, with the traceback in the debug log, so explain() shows it as a bug to report
        log.debug("lowering %s failed", node.format_node(), exc_info=True)
        first = str(exc).splitlines()[0] if str(exc) else ""
        return None, f"{RULE_FAILED} ({type(exc).__name__}: {first}); please report it"
    why = same_types(got, node.meta["val"]) if "val" in node.meta else None
    # a rule that returns the wrong shape or dtype is as much xbench's bug as one that raises
    return (got, None) if why is None else (None, f"{RULE_MISTYPED} ({why}); please report it")


_SEED = torch.zeros((), dtype=torch.int64)


class _Support(OperatorSupportBase):
    def __init__(self, unsupported):
        self.unsupported = unsupported

    def is_node_supported(self, submodules, node: fx.Node) -> bool:
        return node.op == "call_function" and node not in self.unsupported


def partitions(gm: fx.GraphModule, unsupported: dict) -> fx.GraphModule:
    """`gm` with each group of supported nodes moved into a submodule `xbench_<i>` (the rest stays on torch)."""
    part = CapabilityBasedPartitioner(gm, _Support(unsupported), allows_single_node_partition=True)
    return part.fuse_partitions(part.propose_partitions(), prefix="xbench_")

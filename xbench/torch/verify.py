"""Checking a compiled graph against torch eager, and finding the first op at fault.

`Checked` (`options={"verify": True}`) runs each partition on xbench and on torch eager. When the outputs
agree within the tolerance table (its reduction length the graph's longest) the call passes. Otherwise — and
always for graphs with random ops, whose streams differ from torch's by design — `locate` runs a second
xbench operator that returns every intermediate value, and checks each op on its own: torch's op (in float64
for float inputs) applied to xbench's values of that op's inputs, against xbench's value of its output, with
the op's own tolerance. Errors that only accumulate over many ops pass; the first op whose own result is off
raises a `VerificationError` naming it, its shapes, its error and the model's line.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.fx as fx

from ..config import log
from ..errors import VerificationError
from ..lang.trace import Trace
from ..verify import compare, op_class, reduction_length
from . import aten
from .graph import GraphOp, attribute, is_random, lower_node, meta_vars, node_location
from .interop import from_numpy, to_numpy, xb_dtype


@dataclass
class OpCheck:
    """One op's own error: xbench's value of its output against torch's op on xbench's values of its inputs, run
    in float64 (`reference`), or in the op's own dtypes where torch has no float64 kernel for it."""
    node: str
    op: str
    shapes: str
    dtype: str
    ok: bool
    max_abs_error: float
    ratio: float
    message: str
    where: str
    reference: str = "float64"

    def __str__(self) -> str:
        state = "ok" if self.ok else "DIFFERS"
        ref = "" if self.reference == "float64" else f" (reference: torch in {self.reference})"
        return (f"{self.op} ({self.node}) {self.shapes} -> {self.dtype}: {state}, max |error| "
                f"{self.max_abs_error:.3g}, {self.ratio:.2f}x its tolerance{ref}"
                + (f"  [{self.where}]" if self.where else ""))


def debug_graph(gm: fx.GraphModule) -> tuple[fx.GraphModule, list[fx.Node]]:
    """A copy of `gm` that returns the value of every call_function node with a tensor result."""
    g = copy.deepcopy(gm)
    nodes = [n for n in g.graph.nodes if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor)]
    out = next(n for n in g.graph.nodes if n.op == "output")
    out.args = (tuple(nodes),)
    g.graph.eliminate_dead_code()
    g.recompile()
    return g, nodes


def _node_tolerance(node: fx.Node, env_meta: dict) -> tuple[int, str]:
    """The reduction length and operator class of one node, from its own lowering."""
    with Trace("node") as tr:
        env = {n: meta_vars(n.meta.get("val")) for n in node.all_input_nodes}
        token = aten._seed.set(lambda: meta_vars(torch.zeros((), dtype=torch.int64)))
        try:
            lower_node(node, env)
        except Exception:
            return 1, "elementwise"
        finally:
            aten._seed.reset(token)

    class _G:
        eqns = tr.eqns
    return reduction_length(_G), op_class(_G)


def _upcast(v):
    if isinstance(v, torch.Tensor) and v.dtype in (torch.float16, torch.bfloat16, torch.float32):
        return v.double()
    return v


def _run_torch(node: fx.Node, values: dict, gm: fx.GraphModule) -> tuple[object, str]:
    """The op's value on torch and what it was computed in: "float64" (floating inputs widened), or "its own
    dtypes" where torch refuses the widened call."""
    def value(a):
        return values[a] if isinstance(a, fx.Node) else a
    args = fx.node.map_aggregate(node.args, value)
    kwargs = {k: fx.node.map_aggregate(v, value) for k, v in node.kwargs.items()}
    try:
        return (node.target(*fx.node.map_aggregate(args, _upcast),
                            **{k: fx.node.map_aggregate(v, _upcast) for k, v in kwargs.items()}), "float64")
    except (RuntimeError, TypeError, NotImplementedError):
        # torch has no float64 kernel for this op, or it insists on its original dtypes (an output's dtype,
        # a float32 logsumexp beside float64 values): the reference is torch in the op's own dtypes, which the
        # tolerance table is written for, and the check says so. A call that fails in those dtypes too raises.
        log.debug("%s: no float64 run on torch; its reference is torch in the op's own dtypes", node.format_node())
        return node.target(*args, **kwargs), "its own dtypes"


def locate(op: GraphOp, gm: fx.GraphModule, args, arrays) -> tuple[list[OpCheck], dict[fx.Node, torch.Tensor]]:
    """Every op's own check, in graph order (see the module's docstring), and xbench's value of each op."""
    dbg = getattr(op, "_debug", None)
    if dbg is None:
        g, nodes = debug_graph(gm)
        dbg = op._debug = (GraphOp(g, f"{op.name}_intermediates", op.target), nodes)
    dop, nodes = dbg
    c = dop.compiled(args, _call_of(args, arrays))
    outs = c.artifact.run(*arrays)
    xb_vals: dict[fx.Node, torch.Tensor] = {}
    by_name = {n.name: n for n in gm.graph.nodes}
    for (kind, v), n in zip(c.plan, nodes):
        if kind == "xb":
            xb_vals[by_name[n.name]] = from_numpy(outs[v])
        elif kind == "input":
            xb_vals[by_name[n.name]] = args[v]
    values: dict[fx.Node, object] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, a in zip(placeholders, args):
        values[n] = a
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            values[n] = attribute(gm, n)
    checks: list[OpCheck] = []
    for n in gm.graph.nodes:
        if n.op != "call_function":
            continue
        if n in xb_vals and not is_random(n):
            want, reference = _run_torch(n, values, gm)
            got = xb_vals[n]
            k_len, klass = _node_tolerance(n, values)
            dtype = xb_dtype(got.dtype)
            cmp = compare(to_numpy(got), to_numpy(want.to(got.dtype) if not torch.is_floating_point(got) else want),
                          dtype=dtype, reduction=k_len, klass=klass)
            loc = node_location(n)
            shapes = ", ".join(f"{list(v.shape)}" for v in n.all_input_nodes and
                               [values[a] for a in n.all_input_nodes if isinstance(values.get(a), torch.Tensor)])
            checks.append(OpCheck(n.name, aten.target_of(n.target).text, f"({shapes})", dtype, cmp.ok,
                                  cmp.max_abs_error, cmp.ratio, cmp.message,
                                  f"{loc.filename}:{loc.lineno}" if loc else "", reference))
        # downstream ops see xbench's values (random ops' included), so each op is checked on its own
        if n in xb_vals:
            values[n] = xb_vals[n]
        else:
            values[n] = _run_torch(n, values, gm)[0]
    return checks, xb_vals


def _call_of(args, arrays) -> list:
    call, i = [], 0
    for a in args:
        if isinstance(a, torch.Tensor):
            call.append(arrays[i])
            i += 1
        else:
            call.append(a)
    call.extend(arrays[i:])
    return call


class Checked:
    """A graph operator that checks every call (`options={"verify": True}`): each op on its own against torch
    (`locate`), then the fused program's outputs against those of its ops computed one by one."""

    def __init__(self, op: GraphOp, gm: fx.GraphModule):
        self.op, self.gm = op, gm
        self.output = op.output
        self.checks: list[OpCheck] = []

    def __call__(self, *args):
        call, arrays = self.op.arguments(args)
        got = self.op.run(args, call, arrays)
        c = self.op.compiled(args, call)
        self.checks, values = locate(self.op, self.gm, args, arrays)
        bad = next((ch for ch in self.checks if not ch.ok), None)
        if bad is not None:
            raise VerificationError(
                f"{self.op.name}: {bad.op} ({bad.node}) on {bad.shapes} differs from torch beyond the tolerance "
                f"table: max |error| {bad.max_abs_error:.3g}, {bad.ratio:.1f}x its tolerance. {bad.message}",
                hint=f"this op's xbench lowering is wrong for these inputs: compile with "
                     f"options={{'fallback_ops': ['{bad.op}']}} to keep it on torch, and report it",
                loc=_loc(bad.where))
        self._fused_agrees(got, values, c)
        return got

    def _fused_agrees(self, got, values: dict, c) -> None:
        outs = self.output.args[0]
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        k, klass = reduction_length(c.program.graph), op_class(c.program.graph)
        by_name = {n.name: n for n in values}
        for node, g in zip(outs, got):
            ref = by_name.get(getattr(node, "name", None))
            if ref is None or not isinstance(g, torch.Tensor) or is_random(ref):
                continue
            cmp = compare(to_numpy(g), to_numpy(values[ref]), dtype=xb_dtype(g.dtype), reduction=k, klass=klass)
            if not cmp:
                kernels = ", ".join(f"{kk.name} ({'+'.join(kk.origin[:6])})" for kk in c.program.kernels
                                    if node.name in str(kk.origin))
                raise VerificationError(
                    f"{self.op.name}: output {node.name} of the fused program differs from its ops computed one by "
                    f"one (each checked against torch): {cmp.message}",
                    hint="a fusion bug: compile with options={'verify': True} and report the graph" +
                         (f" (kernels {kernels})" if kernels else ""))


def _loc(where: str):
    from ..errors import Location
    if not where:
        return None
    path, _, line = where.rpartition(":")
    return Location(path, int(line)) if line.isdigit() else None

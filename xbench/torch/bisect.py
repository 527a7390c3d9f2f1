"""`xb.torch.bisect(model, inputs, target=...)`: the first operator whose output departs from torch eager.

1. **Capture.** The model runs once on torch through AOTAutograd with the bridge's decompositions, so the ATen
   graphs are the ones xbench compiles; every graph call's inputs are kept (forward, then backward where the
   output has a differentiable scalar `loss`).
2. **Reference.** Each graph is run node by node on torch in float32 (eager) and in float64 (the exact value).
3. **Narrow down.** A cut after node i is the graph's prefix up to i, returning what later nodes need from it
   (and the graph outputs it produced): it is compiled by the bridge like any graph (fused, partitioned, with
   fallbacks) and run on xbench. A cut *departs* when one of its values is further from float64 than FACTOR
   times eager float32 is, and beyond the tolerance table's float32 bound at the value's scale. Anything that
   departs before a cut is carried to its values, so departure grows with i: binary search over the cuts finds
   the first node whose addition makes the prefix depart, in about log2(nodes) compiles.
   A prefix that fails on the backend (a compile or run error) departs too: bisection then names the first op
   whose prefix fails.
4. **Confirm.** That node is checked on its own with `verify`'s per-op machinery: torch's op in float64 on
   xbench's values of its inputs against xbench's value of its output, within the op's own tolerance. The
   report says whether the op itself is wrong or only fused with others into a wrong program.

Random ops (dropout) draw from xbench's own stream, not torch's: bisect a model with them turned off.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from ..errors import ArgumentError
from ..verify import compare, tolerance
from . import aten
from .backend import Options, Session, compile_graph, traced
from .graph import attribute, is_random, node_location
from .interop import to_numpy, xb_dtype
from .verify import _node_tolerance, _run_torch

FACTOR = 4.0


@dataclass
class Captured:
    """One ATen graph the model ran, with the inputs of its first call."""
    name: str
    kind: str
    gm: fx.GraphModule
    args: list


@dataclass
class Departure:
    """The first node whose value departs from eager, and by how much."""
    graph: str
    kind: str
    node: str
    op: str
    shapes: str
    dtype: str
    xbench_error: float                  # largest |xbench - float64| over the values that departed
    eager_error: float                   # largest |eager float32 - float64| there
    allowed: float
    where: str
    own_check: str = ""                  # the op on its own (verify's per-op check)
    op_alone_wrong: bool | None = None
    error: str = ""                      # the prefix ending at this op failed on the backend: how

    def __str__(self) -> str:
        cause = ("the op is wrong on its own" if self.op_alone_wrong else
                 "the op is right on its own: error carried in from before it (rounding accumulated over the ops "
                 "before, or a fusion bug in the program around it)" if self.op_alone_wrong is False
                 else "")
        how = (f"fails on the backend: {self.error}" if self.error else
               f"{self.xbench_error:.3g} from float64, eager float32 {self.eager_error:.3g}, allowed {self.allowed:.3g}")
        return (f"{self.op} ({self.node}) in {self.graph} ({self.kind}) on {self.shapes} -> {self.dtype}: {how}"
                + (f"  [{self.where}]" if self.where else "") +
                (f"\n  on its own: {self.own_check}" if self.own_check else "") + (f"\n  {cause}" if cause else ""))


@dataclass
class BisectResult:
    target: str
    graphs: list[str] = field(default_factory=list)
    departure: Departure | None = None
    compiles: int = 0                    # prefixes compiled
    log: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.departure is not None

    def to_dict(self) -> dict:
        d = {"target": self.target, "graphs": self.graphs, "compiles": self.compiles, "found": self.found}
        if self.departure is not None:
            d["departure"] = dict(self.departure.__dict__)
        return d

    def __str__(self) -> str:
        head = (f"xbench bisect, target {self.target}: {len(self.graphs)} graph(s), {self.compiles} prefix "
                f"compile(s)")
        if self.departure is None:
            return head + "\nno op departs from eager beyond the tolerance"
        return head + "\nfirst op that departs: " + str(self.departure)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


# ---- capture -------------------------------------------------------------------------------------------------

def stand_in(val):
    """A zero tensor with the shape, strides and dtype of the fake tensor `val` (other values as they are)."""
    if isinstance(val, torch.Tensor):
        return torch.empty_strided(tuple(val.shape), tuple(val.stride()), dtype=val.dtype).zero_()
    if isinstance(val, (list, tuple)):
        return type(val)(stand_in(v) for v in val)
    return val


def graph_outputs(gm: fx.GraphModule) -> list:
    """Stand-ins (`stand_in`) for what `gm` returns, from its output node's recorded values: nothing computed."""
    out = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    return list(fx.node.map_aggregate(out.args[0], lambda x: stand_in(x.meta["val"]) if isinstance(x, fx.Node)
                                      else x))


def capture(model, args: tuple, kwargs: dict, backward: bool | None = None, compute: bool = True) -> list[Captured]:
    """The ATen graphs `model(*args, **kwargs)` runs (and its loss's backward), each with its first inputs.
    With `compute=False` each graph returns zeros of its outputs' shapes instead of running: the graphs and
    their inputs' shapes are right, the values past the model's own inputs and weights are not."""
    from functorch.compile import make_boxed_func

    graphs: list[Captured] = []

    def compiler(kind):
        def fn(gm: fx.GraphModule, example_inputs):
            entry = Captured(f"graph{len(graphs)}_{kind}", kind, gm, [])
            graphs.append(entry)

            def run(*a):
                if not entry.args:
                    entry.args = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in a]
                return gm(*a) if compute else graph_outputs(gm)
            return make_boxed_func(run)
        return fn

    def backend(gm, example_inputs):
        return traced(gm, example_inputs, compiler)

    orig = getattr(model, "_orig_mod", model)
    out = torch.compile(orig, backend=backend)(*args, **kwargs)
    if not graphs:
        raise ArgumentError("xb.torch.bisect: Dynamo compiled no graph of the model (its cache for this code may be "
                            "full: torch._dynamo.config.cache_size_limit)",
                            hint="call torch._dynamo.reset() before bisecting")
    loss = getattr(out, "loss", None) if not isinstance(out, torch.Tensor) else out
    if backward is not False and isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.requires_grad:
        loss.backward()
    return [g for g in graphs if g.args or not _has_inputs(g.gm)]


def _has_inputs(gm: fx.GraphModule) -> bool:
    return any(n.op == "placeholder" for n in gm.graph.nodes)


# ---- the references -----------------------------------------------------------------------------------------

def _reference(gm: fx.GraphModule, args: list, double: bool) -> dict[fx.Node, Any]:
    """Every node's value on torch: float32 as captured, or float64 (float inputs upcast, each op run in float64
    where it accepts it)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]

    def inputs() -> dict[fx.Node, Any]:
        return {n: a.double() if double and isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for n, a in zip(placeholders, _fresh(args))}
    values = inputs()
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            v = attribute(gm, n)
            values[n] = v.double() if double and isinstance(v, torch.Tensor) and v.is_floating_point() else v
        elif n.op == "call_function":
            if double:
                values[n] = _run_torch(n, values, gm)[0]
            else:
                a = fx.node.map_aggregate(n.args, lambda x: values[x] if isinstance(x, fx.Node) else x)
                k = {key: fx.node.map_aggregate(v, lambda x: values[x] if isinstance(x, fx.Node) else x)
                     for key, v in n.kwargs.items()}
                values[n] = n.target(*a, **k)
    # the graph may end by writing its inputs in place (running statistics): keep the values it was called with
    return {**values, **inputs()}


def _fresh(args: list) -> list:
    """Copies of a graph's inputs (a graph may end by writing its inputs in place)."""
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


# ---- cuts ---------------------------------------------------------------------------------------------------

def _tensor_valued(n: fx.Node) -> bool:
    return isinstance(n.meta.get("val"), torch.Tensor)


def _cuts(gm: fx.GraphModule) -> list[int]:
    """Positions (in the graph's node order) after which the graph can be cut: after a tensor-valued op, with no
    tuple-valued op before it still waiting to be unpacked."""
    nodes = list(gm.graph.nodes)
    index = {n: i for i, n in enumerate(nodes)}
    cuts = []
    for i, n in enumerate(nodes):
        if n.op != "call_function" or not _tensor_valued(n):
            continue
        open_tuple = any(m.op == "call_function" and not _tensor_valued(m) and
                         any(index[u] > i for u in m.users) for m in nodes[:i + 1])
        if not open_tuple:
            cuts.append(i)
    return cuts


def _frontier(gm: fx.GraphModule, i: int) -> list[fx.Node]:
    """The tensor values computed up to node i that later nodes or the graph's outputs use."""
    nodes = list(gm.graph.nodes)
    index = {n: k for k, n in enumerate(nodes)}
    return [n for n in nodes[:i + 1] if n.op == "call_function" and _tensor_valued(n) and
            any(index[u] > i for u in n.users)]


def _prefix(gm: fx.GraphModule, keep: list[fx.Node]) -> fx.GraphModule:
    g = copy.deepcopy(gm)
    by_name = {n.name: n for n in g.graph.nodes}
    out = next(n for n in g.graph.nodes if n.op == "output")
    out.args = (tuple(by_name[n.name] for n in keep),)
    g.graph.eliminate_dead_code()
    g.recompile()
    return g


class _Bisector:
    def __init__(self, cap: Captured, target: str, options: dict):
        self.cap, self.target, self.options = cap, target, options
        self.gm = cap.gm
        self.eager = _reference(self.gm, cap.args, double=False)
        self.exact = _reference(self.gm, cap.args, double=True)
        self.compiles = 0
        self.errors: dict[int, str] = {}
        self._cache: dict[int, list] = {}

    def run_prefix(self, keep: list[fx.Node]) -> list[torch.Tensor]:
        g = _prefix(self.gm, keep)
        opts = Options.parse({"target": self.target, **self.options})
        fn = compile_graph(g, self.cap.kind, Session(opts), opts)
        self.compiles += 1
        out = fn(*_fresh(self.cap.args))
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def judge(self, node: fx.Node, got: torch.Tensor) -> tuple[bool, float, float, float]:
        """(departs, xbench's distance from float64, eager's, allowed) for one value."""
        want, exact = self.eager[node], self.exact[node]
        if not isinstance(got, torch.Tensor) or not got.is_floating_point():
            same = torch.equal(torch.as_tensor(got), torch.as_tensor(want))
            return (not same, 0.0 if same else math.inf, 0.0, 0.0)
        if got.numel() == 0:
            return (False, 0.0, 0.0, 0.0)
        g, w, x = got.detach().double(), want.detach().double(), exact.detach().double()
        finite = torch.isfinite(x)
        if not torch.equal(torch.isfinite(g), finite):
            return (True, math.inf, 0.0, 0.0)
        mine = float((g - x)[finite].abs().max()) if finite.any() else 0.0
        theirs = float((w - x)[finite].abs().max()) if finite.any() else 0.0
        scale = float(x[finite].abs().max()) if finite.any() else 0.0
        op = _source(node)
        k_len, klass = _node_tolerance(op, {})
        if k_len > 1:     # a reduction's rounding is at its inputs' scale (a mean of centred data is all rounding)
            scale = max([scale] + [_peak(self.exact.get(a)) for a in op.all_input_nodes])
        rtol, _ = tolerance(str(xb_dtype(got.dtype)), k_len, klass)
        allowed = max(FACTOR * theirs, rtol * (scale or 1.0))
        return (mine > allowed, mine, theirs, allowed)

    def departs(self, i: int) -> tuple[bool, list]:
        """Whether the cut after node i departs, and per value (node, departs, xbench's distance, eager's,
        allowed); a prefix that fails to compile or run departs too (node None, the error kept)."""
        if i not in self._cache:
            keep = _frontier(self.gm, i)
            try:
                got = self.run_prefix(keep) if keep else []
            except Exception as exc:   # the backend failed on this prefix: the op that makes it fail is sought
                self.errors[i] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                self._cache[i] = [(None, True, math.inf, 0.0, 0.0)]
            else:
                self._cache[i] = [(n, *self.judge(n, v)) for n, v in zip(keep, got)]
        verdicts = self._cache[i]
        return any(v[1] for v in verdicts), verdicts


def _source(n: fx.Node) -> fx.Node:
    """The op that computes `n`: a getitem's tuple-valued source, else `n` itself."""
    while n.op == "call_function" and aten.target_of(n.target).packet == "getitem" and n.args and \
            isinstance(n.args[0], fx.Node):
        n = n.args[0]
    return n


def _culprit(gm: fx.GraphModule, i: int) -> fx.Node:
    """The op a cut after node i added."""
    return _source(list(gm.graph.nodes)[i])


def _peak(v) -> float:
    """The largest finite |value| of a float tensor (0 for anything else)."""
    if not isinstance(v, torch.Tensor) or not v.is_floating_point() or v.numel() == 0:
        return 0.0
    v = v.detach().double().abs()
    v = v[torch.isfinite(v)]
    return float(v.max()) if v.numel() else 0.0


def _shapes(node: fx.Node) -> str:
    vals = [a.meta.get("val") for a in node.all_input_nodes]
    return "(" + ", ".join(f"{list(v.shape)}" for v in vals if isinstance(v, torch.Tensor)) + ")"


def _own_check(b: _Bisector, node: fx.Node) -> tuple[str, bool | None]:
    """`verify`'s per-op check of `node`: torch's op in float64 (or its own dtypes, where torch refuses float64)
    on xbench's values of its inputs."""
    inputs = [a for a in node.all_input_nodes if a.op == "call_function" and _tensor_valued(a)]
    outs = [node] if _tensor_valued(node) else [u for u in node.users
                                              if aten.target_of(u.target).packet == "getitem"]
    got = b.run_prefix(inputs + outs)
    xb_in, xb_out = dict(zip(inputs, got[:len(inputs)])), got[len(inputs):]
    values: dict[fx.Node, Any] = {}
    for a in node.all_input_nodes:
        values[a] = xb_in.get(a, b.eager[a])
    want, reference = _run_torch(node, values, b.gm)
    if not _tensor_valued(node):
        pairs = [(o, want[u.args[1]]) for o, u in zip(xb_out, outs)]
    else:
        pairs = [(xb_out[0], want)]
    k_len, klass = _node_tolerance(node, values)
    worst, wrong = "", False
    for o, w in pairs:
        if not isinstance(o, torch.Tensor) or not isinstance(w, torch.Tensor):
            continue
        w = w.to(o.dtype) if not o.is_floating_point() else w
        cmp = compare(to_numpy(o), to_numpy(w.contiguous()), dtype=xb_dtype(o.dtype), reduction=k_len, klass=klass)
        if not cmp.ok or not worst:
            worst = (f"max |error| {cmp.max_abs_error:.3g}, {cmp.ratio:.2f}x its tolerance"
                     + ("" if reference == "float64" else f" (reference: torch in {reference})")
                     + (f" ({cmp.message})" if cmp.message and not cmp.ok else ""))
        wrong = wrong or not cmp.ok
    return worst, wrong


def bisect(model, inputs=None, *, target: str = "cpu", options: dict | None = None, backward: bool | None = None,
           **kwargs) -> BisectResult:
    """Find the first operator whose output on xbench's `target` departs from torch eager (see the module's
    docstring). `inputs`: the model's keyword arguments as a dict, its positional ones as a tuple, or one tensor
    (`**kwargs` are passed too). `backward`: also bisect the backward graphs (default: when the output has a
    differentiable scalar `loss` and no forward graph departs)."""
    if isinstance(inputs, dict):
        args, kw = (), {**inputs, **kwargs}
    elif isinstance(inputs, (tuple, list)):
        args, kw = tuple(inputs), dict(kwargs)
    elif inputs is None:
        args, kw = (), dict(kwargs)
    else:
        args, kw = (inputs,), dict(kwargs)
    options = {k: v for k, v in (options or {}).items() if k not in ("target", "verify")}
    Options.parse({"target": target, **options})              # bad options fail here, before any work
    graphs = capture(model, args, kw, backward)
    result = BisectResult(target, [g.name for g in graphs])
    for g in sorted(graphs, key=lambda g: g.kind == "backward"):
        random = [n for n in g.gm.graph.nodes if is_random(n)]
        if random:
            raise ArgumentError(f"xb.torch.bisect: {g.name} has random ops ({aten.target_of(random[0].target).text}); "
                                f"xbench draws them from its own stream, not torch's",
                                hint="bisect the model with dropout off (p=0 in its config) or in eval()")
        b = _Bisector(g, target, options)
        cuts = _cuts(g.gm)
        if not cuts:
            continue
        bad, _ = b.departs(cuts[-1])
        result.log.append(f"{g.name}: {len(cuts)} cuts, whole graph {'departs' if bad else 'agrees'}")
        if not bad:
            result.compiles += b.compiles
            continue
        lo, hi = 0, len(cuts) - 1                  # the first departing cut is in cuts[lo..hi]; cuts[hi] departs
        while lo < hi:
            mid = (lo + hi) // 2
            if b.departs(cuts[mid])[0]:
                hi = mid
            else:
                lo = mid + 1
        _, verdicts = b.departs(cuts[hi])
        node = _culprit(g.gm, cuts[hi])
        worst = max((v for v in verdicts if v[1]), key=lambda v: v[2] / v[4] if v[4] else math.inf)
        loc = node_location(node)
        val = node.meta.get("val")
        dtype = str(xb_dtype(val.dtype)) if isinstance(val, torch.Tensor) else \
            ", ".join(str(xb_dtype(v.dtype)) for v in val if isinstance(v, torch.Tensor))
        dep = Departure(g.name, g.kind, node.name, aten.target_of(node.target).text, _shapes(node), dtype,
                        worst[2], worst[3], worst[4], f"{loc.filename}:{loc.lineno}" if loc else "",
                        error=b.errors.get(cuts[hi], ""))
        if not dep.error:
            dep.own_check, dep.op_alone_wrong = _own_check(b, node)
        result.compiles += b.compiles
        result.departure = dep
        return result
    return result


"""The `torch.compile` backend: `torch.compile(model, backend="xbench", options={...})`.

Dynamo captures the model's graphs (several where it breaks); AOTAutograd turns each into forward and
backward ATen graphs (functionalised: mutations come back as outputs, which AOT copies back), decomposing
only the ops the library does not have. Each graph is then probed (`partition.probe`): if every node lowers,
the whole graph becomes one xbench operator; otherwise the supported nodes form partitions, each one
operator, and the rest runs on torch. `options={"verify": True}` runs every partition on torch eager too and
raises on the first op whose result differs beyond the tolerance table.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import threading
import time
import warnings
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from ..config import log
from ..errors import ArgumentError
from . import aten, saving
from .graph import GraphOp
from .inplace import write_in_place
from .partition import Fallback, partitions, probe
from .products import batch_products

TARGETS = ("cpu", "cuda", "ascend", "reference")


@dataclass(frozen=True)
class Options:
    """What `options=` may hold."""
    target: str = "cpu"                 # the xbench backend partitions run on
    verify: bool = False                # run each partition on torch eager too, raise on a difference
    fallback: bool = True               # False: an op xbench cannot run is an error instead of a torch fallback
    decompose: bool = True              # decompose (core ATen) the ops the library lacks
    fallback_ops: tuple = ()            # ATen ops ("aten.gelu.default", or "gelu") kept on torch

    @classmethod
    def parse(cls, options: dict | None) -> Options:
        options = dict(options or {})
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            raise ArgumentError(f"torch.compile(backend='xbench'): unknown option(s) {', '.join(unknown)}",
                                hint="options are " + ", ".join(cls.__dataclass_fields__))
        target = options.get("target", "cpu")
        if target not in TARGETS:
            raise ArgumentError(f"torch.compile(backend='xbench'): unknown target {target!r}",
                                hint="use one of " + ", ".join(TARGETS))
        if isinstance(options.get("fallback_ops"), str):
            options["fallback_ops"] = (options["fallback_ops"],)
        options["fallback_ops"] = tuple(options.get("fallback_ops", ()))
        return cls(**options)


@dataclass
class GraphRecord:
    """What became of one captured ATen graph: its partitions, the fallbacks, and the time each step took."""
    name: str
    kind: str                            # "forward", "backward" or "inference"
    nodes: int
    ops: dict[str, int]
    fallbacks: list[Fallback]
    partitions: list[GraphOp]
    probe_ms: float
    graph: fx.GraphModule | None = None


@dataclass
class Session:
    """Everything one `torch.compile(..., backend="xbench")` compiled, for `explain`."""
    options: Options
    graphs: list[GraphRecord] = field(default_factory=list)
    dynamo_graphs: int = 0


_counter = itertools.count()


@functools.lru_cache(maxsize=1)
def decompositions() -> dict:
    """Core ATen decompositions of the ops that have no rule and no library operator, and those by which a training
    graph saves less (`saving`)."""
    from torch._decomp import core_aten_decompositions
    table = {}
    for op, fn in core_aten_decompositions().items():
        rule, _ = aten.rule_for(op)
        if rule is None:
            table[op] = fn
    table.update(saving.decompositions())
    return table


# Upsampling, which torch's tracing decomposes into gathers through index tensors (its Python kernels at the
# autograd keys), whose gradients are scatter-adds; the library has each op and its gradient whole
# (upsample_bilinear2d_backward, ...): while the bridge traces, they take ATen's own path, as in eager
_UPSAMPLING = ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact2d",
               "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d", "upsample_bicubic2d")
_AUTOGRAD_KEYS = (torch._C.DispatchKey.CompositeImplicitAutograd, torch._C.DispatchKey.Autograd)


@contextlib.contextmanager
def whole_upsampling():
    """Within: torch's Python decompositions of the upsampling ops are off (restored after)."""
    hidden = []
    for name in _UPSAMPLING:
        for overload in ("default", "vec"):
            op = getattr(getattr(torch.ops.aten, name), overload)
            for key in _AUTOGRAD_KEYS:
                if key in op.py_kernels:
                    hidden.append((op, key, op.py_kernels.pop(key)))
            op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, key, fn in hidden:
            op.py_kernels[key] = fn
            op._dispatch_cache.clear()


def traced(gm: fx.GraphModule, example_inputs, compiler, decompose: bool = True):
    """AOTAutograd over a Dynamo graph: its forward, backward (or inference) ATen graphs, each handed to
    `compiler(kind)`, with the bridge's decompositions and what its training graphs save (`saving`)."""
    from torch._dynamo.backends.common import aot_autograd
    aot = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                       inference_compiler=compiler("inference"),
                       decompositions=decompositions() if decompose else {},
                       partition_fn=saving.partition, keep_inference_input_mutations=True)
    with whole_upsampling():
        return aot(gm, example_inputs)


def compile_graph(gm: fx.GraphModule, kind: str, session: Session, options: Options):
    """A captured ATen graph as a callable on torch tensors (AOT's boxed convention is added by the caller)."""
    n = next(_counter)
    t0 = time.perf_counter()
    write_in_place(gm)
    batch_products(gm)
    unsupported = probe(gm, options.fallback_ops)
    probe_ms = (time.perf_counter() - t0) * 1e3
    ops: dict[str, int] = {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            name = aten.target_of(node.target).text
            ops[name] = ops.get(name, 0) + 1
    fallbacks = list(unsupported.values())
    if fallbacks and not options.fallback:
        from ..errors import BackendError
        raise BackendError("xbench cannot run these ops (fallback=False): " + "; ".join(map(str, fallbacks)))
    target, verify = options.target, options.verify
    record = GraphRecord(f"graph{n}_{kind}", kind, sum(ops.values()), ops, fallbacks, [], probe_ms, gm)
    session.graphs.append(record)
    for f in fallbacks:
        log.log(logging.INFO, "xbench.torch: %s runs on torch: %s", f.op, f)
        if f.defect:         # right answers still (torch runs it), but a bug nobody would see in the log
            warnings.warn(f"xbench.torch: {f}; it runs on torch meanwhile (fallback_ops=[{f.op!r}] keeps it "
                          f"there without this warning)", stacklevel=2)
    if not unsupported:
        op = GraphOp(gm, _content_name(kind, gm), target, donates_inputs=kind == "backward")
        record.partitions.append(op)
        return _checked(op, gm) if verify else op
    split = partitions(gm, unsupported)
    for node in split.graph.nodes:
        if node.op == "call_module" and str(node.target).startswith("xbench_"):
            sub = getattr(split, node.target)
            op = GraphOp(sub, _content_name(kind, sub), target, donates_inputs=kind == "backward")
            record.partitions.append(op)
            setattr(split, node.target, _Module(_checked(op, sub) if verify else op))
    split.recompile()
    return split


def _content_name(kind: str, gm: fx.GraphModule) -> str:
    """An operator name from the graph's code: the same graph compiled again (a Dynamo recompile, the next
    process) is the same program, so its compiled modules come from the cache."""
    from ..cache import digest
    return f"{kind}_{digest(gm.code)[:10]}"


class _Module(torch.nn.Module):
    """A compiled partition in the place of its submodule (the split graph calls submodules)."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        out = self.fn(*args)
        return tuple(out) if len(out) != 1 or self.fn_returns_tuple else out[0]

    @property
    def fn_returns_tuple(self) -> bool:
        op = self.fn if isinstance(self.fn, GraphOp) else self.fn.op
        args = op.output.args[0]
        return isinstance(args, (tuple, list))


def _checked(op: GraphOp, gm: fx.GraphModule):
    from .verify import Checked
    return Checked(op, gm)


def _consuming(op: GraphOp):
    def boxed(args: list):
        return op.consume(args)
    boxed._boxed_call = True
    return boxed


def xbench_backend(gm: fx.GraphModule, example_inputs, options: dict | None = None):
    """The Dynamo backend (entry point `torch_dynamo_backends: xbench`)."""
    from functorch.compile import make_boxed_func

    opts = Options.parse(options)
    session = _session_for(opts)
    session.dynamo_graphs += 1

    def compiler(kind):
        def fn(g: fx.GraphModule, inputs):
            compiled = compile_graph(g, kind, session, opts)
            return _consuming(compiled) if isinstance(compiled, GraphOp) else make_boxed_func(compiled)
        return fn

    return traced(gm, example_inputs, compiler, opts.decompose)


_current: threading.local = threading.local()


def _session_for(opts: Options) -> Session:
    forced = getattr(_current, "session", None)
    if forced is not None:
        return forced
    return Session(opts)


class recording:
    """`with recording() as s:` every graph xbench compiles inside goes into the one session `s` (each compiled
    with its own torch.compile options; `options` here are the session's label, as explain reports them)."""

    def __init__(self, options: dict | None = None):
        self.session = Session(Options.parse(options))

    def __enter__(self) -> Session:
        self._before = getattr(_current, "session", None)
        _current.session = self.session
        return self.session

    def __exit__(self, *exc) -> None:
        _current.session = self._before

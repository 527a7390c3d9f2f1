"""A captured FX graph (or one partition of it) as one xbench operator.

The operator's body walks the graph's nodes in order and lowers each through `aten.rule_for`, so the whole
graph is one trace: lowering fuses across ATen op boundaries as it does inside any operator. Tensor
placeholders and the graph's stored tensors (`get_attr`) are the operator's tensor inputs; a graph with random
ops takes one more, a 0-d int64 seed drawn from torch's generator on every call, so a new step does not
recompile. Other placeholders (SymInt sizes) are static arguments: a new size is a new specialisation, logged.
"""
from __future__ import annotations

import inspect
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.fx as fx

from ..config import log
from ..errors import Location, TraceError, XbenchError, located
from ..ir.graph import Var
from ..lang import functions as F
from ..lang.operator import Operator
from ..lang.tensor import Tensor
from ..runtime import runtime
from . import aten
from .interop import from_numpy, shared_array, xb_dtype

SEED_BOUND = 2 ** 62


def node_location(node: fx.Node) -> Location | None:
    """The model's source line a node was traced from (the last frame of its stack trace)."""
    trace = node.meta.get("stack_trace") or ""
    for line in reversed(trace.strip().splitlines()):
        line = line.strip()
        if line.startswith("File "):
            try:
                path, rest = line[6:].split('", line ', 1)
                lineno, _, fn = rest.partition(", in ")
                return Location(path, int(lineno), fn.strip())
            except ValueError:
                return None
    return None


def attribute(gm: fx.GraphModule, node: fx.Node) -> Any:
    """The stored tensor a get_attr node reads."""
    obj: Any = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part)
    return obj


def concrete(v):
    """A SymInt/SymFloat's value as a plain number (other values unchanged)."""
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return v.node.hint if v.node.hint is not None else v.node.expr
    return v


def meta_vars(val) -> Any:
    """Vars shaped like a node's example value (a FakeTensor, or a tuple of them)."""
    if isinstance(val, torch.Tensor):
        return Tensor(Var(tuple(int(concrete(s)) for s in val.shape), xb_dtype(val.dtype)))
    if isinstance(val, (tuple, list)):
        return type(val)(meta_vars(v) for v in val)
    return concrete(val)


def convert_arg(v):
    if isinstance(v, torch.dtype):
        return xb_dtype(v)
    if isinstance(v, (torch.device, torch.layout, torch.memory_format)):
        return None
    return concrete(v)


def lower_node(node: fx.Node, env: dict) -> Any:
    """Lower one call_function node on the values of its inputs in `env`."""
    rule, why = aten.rule_for(node.target)
    if rule is None:
        raise TraceError(why)
    args = fx.node.map_aggregate(node.args, lambda a: env[a] if isinstance(a, fx.Node) else convert_arg(a))
    kwargs = {k: (env[v] if isinstance(v, fx.Node) else convert_arg(v)) if not isinstance(v, (list, tuple)) else
              fx.node.map_aggregate(v, lambda a: env[a] if isinstance(a, fx.Node) else convert_arg(a))
              for k, v in node.kwargs.items()}
    with located(node_location(node)):
        return rule(*args, **kwargs)


def same_types(got, val) -> str | None:
    """Why a lowered value does not match the node's example value (None when it does)."""
    if isinstance(val, torch.Tensor):
        if not isinstance(got, Tensor):
            return f"lowers to a {type(got).__name__}, ATen gives a tensor"
        want = (tuple(int(concrete(s)) for s in val.shape), xb_dtype(val.dtype))
        if (tuple(got.shape), got.dtype) != want:
            return f"lowers to {got.dtype}{list(got.shape)}, ATen gives {want[1]}{list(want[0])}"
        return None
    if isinstance(val, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) < len(val):
            return f"lowers to {type(got).__name__}, ATen gives {len(val)} values"
        for g, v in zip(got, val):
            why = same_types(g, v)
            if why:
                return why
    return None


def is_random(node: fx.Node) -> bool:
    return node.op == "call_function" and aten.target_of(node.target).packet in aten.RANDOM


@dataclass
class Compiled:
    """One specialisation of a graph operator: its artifact and how the graph's outputs are assembled."""
    artifact: Any
    plan: list[tuple[str, Any]]                 # per graph output: ("xb", k) | ("input", i) | ("value", v)
    trace_ms: float
    compile_ms: float
    program: Any
    calls: int = 0                              # times this specialisation ran


@dataclass
class GraphOp:
    """One FX graph (a whole captured graph or one partition) compiled as one xbench operator for `target`."""
    gm: fx.GraphModule
    name: str
    target: str = "cpu"
    compiles: list[dict] = field(default_factory=list)
    calls: int = 0
    donates_inputs: bool = False     # a backward graph: AOT hands over the activations saved for it (`consume`)

    def __post_init__(self):
        nodes = list(self.gm.graph.nodes)
        self.placeholders = [n for n in nodes if n.op == "placeholder"]
        self.attrs = [n for n in nodes if n.op == "get_attr"]
        self.random = any(is_random(n) for n in nodes)
        self.output = next(n for n in nodes if n.op == "output")
        self._cache: dict[tuple, Compiled] = {}
        self._plan: list | None = None
        self.operator = Operator(self._body_function(), name=self.name)
        self.operator.donates_inputs = self.donates_inputs

    # ---- the traced body -------------------------------------------------------------------------------
    def _body_function(self):
        params = [inspect.Parameter(f"a{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in
                  range(len(self.placeholders))]
        params += [inspect.Parameter(f"c{i}", inspect.Parameter.POSITIONAL_OR_KEYWORD) for i in
                   range(len(self.attrs))]
        if self.random:
            params.append(inspect.Parameter("seed", inspect.Parameter.POSITIONAL_OR_KEYWORD))

        def body(**kw):
            return self._walk(kw)

        body.__signature__ = inspect.Signature(params)
        body.__name__ = self.name
        return body

    def _walk(self, kw: dict):
        env: dict[fx.Node, Any] = {}
        for i, n in enumerate(self.placeholders):
            env[n] = kw[f"a{i}"]
        for i, n in enumerate(self.attrs):
            env[n] = kw[f"c{i}"]
        draws = iter(range(1, 1 << 30))
        seed = kw.get("seed")
        token = aten._seed.set((lambda: seed + next(draws) * 0x9E3779B1) if seed is not None else None)
        try:
            for node in self.gm.graph.nodes:
                if node.op == "call_function":
                    try:
                        env[node] = lower_node(node, env)
                    except XbenchError:
                        raise
                    except Exception as exc:
                        raise TraceError(f"{self.name}: {aten.target_of(node.target).text} ({node.name}): "
                                         f"{type(exc).__name__}: {exc}", loc=node_location(node)) from exc
                elif node.op not in ("placeholder", "get_attr", "output"):
                    raise TraceError(f"{self.name}: a {node.op} node ({node.target}) in a captured graph")
        finally:
            aten._seed.reset(token)
        outs = fx.node.map_aggregate(self.output.args[0], lambda a: env[a] if isinstance(a, fx.Node) else a)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        inputs = {id(kw[f"a{i}"]): i for i in range(len(self.placeholders)) if isinstance(kw[f"a{i}"], Tensor)}
        plan, traced = [], []
        for o in outs:
            if isinstance(o, Tensor) and id(o) in inputs:
                plan.append(("input", inputs[id(o)]))
            elif isinstance(o, Tensor):
                plan.append(("xb", len(traced)))
                traced.append(o)
            else:
                plan.append(("value", o))
        self._plan = plan
        if not traced:                       # nothing for xbench to compute: a zero-size stand-in output
            traced.append(F.zeros((0,), "float32"))
        return tuple(traced)

    # ---- calling ---------------------------------------------------------------------------------------
    def arguments(self, args) -> tuple[list, list[np.ndarray]]:
        """The operator's call arguments for the graph's inputs `args`, and its tensor inputs as arrays."""
        call, arrays = [], []
        for a in args:
            if isinstance(a, torch.Tensor):
                arr = shared_array(a)
                call.append(arr)
                arrays.append(arr)
            else:
                call.append(concrete(a))
        for n in self.attrs:
            arr = shared_array(attribute(self.gm, n))
            call.append(arr)
            arrays.append(arr)
        if self.random:
            seed = np.array(int(torch.randint(0, SEED_BOUND, (), dtype=torch.int64)), dtype=np.int64)
            call.append(seed)
            arrays.append(seed)
        return call, arrays

    @staticmethod
    def key(args, call) -> tuple:
        """The specialisation the graph's inputs `args` call for: each tensor's shape and dtype (read from its
        array in `call`, cheaper than from the tensor), each other input's value."""
        return tuple((a.shape, a.dtype) if isinstance(a, np.ndarray) else a for a in call[:len(args)])

    def compiled(self, args, call) -> Compiled:
        key = self.key(args, call)
        c = self._cache.get(key)
        if c is None:
            c = self._compile(call, key)
        return c

    def _compile(self, call, key) -> Compiled:
        t0 = time.perf_counter()
        spec, _ = runtime.specialize(self.operator, tuple(call), {}, None)
        t1 = time.perf_counter()
        program = spec.program()
        art = spec.artifact(self.target)
        t2 = time.perf_counter()
        c = Compiled(art, list(self._plan or []), (t1 - t0) * 1e3, (t2 - t1) * 1e3, program)
        if self._cache:
            log.log(logging.INFO, "xbench.torch: %s recompiled for new input shapes (%d specialisations): %s",
                    self.name, len(self._cache) + 1, _shapes(key))
        self._cache[key] = c
        self.compiles.append({"shapes": _shapes(key), "trace_ms": c.trace_ms, "compile_ms": c.compile_ms,
                              "kernels": len(program.kernels), "cache_hit": bool(getattr(art, "cache_hit", False))})
        return c

    def __call__(self, *args):
        return self.run(args, *self.arguments(args))

    def run(self, args, call, arrays) -> list:
        """The graph's outputs for `args` (with their `arguments`): the specialisation they call for, run and
        counted."""
        c = self.compiled(args, call)
        self.calls += 1
        c.calls += 1
        return self.assemble(c, c.artifact.run(*arrays), args)

    def consume(self, args: list) -> list:
        """`self(*args)` for AOTAutograd's boxed call, whose caller gives the list up: the list is emptied and
        each input let go inside the program after its last reader, so a backward graph's saved activations are
        freed while it runs instead of all living to its end."""
        call, arrays = self.arguments(args)
        c = self.compiled(args, call)
        passed = {v: args[v] for kind, v in c.plan if kind == "input"}
        del call
        args.clear()
        self.calls += 1
        c.calls += 1
        return self.assemble(c, c.artifact.consume(arrays), passed)

    @staticmethod
    def assemble(c: Compiled, outs: list[np.ndarray], args) -> list:
        """The graph's outputs: xbench's results as tensors over their memory, inputs passed through as given."""
        result = []
        for kind, v in c.plan:
            if kind == "xb":
                result.append(from_numpy(outs[v]))
            elif kind == "input":
                result.append(args[v])
            else:
                result.append(v)
        return result

    @property
    def specializations(self) -> int:
        return len(self._cache)


def _shapes(key) -> str:
    return ", ".join(f"{list(k[0])}" if isinstance(k, tuple) and len(k) == 2 and isinstance(k[0], tuple)
                     else repr(k) for k in key)

"""`from_cuda`: a numba.cuda kernel lifted into an xbench operator, and the operator itself.

Lifting happens per specialisation, as tracing does: for the shapes, dtypes and integer arguments of a call, the
kernel's body is interpreted for one symbolic thread (`interp`), its writes are turned into whole-array
expressions (`memory.commit`), cleaned up (`simplify`) and written as xbench source (`emit`), which is then run
on the traced tensors. The source of the example specialisation is what `op.source` shows and what
`xb.compat.report` counts.
"""
from __future__ import annotations

import ast
import inspect
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentError, DTypeError
from ..lang.operator import Operator
from ..lang.tensor import Tensor
from . import expr as E
from .emit import Emitter
from .errors import LiftError
from .interp import Interp, Threads
from .simplify import unwritten_paths
from .source import KernelSource, source_of

DEFAULT_BLOCK = {1: (32,), 2: (8, 8), 3: (4, 4, 4)}


# ---- what the kernel's text says ---------------------------------------------------------------------------

@dataclass
class Usage:
    """Facts read off the kernel's syntax tree before any interpretation."""
    ndim: int = 1                            # launch dims the kernel uses
    grid_stride: bool = False                # it uses cuda.gridsize
    grid_sync: bool = False
    shared_shapes: list = field(default_factory=list)
    ranks: dict = field(default_factory=dict)          # array parameter -> number of indices
    int_scalars: set = field(default_factory=set)      # scalar parameters used as bounds or indices
    index_arrays: set = field(default_factory=set)     # array parameters whose values index other arrays


def analyse(src: KernelSource) -> Usage:
    u = Usage()
    params = set(src.params)
    tree = src.tree
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            f = n.func
            if f.attr in ("grid", "gridsize") and n.args and isinstance(n.args[0], ast.Constant):
                u.ndim = max(u.ndim, int(n.args[0].value))
                u.grid_stride |= f.attr == "gridsize"
            if f.attr == "array" and isinstance(f.value, ast.Attribute) and f.value.attr == "shared":
                shape = next((k.value for k in n.keywords if k.arg == "shape"), n.args[0] if n.args else None)
                if shape is not None:
                    try:
                        v = src.eval_static(shape, n.lineno)
                        u.shared_shapes.append(tuple(v) if isinstance(v, tuple) else (int(v),))
                    except LiftError:
                        pass
            if f.attr == "sync":
                u.grid_sync = True
            if isinstance(f.value, ast.Attribute) and f.value.attr == "atomic" and len(n.args) >= 2 and \
                    isinstance(n.args[0], ast.Name) and n.args[0].id in params:
                k = len(n.args[1].elts) if isinstance(n.args[1], ast.Tuple) else 1
                u.ranks[n.args[0].id] = max(u.ranks.get(n.args[0].id, 0), k)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute) and \
                n.value.attr in ("threadIdx", "blockIdx", "blockDim", "gridDim") and n.attr in ("y", "z"):
            u.ndim = max(u.ndim, 2 if n.attr == "y" else 3)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in params:
            k = len(n.slice.elts) if isinstance(n.slice, ast.Tuple) else 1
            u.ranks[n.value.id] = max(u.ranks.get(n.value.id, 0), k)
            for m in ast.walk(n.slice):
                if isinstance(m, ast.Subscript) and isinstance(m.value, ast.Name) and m.value.id in params:
                    u.index_arrays.add(m.value.id)
                if isinstance(m, ast.Name) and m.id in params:
                    u.int_scalars.add(m.id)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in params and \
                n.attr in ("shape", "size", "ndim"):
            u.ranks.setdefault(n.value.id, 1)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("range", "len"):
            for m in ast.walk(n):
                if isinstance(m, ast.Name) and m.id in params:
                    if n.func.id == "range":
                        u.int_scalars.add(m.id)
                    else:
                        u.ranks.setdefault(m.id, 1)
    u.int_scalars -= set(u.ranks)
    return u


def guess_bindings(src: KernelSource, outs: list) -> dict:
    """A first reading of how each output is shaped, from the text: an index `i` the kernel stores `out[i, j]` at
    and also reads `x[i, ...]` at (or bounds by `i < x.shape[0]`) gives out.shape[0] = x.shape[0]."""
    params = set(src.params)
    reads: dict[str, tuple] = {}
    for n in ast.walk(src.tree):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in params - set(outs) \
                and isinstance(n.ctx, ast.Load):
            elts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            for ax, e in enumerate(elts):
                if isinstance(e, ast.Name):
                    reads.setdefault(e.id, (n.value.id, ax))
        if isinstance(n, ast.Compare) and isinstance(n.left, ast.Name) and len(n.comparators) == 1:
            c = n.comparators[0]
            if isinstance(c, ast.Subscript) and isinstance(c.value, ast.Attribute) and c.value.attr == "shape" and \
                    isinstance(c.value.value, ast.Name) and c.value.value.id in params - set(outs) and \
                    isinstance(c.slice, ast.Constant):
                reads.setdefault(n.left.id, (c.value.value.id, int(c.slice.value)))
    out = {}
    for n in ast.walk(src.tree):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id in outs and \
                isinstance(n.ctx, ast.Store):
            elts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            out.setdefault(n.value.id, [reads.get(e.id) if isinstance(e, ast.Name) else None for e in elts])
    return out


# ---- one specialisation ------------------------------------------------------------------------------------

@dataclass
class Specialization:
    """The facts one interpretation needs (read by `interp.Interp`)."""
    kernel: KernelSource
    threads: Threads
    sources: dict                             # array parameter -> E.Source (as passed)
    scalars: dict                             # scalar parameter -> node or Python int
    outs: list
    init: Any
    negative_loads: set = field(default_factory=set)

    def init_of(self, name: str):
        return self.init if name in self.outs else None

    @property
    def out_text(self) -> str:
        return ", ".join(repr(o) for o in self.outs)


@dataclass
class Lifted:
    """A kernel lifted at one specialisation: the xbench source and the function it defines."""
    source: str
    fn: Callable
    inputs: list                              # the operator's parameters, in the kernel's order
    inout: list                               # outputs the kernel also reads (they are inputs too)
    out_dtypes: dict
    out_shapes: dict
    shape_rule: dict                          # out -> per axis (param, axis) or a size
    launch: tuple
    natural: dict = field(default_factory=dict)   # out -> the type of the values the kernel stores


class KernelSpec:
    """What `from_cuda` was told and read about a kernel; lifts it at any specialisation."""

    def __init__(self, kernel, out, *, shape=None, dtype=None, init=None, block=None, grid=None, launch=None,
                 name=None):
        self.kernel_obj = kernel
        self.src = source_of(kernel)
        self.name = name or self.src.name
        outs = [out] if isinstance(out, str) else list(out or ())
        if not outs:
            raise ArgumentError("from_cuda needs out=: the name of the parameter the kernel writes its result to",
                                hint=f"{self.src.name} takes ({', '.join(self.src.params)})")
        for o in outs:
            if o not in self.src.params:
                raise ArgumentError(f"out={o!r} is not a parameter of {self.src.name}",
                                    hint=f"its parameters are ({', '.join(self.src.params)})")
        self.outs = outs
        self.usage = analyse(self.src)
        for o in outs:
            self.usage.ranks.setdefault(o, 1)
        self.bindings = guess_bindings(self.src, outs)
        self.fallback_shapes: dict = {}           # outputs' shapes when nothing else tells (random examples)
        self.shape = shape
        self.dtype = dtype
        self.init = init
        self.block = _dims(block, "block") if block is not None else None
        self.grid = grid
        self.launch = launch
        self.shape_rule: dict | None = None
        self.naturals: dict = {}                  # input dtypes -> {out: the type of the values it stores}
        self.inout: list | None = None            # fixed by the first specialisation (the signature)
        self.float_scalars: set = set()
        self.cache: dict = {}
        self.last: Lifted | None = None

    # ---- the launch --------------------------------------------------------------------------------------
    def geometry(self, arrays: dict, scalars: dict) -> tuple[tuple, tuple]:
        """(block, grid) per axis x, y, z for arrays of these shapes."""
        if self.launch is not None:
            from .original import capture_launch
            block, grid = capture_launch(self, arrays, scalars)
            return block, grid
        nd = self.usage.ndim
        block = self.block
        if block is None:
            block = DEFAULT_BLOCK[nd]
            if self.usage.shared_shapes:
                s = self.usage.shared_shapes[0]
                if len(s) >= nd:
                    block = tuple(reversed(s[len(s) - nd:]))
        block = tuple(block) + (1,) * (nd - len(block))
        if self.grid is not None:
            g = self.grid(*arrays.values()) if callable(self.grid) else self.grid
            grid = _dims(g, "grid")
        else:
            # one thread per element: of the largest array for a 1-D launch (which may walk a matrix flat), of its
            # longest axis along each axis of a 2-D or 3-D one
            if nd == 1:
                longest = max([int(np.prod(a.shape)) for a in arrays.values()] + [1])
            else:
                longest = max([max(a.shape, default=1) for a in arrays.values()] + [1])
            grid = tuple(max(1, -(-longest // b)) for b in block)
            if self.usage.grid_stride:
                grid = tuple(min(2, g) for g in grid)
            if self.usage.grid_sync:
                grid = (1,) * nd
                block = tuple(max(b, longest) if d == 0 else b for d, b in enumerate(block))
        grid = tuple(grid) + (1,) * (len(block) - len(grid))
        return tuple(block), tuple(grid)

    # ---- lifting -----------------------------------------------------------------------------------------
    def out_shape(self, name: str, inputs: dict) -> tuple[int, ...]:
        """The shape of a write-only output for these inputs."""
        rule = (self.shape_rule or {}).get(name)
        shape = self.shape
        if isinstance(shape, dict):
            shape = shape.get(name)
        if shape is not None:
            if callable(shape):
                got = shape(**{k: v for k, v in inputs.items() if k in inspect.signature(shape).parameters})
            elif isinstance(shape, str):
                got = tuple(inputs[shape].shape)
            else:
                got = shape
            return tuple(int(s) for s in (got if isinstance(got, (tuple, list)) else (got,)))
        if rule is not None:
            return tuple(int(tuple(inputs[r[0]].shape)[r[1]]) if isinstance(r, tuple) else int(r) for r in rule)
        rank = self.usage.ranks.get(name, 1)
        guess = self.bindings.get(name)
        if guess and len(guess) == rank and all(g is not None and g[0] in inputs and _is_array(inputs[g[0]]) and
                                                g[1] < inputs[g[0]].ndim for g in guess):
            return tuple(int(tuple(inputs[g[0]].shape)[g[1]]) for g in guess)
        for v in inputs.values():
            if _is_array(v) and v.ndim == rank:
                return tuple(v.shape)
        for v in inputs.values():               # a first guess the lifting corrects (row sums of a matrix)
            if _is_array(v) and v.ndim > rank:
                return tuple(v.shape)[:rank]
        if name in self.fallback_shapes:
            return self.fallback_shapes[name]
        raise ArgumentError(f"cannot tell the shape of {name} from the inputs",
                            hint="pass shape= to from_cuda (e.g. shape=lambda x: x.shape)")

    def out_dtype(self, name: str, inputs: dict) -> str:
        dt = self.dtype.get(name) if isinstance(self.dtype, dict) else self.dtype
        if dt is not None:
            return str(D.canonical(dt))
        natural = self.naturals.get(_dtypes_key(inputs), {})
        if name in natural:
            return natural[name]
        rule = (self.shape_rule or {}).get(name)
        if rule:
            for r in rule:
                if isinstance(r, tuple):
                    return _dtype_name(inputs[r[0]])
        for v in inputs.values():
            if _is_array(v):
                return _dtype_name(v)
        return "float32"

    def specialize(self, inputs: dict) -> Lifted:
        """Lift for `inputs` (the operator's arguments by name: arrays or Tensors, and scalars)."""
        key = tuple((k, tuple(v.shape), _dtype_name(v)) if _is_array(v) else (k, _scalar_key(v))
                    for k, v in inputs.items())
        got = self.cache.get(key)
        if got is not None:
            self.last = got
            return got
        lifted = self._lift(inputs)
        again = False
        if self.shape_rule is None:
            # the first lift found how outputs are shaped: lift again with their dims named as the inputs'
            self.shape_rule = lifted.shape_rule
            again = any(isinstance(r, tuple) for rule in self.shape_rule.values() for r in rule)
        dkey = _dtypes_key(inputs)
        if dkey not in self.naturals:
            # ... and typed: outputs take the type of the values the kernel stores in them
            self.naturals[dkey] = lifted.natural
            again = again or any(lifted.natural[o] != lifted.out_dtypes[o] for o in lifted.natural)
        if again:
            lifted = self._lift(inputs)
        if self.inout is None:
            self.inout = lifted.inout
        elif lifted.inout != self.inout:
            raise LiftError(f"at these shapes {self.name} reads its outputs {lifted.inout} before writing them, "
                            f"where the lifted operator's signature expects {self.inout}",
                            construct="in-out outputs")
        self.cache[key] = lifted
        self.last = lifted
        return lifted

    def _lift(self, inputs: dict) -> Lifted:
        src = self.src
        arrays: dict[str, Any] = {}
        scalars: dict[str, Any] = {}
        for p in src.params:
            if p in inputs:
                v = inputs[p]
                if _is_array(v):
                    arrays[p] = v
                else:
                    scalars[p] = v
            elif p in self.outs:
                shape = self.out_shape(p, inputs)
                arrays[p] = _Shaped(shape, self.out_dtype(p, inputs))
            else:
                raise ArgumentError(f"{self.name}: missing argument {p!r}")
        block, grid = self.geometry(arrays, scalars)
        threads = Threads(block, grid)
        rule = self.shape_rule or {}
        sources = {}
        for p, a in arrays.items():
            dt = _dtype_name(a)
            if p in self.outs and p not in inputs:
                r = rule.get(p) or ()
                shape = tuple(E.dim(r[d][0], r[d][1], n) if d < len(r) and isinstance(r[d], tuple) and
                              r[d][0] in inputs and tuple(inputs[r[d][0]].shape)[r[d][1]] == n else E.const(n)
                              for d, n in enumerate(a.shape))
            else:
                shape = tuple(E.dim(p, d, n) for d, n in enumerate(a.shape))
            sources[p] = E.Source(p, dt, shape)
        sc = {}
        for p, v in scalars.items():
            if isinstance(v, (bool, np.bool_)) or isinstance(v, (int, np.integer)) and p not in self.float_scalars:
                sc[p] = E.const(v)
            elif _is_tensor(v) or isinstance(v, np.ndarray):
                sc[p] = E.param(p, _dtype_name(v))
            elif isinstance(v, (float, np.floating)):
                sc[p] = E.param(p, _dtype_name(np.asarray(v)))
            else:
                raise ArgumentError(f"{self.name}: argument {p!r} is a {type(v).__name__}; pass arrays and numbers")
        spec = Specialization(src, threads, sources, sc, self.outs, self.init)
        E.Budget.count = 0
        arrs = Interp(spec).run()
        finals = {}
        for o in self.outs:
            a = arrs[o]
            if not a.versions:
                raise LiftError(f"the kernel never writes {o}", src.tree.lineno, src, construct="output never written")
            finals[o] = a.current
        inout = [o for o in self.outs if arrs[o].read_v0 and self.init is None]
        outs = {}
        for o, fsrc in finals.items():          # (simplified when committed)
            _check_written(o, fsrc.content, fsrc, src)
            outs[o] = fsrc
        names = [p for p in src.params if (p in inputs and p not in self.outs) or p in inout]
        text, fn = _write(self.name, names, outs, spec, inout)
        ins = {p: arrays[p] for p in names if p in arrays}
        rule = {o: _infer_rule(outs[o], names, ins) for o in self.outs if o not in inout}
        natural = {o: _natural(arrs[o].stored, ins) for o in self.outs if o not in inout}
        return Lifted(text, fn, names, inout, {o: outs[o].dtype for o in outs},
                      {o: tuple(E.concrete(s) for s in outs[o].shape) for o in outs}, rule, (block, grid), natural)


class _Shaped:
    """An output array not passed in: its shape and dtype."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.ndim = len(self.shape)


def _check_written(name: str, content: E.Node, src: E.Source, kernel: KernelSource) -> None:
    for un, cond in unwritten_paths(content):
        if E.decide(cond) is False:
            continue
        where = _witness(cond, src)
        if un.src is not None and isinstance(un.src, E.Source):
            what = f"{name}{where}" if where else f"elements of {name}" + (" (which, the data decide)"
                                                                             if cond.data else "")
            raise LiftError(f"the kernel leaves {what} unwritten (no thread stores there), so the result "
                            "would be whatever the array held before the launch", kernel.tree.lineno, kernel,
                            construct="output not fully written",
                            hint="pass init=<value> to from_cuda (what the array holds before the launch), or make "
                                 "the kernel write every element")
        raise LiftError(f"{name}{where} is computed from shared memory {un.what} that no thread of the block wrote",
                        kernel.tree.lineno, kernel, construct="uninitialised shared memory",
                        hint="write every element of the shared array before cuda.syncthreads()")


def _witness(cond: E.Node, src: E.Source) -> str:
    if cond.data:
        return ""
    pos = list(src.pos)
    env = {}
    for i, p in enumerate(pos):
        shape = [1] * len(pos)
        shape[i] = p.extent
        env[p] = np.arange(p.extent).reshape(shape)
    if int(np.prod([p.extent for p in pos])) > (1 << 22):
        return ""
    try:
        vals = np.broadcast_to(E.evaluate(cond, env), tuple(p.extent for p in pos))
    except E.NotEvaluable:
        return ""
    hits = np.argwhere(vals)
    if not len(hits):
        return ""
    return "[" + ", ".join(str(int(v)) for v in hits[0]) + "]"


def _infer_rule(out: E.Source, names: list, arrays: dict) -> list:
    """Each axis of a write-only output as (parameter, axis): the parameter the lifted code reads along it at the
    element's own position, else the first input of the output's rank with that size there; else its size."""
    want = {p: d for d, p in enumerate(out.pos)}
    found: dict[int, tuple] = {}
    for x in E.walk(out.content):
        if isinstance(x, E.Load) and x.src.version == 0 and x.src.name in names:
            for ax, c in enumerate(x.idx):
                if c in want and want[c] not in found:
                    found[want[c]] = (x.src.name, ax)
    rule = []
    for d, s in enumerate(out.shape):
        if d not in found:
            n = E.concrete(s)
            found[d] = next(((p, d) for p, a in arrays.items() if len(a.shape) == len(out.shape) and
                             a.shape[d] == n), n)
        rule.append(found[d])
    return rule


def _natural(stored: list, arrays: dict) -> str:
    """The type of an output the caller does not pass: that of the values stored (numpy's promotion); for
    literals only, the inputs' float type."""
    strong = [dt for dt, weak in stored if not weak]
    if strong:
        out = np.dtype(strong[0])
        for dt in strong[1:]:
            out = np.promote_types(out, dt)
        return out.name
    kinds = {np.dtype(dt).kind for dt, _ in stored}
    if "f" in kinds:
        return next((_dtype_name(a) for a in arrays.values() if np.dtype(_dtype_name(a)).kind == "f"), "float32")
    if kinds & {"i", "u"}:
        return "int64"
    return "bool"


def _write(name: str, params: list, outs: dict, spec: Specialization, inout: list) -> tuple[str, Callable]:
    em = Emitter(name, spec.negative_loads, spec.kernel, params)
    em.count_uses([s.content for s in outs.values()])
    # an output a later phase of the kernel also read is already a named array; the others are returned as written
    read = {id(x.src) for s in outs.values() for x in E.walk(s.content) if isinstance(x, E.Load) and x.src.version}
    results = [em.source_code(s) if id(s) in read else em.whole(s, s.content) for s in outs.values()]
    body = list(em.lines)
    if len(results) == 1:
        body.append(f"return {results[0]}")
    else:
        names = []
        for o, code in zip(outs, results):
            if not code.isidentifier():
                name = o if o not in params and o not in em.taken else f"{o}_out"
                body.append(f"{name} = {code}")
                code = name
            names.append(code)
        body.append(f"return {', '.join(names)}")
    head = f"def {name}({', '.join(params)}):"
    text = "\n".join([head] + ["    " + line for line in body]) + "\n"
    import xbench
    ns: dict = {"xb": xbench, "math": math}
    code = compile(text, f"<xbench lifted {name}>", "exec")
    exec(code, ns)
    shown = "@xb.tensor_op\n" + "\n".join(
        [f"def {name}({', '.join(f'{p}: Tensor' if p not in _int_params(spec) else p for p in params)}):"]
        + ["    " + line for line in body]) + "\n"
    return shown, ns[name]


def _int_params(spec: Specialization) -> set:
    return {p for p, v in spec.scalars.items() if isinstance(v, E.Const)}


# ---- the operator ------------------------------------------------------------------------------------------

class LiftedOperator(Operator):
    """An xbench operator lifted from a numba.cuda kernel. Call it on the kernel's inputs (every parameter but
    the write-only outputs); it returns the outputs. `.source` is its xbench source, `.kernel` the original,
    `.checks` how it compared with the original kernel, `.check(*args)` compares again on other inputs."""

    def __init__(self, spec: KernelSpec, params: list[str], statics: set[str], float_scalars: set[str]):
        self.spec = spec
        self.kernel = spec.kernel_obj
        self.statics = set(statics)
        self.float_scalars = set(float_scalars)
        self.checks: list = []
        self.example: dict | None = None
        self._source: str | None = None
        self._kernel_outputs: dict = {}       # the original kernel's outputs, by inputs
        sig = inspect.Signature([inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                   annotation=Tensor if p not in self.statics
                                                   else inspect.Parameter.empty) for p in params])

        def body(**kw):
            lifted = spec.specialize(kw)
            res = lifted.fn(**{p: kw[p] for p in lifted.inputs})
            return res

        body.__signature__ = sig
        body.__name__ = body.__qualname__ = spec.name
        body.__doc__ = f"{spec.name}, lifted from the numba.cuda kernel {spec.src.name} " \
                       f"({os.path.basename(spec.src.filename)}:{spec.src.first})."
        super().__init__(body, name=spec.name)

    @property
    def source(self) -> str:
        """The operator in the xbench language, as lifted at the shapes it was verified at (`example`)."""
        if self._source is None and self.example is not None:
            self._source = self.spec.specialize(dict(self._lift_args(self.example))).source
        return self._source or ""

    def _lift_args(self, inputs: dict) -> dict:
        _, bound = self._scalars((), dict(inputs))
        return bound

    @property
    def outputs(self) -> list[str]:
        return list(self.spec.outs)

    def bind(self, args, kwargs, loc=None):
        args, kwargs = self._scalars(args, kwargs)
        return super().bind(args, kwargs, loc)

    def _scalars(self, args, kwargs):
        """Python numbers for the kernel's float scalars become 0-d arrays of the arrays' float type (as
        PyTorch's scalars keep a tensor's type); its integer scalars stay static values."""
        names = list(self.signature.parameters)
        bound = dict(zip(names, args))
        bound.update(kwargs)
        floats = [np.asarray(v).dtype for v in bound.values() if isinstance(v, np.ndarray) and
                  np.asarray(v).dtype.kind == "f"]
        ftype = floats[0] if floats else np.dtype("float64")
        for p in self.float_scalars:
            v = bound.get(p)
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
                bound[p] = np.asarray(v, dtype=ftype if not isinstance(v, np.floating) else v.dtype)
        for p in self.statics:
            v = bound.get(p)
            if isinstance(v, (float, np.floating)) and not float(v).is_integer():
                raise DTypeError(f"{self.name}(): {p} is an integer argument of the kernel, got {v!r}",
                                 hint=f"pass an int for {p}")
            if isinstance(v, (float, np.floating)):
                bound[p] = int(v)
        return (), bound

    def check(self, *args, backends=("cpu",), **kwargs):
        """Run the original kernel and this operator on the same inputs; one `Check` per backend and output."""
        from .verify import check_against_kernel
        got = check_against_kernel(self, args, kwargs, backends)
        self.checks.extend(got)
        return got

    def __repr__(self) -> str:
        return f"<xbench operator {self.name}{self.signature_text()} lifted from {self.spec.src.name}>"


def _dims(v, what: str) -> tuple[int, ...]:
    vals = tuple(v) if isinstance(v, (tuple, list)) else (v,)
    if not 1 <= len(vals) <= 3 or not all(isinstance(x, (int, np.integer)) and x > 0 for x in vals):
        raise ArgumentError(f"{what}={v!r}: give 1 to 3 positive ints (x, y, z)")
    return tuple(int(x) for x in vals)


def _is_array(v) -> bool:
    """An array argument (a 0-d array or tensor is a kernel's scalar)."""
    if isinstance(v, _Shaped):
        return True
    if isinstance(v, (np.ndarray, Tensor)):
        return v.ndim > 0
    return False


def _is_tensor(v) -> bool:
    return isinstance(v, Tensor)


def _dtype_name(v) -> str:
    if isinstance(v, Tensor):
        return str(v.dtype)
    if isinstance(v, _Shaped):
        return v.dtype.name
    return np.asarray(v).dtype.name


def _dtypes_key(inputs: dict) -> tuple:
    return tuple((k, _dtype_name(v)) for k, v in inputs.items() if isinstance(v, (np.ndarray, Tensor)))


def _scalar_key(v):
    if isinstance(v, np.ndarray):
        return ("0d", v.dtype.name)
    if isinstance(v, (float, np.floating)):
        return ("float", np.asarray(v).dtype.name)
    return v


# ---- the entry point -------------------------------------------------------------------------------------

def from_cuda(kernel, out, *, shape=None, dtype=None, init=None, block=None, grid=None, launch=None, example=None,
              verify: bool = True, backends=("cpu",), name: str | None = None, seed: int = 0) -> LiftedOperator:
    """Lift a numba.cuda kernel into an xbench operator that runs on every backend (cpu, cuda, ascend).

        @cuda.jit
        def saxpy(a, x, y, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i] + y[i]

        op = xb.compat.from_cuda(saxpy, out="out")     # op(a, x, y) -> out
        print(op.source)                               # the operator in the xbench language

    `out`: the parameter (or tuple of parameters) the kernel writes its results to. The operator takes every other
    parameter, plus an output the kernel also reads (an in-out array), and returns the outputs.
    `shape` / `dtype`: of a write-only output (a callable of the inputs by name, a tuple, or the name of an input
    shaped alike); by default read off the kernel (the inputs it reads along each axis of the output).
    `init`: what an output holds before the launch, where the kernel leaves elements unwritten or updates them
    atomically; without it such an output is an input of the operator (or, if never read, an error).
    `block` / `grid` / `launch`: the launch the kernel's own code depends on (`cuda.blockDim`, `cuda.gridDim`):
    threads per block, blocks per grid (a tuple or a callable of the arrays), or the legacy launch code itself
    (`launch(*kernel_args)` launching it once; it is also what `report` counts as launch code). By default one
    thread per element of the largest array (of the longest axis, per axis, for 2-D and 3-D launches), blocks shaped
    like the kernel's shared-memory tiles.
    `example`: the operator's arguments to verify on (a dict by name, or a tuple in order); by default random
    float32 arrays of one size for every axis. With `verify` (the default) the operator is run on `backends` and
    compared with the original kernel (on the GPU, or numba's CUDA simulator) before it is returned; a difference
    raises `LiftMismatch`. Anything the lifting does not cover raises `LiftError`, naming the construct and the
    kernel's line.
    """
    from .verify import raise_on_mismatch, synthesize
    ks = KernelSpec(kernel, out, shape=shape, dtype=dtype, init=init, block=block, grid=grid, launch=launch,
                    name=name)
    params = ks.src.params
    if example is None:
        ex = synthesize(ks, seed)
        n = next((np.shape(v)[0] for v in ex.values() if isinstance(v, np.ndarray)), 16)
        ks.fallback_shapes = {o: (n,) * ks.usage.ranks.get(o, 1) for o in ks.outs}
    elif isinstance(example, dict):
        ex = dict(example)
    else:
        ins = [p for p in params if p not in ks.outs]
        ex = dict(zip(ins, example)) if len(example) == len(ins) else dict(zip(params, example))
    ks.float_scalars = {p for p in params if p not in ks.usage.ranks and p not in ks.outs and
                        isinstance(ex.get(p), (float, np.floating))}
    unknown = [k for k in ex if k not in params]
    if unknown:
        raise ArgumentError(f"example= names {unknown}, which are not parameters of {ks.src.name}",
                            hint=f"its parameters are ({', '.join(params)})")
    first = ks.specialize(_lift_inputs(ex, ks))
    for o in first.inout:
        if o not in ex:
            if example is not None:
                raise ArgumentError(f"{ks.src.name} reads {o} before writing it, so the operator takes it as an "
                                    "input: include it in example=",
                                    hint=f"or pass init= (what {o} holds before the launch)")
            ex[o] = np.random.default_rng(seed + 1).standard_normal(first.out_shapes[o]).astype(
                first.out_dtypes[o])
    op_params = [p for p in params if p not in ks.outs or p in first.inout]
    statics = {p for p in op_params if p not in ks.usage.ranks and p not in ks.float_scalars and
               not isinstance(ex.get(p), np.ndarray)}
    op = LiftedOperator(ks, op_params, statics, ks.float_scalars)
    op.example = {p: ex[p] for p in op_params}
    if verify:
        checks = op.check(**op.example, backends=tuple(backends))
        raise_on_mismatch(op, checks)
    return op


def _lift_inputs(ex: dict, ks: KernelSpec) -> dict:
    """The example as the lifting sees it: float scalars as 0-d arrays of the arrays' float type."""
    floats = [v.dtype for v in ex.values() if isinstance(v, np.ndarray) and v.dtype.kind == "f"]
    ft = floats[0] if floats else np.dtype("float64")
    out = {}
    for k, v in ex.items():
        if k in ks.float_scalars and not isinstance(v, np.ndarray):
            out[k] = np.asarray(v, dtype=ft)
        else:
            out[k] = v
    return out

"""What a kernel can call and look up: `cuda.*` (thread indices, barriers, shared and local arrays, atomics),
`math.*` and `numpy.*` functions on numbers, numba and numpy types as casts, Python builtins, and device
functions (`@cuda.jit(device=True)`, `@numba.jit` or plain Python), which are interpreted inline."""
from __future__ import annotations

import ast
import builtins
import inspect
import math
import types
from dataclasses import dataclass

import numpy as np

from . import expr as E
from .errors import NotSymbolic
from .memory import SharedArray, Write, commit
from .source import source_of
from .values import ArrayRef, Frame, LocalRef, Poison, SharedRef


@dataclass(frozen=True)
class NS:
    """A namespace the kernel reaches into (`cuda.threadIdx`, `math`, ...), by path."""
    kind: str
    path: tuple = ()


@dataclass(frozen=True)
class DTypeCtor:
    dtype: str


@dataclass(frozen=True)
class GridGroup:
    pass


@dataclass(frozen=True)
class GridSync:
    pass


WARP = {"syncwarp", "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "all_sync", "any_sync",
        "eq_sync", "ballot_sync", "match_any_sync", "match_all_sync", "activemask", "lanemask_lt", "laneid"}
NO_OP = {"threadfence", "threadfence_block", "threadfence_system"}
ATOMIC_OK = {"add": "add", "sub": "sub", "max": "max", "min": "min"}
MATH_UNARY = {
    "exp": "exp", "expm1": "expm1", "log2": "log2", "log10": "log10", "log1p": "log1p", "sqrt": "sqrt",
    "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin", "acos": "acos", "atan": "atan", "sinh": "sinh",
    "cosh": "cosh", "tanh": "tanh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "erf": "erf",
    "erfc": "erfc", "fabs": "abs", "isnan": "isnan", "isinf": "isinf", "isfinite": "isfinite",
}
NUMPY_UNARY = dict(MATH_UNARY, absolute="abs", abs="abs", arcsin="asin", arccos="acos", arctan="atan",
                   arcsinh="asinh", arccosh="acosh", arctanh="atanh", floor="floor", ceil="ceil", trunc="trunc",
                   negative="neg", sign="sign", rint="round", exp2="exp2", log="log")
BINARY = {"atan2": "atan2", "hypot": "hypot", "copysign": "copysign", "fmod": "fmod", "pow": "pow",
          "power": "pow", "maximum": "max", "minimum": "min", "fmax": "max", "fmin": "min", "arctan2": "atan2"}
_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
           "uint64", "bool_", "boolean")


class Calls:
    def __init__(self, interp):
        self.it = interp

    # ---- turning Python objects into interpreter values -------------------------------------------------
    def lift(self, v):
        if isinstance(v, types.ModuleType):
            name = v.__name__
            if name == "math":
                return NS("math")
            if name == "numpy":
                return NS("numpy")
            if name.startswith(("numba.cuda", "numba_cuda")):
                return NS("cuda")
            if name in ("numba", "numba.types", "numba.core.types"):
                return NS("numba")
            return v
        dt = _dtype_of(v)
        if dt is not None:
            return DTypeCtor(dt)
        if isinstance(v, tuple):
            return tuple(self.lift(x) for x in v)
        return v

    # ---- attributes -------------------------------------------------------------------------------------
    def attribute(self, base, attr: str, n: ast.Attribute):
        it = self.it
        if isinstance(base, NS):
            return self.ns_attr(base, attr, n)
        if isinstance(base, ArrayRef):
            arr = it.st.arrays[base.name]
            shape = arr.shape[len(base.prefix):]
            if attr == "shape":
                return tuple(shape)
            if attr == "size":
                return _product(shape)
            if attr == "ndim":
                return len(shape)
            if attr == "dtype":
                return DTypeCtor(arr.dtype)
            raise it.err(f"`{ast.unparse(n)}`: arrays in kernels have shape, size, ndim and dtype", n,
                         construct="array attribute")
        if isinstance(base, (SharedRef, LocalRef)):
            shape = it.st.shared[base.name].shape if isinstance(base, SharedRef) else base.shape
            if attr == "shape":
                return tuple(E.const(s) for s in shape)
            if attr == "size":
                return E.const(int(np.prod(shape)))
            raise it.err(f"`{ast.unparse(n)}` is not supported", n, construct="array attribute")
        if isinstance(base, GridGroup):
            if attr == "sync":
                return GridSync()
            raise it.err(f"`{ast.unparse(n)}`: of a grid group, xbench supports sync()", n, construct="cooperative groups")
        if isinstance(base, E.Node):
            raise it.err(f"`{ast.unparse(n)}`: numbers have no attribute {attr!r} here", n, construct="attribute")
        try:
            return self.lift(getattr(base, attr))
        except AttributeError:
            raise it.err(f"`{ast.unparse(n)}`: no attribute {attr!r}", n, construct="attribute") from None

    def ns_attr(self, ns: NS, attr: str, n):
        it = self.it
        th = it.threads
        path = ns.path + (attr,)
        if ns.kind == "cuda":
            if len(path) == 2 and path[0] in ("threadIdx", "blockIdx", "blockDim", "gridDim") and attr in "xyz":
                d = "xyz".index(attr)
                if path[0] == "threadIdx":
                    return th.local(d)
                if path[0] == "blockIdx":
                    return th.block_index(d)
                if path[0] == "blockDim":
                    return E.const(th.block[d] if d < th.ndim else 1)
                return E.const(th.grid[d] if d < th.ndim else 1)
            if path == ("warpsize",):
                return E.const(32)
            if path == ("laneid",):
                raise it.err("cuda.laneid is a warp intrinsic; xbench lifts kernels whose threads share data only "
                             "through memory and barriers", n, construct="warp intrinsic")
            if len(path) == 1 and attr in _DTYPES:
                return DTypeCtor(_norm_dtype(attr))
            return NS("cuda", path)
        if ns.kind == "math":
            if attr in ("pi", "e", "inf", "nan", "tau"):
                return E.const(float(getattr(math, attr)))
            return NS("math", path)
        if ns.kind == "numpy":
            if attr in ("pi", "e", "inf", "nan"):
                return E.const(float(getattr(np, attr)))
            if attr in _DTYPES or attr in ("float_", "intp", "uintp", "single", "double", "half"):
                return DTypeCtor(np.dtype(getattr(np, attr)).name)
            return NS("numpy", path)
        if ns.kind == "numba":
            if attr in _DTYPES or attr in ("intp", "uintp", "float_", "double"):
                return DTypeCtor(_norm_dtype(attr if attr not in ("float_", "double") else "float64"))
            if attr == "cuda":
                return NS("cuda")
            if attr in ("types", "core"):
                return NS("numba")
            return NS("numba", path)
        return NS(ns.kind, path)

    # ---- calls -------------------------------------------------------------------------------------------
    def call(self, f, args: list, kwargs: dict, n: ast.Call):
        it = self.it
        if isinstance(f, NS):
            return self.ns_call(f, args, kwargs, n)
        if isinstance(f, DTypeCtor):
            if len(args) != 1:
                raise it.err(f"{f.dtype}() takes one number", n, construct="cast")
            return E.cast(it.num(args[0], n), f.dtype)
        if isinstance(f, GridSync):
            return self.grid_sync(n)
        if f is builtins.print:
            return None
        name = getattr(f, "__name__", None)
        if isinstance(name, str) and getattr(builtins, name, None) is f:
            return self.builtin(name, args, kwargs, n)
        if hasattr(f, "py_func") or inspect.isfunction(f):
            return self.device_call(f, args, kwargs, n)
        raise it.err(f"`{ast.unparse(n.func)}` ({type(f).__name__}) cannot be called in a lifted kernel", n,
                     construct="call", hint="call math/numpy functions, numba types and device functions")

    def builtin(self, name: str, args, kwargs, n):
        it = self.it
        num = it.num
        if name == "len":
            (a,) = args
            if isinstance(a, ArrayRef):
                arr = it.st.arrays[a.name]
                return arr.shape[len(a.prefix)]
            if isinstance(a, SharedRef):
                return E.const(it.st.shared[a.name].shape[0])
            if isinstance(a, LocalRef):
                return E.const(a.shape[0])
            if isinstance(a, tuple):
                return E.const(len(a))
        if name == "abs":
            return E.unary("abs", num(args[0], n))
        if name in ("min", "max"):
            vals = list(args[0]) if len(args) == 1 and isinstance(args[0], tuple) else list(args)
            out = num(vals[0], n)
            for v in vals[1:]:
                out = E.binary(name, out, num(v, n))
            return out
        if name == "float":
            return E.cast(num(args[0], n), "float64")
        if name == "int":
            return E.cast(num(args[0], n), "int64")
        if name == "bool":
            return E.as_bool(num(args[0], n))
        if name == "pow":
            return E.binary("pow", num(args[0], n), num(args[1], n))
        if name == "round" and len(args) == 1:
            return E.cast(E.unary("round", num(args[0], n)), "int64")
        if name == "range":
            raise it.err("range() is supported only as the iterable of a for loop", n, construct="range")
        raise it.err(f"the builtin {name}() is not supported in a lifted kernel", n, construct=f"builtin {name}")

    def ns_call(self, f: NS, args, kwargs, n):
        it = self.it
        p = f.path
        name = p[-1] if p else ""
        num = it.num
        if f.kind == "math":
            if name in MATH_UNARY and len(args) == 1:
                return E.unary(MATH_UNARY[name], num(args[0], n))
            if name == "log":
                x = E.unary("log", num(args[0], n))
                return x if len(args) == 1 else E.binary("div", x, E.unary("log", num(args[1], n)))
            if name in ("floor", "ceil", "trunc"):         # math.floor of a float is an integer, as in Python
                x = num(args[0], n)
                return x if E.is_int(x.dtype) else E.cast(E.unary(name, x), "int64")
            if name in BINARY and len(args) == 2:
                a, b = num(args[0], n), num(args[1], n)
                if name == "pow":
                    a, b = _floats(a), _floats(b)
                return E.binary(BINARY[name], a, b)
            if name in ("degrees", "radians"):
                k = 180.0 / math.pi if name == "degrees" else math.pi / 180.0
                return E.mul(num(args[0], n), E.const(k))
        elif f.kind == "numpy":
            if name in NUMPY_UNARY and len(args) == 1:
                return E.unary(NUMPY_UNARY[name], num(args[0], n))
            if name in BINARY and len(args) == 2:
                return E.binary(BINARY[name], num(args[0], n), num(args[1], n))
            if name == "where" and len(args) == 3:
                return E.select(E.as_bool(num(args[0], n)), num(args[1], n), num(args[2], n))
            if name == "square":
                x = num(args[0], n)
                return E.mul(x, x)
        elif f.kind == "cuda":
            return self.cuda_call(p, args, kwargs, n)
        what = ".".join((f.kind,) + p)
        raise it.err(f"{what}() is not supported in a lifted kernel", n, construct=what)

    def cuda_call(self, p: tuple, args, kwargs, n):
        it = self.it
        th = it.threads
        name = ".".join(p)
        if p in (("grid",), ("gridsize",)):
            nd = E.try_concrete(it.num(args[0], n)) if args else None
            if nd not in (1, 2, 3):
                raise it.err(f"cuda.{name}() takes 1, 2 or 3", n, construct=f"cuda.{name}")
            if p == ("grid",):
                vals = [th.g(d) for d in range(nd)]
            else:
                vals = [E.const(th.grid[d] * th.block[d] if d < th.ndim else 1) for d in range(nd)]
            return vals[0] if nd == 1 else tuple(vals)
        if p == ("syncthreads",):
            it.st.phase += 1
            return None
        if p[0] in NO_OP:
            return None
        if p[0] in WARP:
            raise it.err(f"cuda.{name} is a warp intrinsic: xbench lifts kernels whose threads share data only "
                         "through memory and barriers", n, construct="warp intrinsic",
                         hint="write the reduction as a loop in the thread (or with shared memory and "
                              "cuda.syncthreads()), or as an xbench operator (xb.sum)")
        if p[0] in ("syncthreads_count", "syncthreads_and", "syncthreads_or"):
            raise it.err(f"cuda.{name} (a block-wide vote) is not supported", n, construct="block vote")
        if p == ("shared", "array") or p == ("local", "array"):
            shape = kwargs.get("shape", args[0] if args else None)
            dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
            shape = _static_shape(shape, it, n)
            if not isinstance(dtype, DTypeCtor):
                raise it.err(f"cuda.{name}: give the dtype as a numba or numpy type", n, construct=f"cuda.{name}")
            if p[0] == "local":
                return it.new_local(shape, dtype.dtype)
            if any(lc.sym is not None for f in it.st.frames for lc in f.loops):
                raise NotSymbolic("it declares shared memory")
            sname = it.assign_target or f"shared{len(it.st.shared)}"
            while sname in it.st.shared:
                sname += "_"
            it.st.shared[sname] = SharedArray(sname, shape, dtype.dtype, n.lineno)
            return SharedRef(sname)
        if p[0] == "atomic":
            return self.atomic(p[1] if len(p) > 1 else "", args, n)
        if p == ("cg", "this_grid"):
            return GridGroup()
        if p == ("fma",):
            a, b, c = (it.num(x, n) for x in args)
            return E.add(E.mul(a, b), c)
        if p == ("selp",):
            return E.select(E.as_bool(it.num(args[0], n)), it.num(args[1], n), it.num(args[2], n))
        if p[0] == "random":
            raise it.err("random numbers in kernels (cuda.random) are not lifted", n, construct="random numbers",
                         hint="draw the numbers on the host and pass them in, or use xb.ops' random operators")
        raise it.err(f"cuda.{name} is not supported in a lifted kernel", n, construct=f"cuda.{name}")

    def atomic(self, op: str, args, n):
        it = self.it
        if op not in ATOMIC_OK:
            raise it.err(f"cuda.atomic.{op} is not supported (atomic add, sub, max and min are)", n,
                         construct=f"cuda.atomic.{op}")
        if len(args) != 3:
            raise it.err(f"cuda.atomic.{op}(array, index, value) takes three arguments", n, construct="atomic")
        ref, idx, val = args
        if isinstance(ref, SharedRef):
            raise it.err("atomics on shared memory are not lifted", n, construct="shared-memory atomic",
                         hint="accumulate in the thread, or atomically into a global output array")
        if not isinstance(ref, ArrayRef):
            raise it.err("the first argument of an atomic must be an array argument of the kernel", n,
                         construct="atomic")
        ix = it.index(ref.prefix + (idx if isinstance(idx, tuple) else (idx,)), n)
        if any(c.data for c in ix):
            raise it.err(f"cuda.atomic.{op} at an address computed from the data (`{ast.unparse(n.args[1])}`): which "
                         "elements are updated depends on the values, which a lifted operator cannot know", n,
                         construct="atomic with a data-dependent address",
                         hint="for a histogram or scatter, write it with xb.scatter_add")
        if ref.name not in it.spec.outs:
            raise it.err(f"the kernel updates {ref.name}, which is not one of its outputs", n,
                         construct="store to an input")
        arr = it.st.arrays[ref.name]
        if len(ix) != len(arr.shape):
            raise it.err(f"{ref.name} has {len(arr.shape)} dims but the atomic gives {len(ix)} indices", n,
                         construct="index")
        it.check_bounds(ref.name, ix, arr.current.sizes, n, load=False)
        raw = it.num(val, n)
        arr.stored.append((raw.dtype, raw.weak))
        value = E.cast(raw, arr.dtype)
        arr.pending.append(Write(ix, value, it.live, n.lineno, ATOMIC_OK[op], it.coords(), it.st.phase))
        arr.written = True
        if it.spec.init_of(ref.name) is None and arr.current is arr.v0:
            arr.read_v0 = True
        return Poison(f"the value cuda.atomic.{op} returns (the element before the update) is not supported",
                      n.lineno)

    def grid_sync(self, n):
        it = self.it
        if any(lc.sym is not None for f in it.st.frames for lc in f.loops):
            raise NotSymbolic("it synchronises the grid")
        for a in it.st.arrays.values():
            commit(a, it.spec.init_of(a.name), it.kernel)
        it.st.phase += 1
        return None

    def device_call(self, f, args, kwargs, n):
        it = self.it
        py = getattr(f, "py_func", f)
        if py in it.calls:
            raise it.err(f"{py.__name__} calls itself (recursion), which a GPU kernel cannot do and xbench does not "
                         "lift", n, construct="recursion", hint="write the recursion as a loop")
        src = source_of(f)
        try:
            bound = inspect.signature(py).bind(*args, **kwargs)
        except TypeError as exc:
            raise it.err(f"calling {py.__name__}: {exc}", n, construct="call") from None
        bound.apply_defaults()
        frame = Frame(src, dict(bound.arguments))
        live0 = it.live
        it.st.frames.append(frame)
        it.calls.append(py)
        line0 = it.line
        try:
            it.block(src.tree.body)
        finally:
            it.calls.pop()
            it.st.frames.pop()
            it.line = line0
        it.live = live0
        result = None
        for cond, v in reversed(frame.returns):
            if v is None:
                continue
            v = it.num(v, n) if not isinstance(v, tuple) else v
            result = v if result is None else (E.select(cond, v, result) if isinstance(v, E.Node) else v)
        return result


def _dtype_of(v) -> str | None:
    try:
        from numba.core import types as nt
    except ImportError:       # pragma: no cover
        nt = None
    if nt is not None and isinstance(v, nt.Type):
        if isinstance(v, (nt.Integer, nt.Float, nt.Boolean)):
            return _norm_dtype(str(v))
        return None
    if isinstance(v, type) and issubclass(v, np.generic):
        return np.dtype(v).name
    if isinstance(v, np.dtype):
        return v.name
    return None


def _norm_dtype(name: str) -> str:
    return {"bool_": "bool", "boolean": "bool", "intp": "int64", "uintp": "uint64"}.get(name, name)


def _product(shape) -> E.Node:
    if len(shape) == 1:
        return shape[0]
    return E.const(int(np.prod([E.concrete(s) for s in shape])))


def _floats(x: E.Node) -> E.Node:
    return x if E.is_float(x.dtype) else E.cast(x, "float64", x.weak)


def _static_shape(shape, it, n) -> tuple[int, ...]:
    vals = shape if isinstance(shape, tuple) else (shape,)
    out = []
    for v in vals:
        k = E.try_concrete(v) if isinstance(v, E.Node) else v if isinstance(v, (int, np.integer)) else None
        if k is None:
            raise it.err("shared and local arrays need shapes known when the kernel is compiled", n,
                         construct="array shape")
        out.append(int(k))
    return tuple(out)

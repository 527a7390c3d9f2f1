"""The values one symbolic CUDA thread computes: index expressions and data expressions in one small language.

Nodes are immutable and hash-consed (structurally equal nodes are the same object), so equality is identity and
substitution memoises cheaply. Integer index arithmetic is kept affine (`Lin`: integer coefficients over atoms:
thread and loop variables, array dims, floor divisions and remainders by constants), which is what inverting a
store (which thread writes which element) and slicing a load need. Every node carries its element type with a
`weak` flag: literals and Python numbers are weak and take the type of the array values they meet, as PyTorch's
scalars do; everything else follows numpy's promotion, as numba's typing does.

Kinds of variables (`Sym.kind`): "thread" (a global thread coordinate, `cuda.grid`), "loop" (the iteration of a
loop interpreted once for all its iterations), "pos" (an element position of an array version), "red" (a
reduction axis), "carry" (a loop-carried local's value at the start of an iteration).
"""
from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable, Iterable

import numpy as np

_TABLE: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_uids = itertools.count(1)

FLOAT_KINDS = "f"
INT_KINDS = "iu"


class Budget:
    """Nodes created while lifting one kernel: unrolled loops that grow expressions past this are refused."""
    limit = 400_000
    count = 0


def kind(dtype: str) -> str:
    return np.dtype(dtype).kind


def is_float(dtype: str) -> bool:
    return kind(dtype) == "f"


def is_int(dtype: str) -> bool:
    return kind(dtype) in INT_KINDS


def is_bool(dtype: str) -> bool:
    return dtype == "bool"


def promote(a: Node, b: Node) -> tuple[str, bool]:
    """numpy's promotion for two strong types; a weak operand takes the other's type unless its kind is higher
    (a Python float with an integer array gives float64, as numba does)."""
    if a.weak and not b.weak:
        return _weak_with(b.dtype, a.dtype), False
    if b.weak and not a.weak:
        return _weak_with(a.dtype, b.dtype), False
    return np.promote_types(a.dtype, b.dtype).name, a.weak and b.weak


_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}


def _weak_with(strong: str, weak: str) -> str:
    if _RANK[kind(weak)] <= _RANK[kind(strong)]:
        return strong
    return "float64" if kind(weak) == "f" else "int64"


class Node:
    __slots__ = ("__weakref__", "data", "dtype", "free", "uid", "weak")

    def _init(self, dtype: str, weak: bool, children: Iterable[Node]) -> None:
        self.uid = next(_uids)
        self.dtype = dtype
        self.weak = weak
        free: frozenset = frozenset()
        data = False
        for c in children:
            free |= c.free
            data = data or c.data
        self.free = free
        self.data = data
        Budget.count += 1
        if Budget.count > Budget.limit:
            raise ExpressionTooLarge()

    def children(self) -> tuple[Node, ...]:
        return ()

    def rebuild(self, kids: list[Node]) -> Node:
        return self

    def __repr__(self) -> str:
        return show(self)

    # operators, so interpreter code reads naturally
    def __add__(self, o): return add(self, wrap(o))
    def __radd__(self, o): return add(wrap(o), self)
    def __sub__(self, o): return sub(self, wrap(o))
    def __rsub__(self, o): return sub(wrap(o), self)
    def __mul__(self, o): return mul(self, wrap(o))
    def __rmul__(self, o): return mul(wrap(o), self)
    def __neg__(self): return neg(self)

    def __bool__(self):
        raise TypeError("a symbolic value has no truth value here")


class ExpressionTooLarge(Exception):
    pass


def _key(cls, *parts):
    return (cls,) + tuple(("#", p.uid) if isinstance(p, Node) else p for p in parts)


def _intern(cls, parts, make: Callable[[], Node]) -> Node:
    k = _key(cls, *parts)
    n = _TABLE.get(k)
    if n is None:
        n = make()
        _TABLE[k] = n
    return n


# ---- leaves --------------------------------------------------------------------------------------------

class Const(Node):
    __slots__ = ("value",)

    def __init__(self, value, dtype: str, weak: bool):
        self.value = value
        self._init(dtype, weak, ())


def const(value, dtype: str | None = None, weak: bool | None = None) -> Node:
    """A number: Python numbers are weak (int64 / float64 / bool), numpy scalars strong in their own type."""
    if isinstance(value, np.generic) and dtype is None:
        dtype, weak = value.dtype.name, (False if weak is None else weak)
        value = value.item()
    if isinstance(value, (bool, np.bool_)):
        dtype = dtype or "bool"
    elif isinstance(value, (int, np.integer)):
        dtype = dtype or "int64"
    elif isinstance(value, (float, np.floating)):
        dtype = dtype or "float64"
    else:
        raise TypeError(f"not a number: {value!r}")
    weak = True if weak is None else weak
    if dtype == "bool":
        value = bool(value)
    elif is_int(dtype):
        value = int(value)
    else:
        value = float(value)
    if isinstance(value, float):
        key = ("nan",) if math.isnan(value) else (value, math.copysign(1.0, value))
    else:
        key = (value,)
    return _intern("Const", key + (dtype, weak), lambda: Const(value, dtype, weak))


TRUE = const(True)
FALSE = const(False)
ZERO = const(0)
ONE = const(1)


def wrap(v) -> Node:
    return v if isinstance(v, Node) else const(v)


class Sym(Node):
    """A variable (not interned: each is its own). `extent` is concrete; `extent_expr` the same number as the
    kernel's own code names it (a dim, a difference of dims), for the operator's source."""
    __slots__ = ("axis", "block", "extent", "extent_expr", "name", "order", "sym_kind")
    _orders = itertools.count()

    def __init__(self, name: str, sym_kind: str, extent: int, extent_expr: Node | None = None,
                 dtype: str = "int64", axis: int = 0, block: int = 1):
        self.name = name
        self.sym_kind = sym_kind
        self.extent = int(extent)
        self.extent_expr = extent_expr
        self.axis = axis
        self.block = block
        self.order = next(Sym._orders)
        self._init(dtype, False, ())
        self.free = frozenset((self,))
        if sym_kind == "carry":
            self.data = True

    def extent_node(self) -> Node:
        return self.extent_expr if self.extent_expr is not None else const(self.extent)


class Dim(Node):
    """Axis `axis` of array parameter `param`: a known size that keeps its name in the operator's source."""
    __slots__ = ("axis", "param", "value")

    def __init__(self, param: str, axis: int, value: int):
        self.param, self.axis, self.value = param, axis, int(value)
        self._init("int64", False, ())


def dim(param: str, axis: int, value: int) -> Node:
    return _intern("Dim", (param, axis, int(value)), lambda: Dim(param, axis, value))


class Param(Node):
    """A scalar argument of the kernel, passed to the operator as a 0-d tensor."""
    __slots__ = ("name",)

    def __init__(self, name: str, dtype: str):
        self.name = name
        self._init(dtype, False, ())
        self.data = True


def param(name: str, dtype: str) -> Node:
    return _intern("Param", (name, dtype), lambda: Param(name, dtype))


class Source:
    """What a load reads: an array argument as passed (version 0), or the contents an earlier phase of the
    kernel left in it (a grid-wide barrier commits the writes before it). `content` is an expression over
    `pos` (one position variable per axis); None for version 0."""

    def __init__(self, name: str, dtype: str, shape: tuple[Node, ...], version: int = 0,
                 content: Node | None = None, pos: tuple[Sym, ...] = (), kind: str = "global"):
        self.name, self.dtype, self.shape, self.version = name, dtype, tuple(shape), version
        self.content, self.pos, self.kind = content, tuple(pos), kind

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(concrete(s) for s in self.shape)

    def __repr__(self) -> str:
        return self.name if self.version == 0 else f"{self.name}@{self.version}"


class Load(Node):
    __slots__ = ("idx", "line", "src")

    def __init__(self, src: Source, idx: tuple[Node, ...], line: int):
        self.src, self.idx, self.line = src, tuple(idx), line
        self._init(src.dtype, False, idx)
        self.data = True

    def children(self):
        return self.idx

    def rebuild(self, kids):
        return load(self.src, tuple(kids), self.line)


def load(src: Source, idx: tuple[Node, ...], line: int = 0) -> Node:
    return _intern("Load", (id(src), src.name, src.version) + tuple(idx), lambda: Load(src, idx, line))


class Unwritten(Node):
    """The contents of memory no thread wrote (an output before the launch, shared memory before its first
    write): an operator must never reach one."""
    __slots__ = ("src", "what")

    def __init__(self, src, what: str, dtype: str):
        self.src, self.what = src, what
        self._init(dtype, False, ())
        self.data = True


def unwritten(src, what: str, dtype: str) -> Node:
    return _intern("Unwritten", (id(src), what, dtype), lambda: Unwritten(src, what, dtype))


# ---- affine integers -------------------------------------------------------------------------------------

class Lin(Node):
    """const + sum(coef * atom): integer affine combinations (atoms sorted by uid)."""
    __slots__ = ("const", "terms")

    def __init__(self, terms: tuple[tuple[Node, int], ...], const_: int, dtype: str):
        self.terms, self.const = terms, const_
        self._init(dtype, False, [t for t, _ in terms])

    def children(self):
        return tuple(t for t, _ in self.terms)

    def rebuild(self, kids):
        out = const(self.const)
        for k, (_, c) in zip(kids, self.terms):
            out = add(out, mul(k, const(c)))
        return out


def _lin_parts(n: Node) -> tuple[dict[Node, int], int] | None:
    if isinstance(n, Lin):
        return dict(n.terms), n.const
    if isinstance(n, Const) and is_int(n.dtype):
        return {}, n.value
    if is_int(n.dtype) and not isinstance(n, Const):
        return {n: 1}, 0
    return None


def _merge_divmod(terms: dict[Node, int], c: int) -> tuple[dict[Node, int], int]:
    """m * (a % k) + m*k * (a // k) == m * a."""
    changed = True
    while changed:
        changed = False
        for t, m in list(terms.items()):
            if isinstance(t, Mod):
                q = floordiv_c(t.a, t.c)
                if q in terms and terms[q] == m * t.c:
                    del terms[t], terms[q]
                    parts = _lin_parts(t.a)
                    for a, ka in parts[0].items():
                        terms[a] = terms.get(a, 0) + m * ka
                    c += m * parts[1]
                    terms = {x: k for x, k in terms.items() if k}
                    changed = True
                    break
    return terms, c


def lin(terms: dict[Node, int], c: int = 0, dtype: str = "int64") -> Node:
    terms = {t: k for t, k in terms.items() if k}
    terms, c = _merge_divmod(terms, int(c))
    if not terms:
        return const(int(c), dtype, weak=True)
    if len(terms) == 1 and c == 0:
        (t, k), = terms.items()
        if k == 1 and t.dtype == dtype:
            return t
    items = tuple(sorted(terms.items(), key=lambda kv: kv[0].uid))
    return _intern("Lin", (tuple((t.uid, k) for t, k in items), int(c), dtype),
                   lambda: Lin(items, int(c), dtype))


# ---- constructors that simplify --------------------------------------------------------------------------

def add(a: Node, b: Node) -> Node:
    dt, weak = promote(a, b)
    if isinstance(a, Const) and isinstance(b, Const):
        return const(_np_op("add", a, b, dt), dt, weak)
    if is_int(dt):
        pa, pb = _lin_parts(a), _lin_parts(b)
        terms = dict(pa[0])
        for t, k in pb[0].items():
            terms[t] = terms.get(t, 0) + k
        return lin(terms, pa[1] + pb[1], dt)
    if _is_zero(b) and a.dtype == dt:
        return a
    if _is_zero(a) and b.dtype == dt:
        return b
    return Bin.make("add", a, b)


def sub(a: Node, b: Node) -> Node:
    dt, _ = promote(a, b)
    if is_int(dt):
        return add(a, mul(b, const(-1)))
    if _is_zero(b) and a.dtype == dt:
        return a
    return Bin.make("sub", a, b)


def mul(a: Node, b: Node) -> Node:
    dt, weak = promote(a, b)
    if isinstance(a, Const) and isinstance(b, Const):
        return const(_np_op("mul", a, b, dt), dt, weak)
    if is_int(dt):
        for x, y in ((a, b), (b, a)):
            if isinstance(y, Const) or isinstance(y, Dim) and not isinstance(x, Const):
                k = int(y.value)          # a variable times a dim: the dim's value (the product is not affine)
                p = _lin_parts(x)
                return lin({t: c * k for t, c in p[0].items()}, p[1] * k, dt)
    if isinstance(b, Const) and b.value == 1 and a.dtype == dt:
        return a
    if isinstance(a, Const) and a.value == 1 and b.dtype == dt:
        return b
    return Bin.make("mul", a, b)


def neg(a: Node) -> Node:
    if is_int(a.dtype):
        return mul(a, const(-1))
    if isinstance(a, Const):
        return const(-a.value, a.dtype, a.weak)
    return Un.make("neg", a)


def _is_zero(n: Node) -> bool:
    return isinstance(n, Const) and n.value == 0 and not (isinstance(n.value, float) and math.copysign(1, n.value) < 0)


def _np_op(op: str, a: Const, b: Const, dt: str):
    x = np.array(a.value, dtype=dt)
    y = np.array(b.value, dtype=dt)
    with np.errstate(all="ignore"):
        return _NP_BIN[op](x, y).item()


_NP_BIN = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "floordiv": np.floor_divide,
    "mod": np.mod, "pow": np.power, "max": np.maximum, "min": np.minimum, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "and": np.logical_and,
    "or": np.logical_or, "xor": np.logical_xor, "bitand": np.bitwise_and, "bitor": np.bitwise_or,
    "bitxor": np.bitwise_xor, "lshift": np.left_shift, "rshift": np.right_shift, "atan2": np.arctan2,
    "hypot": np.hypot, "copysign": np.copysign, "fmod": np.fmod,
}
COMPARE = ("lt", "le", "gt", "ge", "eq", "ne")
LOGICAL = ("and", "or", "xor")


class FloorDiv(Node):
    __slots__ = ("a", "c")

    def __init__(self, a: Node, c: int):
        self.a, self.c = a, c
        self._init(a.dtype, False, (a,))

    def children(self):
        return (self.a,)

    def rebuild(self, kids):
        return floordiv_c(kids[0], self.c)


class Mod(Node):
    __slots__ = ("a", "c")

    def __init__(self, a: Node, c: int):
        self.a, self.c = a, c
        self._init(a.dtype, False, (a,))

    def children(self):
        return (self.a,)

    def rebuild(self, kids):
        return mod_c(kids[0], self.c)


def _split(a: Node, c: int) -> tuple[dict[Node, int], int, dict[Node, int], int] | None:
    """a = c * (q_terms, q_const) + (r_terms, r_const), r holding the terms whose coefficients c does not divide."""
    p = _lin_parts(a)
    if p is None:
        return None
    q, r = {}, {}
    for t, k in p[0].items():
        if k % c == 0:
            q[t] = k // c
        else:
            r[t] = k
    qc, rc = divmod(p[1], c)
    return q, qc, r, rc


def floordiv_c(a: Node, c: int) -> Node:
    c = int(c)
    if c == 1:
        return a
    if isinstance(a, Const):
        return const(a.value // c, a.dtype, a.weak)
    s = _split(a, c)
    if s is not None:
        q, qc, r, rc = s
        rest = lin(r, rc, a.dtype)
        lo, hi = bounds(rest)
        if lo is not None and hi is not None and lo >= 0 and hi < c:
            return lin(q, qc, a.dtype)
        if q or qc:
            lo2, hi2 = (lo // c if lo is not None else None), (hi // c if hi is not None else None)
            inner = lin(q, qc, a.dtype)
            if lo2 is not None and lo2 == hi2:
                return add(inner, const(lo2))
            return add(inner, floordiv_c(rest, c))
    lo, hi = bounds(a)
    if lo is not None and hi is not None and lo // c == hi // c:
        return const(lo // c)
    return _intern("FloorDiv", (a, c), lambda: FloorDiv(a, c))


def mod_c(a: Node, c: int) -> Node:
    c = int(c)
    if c == 1:
        return const(0)
    if isinstance(a, Const):
        return const(a.value % c, a.dtype, a.weak)
    s = _split(a, c)
    if s is not None:
        q, qc, r, rc = s
        rest = lin(r, rc, a.dtype)
        lo, hi = bounds(rest)
        if lo is not None and hi is not None and lo >= 0 and hi < c:
            return rest
        if q or qc:
            return mod_c(rest, c)
    lo, hi = bounds(a)
    if lo is not None and hi is not None and lo >= 0 and hi < c:
        return a
    return _intern("Mod", (a, c), lambda: Mod(a, c))


# ---- general operations ------------------------------------------------------------------------------

class Bin(Node):
    __slots__ = ("a", "b", "op")

    def __init__(self, op: str, a: Node, b: Node, dtype: str, weak: bool):
        self.op, self.a, self.b = op, a, b
        self._init(dtype, weak, (a, b))

    def children(self):
        return (self.a, self.b)

    def rebuild(self, kids):
        return binary(self.op, kids[0], kids[1])

    @staticmethod
    def make(op: str, a: Node, b: Node) -> Node:
        dt, weak = result_type(op, a, b)
        return _intern("Bin", (op, a, b), lambda: Bin(op, a, b, dt, weak))


def result_type(op: str, a: Node, b: Node) -> tuple[str, bool]:
    if op in COMPARE or op in LOGICAL:
        return "bool", a.weak and b.weak
    dt, weak = promote(a, b)
    if op == "div" and not is_float(dt):
        return "float64", weak
    if op in ("atan2", "hypot", "copysign", "fmod") and not is_float(dt):
        return "float64", weak
    return dt, weak


def binary(op: str, a: Node, b: Node) -> Node:
    """Any binary operation, folding constants and keeping integer arithmetic affine."""
    a, b = wrap(a), wrap(b)
    if op == "add":
        return add(a, b)
    if op == "sub":
        return sub(a, b)
    if op == "mul":
        return mul(a, b)
    if op in LOGICAL:
        return logical(op, a, b)
    if op in COMPARE:
        return compare(op, a, b)
    dt, weak = result_type(op, a, b)
    if isinstance(a, Const) and isinstance(b, Const) and op in _NP_BIN:
        if op in ("floordiv", "mod") and is_int(dt) and b.value == 0:
            return Bin.make(op, a, b)
        return const(_np_op(op, a, b, dt if op != "div" else dt), dt, weak)
    if is_int(dt) and op in ("floordiv", "mod"):
        c = _const_int(b)
        if c is not None and c > 0:
            return floordiv_c(a, c) if op == "floordiv" else mod_c(a, c)
    if op in ("max", "min") and a is b:
        return a
    return Bin.make(op, a, b)


def _const_int(n: Node) -> int | None:
    if isinstance(n, Const) and is_int(n.dtype):
        return n.value
    if isinstance(n, Dim):
        return n.value
    if isinstance(n, Lin) and all(isinstance(t, Dim) for t, _ in n.terms):
        return concrete(n)
    return None


def compare(op: str, a: Node, b: Node) -> Node:
    a, b = wrap(a), wrap(b)
    if isinstance(a, Const) and isinstance(b, Const):
        dt, _ = promote(a, b)
        return const(bool(_np_op(op, a, b, dt)))
    if is_int(a.dtype) and is_int(b.dtype) or is_bool(a.dtype) and is_bool(b.dtype) and op in ("eq", "ne"):
        d = decide_cmp(op, a, b)
        if d is not None:
            return const(d)
    return Bin.make(op, a, b)


def logical(op: str, a: Node, b: Node) -> Node:
    a, b = as_bool(a), as_bool(b)
    if op == "and":
        if a is FALSE or b is FALSE:
            return FALSE
        if a is TRUE:
            return b
        if b is TRUE or a is b:
            return a
    elif op == "or":
        if a is TRUE or b is TRUE:
            return TRUE
        if a is FALSE:
            return b
        if b is FALSE or a is b:
            return a
    elif isinstance(a, Const) and isinstance(b, Const):
        return const(a.value != b.value)
    if op == "or":
        ca, cb = conjuncts(a), conjuncts(b)
        common = [x for x in ca if x in cb]
        ra, rb = [x for x in ca if x not in common], [x for x in cb if x not in common]
        if len(ra) == 1 and len(rb) == 1 and lnot(ra[0]) is rb[0]:      # (x & c) | (x & ~c) -> x
            return land(*common)
        if not ra or not rb:                                              # (x & c) | x -> x
            return land(*common)
    if op in ("and", "or") and a.uid > b.uid:
        a, b = b, a
    return Bin.make(op, a, b)


def as_bool(a: Node) -> Node:
    a = wrap(a)
    if a.dtype == "bool":
        return a
    return compare("ne", a, const(0, a.dtype, True) if not is_float(a.dtype) else const(0.0, a.dtype, True))


def land(*xs) -> Node:
    out = TRUE
    for x in xs:
        out = logical("and", out, x)
    return out


def lor(*xs) -> Node:
    out = FALSE
    for x in xs:
        out = logical("or", out, x)
    return out


def lnot(a: Node) -> Node:
    a = as_bool(a)
    if isinstance(a, Const):
        return const(not a.value)
    if isinstance(a, Un) and a.op == "not":
        return a.a
    if isinstance(a, Bin) and a.op in COMPARE:
        return compare({"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}[a.op], a.a, a.b) \
            if not (is_float(a.a.dtype) or is_float(a.b.dtype)) else Un.make("not", a)
    return Un.make("not", a)


class Un(Node):
    __slots__ = ("a", "op")

    def __init__(self, op: str, a: Node, dtype: str, weak: bool):
        self.op, self.a = op, a
        self._init(dtype, weak, (a,))

    def children(self):
        return (self.a,)

    def rebuild(self, kids):
        return unary(self.op, kids[0])

    @staticmethod
    def make(op: str, a: Node) -> Node:
        dt, weak = unary_type(op, a)
        return _intern("Un", (op, a), lambda: Un(op, a, dt, weak))


# unary functions: name -> result kind ("same": keeps the type; "float": floats keep theirs, ints give float64;
# "bool"; "int64")
UNARY = {
    "neg": "same", "abs": "same", "not": "bool", "invert": "same", "exp": "float", "exp2": "float",
    "expm1": "float", "log": "float", "log2": "float", "log10": "float", "log1p": "float", "sqrt": "float",
    "rsqrt": "float", "sin": "float", "cos": "float", "tan": "float", "asin": "float", "acos": "float",
    "atan": "float", "sinh": "float", "cosh": "float", "tanh": "float", "asinh": "float", "acosh": "float",
    "atanh": "float", "erf": "float", "erfc": "float", "floor": "float", "ceil": "float", "trunc": "float",
    "round": "float", "isnan": "bool", "isinf": "bool", "isfinite": "bool", "sign": "same",
}


def unary_type(op: str, a: Node) -> tuple[str, bool]:
    r = UNARY[op]
    if r == "same":
        return a.dtype, a.weak
    if r == "bool":
        return "bool", a.weak
    return (a.dtype if is_float(a.dtype) else "float64"), a.weak


def unary(op: str, a: Node) -> Node:
    a = wrap(a)
    if op == "neg":
        return neg(a)
    if op == "not":
        return lnot(a)
    if isinstance(a, Const):
        dt, weak = unary_type(op, a)
        fn = _NP_UN.get(op)
        if fn is not None:
            with np.errstate(all="ignore"):
                return const(fn(np.array(a.value, dtype=a.dtype if is_float(a.dtype) else dt)).item(), dt, weak)
    if op in ("floor", "ceil", "trunc", "round") and is_int(a.dtype):
        return cast(a, "float64")
    return Un.make(op, a)


def _erf(x):
    return np.vectorize(math.erf)(x)


def _erfc(x):
    return np.vectorize(math.erfc)(x)


_NP_UN = {
    "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "round": np.round, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
    "sign": np.sign, "erf": _erf, "erfc": _erfc,
}


class Select(Node):
    __slots__ = ("a", "b", "c")

    def __init__(self, c: Node, a: Node, b: Node, dtype: str, weak: bool):
        self.c, self.a, self.b = c, a, b
        self._init(dtype, weak, (c, a, b))

    def children(self):
        return (self.c, self.a, self.b)

    def rebuild(self, kids):
        return select(kids[0], kids[1], kids[2])


def select(c: Node, a: Node, b: Node) -> Node:
    c, a, b = as_bool(wrap(c)), wrap(a), wrap(b)
    if c is TRUE:
        return a
    if c is FALSE:
        return b
    if a is b:
        return a
    if isinstance(c, Un) and c.op == "not":
        c, a, b = c.a, b, a
    dt, weak = promote(a, b)
    if a.dtype != dt and not isinstance(a, Unwritten):
        a = cast(a, dt, weak)
    if b.dtype != dt and not isinstance(b, Unwritten):
        b = cast(b, dt, weak)
    if isinstance(a, Select) and a.c is c:        # select(c, select(c, x, y), z) -> select(c, x, z)
        a = a.a
    if isinstance(b, Select) and b.c is c:
        b = b.b
    if a is b:
        return a
    if dt == "bool" and isinstance(a, Const) and isinstance(b, Const):
        return c if a.value else lnot(c)
    return _intern("Select", (c, a, b), lambda: Select(c, a, b, dt, weak))


class Cast(Node):
    __slots__ = ("a",)

    def __init__(self, a: Node, dtype: str, weak: bool):
        self.a = a
        self._init(dtype, weak, (a,))

    def children(self):
        return (self.a,)

    def rebuild(self, kids):
        return cast(kids[0], self.dtype, self.weak)


def cast(a: Node, dtype: str, weak: bool = False) -> Node:
    a = wrap(a)
    if a.dtype == dtype:
        if a.weak and not weak:
            if isinstance(a, Const):
                return const(a.value, dtype, False)
            return _intern("Cast", (a, dtype, weak), lambda: Cast(a, dtype, weak))
        return a
    if isinstance(a, Const):
        with np.errstate(all="ignore"):
            if is_int(dtype) and is_float(a.dtype):
                v = a.value
                if not math.isfinite(v):
                    return _intern("Cast", (a, dtype, weak), lambda: Cast(a, dtype, weak))
                return const(int(v), dtype, weak)
            return const(np.array(a.value).astype(dtype).item(), dtype, weak)
    if isinstance(a, Cast) and _widens(a.a.dtype, a.dtype) and _widens(a.dtype, dtype):
        a = a.a
        if a.dtype == dtype:
            return a
    if isinstance(a, Unwritten):
        return a
    return _intern("Cast", (a, dtype, weak), lambda: Cast(a, dtype, weak))


def _widens(a: str, b: str) -> bool:
    """Every value of a is exactly a value of b."""
    return np.can_cast(a, b, casting="safe") and (kind(a) == kind(b) or kind(b) == "f" and kind(a) != "f"
                                                  and np.dtype(b).itemsize > np.dtype(a).itemsize)


class Reduce(Node):
    """`kind` (sum, prod, max, min) of `body` over `var` in [0, var.extent)."""
    __slots__ = ("body", "rkind", "var")

    def __init__(self, rkind: str, var: Sym, body: Node):
        self.rkind, self.var, self.body = rkind, var, body
        self._init(body.dtype, body.weak, (body,))
        self.free = body.free - {var}

    def children(self):
        return (self.body,)

    def rebuild(self, kids):
        return reduce_(self.rkind, self.var, kids[0])


def reduce_(rkind: str, var: Sym, body: Node) -> Node:
    if var.extent <= 0:
        return identity(rkind, body.dtype)
    if var not in body.free:
        if rkind in ("max", "min"):
            return body
        if rkind == "sum" and not isinstance(body, Unwritten) and body.dtype != "bool":
            return mul(body, const(var.extent, body.dtype, weak=True))
    if var.extent == 1:
        return subst(body, {var: ZERO})
    if isinstance(body, Const) and rkind == "sum" and body.value == 0:
        return body
    return _intern("Reduce", (rkind, var, body), lambda: Reduce(rkind, var, body))


def identity(rkind: str, dtype: str) -> Node:
    if rkind == "sum":
        return const(0, dtype, False)
    if rkind == "prod":
        return const(1, dtype, False)
    if is_float(dtype):
        return const(-math.inf if rkind == "max" else math.inf, dtype, False)
    info = np.iinfo(dtype) if is_int(dtype) else None
    if info is None:
        return const(rkind == "min", dtype, False)
    return const(info.min if rkind == "max" else info.max, dtype, False)


# traversals and interval reasoning live in traverse.py and ranges.py; their names are this module's vocabulary
from .ranges import (  # noqa: E402
    NotEvaluable,
    bounds,
    concrete,
    conjuncts,
    decide,
    decide_cmp,
    disjuncts,
    evaluate,
    refine,
    try_concrete,
)
from .traverse import contains, show, subst, walk  # noqa: E402

__all__ = ["NotEvaluable", "bounds", "contains", "show", "subst", "walk", "concrete", "conjuncts", "decide", "decide_cmp", "disjuncts", "evaluate",
           "refine", "try_concrete"]

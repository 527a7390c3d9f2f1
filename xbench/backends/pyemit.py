"""Shared by the backends that generate Python source (cpu with numba, cuda with numba-cuda): turning loop-IR
scalar expressions into Python expressions, with typed constants, common-subexpression temporaries and
loop-invariant hoisting. Each backend supplies its own table of function spellings."""
from __future__ import annotations

import itertools
import re
from collections.abc import Callable

from ..dtypes import is_float
from ..errors import BackendError
from ..ir.expr import INDEX, Call, Cast, Const, Expr, Idx, Load, Local, Select

NP_TYPES = {"float32": "np.float32", "float64": "np.float64", "int8": "np.int8", "uint8": "np.uint8",
            "int16": "np.int16", "int32": "np.int32", "int64": "np.int64", "bool": "np.bool_"}

NARROW_INTS = ("int8", "uint8", "int16", "int32")
OVERFLOWING = ("add", "sub", "mul", "neg", "abs", "pow", "shl", "floordiv")   # results that can leave the type

INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "floordiv": "//", "mod": "%", "pow": "**",
         "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "bitwise_and": "&",
         "bitwise_or": "|", "bitwise_xor": "^", "logical_and": "&", "logical_or": "|", "logical_xor": "^",
         "shl": "<<", "shr": ">>"}


class Source:
    """Lines of Python with indentation."""

    def __init__(self):
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.depth + line) if line else "")

    def indent(self):
        src = self

        class _Ctx:
            def __enter__(self):
                src.depth += 1

            def __exit__(self, *a):
                src.depth -= 1
        return _Ctx()

    def text(self) -> str:
        return "\n".join(self.lines)


class Indent:
    """`with Indent(src, n):` writes the block `n` levels deeper."""

    def __init__(self, src: Source, n: int):
        self.src, self.n = src, n

    def __enter__(self):
        self.src.depth += self.n

    def __exit__(self, *a):
        self.src.depth -= self.n


def subscript(buf: str, index: list[str]) -> str:
    """`buf[i, j]`, or `buf[()]` for a 0-d array."""
    return f"{buf}[{', '.join(index) if index else '()'}]"


def _sanitize(value) -> str:
    s = repr(value).replace("-", "m").replace(".", "p").replace("+", "")
    return re.sub(r"[^0-9A-Za-z_]", "_", s)


class Emitter:
    """Python expressions for one generated module.

    `functions(name, dtype, args) -> str` spells a scalar function call for this backend (or None to use
    the default infix/np spelling)."""

    def __init__(self, functions: Callable[[str, str, list[str], list[str]], str | None], *,
                 compute: Callable[[str], str] = lambda d: d,
                 load: Callable[[str, str, str], str] | None = None,
                 cast: Callable[[str, str, str], str | None] | None = None,
                 wrapping: Callable[[str, list[str]], str] | None = None,
                 select: Callable[[str, str, str], str] | None = None,
                 in_bounds: Callable[[Load], bool] | None = None):
        """`compute(dtype)`: the type arithmetic on `dtype` values runs in (16-bit floats may widen);
        `load(buf, dtype, text)`: wraps the read of a buffer element; `cast(src, dst, text)`: a backend's own
        spelling of a conversion, or None for the default; `wrapping(fn, args)`: the spelling of an int64
        add, sub or mul of data (it reads a buffer or a local, unlike index arithmetic) that must wrap;
        `select(cond, a, b)`: a choice between two values both evaluated first, for the selects whose branches
        may be (`speculable`, with `in_bounds(load)` saying which reads at computed indices stay inside their
        buffer); without it every select evaluates only its chosen branch."""
        self.functions = functions
        self.compute = compute
        self.load = load
        self.cast = cast
        self.wrapping = wrapping
        self.select = select
        self.in_bounds = in_bounds
        self.constants: dict[tuple, str] = {}
        self._tmp = itertools.count()

    def const(self, value, dtype: str) -> str:
        dtype = self.compute(dtype)
        if dtype == "bool":
            return "True" if value else "False"
        if dtype == INDEX and isinstance(value, int):
            # Python reads -9223372036854775808 as -(2**63), an unsigned 64-bit literal in numba
            return str(value) if value > -2 ** 63 else "(-9223372036854775807 - 1)"
        key = (dtype, repr(value))
        if key not in self.constants:
            self.constants[key] = f"_{dtype[0]}{dtype[-2:] if dtype[-2:].isdigit() else ''}_{_sanitize(value)}"
        return self.constants[key]

    def constant_lines(self) -> list[str]:
        out = []
        for (dtype, value), name in self.constants.items():
            v = value if value not in ("inf", "-inf", "nan") else f"float({value!r})"
            out.append(f"{name} = {NP_TYPES[dtype]}({v})")
        return out

    def tmp(self, prefix: str = "t") -> str:
        return f"{prefix}{next(self._tmp)}"

    # ---- expressions ---------------------------------------------------------------------------------
    def expr(self, e: Expr, names: dict[Expr, str] | None = None) -> str:
        names = names or {}
        if e in names:
            return names[e]
        if isinstance(e, Const):
            v = e.value
            if is_float(e.dtype):
                v = float(v)
                if v != v:
                    return self.const("nan", e.dtype)
                if v in (float("inf"), float("-inf")):
                    return self.const("inf" if v > 0 else "-inf", e.dtype)
            return self.const(v, e.dtype)
        if isinstance(e, (Idx, Local)):
            return e.name
        if isinstance(e, Load):
            text = subscript(e.buf, [self.expr(i, names) for i in e.index])
            return self.load(e.buf, e.dtype, text) if self.load else text
        if isinstance(e, Select):
            a, cond, b = self.expr(e.a, names), self.expr(e.cond, names), self.expr(e.b, names)
            if self.select is not None and speculable(e, self.in_bounds):
                return self.select(cond, a, b)
            return f"({a} if {cond} else {b})"
        if isinstance(e, Cast):
            x = self.expr(e.x, names)
            if self.cast is not None:
                custom = self.cast(e.x.dtype, e.dtype, x)
                if custom is not None:
                    return custom
            src, dst = self.compute(e.x.dtype), self.compute(e.dtype)
            if e.dtype == "bool":
                return f"({x} != 0)"
            if src == "bool" or dst != src:
                return f"{NP_TYPES[dst]}({x})"
            return x
        if isinstance(e, Call):
            args = [self.expr(a, names) for a in e.args]
            arg_types = [a.dtype for a in e.args]
            if self.wrapping is not None and e.dtype == "int64" and e.fn in ("add", "sub", "mul") \
                    and all(t == "int64" for t in arg_types) and _reads_data(e):
                return self.wrapping(e.fn, args)
            if e.dtype in NARROW_INTS and e.fn in OVERFLOWING:
                # numba computes narrow integers in 64 bits: wrap each result to its type, as PyTorch
                inner = Call(e.fn, e.args, "int64")
                return f"{NP_TYPES[e.dtype]}({self.expr(inner, names)})"
            custom = self.functions(e.fn, e.dtype, args, arg_types)
            if custom is not None:
                return custom
            if len(args) == 2 and e.fn in INFIX:
                return f"({args[0]} {INFIX[e.fn]} {args[1]})"
            if e.fn == "neg":
                return f"(-{args[0]})"
            if e.fn in ("minimum", "maximum") and e.dtype == INDEX:
                return f"{e.fn[:3]}({args[0]}, {args[1]})"
            raise BackendError(f"this backend has no spelling for {e.fn} on {e.dtype}",
                               hint="use the reference or cpu backend for this operator")
        raise TypeError(f"cannot emit {type(e).__name__}")


def speculable(e: Select, in_bounds: Callable[[Load], bool] | None = None) -> bool:
    """Whether both branches of `e` may be evaluated whatever its condition: every buffer read in them is at
    plain axis variables or constants, or at indices `in_bounds` knows stay inside the buffer (a stride-2
    gradient's `g[y // 2] if y % 2 == 0 else 0`). A guarded read (a padded window's
    `x[y + r - 1] if 0 <= y + r - 1 < H else 0`, a gather at a loaded index) is evaluated only where chosen."""
    def safe(n: Load) -> bool:
        return all(isinstance(i, (Idx, Const)) for i in n.index) or (in_bounds is not None and in_bounds(n))
    return all(safe(n) for branch in (e.a, e.b) for n in branch.walk() if isinstance(n, Load))


def index_range(e: Expr, extents: dict[str, int]) -> tuple[int, int] | None:
    """The least and the greatest value of an index expression over the axes' `extents`; None where it reads
    data, names another variable or uses an operation bounded by nothing here."""
    if isinstance(e, Const) and e.dtype == INDEX:
        return int(e.value), int(e.value)
    if isinstance(e, Idx):
        n = extents.get(e.name, 0)
        return (0, n - 1) if n > 0 else None
    if not (isinstance(e, Call) and e.dtype == INDEX and len(e.args) == 2):
        return None
    a, b = (index_range(x, extents) for x in e.args)
    if a is None or b is None:
        return None
    if e.fn == "add":
        return a[0] + b[0], a[1] + b[1]
    if e.fn == "sub":
        return a[0] - b[1], a[1] - b[0]
    if e.fn == "mul":
        ends = [x * y for x in a for y in b]
        return min(ends), max(ends)
    if e.fn in ("floordiv", "mod") and b[0] == b[1] > 0:
        c = b[0]
        return (a[0] // c, a[1] // c) if e.fn == "floordiv" else (0, c - 1)
    if e.fn in ("minimum", "maximum"):
        f = min if e.fn == "minimum" else max
        return f(a[0], b[0]), f(a[1], b[1])
    return None


def _reads_data(e: Expr) -> bool:
    return any(isinstance(n, (Load, Local)) for n in e.walk())


def replace_top_down(e: Expr, table: dict[Expr, Expr]) -> Expr:
    if e in table:
        return table[e]
    kids = e.children()
    if not kids:
        return e
    new = tuple(replace_top_down(c, table) for c in kids)
    return e if new == kids else e._rebuild(new)


def _nontrivial(e: Expr) -> bool:
    return isinstance(e, (Call, Cast, Load, Select)) and not (
        isinstance(e, Call) and e.dtype == INDEX and all(isinstance(a, (Idx, Const)) for a in e.args))


def _visit_eager(e: Expr, f: Callable[[Expr], bool]) -> None:
    """Visit nodes that are always evaluated (not inside a Select's branches); `f` returns False to stop."""
    if not f(e):
        return
    if isinstance(e, Select):
        _visit_eager(e.cond, f)
        return
    for c in e.children():
        _visit_eager(c, f)


def invariants(exprs: list[Expr], varying: set[str]) -> list[Expr]:
    """Maximal non-trivial subexpressions that use none of the `varying` loop variables or locals."""
    found: dict[Expr, None] = {}

    def visit(n: Expr) -> bool:
        if _nontrivial(n) and not ({i.name for i in n.walk() if isinstance(i, (Idx, Local))} & varying):
            found.setdefault(n)
            return False
        return True

    for e in exprs:
        _visit_eager(e, visit)
    return list(found)


def common(exprs: list[Expr]) -> list[Expr]:
    """Non-trivial subexpressions evaluated more than once, innermost first."""
    counts: dict[Expr, int] = {}

    def visit(n: Expr) -> bool:
        if _nontrivial(n):
            counts[n] = counts.get(n, 0) + 1
            return counts[n] == 1
        return True

    for e in exprs:
        _visit_eager(e, visit)
    order: list[Expr] = []

    def post(n: Expr):
        for c in (n.children() if not isinstance(n, Select) else (n.cond,)):
            post(c)
        if counts.get(n, 0) > 1 and n not in order:
            order.append(n)

    for e in exprs:
        post(e)
    return order

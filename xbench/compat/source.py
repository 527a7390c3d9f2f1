"""The Python source of a kernel or device function: its syntax tree, lines and the names it sees."""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import textwrap

from ..errors import Location
from .errors import LiftError


class KernelSource:
    """`fn` (a `numba.cuda.jit` kernel or device function, a `numba.jit` function or plain Python) parsed."""

    def __init__(self, fn):
        self.obj = fn
        py = getattr(fn, "py_func", fn)
        if not inspect.isfunction(py):
            raise LiftError(f"{fn!r} is not a Python function or a numba kernel", construct="kernel",
                            hint="pass the @cuda.jit kernel itself (xb.compat.from_cuda(saxpy, out='out'))")
        self.py = py
        self.name = py.__name__
        code = py.__code__
        self.filename = code.co_filename
        try:
            lines, first = inspect.getsourcelines(py)
        except (OSError, TypeError) as exc:
            raise LiftError(f"the source of {self.name} is not available ({exc})", construct="kernel source",
                            hint="define the kernel in a file or a notebook cell (not with exec or -c)") from None
        self.first = first
        self.text_lines = lines
        tree = ast.parse(textwrap.dedent("".join(lines)))
        fdefs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if not fdefs:
            raise LiftError(f"no function definition found in the source of {self.name}", construct="kernel source")
        self.tree = fdefs[0]
        self.params = [a.arg for a in self.tree.args.args]
        if self.tree.args.vararg or self.tree.args.kwarg or self.tree.args.kwonlyargs:
            raise LiftError(f"{self.name} takes *args, **kwargs or keyword-only arguments", self.tree.lineno, self,
                            construct="variadic parameters", hint="list the kernel's parameters by name")
        self.closure = dict(zip(code.co_freevars, (c.cell_contents for c in (py.__closure__ or ())))) \
            if py.__closure__ else {}

    def lineno(self, line: int) -> int:
        return self.first + line - 1

    def location(self, line: int) -> Location:
        return Location(self.filename, self.lineno(line), self.name)

    def code(self, line: int) -> str:
        i = line - 1
        return self.text_lines[i].strip() if 0 <= i < len(self.text_lines) else \
            linecache.getline(self.filename, self.lineno(line)).strip()

    def resolve(self, name: str):
        if name in self.closure:
            return self.closure[name]
        g = self.py.__globals__
        if name in g:
            return g[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise KeyError(name)

    def eval_static(self, node: ast.AST, line: int):
        """A compile-time constant expression (a shared array's shape, from the kernel's globals)."""
        ns = dict(self.py.__globals__)
        ns.update(self.closure)
        try:
            return eval(compile(ast.Expression(node), self.filename, "eval"), ns)
        except Exception as exc:
            raise LiftError(f"cannot evaluate {ast.unparse(node)!r} at compile time ({type(exc).__name__}: {exc})",
                            line, self, construct="compile-time constant",
                            hint="give shared and local arrays shapes made of constants") from None


@functools.lru_cache(maxsize=256)
def _cached(fn) -> KernelSource:
    return KernelSource(fn)


def source_of(fn) -> KernelSource:
    try:
        return _cached(fn)
    except TypeError:            # unhashable callables
        return KernelSource(fn)


def code_lines(text: str) -> int:
    """Lines of code in `text`: not blank, not only a comment, not part of a docstring."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        tree = None
    doc: set[int] = set()
    if tree is not None:
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                    isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                doc.update(range(body[0].lineno, body[0].end_lineno + 1))
    n = 0
    for i, line in enumerate(textwrap.dedent(text).splitlines(), 1):
        s = line.strip()
        if s and not s.startswith("#") and i not in doc:
            n += 1
    return n

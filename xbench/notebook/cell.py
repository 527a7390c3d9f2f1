"""Running the body of a `%%tensorop` cell: compile it as the cell's own file (line numbers are the cell's, with
the magic line as line 1), execute it in the notebook's namespace with `xb` and `Tensor` at hand and annotations
left unevaluated (so dims need no declaration), and turn each function it defines into an `Operator`.

User errors become a `CellError`: one short message naming the cell line, with the original traceback kept for
the collapsed section (`%xbench --traceback` prints it too).
"""
from __future__ import annotations
import __future__

import ast
import inspect
import traceback
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from ..errors import XbenchError
from ..lang.operator import Operator

_FLAGS = __future__.annotations.compiler_flag


class CellError(Exception):
    """A user error in a `%%tensorop` cell. IPython shows `short` instead of a traceback; `full` keeps the
    traceback of the original error."""

    def __init__(self, short: str, full: str, line: int | None = None, original: BaseException | None = None):
        super().__init__(short)
        self.short = short
        self.full = full
        self.line = line
        self.original = original

    def _render_traceback_(self) -> list[str]:
        return self.short.splitlines()


def close_match(exc: BaseException) -> str | None:
    """'did you mean xb.tanh?' for an attribute or name that does not exist, from the names that do."""
    import builtins
    import difflib
    name = getattr(exc, "name", None)
    if not isinstance(name, str):
        return None
    if isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        if obj is None:
            return None
        names = [n for n in dir(obj) if not n.startswith("_")]
        owner = "xb." if getattr(obj, "__name__", "") == "xbench" else \
            (f"{obj.__name__}." if hasattr(obj, "__name__") and hasattr(obj, "__file__") else ".")
    elif isinstance(exc, NameError):
        frame = exc.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        scope = dict(vars(builtins))
        if frame is not None:
            scope.update(frame.tb_frame.f_globals)
            scope.update(frame.tb_frame.f_locals)
        names, owner = [n for n in scope if not n.startswith("_")], ""
    else:
        return None
    found = difflib.get_close_matches(name, names, n=3, cutoff=0.75)
    if not found:
        return None
    best = difflib.SequenceMatcher(None, name, found[0]).ratio()
    found = [n for n in found if difflib.SequenceMatcher(None, name, n).ratio() >= best - 0.02]
    return "did you mean " + " or ".join(f"{owner}{n}" if owner != "." else n for n in found) + "?"


@dataclass
class CellSource:
    """The cell body as a file of its own: `filename` is registered with linecache, so tracebacks and the
    lines named by xbench errors show the cell's text."""

    text: str
    filename: str

    @classmethod
    def from_cell(cls, body: str, shell: Any = None, number: int = 0) -> CellSource:
        text = "\n" + body          # line 1 is the %%tensorop line, so code keeps its cell line numbers
        if shell is not None and hasattr(shell, "compile"):
            filename = shell.compile.cache(text, number)
        else:
            import linecache
            filename = f"<tensorop-cell-{abs(hash(text)):x}>"
            linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        return cls(text, filename)

    def line(self, lineno: int) -> str:
        lines = self.text.splitlines()
        return lines[lineno - 1] if 0 < lineno <= len(lines) else ""

    # ---- errors ------------------------------------------------------------------------------------------------
    def lineno_of(self, exc: BaseException) -> int | None:
        """The cell line an error points at: its xbench location, a syntax error's line, or the innermost frame
        of its traceback that ran cell code."""
        loc = getattr(exc, "loc", None)
        if loc is not None and getattr(loc, "filename", None) == self.filename:
            return loc.lineno
        if isinstance(exc, SyntaxError) and exc.filename == self.filename:
            return exc.lineno
        found = None
        tb: TracebackType | None = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == self.filename:
                found = tb.tb_lineno
            tb = tb.tb_next
        return found

    def error(self, exc: BaseException, what: str | None = None) -> CellError:
        """A CellError for `exc`: `xbench: cell line N: <message>`, the line itself, and the hint (for a name
        that does not exist, the close matches: `xb.tanhh` -> `xb.tanh`)."""
        lineno = self.lineno_of(exc)
        if isinstance(exc, XbenchError):
            message, hint = exc.message, exc.hint
        elif isinstance(exc, SyntaxError):
            message, hint = f"SyntaxError: {exc.msg}", None
        else:
            message, hint = f"{type(exc).__name__}: {exc}", close_match(exc)
        message = message.removeprefix("xbench: ")
        where = f"cell line {lineno}" if lineno else "in this cell"
        out = f"xbench: {where}: " + (f"{what}: " if what else "") + message
        if lineno:
            out += f"\n  {lineno:>4} | {self.line(lineno).rstrip()}"
            if isinstance(exc, SyntaxError) and exc.offset and exc.lineno == lineno:
                out += "\n       | " + " " * (exc.offset - 1) + "^"
        if hint:
            out += f"\n  hint: {hint}"
        return CellError(out, self.traceback(exc), lineno, exc)

    def traceback(self, exc: BaseException) -> str:
        """The traceback of `exc` from the first frame of the cell's own code on (the magic's and IPython's
        frames above it say nothing about the mistake); all of it when no frame ran cell code."""
        tb: TracebackType | None = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != self.filename:
            tb = tb.tb_next
        return "".join(traceback.format_exception(type(exc), exc, tb if tb is not None else exc.__traceback__))

    # ---- running -----------------------------------------------------------------------------------------------
    def defined_functions(self) -> list[str]:
        """Names of the functions the cell defines at its top level, in order."""
        try:
            tree = ast.parse(self.text, self.filename)
        except SyntaxError as exc:
            exc.filename = self.filename
            raise self.error(exc) from None
        return [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]

    def run(self, namespace: dict[str, Any]) -> list[Operator]:
        """Execute the cell in `namespace` and make every function it defined an Operator (bound in the namespace
        under the same name). Raises CellError for a mistake in the cell."""
        import xbench
        from xbench import Tensor

        namespace.setdefault("xb", xbench)
        namespace.setdefault("Tensor", Tensor)
        names = self.defined_functions()
        if not names:
            raise CellError("xbench: this %%tensorop cell defines no function; write an operator such as\n"
                            "  def scale(x: Tensor[N]) -> Tensor[N]:\n      return 2 * x", "")
        try:
            code = compile(self.text, self.filename, "exec", flags=_FLAGS, dont_inherit=True)
        except SyntaxError as exc:
            raise self.error(exc) from None
        try:
            exec(code, namespace)
        except Exception as exc:
            raise self.error(exc) from None
        ops = []
        for name in names:
            obj = namespace.get(name)
            if isinstance(obj, Operator):
                ops.append(obj)
            elif inspect.isfunction(obj) and obj.__code__.co_filename == self.filename:
                try:
                    op = Operator(obj)
                except Exception as exc:
                    raise self.error(exc, f"operator {name}") from None
                namespace[name] = op
                ops.append(op)
        return ops

"""A generated operator: inputs, captured constants and straight-line statements of the xbench language.

A `Program` renders to the Python source a user would write (`source()`), becomes a real `Operator` by
executing that source (`operator()`), and can be edited by the shrinker (outputs dropped, statements replaced
by inputs, dead statements removed) while staying well-typed.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np

from .values import Recipe, literal

OP_NAME = "fuzz_op"


@dataclass(frozen=True)
class Input:
    name: str
    shape: tuple[int, ...]
    dtype: str
    recipe: Recipe                      # how its values are made (seeded numpy code, or literal values)


@dataclass(frozen=True)
class Stmt:
    name: str
    text: str                           # the right-hand side, in the language
    uses: tuple[str, ...]               # the values and constants it reads
    shape: tuple[int, ...] = ()
    dtype: str = ""


@dataclass
class Program:
    inputs: list[Input]
    consts: dict[str, Recipe]
    stmts: list[Stmt]
    outputs: list[str]
    seed: int = 0
    notes: list[str] = field(default_factory=list)

    # ---- values -------------------------------------------------------------------------------------
    def arrays(self) -> list[np.ndarray]:
        return [i.recipe.make() for i in self.inputs]

    def const_values(self) -> dict[str, np.ndarray]:
        return {n: r.make() for n, r in self.consts.items()}

    def types(self) -> dict[str, tuple[tuple[int, ...], str]]:
        out = {i.name: (i.shape, i.dtype) for i in self.inputs}
        out.update({s.name: (s.shape, s.dtype) for s in self.stmts})
        return out

    def size(self) -> tuple[int, int, int]:
        """What the shrinker makes smaller: statements and values first, then elements, then the values'
        complexity (special values, nonzero literal elements)."""
        parts = 2 * len(self.stmts) + len(self.outputs) + len(self.consts) + len(self.inputs)
        elements = sum(i.recipe.size for i in self.inputs)
        detail = sum(len(i.recipe.specials) + (int(np.count_nonzero(i.recipe.data)) if i.recipe.kind == "literal"
                                               else 0) for i in self.inputs)
        return parts, elements, detail

    # ---- source -------------------------------------------------------------------------------------
    def body(self) -> str:
        lines = [f"    {s.name} = {s.text}" for s in self.stmts]
        lines.append(f"    return {', '.join(self.outputs)}")
        return "\n".join(lines)

    def signature(self) -> str:
        return ", ".join(f"{i.name}: Tensor" for i in self.inputs)

    def source(self, consts: str = "names") -> str:
        """The operator as a module: imports, constants (as code when `consts="code"`), the function."""
        head = ["import numpy as np", "", "import xbench as xb", "from xbench import Tensor", ""]
        if consts == "code":
            for n, r in self.consts.items():
                head.append(f"{n} = {r.code()}")
            if self.consts:
                head.append("")
        head += ["", "@xb.tensor_op", f"def {OP_NAME}({self.signature()}):", self.body(), ""]
        return "\n".join(head)

    def operator(self):
        """A fresh `Operator` from the source (so tracing sees exactly the text a user would)."""
        ns: dict = {}
        code = compile(self.source(), f"<{OP_NAME}>", "exec")
        ns.update(self.const_values())
        exec(code, ns)
        return ns[OP_NAME]

    # ---- editing (for the shrinker) -----------------------------------------------------------------
    def copy(self, **kw) -> Program:
        p = Program(list(self.inputs), dict(self.consts), list(self.stmts), list(self.outputs), self.seed,
                    list(self.notes))
        for k, v in kw.items():
            setattr(p, k, v)
        return p

    def dead_code(self) -> Program:
        live = set(self.outputs)
        keep = []
        for s in reversed(self.stmts):
            if s.name in live:
                keep.append(s)
                live.update(s.uses)
        keep.reverse()
        return self.copy(stmts=keep, inputs=[i for i in self.inputs if i.name in live],
                         consts={n: r for n, r in self.consts.items() if n in live})

    def as_input(self, name: str, values: np.ndarray) -> Program:
        """Replace statement `name` by a new input holding `values` (what it evaluated to)."""
        s = next(s for s in self.stmts if s.name == name)
        new = Input(f"x_{name}", s.shape, s.dtype, literal(values))
        stmts = []
        for t in self.stmts:
            if t.name == name:
                continue
            stmts.append(rename(t, name, new.name))
        outs = [new.name if o == name else o for o in self.outputs]
        return self.copy(inputs=self.inputs + [new], stmts=stmts, outputs=outs).dead_code()

    def bypass(self, name: str, operand: str) -> Program:
        """Replace the uses of statement `name` by `operand` (of the same type)."""
        stmts = [rename(t, name, operand) for t in self.stmts if t.name != name]
        outs = [operand if o == name else o for o in self.outputs]
        return self.copy(stmts=stmts, outputs=_dedup(outs)).dead_code()

    def with_input(self, name: str, **kw) -> Program:
        return self.copy(inputs=[replace(i, **kw) if i.name == name else i for i in self.inputs])

    def with_const(self, name: str, recipe: Recipe) -> Program:
        consts = dict(self.consts)
        consts[name] = recipe
        return self.copy(consts=consts)


def rename(s: Stmt, old: str, new: str) -> Stmt:
    if old not in s.uses:
        return s
    text = re.sub(rf"\b{re.escape(old)}\b", new, s.text)
    return replace(s, text=text, uses=tuple(dict.fromkeys(new if u == old else u for u in s.uses)))


def _dedup(xs: list[str]) -> list[str]:
    return list(dict.fromkeys(xs))

"""A minimal failing operator as a pytest file: the operator as a user would write it, its inputs as numpy
code, and a test asserting that the backend that failed gives the reference's values."""
from __future__ import annotations

import os
import textwrap

from ..cache import atomic_write
from .program import OP_NAME, Program
from .values import HELPERS


def test_source(prog: Program, finding, seed: int) -> str:
    needs = set()
    for r in [i.recipe for i in prog.inputs] + list(prog.consts.values()):
        needs |= r.needs()
    message = textwrap.indent(textwrap.fill(finding.message.strip().splitlines()[0] if finding.message.strip()
                                            else "", 100), "")
    lines = [f'"""Found by `python -m xbench fuzz --seed {seed}` (operator {finding.operator}): '
             f'{finding.kind} on {finding.backend}.', "", message, '"""', "import numpy as np"]
    if "ml_dtypes" in needs:
        lines.append("import ml_dtypes")
    lines += ["", "import xbench as xb", "from xbench import Tensor", "from xbench.fuzz.check import assert_agrees",
              ""]
    for h in ("_put", "_wide"):
        if h in needs:
            lines += ["", HELPERS[h].rstrip()]
    if prog.consts:
        lines.append("")
        for n, r in prog.consts.items():
            lines.append(f"{n} = {r.code()}")
    lines += ["", "", "@xb.tensor_op", f"def {OP_NAME}({prog.signature()}):", prog.body(), "", "",
              f"def test_{finding.backend}_{finding.signature}():"]
    for i in prog.inputs:
        lines.append(f"    {i.name} = {i.recipe.code()}")
    isolate = finding.kind in ("crash", "hang")
    args = ", ".join(i.name for i in prog.inputs)
    backends = f"({finding.backend!r},)" if finding.backend not in ("language", "reference") else "()"
    lines.append(f"    assert_agrees({OP_NAME}, [{args}{',' if len(prog.inputs) == 1 else ''}], "
                 f"backends={backends}{', isolate=True' if isolate else ''})")
    return "\n".join(lines) + "\n"


def write_test(folder: str, prog: Program, finding, seed: int) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"test_fuzz_{finding.backend}_{finding.signature}.py")
    atomic_write(path, test_source(prog, finding, seed))
    return path

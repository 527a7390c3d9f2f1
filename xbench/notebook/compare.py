"""The "Side by side" tab: the loop IR of an operator above the code each backend made of it, with the mapping
from each loop-IR statement to the lines it became (select one statement, see its lines highlighted in every
backend).

A statement is matched to the lines of its own kernel that name what it defines (its local, or the buffer it
stores to, under the backends' spellings: `max0`, `max0_`, `_sh_tmp1_row`, `outGm`) or call what it computes
(`exp` as `_xb_exp_f32`, `math.exp`, the Ascend C `Exp`; a sum reduction as `ReduceSum`). Selection is plain
HTML (a radio button per statement and a `:has()` rule per statement), so it works without a kernel: in the
widget, in the saved notebook, on GitHub.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .html import HIGHLIGHT_CLASS, _highlighted, esc

TITLES = {"cpu": "CPU", "cuda": "CUDA", "ascend": "Ascend C"}
LANG = {"cpu": "python", "cuda": "python", "ascend": "cpp"}
# Ascend C vector APIs of the scalar functions and reductions
ASCEND_API = {"exp": "Exp", "log": "Ln", "sqrt": "Sqrt", "rsqrt": "Rsqrt", "tanh": "Tanh", "abs": "Abs",
              "maximum": "Max", "minimum": "Min", "relu": "Relu", "reciprocal": "Reciprocal",
              "sum": "ReduceSum", "max": "ReduceMax", "min": "ReduceMin", "add": "Add", "mul": "Mul",
              "sub": "Sub", "div": "Div"}
STYLE = """<style>
.xb-cmp .xb-radio { position: absolute; opacity: 0; width: 1px; height: 1px; pointer-events: none; }
.xb-cmp .xb-stmts { margin: 0 0 8px; padding: 4px 0; font-family: var(--jp-code-font-family, monospace);
  border: 1px solid var(--jp-border-color2, #ddd); border-radius: 2px; }
.xb-cmp .xb-kernel { padding: 2px 8px; font-weight: 600; overflow-wrap: anywhere; }
.xb-cmp .xb-stmt { display: flex; gap: 12px; justify-content: space-between; padding: 1px 8px 1px 24px;
  cursor: pointer; }
.xb-cmp .xb-stmt:hover { background: var(--jp-layout-color2, #eee); }
.xb-cmp .xb-stmt-text { white-space: pre-wrap; overflow-wrap: anywhere; }
.xb-cmp .xb-stmt-where { white-space: nowrap; color: var(--jp-ui-font-color2, #666); font-size: 11px; }
.xb-cmp .xb-radio:checked + .xb-stmt { background: rgba(33, 150, 243, 0.22);
  outline: 1px solid var(--jp-brand-color1, #1976d2); }
.xb-cmp .xb-cols { display: grid; gap: 8px; }
.xb-cmp .xb-col { min-width: 0; }
.xb-cmp .xb-col-title { font-weight: 600; margin: 0 0 2px; }
</style>"""


@dataclass
class Statement:
    sid: str                     # k0s2: kernel 0, stage 2
    kernel: str
    text: str
    defines: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)


def statements(program: Any) -> list[Statement]:
    from ..ir.expr import Call
    out = []
    for ki, k in enumerate(program.kernels):
        for si, s in enumerate(k.stages):
            defs = [getattr(s, a) for a in ("local", "index_local", "buf", "values_buf", "indices_buf")
                    if getattr(s, a, None)]
            calls = []
            kind = getattr(s, "kind", None)
            if isinstance(kind, str) and type(s).__name__ == "Reduce":
                calls.append(kind)
            for e in s.exprs():
                for n in e.walk():
                    if isinstance(n, Call) and n.fn not in calls and n.fn not in ("add", "sub", "mul", "div"):
                        calls.append(n.fn)
            out.append(Statement(f"k{ki}s{si}", k.name, s.text(), defs, calls))
    return out


def _patterns(st: Statement) -> list[re.Pattern]:
    pats = [re.compile(rf"(?<![A-Za-z0-9]){re.escape(d)}(_|Gm)?(?![A-Za-z0-9])") for d in st.defines]
    pats += [re.compile(rf"(?<![A-Za-z0-9]){re.escape(d)}(?![A-Za-z0-9])") for d in st.defines]
    for fn in st.calls:
        pats.append(re.compile(rf"(?<![A-Za-z]){re.escape(fn)}(?![a-z])"))
        if fn in ASCEND_API:
            pats.append(re.compile(rf"\b{ASCEND_API[fn]}\("))
    return pats


def _sections(kernels: Sequence[Any], program: Any) -> list[tuple[str, list[str]]]:
    """(loop-IR kernel name, lines) of a backend's kernels, in order."""
    return [(k.name, k.source.split("\n")) for k in kernels]


def line_map(stmts: Sequence[Statement], kernels: Sequence[Any]) -> dict[str, list[int]]:
    """Statement id -> indices of the lines (over the backend's kernels joined, one blank line between) that
    match it."""
    hits: dict[str, list[int]] = {s.sid: [] for s in stmts}
    base = 0
    for k in kernels:
        lines = k.source.split("\n")
        for st in stmts:
            if st.kernel != k.name:
                continue
            pats = _patterns(st)
            hits[st.sid] += [base + i for i, ln in enumerate(lines) if any(p.search(ln) for p in pats)]
        base += len(lines) + 1
    return hits


_made: dict[str, int] = {}


def _uid(program: Any, backends: Mapping[str, Sequence[Any]]) -> str:
    """An id for one rendering: a digest of what it shows and how many times this process showed it (the same
    notebook run again gives the same ids, two renderings on one page differ)."""
    import hashlib
    h = hashlib.sha1(program.text().encode())
    for b, ks in backends.items():
        h.update(b.encode() + "".join(k.source for k in ks).encode())
    key = h.hexdigest()[:8]
    _made[key] = _made.get(key, 0) + 1
    return f"{key}{_made[key]}"


def compare_html(program: Any, backends: Mapping[str, Sequence[Any]], uid: str | None = None) -> str:
    """The tab's HTML: statements (radio buttons) above one column per backend (`backends`: name -> its
    KernelInfos)."""
    stmts = statements(program)
    uid = uid or _uid(program, backends)
    maps = {b: line_map(stmts, ks) for b, ks in backends.items()}
    rules = [f"#xb-cmp-{uid}:has(#xb-cmp-{uid}-{s.sid}:checked) .xb-m-{s.sid} {{ background: "
             f"rgba(33, 150, 243, 0.22); outline: 1px solid var(--jp-brand-color1, #1976d2); }}" for s in stmts]
    out = [STYLE, f"<style>{''.join(rules)}</style>", f"<div class='xb-cmp' id='xb-cmp-{uid}'>",
           "<div class='xb-stmts'>"]
    kernel = None
    for s in stmts:
        if s.kernel != kernel:
            kernel = s.kernel
            out.append(f"<div class='xb-kernel'>kernel {esc(kernel)}</div>")
        where = " · ".join(f"{TITLES.get(b, b)} {len(m[s.sid])}" for b, m in maps.items())
        out.append(f"<input type='radio' class='xb-radio' name='xb-cmp-{uid}' id='xb-cmp-{uid}-{s.sid}' "
                   f"data-sid='{s.sid}'><label class='xb-stmt' for='xb-cmp-{uid}-{s.sid}' data-sid='{s.sid}'>"
                   f"<span class='xb-stmt-text'>{esc(s.text)}</span><span class='xb-stmt-where'>lines: "
                   f"{esc(where)}</span></label>")
    out.append("</div>")
    out.append(f"<div class='xb-cols' style='grid-template-columns: repeat({max(1, len(backends))}, minmax(0, 1fr))'>")
    for b, ks in backends.items():
        text = "\n\n".join(k.source for k in ks)
        owners: dict[int, list[str]] = {}
        for sid, idx in maps[b].items():
            for i in idx:
                owners.setdefault(i, []).append(sid)
        lines = _highlighted(text, LANG.get(b, "text")).split("\n")
        body = "".join(f"<span class='xb-line {' '.join(f'xb-m-{s}' for s in owners.get(i, []))}'"
                       f"{' data-sids=' + chr(39) + ' '.join(owners[i]) + chr(39) if i in owners else ''}>"
                       f"{ln or ' '}</span>" for i, ln in enumerate(lines))
        out.append(f"<div class='xb-col' data-backend='{esc(b)}'><div class='xb-col-title'>{esc(TITLES.get(b, b))}"
                   f"</div><pre class='xb-code {HIGHLIGHT_CLASS}'>{body}</pre></div>")
    out.append("</div></div>")
    return "".join(out)

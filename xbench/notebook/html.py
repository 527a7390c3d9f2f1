"""HTML pieces of the notebook views: one stylesheet, tables, highlighted code.

Colours come from JupyterLab's theme variables (`--jp-*`, with light fallbacks where there are none, as in
nbconvert or on GitHub), so the views read the same in the light and dark themes. Code wraps instead of
scrolling (no nested scrollbars, no line cut at a column's edge) and numbers never break across lines.
"""
from __future__ import annotations

import html
from collections.abc import Sequence

HIGHLIGHT_CLASS = "xb-hl"

# pygments token class -> (JupyterLab CodeMirror variable, fallback)
_TOKENS = {
    "k": ("keyword", "#008000"), "kn": ("keyword", "#008000"), "kd": ("keyword", "#008000"),
    "kc": ("keyword", "#008000"), "kr": ("keyword", "#008000"), "kt": ("variable-3", "#b00040"),
    "ow": ("operator", "#aa22ff"), "o": ("operator", "#666666"), "p": ("punctuation", "inherit"),
    "n": ("variable", "inherit"), "nb": ("builtin", "#008000"), "bp": ("builtin", "#008000"),
    "nf": ("def", "#0000ff"), "fm": ("def", "#0000ff"), "nc": ("def", "#0000ff"), "nd": ("meta", "#aa22ff"),
    "nn": ("variable-2", "#0000ff"), "nv": ("variable-2", "#19177c"),
    "s": ("string", "#ba2121"), "s1": ("string", "#ba2121"), "s2": ("string", "#ba2121"),
    "sa": ("string", "#ba2121"), "sd": ("string", "#ba2121"), "si": ("string-2", "#a45a77"),
    "se": ("string-2", "#aa5d1f"), "sc": ("string", "#ba2121"),
    "m": ("number", "#666666"), "mi": ("number", "#666666"), "mf": ("number", "#666666"),
    "mh": ("number", "#666666"), "mo": ("number", "#666666"), "il": ("number", "#666666"),
    "c": ("comment", "#3d7b7b"), "c1": ("comment", "#3d7b7b"), "cm": ("comment", "#3d7b7b"),
    "cs": ("comment", "#3d7b7b"), "cp": ("meta", "#9c6500"), "cpf": ("comment", "#3d7b7b"),
    "err": ("error", "#ff0000"),
}


def _token_rules() -> str:
    return "\n".join(f".{HIGHLIGHT_CLASS} .{cls} {{ color: var(--jp-mirror-editor-{var}-color, {fb}); }}"
                     for cls, (var, fb) in _TOKENS.items())


STYLE = f"""<style>
.xb-view {{ color: var(--jp-ui-font-color1, #1f1f1f); font-size: 12px; line-height: 1.4; max-width: 100%;
  box-sizing: border-box; }}
.xb-view * {{ box-sizing: border-box; }}
.xb-title {{ font-weight: 600; margin: 2px 0 6px; overflow-wrap: anywhere; }}
.xb-view table.xb-table {{ border-collapse: collapse; margin: 2px 0 8px; max-width: 100%; border: none; }}
.xb-view table.xb-table tr, .xb-view table.xb-table tbody tr:nth-child(odd) {{ background: none; }}
.xb-view table.xb-table th, .xb-view table.xb-table td {{ text-align: left; padding: 2px 8px; vertical-align: top;
  border: none; border-bottom: 1px solid var(--jp-border-color2, #ddd); }}
.xb-view table.xb-table th {{ font-weight: 600; white-space: nowrap; }}
.xb-view table.xb-table td {{ white-space: nowrap; }}
.xb-view table.xb-table td.xb-note {{ white-space: normal; overflow-wrap: anywhere; min-width: 12em;
  color: var(--jp-ui-font-color2, #555); }}
.xb-pass {{ color: var(--jp-success-color1, #1a7f37); }}
.xb-fail {{ color: var(--jp-error-color1, #cf222e); }}
.xb-error {{ color: var(--jp-warn-color1, #9a6700); }}
.xb-view pre.xb-code {{ white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal; overflow: visible;
  margin: 0 0 8px; padding: 6px 8px;
  font-family: var(--jp-code-font-family, monospace); font-size: 12px; line-height: 1.4;
  color: var(--jp-content-font-color1, #1f1f1f); background: var(--jp-cell-editor-background, #f7f7f7);
  border: 1px solid var(--jp-border-color2, #ddd); border-radius: 2px; }}
.xb-code .xb-line {{ display: block; padding-left: 2ch; text-indent: -2ch; }}
.xb-message {{ white-space: pre-wrap; overflow-wrap: anywhere; color: var(--jp-error-color1, #cf222e); }}
.xb-view h4 {{ margin: 10px 0 4px; font-size: 12px; }}
.xb-cards {{ display: flex; flex-wrap: wrap; gap: 4px 24px; align-items: flex-start; }}
.xb-cards > div {{ flex: 0 1 auto; max-width: 100%; min-width: 0; }}
.xb-view .xb-cards table.xb-table td:first-child {{ white-space: normal; }}
.xb-view details > summary {{ cursor: pointer; font-weight: 600; }}
.xb-roofline svg {{ display: block; }}
.xb-roofline {{ color: var(--jp-ui-font-color1, #1f1f1f); max-width: 100%; }}
{_token_rules()}
</style>"""


def esc(text: object) -> str:
    return html.escape(str(text))


def code(text: str, lang: str = "text", *, lines: bool = True) -> str:
    """`text` as a wrapped, highlighted block: each source line a `.xb-line` (wrapped lines hang indented)."""
    body = _highlighted(text, lang)
    if lines:
        body = "".join(f"<span class='xb-line'>{ln or ' '}</span>" for ln in body.split("\n"))
    return f'<pre class="xb-code {HIGHLIGHT_CLASS}">{body}</pre>'


def _highlighted(text: str, lang: str) -> str:
    """HTML of `text` with pygments token spans, one source line per `\\n` (spans never cross a line)."""
    from pygments import lex
    from pygments.lexers import get_lexer_by_name
    from pygments.token import STANDARD_TYPES

    lexer = get_lexer_by_name(lang if lang in ("python", "cpp") else "text", stripnl=False, ensurenl=False)
    out = []
    for tok, value in lex(text, lexer):
        cls = ""
        t = tok
        while t is not None and t not in STANDARD_TYPES:
            t = t.parent
        if t is not None:
            cls = STANDARD_TYPES[t]
        for i, piece in enumerate(value.split("\n")):
            if i:
                out.append("\n")
            if piece:
                out.append(f"<span class='{cls}'>{esc(piece)}</span>" if cls else esc(piece))
    return "".join(out)


def pre(text: str) -> str:
    return code(text, "text")


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, note_columns: Sequence[int] = (),
          classes: Sequence[Sequence[str]] | None = None, escape: bool = True) -> str:
    """A table whose cells never wrap a number; `note_columns` (indices) may wrap text."""
    e = esc if escape else str
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cells = []
        for j, c in enumerate(row):
            cls = ["xb-note"] if j in note_columns else []
            if classes is not None and classes[i][j]:
                cls.append(classes[i][j])
            attr = f" class='{' '.join(cls)}'" if cls else ""
            cells.append(f"<td{attr}>{e(c)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table class='xb-table'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def error(message: str, tb: str | None = None) -> str:
    out = f"<p class='xb-message'><b>{esc(message)}</b></p>"
    if tb:
        out += f"<details><summary>Traceback</summary>{pre(tb)}</details>"
    return out


def view(body: str) -> str:
    """A view's HTML: the stylesheet and its body in a `.xb-view` block."""
    return f"{STYLE}<div class='xb-view'>{body}</div>"

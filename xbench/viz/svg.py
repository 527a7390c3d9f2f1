"""A figure as SVG for the notebook: values on hover, the page's text colour, the width of its cell.

`to_svg(fig, tooltips)` saves the figure as SVG (glyphs as paths, so text lays out exactly as matplotlib placed
it; ids salted so the same figure gives the same text), then:
- every group whose id is a key of `tooltips` gets a `<title>` with its text, which browsers show on hover;
- the colour INK (axes, ticks, labels) becomes `currentColor`, so the figure takes the text colour of the page
  (JupyterLab's light and dark themes alike), and the background is left transparent;
- the root element scales to its container (`width="100%"`, at most its natural width), so it never overflows.
"""
from __future__ import annotations

import html
import io
import re
from collections.abc import Mapping

INK = "#010203"            # the colour figures draw text and axes in, replaced by currentColor in SVG


def to_svg(fig, tooltips: Mapping[str, str] | None = None) -> str:
    import matplotlib

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "path", "svg.hashsalt": "xbench"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, transparent=True)
    text = buf.getvalue()
    text = text.replace(INK, "currentColor").replace(INK.upper(), "currentColor")
    for gid, tip in (tooltips or {}).items():
        gid_attr = html.escape(gid, quote=True)       # matplotlib writes an artist's gid as its group's id
        text = re.sub(rf'(<g id="{re.escape(gid_attr)}"[^>]*>)', lambda m, t=tip: m.group(1)
                      + f"\n   <title>{html.escape(t)}</title>", text, count=1)
    m = re.search(r'<svg ([^>]*?)width="([\d.]+)pt" height="([\d.]+)pt"', text)
    if m:
        w = float(m.group(2)) * 4 / 3             # pt -> CSS px
        text = text[:m.start()] + f'<svg {m.group(1)}width="100%" style="max-width: {w:.0f}px; height: auto"' \
            + text[m.end():]
    return text[text.index("<svg"):]

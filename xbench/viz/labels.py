"""Text labels that never overlap: annotations moved apart vertically, in display space, after layout.

`spread(fig, annotations)` draws the figure once (so the layout and text sizes are final), then, among the given
annotations, moves each that overlaps an earlier one (in order of their anchors' heights) just above or below
it, by changing its offset in points (an annotation drawn with a leader line keeps pointing at its anchor).
Labels are kept inside their axes. `overlaps(fig, texts)` lists the pairs that still overlap (the tests use it).
"""
from __future__ import annotations

from collections.abc import Sequence

GAP_PX = 2.0


def _canvas(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    return fig.canvas


def _box(t, renderer):
    """The text's own box (an Annotation's extent would include its leader line)."""
    from matplotlib.text import Text
    return Text.get_window_extent(t, renderer)


def _marker_boxes(markers: Sequence, px_per_pt: float) -> list[tuple[float, float, float, float]]:
    out = []
    for ln in markers:
        r = ln.get_markersize() * px_per_pt / 2 + 1
        for x, y in ln.get_transform().transform(ln.get_xydata()):
            out.append((x - r, x + r, y - r, y + r))
    return out


def _line_boxes(lines: Sequence, step: float = 3.0) -> list[tuple[float, float, float, float]]:
    """Small boxes along each line's path in display space (a label must not sit on a roof)."""
    import numpy as np
    out = []
    for ln in lines:
        xy = ln.get_transform().transform(ln.get_xydata())
        half = max(1.0, ln.get_linewidth())
        for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
            n = max(1, int(np.hypot(x1 - x0, y1 - y0) / step))
            for t in np.linspace(0.0, 1.0, n + 1):
                x, y = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                out.append((x - half, x + half, y - half, y + half))
    return out


def spread(fig, annotations: Sequence, markers: Sequence = (), lines: Sequence = ()) -> None:
    """Move `annotations` (matplotlib Annotations with offsets in points) apart, off the `markers` (Line2D
    artists whose markers a label must not cover) and off the `lines` (Line2D artists a label must not sit
    on); see the module docstring."""
    if not annotations:
        return
    canvas = _canvas(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    px_per_pt = fig.dpi / 72.0
    placed = _marker_boxes(markers, px_per_pt) + _line_boxes(lines)    # boxes placed: (x0, x1, y0, y1)
    order = sorted(annotations, key=lambda a: _box(a, renderer).y0)
    for a in order:
        b = _box(a, renderer)
        ax = a.axes
        lim = ax.get_window_extent(renderer) if ax is not None else fig.bbox
        x0, x1, y0, y1 = b.x0, b.x1, b.y0, b.y1
        dy = 0.0
        for _ in range(len(placed) + 1):
            hit = [p for p in placed if p[0] < x1 and x0 < p[1] and p[2] < y1 + dy and y0 + dy < p[3]]
            if not hit:
                break
            dy = max(p[3] for p in hit) + GAP_PX - y0
        if y1 + dy > lim.y1:                      # no room above: go below everything it overlaps instead
            dy_down = 0.0
            for _ in range(len(placed) + 1):
                hit = [p for p in placed if p[0] < x1 and x0 < p[1] and p[2] < y1 + dy_down and y0 + dy_down < p[3]]
                if not hit:
                    break
                dy_down = min(p[2] for p in hit) - GAP_PX - y1
            dy = dy_down
        if dy:
            ox, oy = a.xyann
            a.xyann = (ox, oy + dy / px_per_pt)
        placed.append((x0, x1, y0 + dy, y1 + dy))


def overlaps(fig, texts: Sequence) -> list[tuple[str, str]]:
    """Pairs of the given texts whose drawn boxes overlap."""
    canvas = _canvas(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    boxes = [(t.get_text(), _box(t, renderer)) for t in texts if t.get_visible() and t.get_text()]
    out = []
    for i, (na, a) in enumerate(boxes):
        for nb, b in boxes[:i]:
            if a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1:
                out.append((nb, na))
    return out

"""What a long `%%tensorop` cell is doing while it runs: a progress bar with the step in words ("softmax:
compiling 1 kernel(s) (k0_row) for cuda, then checking it against the float64 reference"), shown at the top of
the cell's output and emptied when the cell is done. In a terminal IPython the steps go to stderr, one line each
(only when stderr is a terminal); elsewhere nothing is shown."""
from __future__ import annotations

import sys
from typing import Any


def _in_kernel(shell: Any) -> bool:
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


class CellProgress:
    def __init__(self, total: int, shell: Any = None):
        self.total, self.done = max(1, total), 0
        self.handle = None
        self.tty = False
        if _in_kernel(shell):
            import ipywidgets as W
            from IPython.display import display

            from . import html as H
            self.bar = W.IntProgress(value=0, min=0, max=self.total, description="xbench",
                                     layout=W.Layout(width="220px"))
            self.text = W.HTML(H.view(""))
            self.widget = W.HBox([self.bar, self.text])
            self.widget.add_class("xb-progress")
            self.handle = display(_Shown(self.widget), display_id=True)
        else:
            self.tty = bool(getattr(sys.stderr, "isatty", lambda: False)())

    def step(self, key: str, what: str) -> None:
        self.done = min(self.total, self.done + 1)
        if self.handle is not None:
            from . import html as H
            self.bar.value = self.done - 1
            self.text.value = H.view(f"<span class='xb-note'>{H.esc(what)} …</span>")
        elif self.tty:
            sys.stderr.write(f"xbench [{self.done}/{self.total}] {what}\n")
            sys.stderr.flush()

    def close(self) -> None:
        """Empty the progress output (the cell's view follows it)."""
        if self.handle is not None:
            self.handle.update({"text/plain": ""}, raw=True)
            self.widget.close()
            self.handle = None


class _Shown:
    """The progress widget with an empty text form: what a saved notebook (or a test comparing outputs) keeps of
    a cell's progress is nothing, whether or not the display's last update reached it."""

    def __init__(self, widget: Any):
        self.widget = widget

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        data = self.widget._repr_mimebundle_()
        data["text/plain"] = ""
        return data

"""xbench in Jupyter: `%load_ext xbench` registers the `%%tensorop` and `%xbench` magics and connects the kernel's
operator registry to the JupyterLab panel; `xb.explore(op)` is the interactive profiling widget; `TuningView(result)`
shows an `xb.tune` result as the Tuning tab of a `%%tensorop --tune` cell."""
from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext xbench`: the magics, and the comm that feeds the xbench panel (inside a Jupyter kernel)."""
    from . import comm
    from .magics import XbenchMagics

    ipython.register_magics(XbenchMagics)
    comm.register(ipython)
    _show_figures_as_png(ipython)


def _figure_png(fig: Any) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def _show_figures_as_png(ipython: Any) -> None:
    """xb.roofline returns a matplotlib Figure made without pyplot, which IPython shows only as text until a
    matplotlib backend registers a formatter; give Figures a PNG form unless one is registered already."""
    formatter = getattr(getattr(ipython, "display_formatter", None), "formatters", {}).get("image/png")
    if formatter is None:
        return
    known = any(getattr(t, "__module__", "") == "matplotlib.figure" and t.__name__ == "Figure"
                for t in formatter.type_printers) or ("matplotlib.figure", "Figure") in formatter.deferred_printers
    if not known:
        formatter.for_type_by_name("matplotlib.figure", "Figure", _figure_png)


def unload_ipython_extension(ipython: Any) -> None:
    from . import comm

    comm.unregister(ipython)


def last_result(name: str) -> Any:
    """What the last `%%tensorop` cell found for operator `name` in this session: `.backends[b]` (status, error,
    timing, artifact), `.dims`, `.record()`, and `.report` (the `xb.profile` Report of a `--profile` cell)."""
    from IPython import get_ipython

    shell = get_ipython()
    magics = shell.magics_manager.registry.get("XbenchMagics") if shell is not None else None
    if magics is None:
        raise LookupError("xbench is not loaded in this session; run %load_ext xbench first")
    if name not in magics.compiled:
        known = ", ".join(magics.compiled) or "none yet"
        raise LookupError(f"no %%tensorop cell has compiled {name!r} in this session (compiled: {known})")
    return magics.compiled[name]


def explore(op: Any, sizes: Any = None, **options: Any) -> Any:
    """`xb.explore(op, sizes={"N": 1024}, backends=[...], targets=[...], dtype="float32")`: see
    `xbench.notebook.explore.explore`."""
    from .explore import explore as _explore

    return _explore(op, sizes, **options)


def __getattr__(name: str) -> Any:
    if name == "TuningView":          # imports ipywidgets: only when asked for
        from .tuning import TuningView
        return TuningView
    raise AttributeError(f"module 'xbench.notebook' has no attribute {name!r}")

"""xbench in Jupyter: `%load_ext xbench` registers the `%%tensorop` and `%xbench` magics and connects the kernel's
operator registry to the JupyterLab panel; `xb.explore(op)` is the interactive profiling widget."""
from __future__ import annotations

from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext xbench`: the magics, and the comm that feeds the xbench panel (inside a Jupyter kernel)."""
    from . import comm
    from .magics import XbenchMagics

    ipython.register_magics(XbenchMagics)
    comm.register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from . import comm

    comm.unregister(ipython)


def explore(op: Any, sizes: Any = None, **options: Any) -> Any:
    """`xb.explore(op, sizes={"N": 1024}, backends=[...], targets=[...], dtype="float32")`: see
    `xbench.notebook.explore.explore`."""
    from .explore import explore as _explore

    return _explore(op, sizes, **options)

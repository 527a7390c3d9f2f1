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

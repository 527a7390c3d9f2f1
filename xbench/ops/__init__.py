"""The unified operator library: `xb.ops.<name>`.

The operators live in the top-level `kernels/` folder of the source tree (installed as `xbench/_kernels`),
written only in the public xbench language. Each module there registers its operators with
`@xb.ops.register(category)`; they are imported on first use.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from pathlib import Path

from ..lang.operator import Operator, tensor_op

_here = Path(__file__).resolve()
for _candidate in (_here.parents[2] / "kernels", _here.parents[1] / "_kernels"):
    if _candidate.is_dir() and (_candidate / "__init__.py").exists():
        __path__.append(str(_candidate))
        break

REGISTRY: dict[str, tuple[Operator, str]] = {}
_loaded = False


def register(category: str, name: str | None = None) -> Callable:
    """Decorator for library operators: makes a tensor_op and lists it under `category`."""
    def deco(fn):
        op = fn if isinstance(fn, Operator) else tensor_op(fn, name=name)
        REGISTRY[name or op.name] = (op, category)
        return op
    return deco


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


def list(category: str | None = None) -> list[str]:
    """Names of the library operators (in one category, if given)."""
    _load_all()
    return sorted(n for n, (_, c) in REGISTRY.items() if category in (None, c))


def categories() -> list[str]:
    _load_all()
    return sorted({c for _, c in REGISTRY.values()})


def get(name: str) -> Operator:
    _load_all()
    if name not in REGISTRY:
        import difflib
        close = difflib.get_close_matches(name, REGISTRY, n=3)
        raise AttributeError(f"xb.ops has no operator {name!r}" + (f"; did you mean {', '.join(close)}?" if close
                                                                    else ""))
    return REGISTRY[name][0]


def __getattr__(name: str) -> Operator:
    if name.startswith("__"):
        raise AttributeError(name)
    return get(name)

"""The unified operator library: `xb.ops.<name>`.

The operators live in the top-level `kernels/` folder of the source tree (installed as `xbench/_kernels`),
written only in the public xbench language. Each module there registers its operators with
`@xb.ops.register(category, ...)`; they are imported on first use. A module's file name must never equal an
operator name (attribute lookup would find the module).

Registering an operator
-----------------------
::

    from ._samples import unary                      # input generators shared by the library

    @register("unary", aliases=("absolute",), samples=unary(), torch="torch.abs", grad=True,
              dtypes=FLOATS + INTS)
    def abs(input: Tensor):
        return xb.abs(input)

`register(category, name=None, *, aliases=(), samples=None, torch=None, grad=(), dtypes=FLOATS, notes="",
torch_grad=True)`

- `category` -- one of the library's categories (see `docs/library.md`): "unary", "binary", "activation",
  "softmax", "reduction", "normalization", "blas", "convolution", "pooling", "resample", "padding",
  "indexing", "embedding", "attention", "loss", "sort", "creation", "shape", "random", "fused".
- `name` -- the registry name (default: the function's name); `aliases` -- more names for the same operator
  (ATen base names such as `_softmax` next to friendly names such as `softmax`).
- `samples` -- a generator of argument sets: `samples(dtype: str, shapes: ShapeSet) -> Iterable[Sample]`.
  Each `Sample(args, kwargs, note, grad)` holds numpy arrays (inputs, of `dtype` where the operator's
  dtype is that dtype; index tensors stay integer) and static arguments as plain Python values, exactly as
  the operator is called: `op(*s.args, **s.kwargs)`. It must be deterministic: draw random numbers from
  `shapes.rng(<op name>, <anything>)`. Cover the shape set's shapes, non-contiguous views
  (`shapes.noncontig`), special values (`shapes.special`: +-0, +-inf, NaN, large magnitudes; mark those
  samples `grad=False`) and empty tensors (`shapes.empty`) where they make sense. Mark samples at which the
  operator is not differentiable (kinks, special values) `grad=False`.
- `torch` -- the PyTorch counterpart the reference is cross-checked against: a dotted path from the torch
  module (`"torch.abs"`, `"torch.nn.functional.gelu"`, `"torch.ops.aten._softmax"`) called with the same
  arguments (numpy arrays become torch tensors), or a callable `fn(torch, *args, **kwargs)` that adapts the
  arguments itself, or `NoTorch("reason")` where PyTorch has no comparable function (the reason appears in
  the coverage grid). A function returning a tuple is compared output by output.
- `grad` -- which tensor arguments are differentiable: `True` (every argument a sample passes a float array
  to), a tuple of argument names, or `()` (not differentiable: integer results, comparisons, random numbers).
- `dtypes` -- the input dtypes the operator takes, from `FLOATS`, `INTS`, `BOOL` (or any dtype names); the
  grid runs each of them on each backend.
- `notes` -- one line shown by `info(name)` (deviations from PyTorch, limits).
- `torch_grad` -- False where PyTorch's backward is not the true derivative of its forward (ctc_loss), so the
  gradient is checked against finite differences only.

`list(category=None)` / `categories()` / `info(name) -> OpInfo` / `get(name)` query the registry.

Operator packages
-----------------
A package of its own registers operators by being installed: it names a module (or a function) under the
entry-point group `xbench.ops`, and that module registers its operators with `@xb.ops.register(...)` exactly as
the library does. They load with the library, are verified on the same grid (`python -m xbench coverage`), and
`info(name).plugin` names the distribution they came from. A plugin that fails to load is reported like a library
module that fails to import (`LOAD_ERRORS`, a warning) without hiding the rest. See `examples/xbench-example-plugin`.

    [project.entry-points."xbench.ops"]
    example = "xbench_example.ops"
"""
from __future__ import annotations

import builtins
import hashlib
import importlib
import pkgutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..lang.operator import Operator, tensor_op

_here = Path(__file__).resolve()
for _candidate in (_here.parents[2] / "kernels", _here.parents[1] / "_kernels"):
    if _candidate.is_dir() and (_candidate / "__init__.py").exists():
        __path__.append(str(_candidate))
        break

FLOATS: tuple[str, ...] = ("float32", "float16", "bfloat16", "float64")
INTS: tuple[str, ...] = ("int32", "int64")
BOOL: tuple[str, ...] = ("bool",)

CATEGORIES: tuple[str, ...] = (
    "unary", "binary", "activation", "softmax", "reduction", "normalization", "blas", "convolution", "pooling",
    "resample", "padding", "indexing", "embedding", "attention", "loss", "sort", "creation", "shape", "random",
    "fused")


@dataclass(frozen=True)
class Sample:
    """One way to call an operator: `op(*args, **kwargs)`; `grad=False` where it is not differentiable."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    note: str = ""
    grad: bool = True

    def __repr__(self) -> str:
        def show(v):
            return f"{v.dtype}{builtins.list(v.shape)}" if isinstance(v, np.ndarray) else repr(v)
        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in self.kwargs.items()]
        return f"({', '.join(parts)})" + (f" [{self.note}]" if self.note else "")


@dataclass(frozen=True)
class ShapeSet:
    """The shapes samples draw from. `pointwise`: any-rank shapes (scalars, size 1, powers of two, +17
    non-aligned); `reduction`: shapes of rank >= 1 reduced along a dim; `matrix`: (M, K, N); `image`:
    (N, C, H, W); flags say whether to add special values, non-contiguous views and empty tensors."""

    name: str
    pointwise: tuple[tuple[int, ...], ...]
    reduction: tuple[tuple[int, ...], ...]
    matrix: tuple[tuple[int, int, int], ...]
    image: tuple[tuple[int, int, int, int], ...]
    special: bool = True
    noncontig: bool = True
    empty: bool = True

    def rng(self, *key: Any) -> np.random.Generator:
        """A generator seeded from `key` (and the set's name): the same samples on every run."""
        h = hashlib.sha256(repr((self.name,) + key).encode()).digest()
        return np.random.default_rng(int.from_bytes(h[:8], "little"))


SHAPES: dict[str, ShapeSet] = {
    "full": ShapeSet(
        "full",
        pointwise=((), (1,), (17,), (64,), (1024 + 17,), (16, 17), (32, 64), (2, 3, 33), (4, 1, 64)),
        reduction=((1,), (64,), (1000,), (1, 1), (17, 64), (64, 17), (8, 256 + 17), (4, 33, 16)),
        matrix=((1, 1, 1), (16, 16, 16), (17, 33, 9), (64, 128, 32), (128, 64, 129)),
        image=((1, 1, 4, 4), (2, 3, 16, 17), (2, 8, 32, 32))),
    "quick": ShapeSet(
        "quick",
        pointwise=((), (17,), (16, 17), (2, 3, 33)),
        reduction=((17,), (1, 1), (17, 64), (4, 33, 16)),
        matrix=((1, 1, 1), (17, 33, 9), (64, 32, 48)),
        image=((1, 1, 4, 4), (2, 3, 9, 10))),
    # for the slow backends (cuda in the simulator, the Ascend twin): a few small shapes
    "tiny": ShapeSet(
        "tiny",
        pointwise=((), (17,), (3, 5)),
        reduction=((5,), (3, 17)),
        matrix=((1, 1, 1), (5, 7, 3)),
        image=((1, 2, 5, 6),),
        empty=False),
}


@dataclass(frozen=True)
class NoTorch:
    """`torch=NoTorch("reason")`: PyTorch has nothing to compare this operator with, and why."""

    reason: str


@dataclass
class OpInfo:
    """Everything registered about one library operator."""

    name: str
    op: Operator
    category: str
    aliases: tuple[str, ...] = ()
    samples: Callable[[str, ShapeSet], Iterable[Sample]] | None = None
    torch: str | Callable | NoTorch | None = None
    grad: tuple[str, ...] | bool = ()
    dtypes: tuple[str, ...] = FLOATS
    notes: str = ""
    module: str = ""
    torch_grad: bool = True
    plugin: str = ""                 # the distribution of an operator package ("" for the library's own)

    @property
    def doc(self) -> str:
        return (self.op.__doc__ or "").strip()

    def grad_args(self) -> tuple[str, ...]:
        """Names of the differentiable arguments; with `grad=True`, the annotated tensor parameters (a sample
        may pass float arrays to unannotated parameters too: the harness differentiates those as well)."""
        if self.grad is True:
            return tuple(n for n, s in self.op._specs.items() if s is not None)
        return tuple(self.grad or ())

    def __repr__(self) -> str:
        return (f"OpInfo({self.name!r}, category={self.category!r}, aliases={self.aliases}, "
                f"dtypes={self.dtypes}, grad={self.grad_args()}, torch={_torch_text(self.torch)!r})")


def _torch_text(t) -> str:
    if t is None:
        return "none"
    if isinstance(t, NoTorch):
        return f"none ({t.reason})"
    if isinstance(t, str):
        return t
    return getattr(t, "__qualname__", repr(t))


REGISTRY: dict[str, tuple[Operator, str]] = {}
INFO: dict[str, OpInfo] = {}
_loaded = False
PLUGIN_GROUP = "xbench.ops"
_loading_plugin = ""


def register(category: str, name: str | None = None, *, aliases: Iterable[str] = (),
             samples: Callable[[str, ShapeSet], Iterable[Sample]] | None = None,
             torch: str | Callable | NoTorch | None = None, grad: Iterable[str] | bool = (),
             dtypes: Iterable[str] = FLOATS, notes: str = "", torch_grad: bool = True) -> Callable:
    """Decorator for library operators: makes a tensor_op and lists it under `category` (and its aliases)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown operator category {category!r}; use one of {', '.join(CATEGORIES)}")

    def deco(fn):
        op = fn if isinstance(fn, Operator) else tensor_op(fn, name=name)
        key = name or op.name
        names = (key,) + tuple(aliases)
        info = OpInfo(key, op, category, tuple(aliases), samples, torch,
                      grad if isinstance(grad, bool) else tuple(grad), tuple(dtypes), notes,
                      getattr(fn, "__module__", "") or "", torch_grad, _loading_plugin)
        unknown = [a for a in info.grad_args() if a not in op.signature.parameters]
        if unknown:
            raise ValueError(f"{key}: grad names {unknown}, which are not parameters of {op.signature_text()}")
        for n in names:
            if n in INFO and INFO[n].op is not op:
                raise ValueError(f"operator {n!r} is registered twice ({INFO[n].module} and {info.module})")
            REGISTRY[n] = (op, category)
            INFO[n] = info
        return op
    return deco


LOAD_ERRORS: dict[str, str] = {}


def _load_all() -> None:
    """Import every library module. A module that fails to import is reported (a warning, `LOAD_ERRORS`, and
    a failure row in the coverage grid) without hiding the operators of the others."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_"):
            try:
                importlib.import_module(f"{__name__}.{mod.name}")
            except Exception as exc:
                import traceback
                import warnings
                LOAD_ERRORS[mod.name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-2)}"
                warnings.warn(f"xbench library module {mod.name!r} failed to import: {type(exc).__name__}: {exc}",
                              RuntimeWarning, stacklevel=2)
    load_plugins()


def load_plugins(eps=None) -> list[str]:
    """Load the operator packages installed under the entry-point group `xbench.ops` (or the entry points
    given); return the names of the operators they registered. A plugin that fails is reported in `LOAD_ERRORS`
    as `plugin <name>`, with a warning."""
    global _loading_plugin
    if eps is None:
        from importlib.metadata import entry_points
        eps = entry_points(group=PLUGIN_GROUP)
    before = set(INFO)
    for ep in eps:
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.name
        _loading_plugin = dist
        try:
            obj = ep.load()
            if callable(obj) and not isinstance(obj, type(importlib)):
                obj()
        except Exception as exc:
            import traceback
            import warnings
            LOAD_ERRORS[f"plugin {ep.name}"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-2)}"
            warnings.warn(f"xbench operator package {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: "
                          f"{exc}", RuntimeWarning, stacklevel=2)
        finally:
            _loading_plugin = ""
    return sorted(set(INFO) - before)


def list(category: str | None = None, aliases: bool = True) -> builtins.list[str]:
    """Names of the library operators (in one category, if given); `aliases=False`: one name per operator."""
    _load_all()
    return sorted(n for n, i in INFO.items() if category in (None, i.category) and (aliases or n == i.name))


def categories() -> builtins.list[str]:
    _load_all()
    return sorted({i.category for i in INFO.values()})


def info(name: str) -> OpInfo:
    """What is registered about operator `name` (samples, PyTorch counterpart, grad arguments, dtypes)."""
    get(name)
    return INFO[name]


def get(name: str) -> Operator:
    _load_all()
    if name not in REGISTRY:
        import difflib
        close = difflib.get_close_matches(name, REGISTRY, n=3)
        broken = f" (library modules that failed to import: {', '.join(LOAD_ERRORS)})" if LOAD_ERRORS else ""
        raise AttributeError(f"xb.ops has no operator {name!r}" + (f"; did you mean {', '.join(close)}?" if close
                                                                    else "") + broken)
    return REGISTRY[name][0]


def __getattr__(name: str) -> Operator:
    if name.startswith("__"):
        raise AttributeError(name)
    return get(name)

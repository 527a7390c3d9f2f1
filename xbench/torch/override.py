"""Op-by-op override of ATen, as FlagGems does it, with more safety: `xb.torch.enable()`, `with
xb.torch.enabled():`, `xb.torch.stats()`.

An unchanged eager model runs on the library's kernels: a torch dispatch mode takes each ATen call whose op has a
library operator (the `torch=` names in kernels/) and runs it as an xbench operator on the tensors' memory. The
safety: an op is taken over only for the dtypes whose grid cells pass (cpu against the float64 reference, and the
reference against torch), from the newest saved coverage grid or checked when first enabled; views and in-place
ops stay with torch (xbench results are fresh tensors); the first call of each signature is checked against
ATen's own shape and dtype rules; a call xbench cannot run goes to torch, and `stats()` lists why.
"""
from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections import Counter
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode

from ..cache import atomic_write
from ..config import cache_dir, log
from ..errors import XbenchError
from .graph import GraphOp
from .interop import xb_dtype

# ops whose ATen result aliases an input, or which only move metadata: an xbench copy would change semantics
_VIEWS = frozenset({"view", "reshape", "transpose", "t", "expand", "permute", "slice", "select", "alias", "detach",
                    "as_strided", "squeeze", "unsqueeze", "unfold", "narrow", "split", "chunk", "unbind",
                    "diagonal", "movedim", "swapaxes", "swapdims", "contiguous", "clone", "lift_fresh", "_unsafe_view",
                    "view_as", "expand_as", "flatten", "unflatten", "real", "imag", "conj", "resolve_conj"})


@dataclass
class Stats:
    """What the override took over, how often, and what it left to torch and why."""
    calls: Counter = field(default_factory=Counter)            # ATen op -> calls run on xbench
    registered: dict[str, tuple[str, ...]] = field(default_factory=dict)    # op -> dtypes taken over
    skipped: dict[str, str] = field(default_factory=dict)      # op -> why it stays with torch
    fell_back: Counter = field(default_factory=Counter)        # (op, reason) -> calls sent to torch at run time

    def __str__(self) -> str:
        lines = [f"xbench override: {len(self.registered)} ATen ops taken over, {sum(self.calls.values())} calls "
                 f"on xbench, {sum(self.fell_back.values())} sent to torch"]
        for op, n in self.calls.most_common():
            lines.append(f"  {op:40s} {n:6d} calls")
        for (op, why), n in self.fell_back.most_common():
            lines.append(f"  to torch: {op} x{n}: {why}")
        return "\n".join(lines)


def _leaves(x) -> list:
    out = []
    fx.node.map_aggregate(x, lambda a: out.append(a) if isinstance(a, torch.Tensor) else None)
    return out


def _key(func, args, kwargs) -> tuple:
    def spell(a):
        if isinstance(a, torch.Tensor):
            return ("T", tuple(a.shape), str(a.dtype))
        if isinstance(a, (list, tuple)):
            return tuple(spell(x) for x in a)
        return repr(a)
    return (func, spell(args), tuple(sorted((k, spell(v)) for k, v in kwargs.items())))


def _one_op_graph(func, args, kwargs) -> fx.GraphModule:
    g = fx.Graph()
    counter = iter(range(1 << 30))

    def place(a):
        return g.placeholder(f"t{next(counter)}") if isinstance(a, torch.Tensor) else a
    node = g.call_function(func, fx.node.map_aggregate(args, place),
                           {k: fx.node.map_aggregate(v, place) for k, v in kwargs.items()})
    g.output(node)
    return fx.GraphModule(torch.nn.Module(), g)


def _meta(x):
    return torch.empty(x.shape, dtype=x.dtype, device="meta") if isinstance(x, torch.Tensor) else x


class _Entry:
    """One ATen op taken over: a compiled one-op xbench operator per call signature (or why there is none)."""

    def __init__(self, name: str, dtypes: tuple[str, ...]):
        self.name, self.dtypes = name, set(dtypes)
        self.ops: dict[tuple, tuple[GraphOp, bool] | str] = {}

    def __call__(self, func, args, kwargs):
        key = _key(func, args, kwargs)
        built = self.ops.get(key)
        if built is None:
            built = self.ops[key] = self._build(func, args, kwargs)
        if isinstance(built, str):
            raise _NotHere(built)
        op, several = built
        outs = op(*_leaves((args, kwargs)))
        return tuple(outs) if several else outs[0]

    @staticmethod
    def _build(func, args, kwargs) -> tuple[GraphOp, bool] | str:
        """The op as a one-node graph, probed against ATen's own result types (run on meta tensors)."""
        from .partition import probe
        want = func(*fx.node.map_aggregate(args, _meta), **{k: fx.node.map_aggregate(v, _meta)
                                                             for k, v in kwargs.items()})
        gm = _one_op_graph(func, args, kwargs)
        for n, t in zip((n for n in gm.graph.nodes if n.op == "placeholder"), _leaves((args, kwargs))):
            n.meta["val"] = t
        next(n for n in gm.graph.nodes if n.op == "call_function").meta["val"] = want
        bad = probe(gm)
        if bad:
            return next(iter(bad.values())).reason
        return GraphOp(gm, f"aten_{func.name().replace('::', '_').replace('.', '_')}", "cpu"), \
            isinstance(want, (tuple, list))


class _NotHere(Exception):
    pass


class _Override(TorchDispatchMode):
    def __init__(self, table: dict, stats: Stats):
        super().__init__()
        self.table, self.stats = table, stats

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = self.table.get(func)
        if entry is not None:
            tensors = _leaves((args, kwargs))
            if tensors and all(t.device.type == "cpu" for t in tensors) and \
                    {xb_dtype(t.dtype) for t in tensors if t.is_floating_point()} <= entry.dtypes:
                try:
                    out = entry(func, args, kwargs)
                    self.stats.calls[entry.name] += 1
                    return out
                except (_NotHere, XbenchError) as exc:
                    self.stats.fell_back[(entry.name, str(exc).splitlines()[0].removeprefix("xbench: "))] += 1
        return func(*args, **kwargs)


# ---- which ops, for which dtypes -------------------------------------------------------------------------------

def _aten_overloads(name: str) -> list:
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return []
    out = []
    for o in packet.overloads():
        f = getattr(packet, o)
        s = f._schema
        if s.is_mutable or any(r.alias_info is not None for r in s.returns):
            continue
        if not any(isinstance(a.type, torch.TensorType) or "Tensor" in str(a.type) for a in s.arguments):
            continue
        out.append(f)
    return out


def _grid_status(dtype: str) -> dict[str, bool]:
    """op -> whether its cpu and torch cells pass for `dtype`, from the newest saved coverage grid."""
    path = cache_dir("coverage") / "latest.json"
    try:
        cells = json.loads(path.read_text())["cells"]
    except (OSError, ValueError, KeyError):
        return {}
    status: dict[str, bool] = {}
    for c in cells:
        if c.get("dtype") == dtype and c.get("backend") in ("cpu", "torch"):
            status[c["op"]] = status.get(c["op"], True) and c.get("status") == "pass"
    return status


def _qualified(name: str, dtype: str, saved: dict[str, bool]) -> tuple[bool, str]:
    import xbench as xb

    from ..library.harness import check
    info = xb.ops.info(name)
    if dtype not in info.dtypes:
        return False, f"the library operator takes {', '.join(info.dtypes)}, not {dtype}"
    if name in saved:
        return saved[name], "" if saved[name] else f"its {dtype} grid cells fail (cpu or torch)"
    key = f"{info.name}:{dtype}:{_source_digest(info)}"
    known = _checked()
    if key not in known:
        result = [True, ""]
        for backend in ("torch", "cpu"):
            cell = check(info.name, backend, dtype, "tiny")
            if cell.status != "pass":
                result = [False, f"{backend} cell {cell.status}: {cell.reason[:120]}"]
                break
        known[key] = result
        atomic_write(_checked_path(), json.dumps(known, indent=0, sort_keys=True))
    return tuple(known[key])


def _checked_path():
    return cache_dir("torch") / "override-cells.json"


def _checked() -> dict:
    """Grid cells checked when an op was first enabled, keyed by the operator's source: a changed operator is
    checked again."""
    try:
        return json.loads(_checked_path().read_text())
    except (OSError, ValueError):
        return {}


def _source_digest(info) -> str:
    import inspect

    from ..cache import digest
    try:
        return digest(inspect.getsource(info.op.fn))[:12]
    except (OSError, TypeError):
        return "unknown"


_state = threading.local()
_global: _Override | None = None
_stats = Stats()


def _table(ops, exclude, dtypes, stats: Stats) -> dict:
    import xbench as xb
    known = set(xb.ops.list())
    for n in set(ops or ()) - known:
        stats.skipped[n] = f"no library operator {n!r} (and so no ATen op aten.{n} to take over)"
    names = sorted(set(ops) & known) if ops else sorted(known)
    saved = {d: _grid_status(d) for d in dtypes}
    table = {}
    for name in names:
        if name in exclude:
            stats.skipped[name] = "excluded"
            continue
        overloads = _aten_overloads(name)
        if not overloads:
            if ops:
                stats.skipped[name] = f"no ATen op aten.{name}" if not hasattr(torch.ops.aten, name) else \
                    "a view or in-place op (stays with torch)"
            continue
        if name in _VIEWS:
            stats.skipped[name] = "a view (its result aliases the input: stays with torch)"
            continue
        ok = []
        for d in dtypes:
            good, why = _qualified(name, d, saved[d])
            if good:
                ok.append(d)
            else:
                stats.skipped[f"{name} ({d})"] = why
        if not ok:
            continue
        entry = _Entry(name, tuple(ok))
        stats.registered[name] = tuple(ok)
        for f in overloads:
            table[f] = entry
    log.log(logging.INFO, "xbench.torch.enable: %d ATen ops taken over", len(stats.registered))
    return table


def enable(ops=None, exclude=(), dtypes=("float32",)) -> Stats:
    """Run the library's operators as the CPU implementations of their ATen ops, for this thread, until
    `disable()`: `ops` (library names; default all with an ATen counterpart) minus `exclude`, for `dtypes`."""
    global _global
    disable()
    table = _table(ops, set(exclude), tuple(dtypes), _stats)
    _global = _Override(table, _stats)
    _global.__enter__()
    return _stats


def disable() -> None:
    global _global
    if _global is not None:
        _global.__exit__(None, None, None)
        _global = None


@contextlib.contextmanager
def enabled(ops=None, exclude=(), dtypes=("float32",)):
    """`with xb.torch.enabled(): model(x)` — the override inside the block only."""
    mode = _Override(_table(ops, set(exclude), tuple(dtypes), _stats), _stats)
    with mode:
        yield _stats


def stats(reset: bool = False) -> Stats:
    """Which ATen ops the override took over, how many calls ran on xbench, and what went to torch and why."""
    global _stats
    out = _stats
    if reset:
        _stats = Stats()
        if _global is not None:
            _global.stats = _stats
    return out

"""Checking a backend against the float64 reference: at which sizes, and what the check found.

A backend that runs on this machine is checked at the call's own sizes. A simulated one (cuda under numba's CUDA
simulator, ascend on the CPU twin) is checked at `sim_dims`: every named dim a size of its own, so a broadcast
along the wrong axis or a contraction over the wrong dim fails instead of passing at equal sizes, and sizes past
the strides of the generated loops (the first dim past twice the 48 vector cores of an Ascend launch, the others
past a warp's 32 lanes and the K step of a GEMM tile), within what the simulator runs in about a second.
`loop_trips(artifact)` reads from the artifact's launch facts how many trips each loop of its kernels ran, so a
check says which loops ran only once.

Inputs are made from an operator's `Tensor[...]` annotations (`make_inputs`): named dims from the sizes given
(else DEFAULT_SIZES, distinct in order of appearance), floats standard normal, integers in [0, 8), bools fair.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes as D
from ..errors import XbenchError

DEFAULT_SIZES = (16, 24, 20, 12, 28, 8, 32, 36)    # dims not sized by the caller, in order of appearance
# a simulated backend's check sizes, in order of appearance: the cuda simulator runs two blocks per grid
# dimension (a row kernel's block takes 8 rows of 32 lanes: 37 rows wrap its grid-stride loop, and cost about a
# second), an Ascend launch up to 48 vector cores (97 rows give each core two or three)
SIM_SIZES = {"cuda": (37, 41, 43, 47, 53, 59, 61, 67), "ascend": (97, 41, 37, 43, 47, 53, 59, 61)}
SIM_ELEMENTS = 1 << 12                              # largest tensor of a simulated check (elements)
SIM_SECONDS = 3.0          # a check grown so every loop runs twice may take this long in the CUDA simulator
TWIN_ELEMENTS = 1 << 17    # ... and its largest tensor this many elements on the Ascend twin (compiled C++)
ASCEND_VECTOR_CORES, ASCEND_CUBE_CORES, ASCEND_TILE = 48, 24, 128
GROW_ROUNDS = 2            # compiles a check may spend growing its sizes
SEED = 0


class InputError(XbenchError, ValueError):
    """Inputs cannot be made for an operator from its annotations."""


@dataclass
class Inputs:
    args: list[Any]                  # positional arguments of the call (arrays; None where a default is used)
    kwargs: dict[str, Any]
    dims: dict[str, int]             # every named dim of the annotations and its size
    defaulted: list[str]             # dims that took a default size


def default_size(i: int) -> int:
    return DEFAULT_SIZES[i % len(DEFAULT_SIZES)] + 40 * (i // len(DEFAULT_SIZES))


def tensor_shapes(op: Any) -> dict[str, list[str | int]]:
    """Parameter -> its annotated dims (names, fixed sizes; `...` dropped), for annotated tensor parameters."""
    out = {}
    for name, spec in op.params.items():
        if spec is not None and spec.dims is not None:
            out[name] = [d if isinstance(d, int) else d.name for d in spec.dims if d is not Ellipsis]
    return out


def dim_names(op: Any) -> list[str]:
    names: list[str] = []
    for dims in tensor_shapes(op).values():
        names.extend(d for d in dims if isinstance(d, str) and d not in names)
    return names


def make_inputs(op: Any, sizes: Mapping[str, int], dtype: str = "float32", seed: int = SEED) -> Inputs:
    """Random arrays for every `Tensor[...]` parameter of `op` (module docstring)."""
    dtype = str(D.canonical(dtype))
    rng = np.random.default_rng(seed)
    kwargs: dict[str, Any] = {}
    dims: dict[str, int] = {}
    defaulted: list[str] = []
    order = dim_names(op)
    taken = {int(v) for k, v in sizes.items() if k in order}
    unsized: dict[str, int] = {}
    for i, n in enumerate(order):       # the i-th dim's default, or the next one no other dim has
        if n in sizes:
            continue
        j = i
        while default_size(j) in taken:
            j += 1
        unsized[n] = default_size(j)
        taken.add(unsized[n])
    for name, p in op.signature.parameters.items():
        spec = op.params.get(name)
        if spec is None or spec.dims is None:
            if p.default is not p.empty:
                continue
            what = "is annotated Tensor without dims" if spec is not None else "has no Tensor[...] annotation"
            raise InputError(f"{op.name}: parameter {name!r} {what} and no default, so there is nothing to make "
                             f"an input from", hint=f"annotate it with its dims, e.g. `{name}: Tensor[N, D]`, or "
                             f"give it a default value")
        shape = []
        for d in spec.dims:
            if d is Ellipsis:
                continue
            if isinstance(d, int):
                shape.append(d)
                continue
            if d.name not in dims:
                if d.name in sizes:
                    dims[d.name] = int(sizes[d.name])
                else:
                    dims[d.name] = unsized[d.name]
                    defaulted.append(d.name)
            shape.append(dims[d.name])
        kwargs[name] = random_array(rng, tuple(shape), spec.dtype or dtype)
    return Inputs([], kwargs, dims, defaulted)


def random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    if D.is_float(dtype):
        return rng.standard_normal(shape).astype(D.to_numpy(dtype))
    if dtype == "bool":
        return rng.random(shape) < 0.5
    return rng.integers(0, 8, size=shape).astype(D.to_numpy(dtype))


def call_dims(op: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, int] | None:
    """The named dims of a call from its arrays and the operator's annotations; None when a tensor parameter is
    not annotated (sizes of its own cannot be made then)."""
    if not hasattr(op, "params") or not hasattr(op, "signature"):
        return None
    try:
        bound = op.signature.bind(*args, **kwargs)
    except TypeError:
        return None
    shapes = tensor_shapes(op)
    dims: dict[str, int] = {}
    for name, value in bound.arguments.items():
        spec = op.params.get(name)
        if spec is None:
            if isinstance(value, np.ndarray):
                return None
            continue
        if spec.dims is None or name not in shapes:
            return None
        shape = np.shape(value)
        want = shapes[name]
        if len(shape) < len(want):
            return None
        for d, n in zip(want, shape[len(shape) - len(want):]):
            if isinstance(d, str):
                dims.setdefault(d, int(n))
    return dims


def _largest(shapes: Mapping[str, list[str | int]], dims: Mapping[str, int]) -> int:
    return max((math.prod(dims.get(d, 1) if isinstance(d, str) else d for d in s) for s in shapes.values()),
               default=0)


def sim_dims(op: Any, dims: Mapping[str, int], given: Sequence[str] = (), backend: str = "cuda") -> dict[str, int]:
    """The sizes a simulated backend is checked at (module docstring): dims the caller gave keep their size when
    every tensor then fits SIM_ELEMENTS, else at most the SIM_SIZES one; the others take SIM_SIZES; then the
    largest dims shrink until every tensor fits. Dims of different sizes stay different."""
    shapes = tensor_shapes(op)
    names = [n for n in dim_names(op) if n in dims] + [n for n in dims if n not in dim_names(op)]
    fits = _largest(shapes, dims) <= SIM_ELEMENTS
    out: dict[str, int] = {}
    for i, n in enumerate(names):
        sizes = SIM_SIZES.get(backend, SIM_SIZES["cuda"])
        wrap = sizes[i % len(sizes)]
        out[n] = (int(dims[n]) if fits else min(int(dims[n]), wrap)) if n in given else wrap
    floor = {n: min(out[n], 5) for n in out}
    while _largest(shapes, out) > SIM_ELEMENTS:
        grow = [n for n in out if out[n] > floor[n]]
        if not grow:
            break
        n = max(grow, key=lambda k: out[k])
        out[n] = max(floor[n], int(out[n] * 0.8))
    _distinct(out, dims)
    return out


def _distinct(out: dict[str, int], dims: Mapping[str, int]) -> None:
    """Make sizes of dims whose sizes differ in `dims` differ in `out` too (a smaller one moves down)."""
    names = list(out)
    for i, a in enumerate(names):
        for b in names[:i]:
            if out[a] == out[b] and dims.get(a) != dims.get(b):
                taken = {out[n] for n in names[:i]}
                v = out[a]
                while v in taken and v > 2:
                    v -= 1
                while v in taken:
                    v += 1
                out[a] = v


# ---- loops that ran once ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Loop:
    kernel: str
    loop: str          # what it iterates, e.g. "blocks over rows (grid x)", "lanes over 41 elements"
    trips: int
    grow: float = 1.0  # how much each dim would have to grow for a second trip (an estimate; 1: none)
    over: int = 1      # ... the loop running over this many of the dims together (0: all, -1: all but the last)


def _stage_length(program: Any, kernel: str) -> int:
    for k in getattr(program, "kernels", ()):
        if k.name == kernel:
            best = 1
            for s in k.stages:
                axes = getattr(s, "axes", None) or ((s.axis,) if hasattr(s, "axis") else ())
                best = max(best, int(np.prod([a.extent for a in axes], dtype=np.int64)) if axes else 1)
            return best
    return 1


def _cuda_loops(art: Any) -> list[Loop]:
    out = []
    for k in art.kernels:
        launches = k.resources.get("launches")
        items = launches.values() if isinstance(launches, Mapping) else [k.resources]
        for ln in items:
            if not isinstance(ln, Mapping) or "grid" not in ln:
                continue
            name = str(ln.get("function", k.name))
            grid, sim = list(ln["grid"]), list(ln.get("sim_grid", ln["grid"]))
            simulated = bool(getattr(art, "predicted", False))
            run_grid = sim if simulated else grid
            cap = _sim_grid_max() if simulated else 1 << 30       # the most blocks per grid dimension run here
            if ln.get("template") == "tiled":
                M, N, K = int(ln["M"]), int(ln["N"]), int(ln["K"])
                ext = {"x": (N, int(ln["BN"])), "y": (M, int(ln["BM"]))}
                tiles = {"x": -(-N // int(ln["BN"])), "y": -(-M // int(ln["BM"])), "z": int(ln.get("batch", 1))}
                for i, ax in enumerate("xyz"):
                    if tiles[ax] > 1 or ax != "z":
                        need = (ext[ax][1] * min(cap, max(grid[i], 2)) + 1) / max(1, ext[ax][0]) if ax in ext \
                            else 1.0
                        out.append(Loop(name, f"block tiles over {'NMB'[i]} (grid {ax})",
                                        -(-tiles[ax] // max(1, run_grid[i])), need))
                out.append(Loop(name, f"K steps of {ln['BK']}", -(-K // int(ln["BK"])), (int(ln["BK"]) + 1) / K))
                continue
            points = int(ln.get("points", 0) or 0)
            T = int(ln.get("threads_per_point", 1) or 1)
            if T > 1:
                R = int(ln.get("points_per_block", 1) or 1)
                groups = -(-points // R) if points else grid[0]
                out.append(Loop(name, "blocks over outer points (grid x)", -(-groups // max(1, run_grid[0])),
                                (R * min(cap, max(grid[0], 2)) + 1) / max(1, points), 0))
                L = _stage_length(art.program, k.name)
                out.append(Loop(name, f"{T} lanes over {L} elements", -(-L // T), (T + 1) / L))
            elif points:
                tpb = int(ln.get("threads_per_block", 1) or 1)
                out.append(Loop(name, "threads over outer points (grid-stride)", -(-points // (tpb * max(1, run_grid[0]))),
                                (tpb * min(cap, max(grid[0], 2)) + 1) / max(1, points), 0))
    return out


def _ascend_loops(art: Any) -> list[Loop]:
    out = []
    for k in art.kernels:
        launches = k.resources.get("launches")
        for ln in launches if isinstance(launches, list) else ():
            if not isinstance(ln, Mapping) or not isinstance(ln.get("tiling"), Mapping):
                continue
            t, name = ln["tiling"], str(ln.get("entry", k.name))
            cores = int(t.get("blockDim", ln.get("block_dim", 1)) or 1)
            most = ASCEND_VECTOR_CORES if ln.get("form") != "matmul" else ASCEND_CUBE_CORES
            for per, count, what, over in (("rowsPerBlock", "rows", "rows per core", -1),
                                           ("tilesPerBlock", "totalTiles", "tiles per core", 0),
                                           ("unitsPerBlock", "units", "matmul blocks per core", 2)):
                extra = {"rowsPerBlock": "extraRows", "tilesPerBlock": "extraTiles", "unitsPerBlock": "extraUnits"}
                if per in t:
                    trips = int(t[per]) + (1 if int(t.get(extra[per], 0) or 0) > 0 else 0)
                    n = max(1, int(t.get(count, cores) or 1))
                    # two per core on every core a launch can use: rows and matmul blocks; tiles: a core's share
                    # must hold two of the least length (a tile is half a share from two of them on)
                    tile = int(t.get("tileLength", ASCEND_TILE)) or ASCEND_TILE
                    need = 2 * most / n if per != "tilesPerBlock" else 4 * most * max(tile, 2 * ASCEND_TILE) / (
                        tile * n)
                    out.append(Loop(name, f"{what} ({cores} cores)", trips, need, over))
            if int(t.get("tilesPerRow", 1) or 1) > 1 and "tilesPerBlock" not in t:
                out.append(Loop(name, "tiles per row", int(t["tilesPerRow"])))
    return out


def _sim_grid_max() -> int:
    from ..backends.cuda.codegen import SIM_GRID_MAX
    return int(SIM_GRID_MAX)


def loop_trips(art: Any) -> list[Loop]:
    """The loops of a cuda or ascend artifact and the trips each ran (the most of any thread or core: a second
    trip exercised anywhere) as run here: a simulated cuda launch runs its `sim_grid`. Empty for other
    backends."""
    backend = getattr(art, "backend", "")
    if backend == "cuda":
        return _cuda_loops(art)
    if backend == "ascend":
        return _ascend_loops(art)
    return []


# ---- the check ------------------------------------------------------------------------------------------------

@dataclass
class Check:
    """One backend checked against the reference: the comparisons of its outputs, at `dims` (None: the call's
    own arrays, of an operator without annotations), and the loops of what ran."""

    backend: str
    dims: dict[str, int] | None
    comparisons: list[Any] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    resized: bool = False            # checked at sizes of its own, not the call's

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.comparisons)

    @property
    def max_abs_error(self) -> float | None:
        errs = [c.max_abs_error for c in self.comparisons if math.isfinite(c.max_abs_error)]
        return max(errs) if errs else None

    @property
    def max_rel_error(self) -> float | None:
        errs = [c.max_rel_error for c in self.comparisons if math.isfinite(c.max_rel_error)]
        return max(errs) if errs else None

    @property
    def once(self) -> list[Loop]:
        return [lp for lp in self.loops if lp.trips < 2]

    def where(self) -> str:
        """'at N=97, D=41' (and which loops ran once)."""
        at = "at " + (", ".join(f"{k}={v}" for k, v in self.dims.items()) if self.dims else "the call's sizes")
        if not self.loops:
            return at
        once = self.once
        if not once:
            return at + "; every loop ran more than one trip"
        return at + "; ran once: " + ", ".join(f"{lp.kernel} {lp.loop}" for lp in once)


def check(op: Any, args: Sequence[Any], kwargs: Mapping[str, Any], backend: str, *, artifact: Any = None,
          given: Sequence[str] | None = None, dtype: str = "float32", schedule: Any = None) -> Check:
    """Check `backend` against the reference for the call `op(*args, **kwargs)`: at the call's sizes when the
    backend runs here (or its artifact is not simulated), else at `sim_dims` (the dims in `given`, default all,
    are the caller's). Raises what compiling or running raises."""
    from ..verify import check as compare_outputs

    art = artifact if artifact is not None else op.compile(backend, *args, schedule=schedule, **kwargs)
    dims = call_dims(op, args, kwargs)
    if not getattr(art, "predicted", False) or dims is None:
        comps = compare_outputs(art, op.arrays(*args, **kwargs))
        return Check(backend, dims, list(comps), loop_trips(art))
    names = list(dims) if given is None else [n for n in dims if n in given]
    small = sim_dims(op, dims, names, backend)
    if small == dims:
        comps = compare_outputs(art, op.arrays(*args, **kwargs))
        return Check(backend, dims, list(comps), loop_trips(art))
    dt = _float_dtype(op, args, kwargs) or dtype
    inputs = make_inputs(op, small, dt)
    small_art = op.compile(backend, *inputs.args, schedule=schedule, **inputs.kwargs)
    loops = loop_trips(small_art)
    for _ in range(GROW_ROUNDS):        # larger, so the loops that ran once run twice, while affordable
        grown = _grown(op, small, loops, [n for n in small if n not in names], dims)
        if grown is None:
            break
        bigger = make_inputs(op, grown, dt)
        art2 = op.compile(backend, *bigger.args, schedule=schedule, **bigger.kwargs)
        if not _affordable(backend, art2, op, grown):
            break
        small, inputs, small_art, loops = grown, bigger, art2, loop_trips(art2)
    comps = compare_outputs(small_art, op.arrays(*inputs.args, **inputs.kwargs))
    return Check(backend, small, list(comps), loops, resized=True)


def _grown(op: Any, dims: Mapping[str, int], loops: Sequence[Loop], free: Sequence[str],
           call: Mapping[str, int]) -> dict[str, int] | None:
    """The check's dims grown so that each loop that ran once would run twice (`Loop.grow`; a loop over every
    point shares its growth among the free dims), or None when nothing can grow. Dims the caller gave
    (not in `free`) keep their size; the others stay distinct."""
    once = [lp for lp in loops if lp.trips < 2 and lp.grow > 1]
    if not once or not free:
        return None
    def share(lp: Loop) -> float:
        n = {0: len(free), -1: max(1, len(free) - 1)}.get(lp.over, min(lp.over, len(free)))
        return lp.grow ** (1 / max(1, n))
    per_dim = max(share(lp) for lp in once) * 1.05
    out = {n: (int(math.ceil(v * per_dim)) if n in free else v) for n, v in dims.items()}
    _distinct(out, call)
    return out if out != dict(dims) else None


def _affordable(backend: str, art: Any, op: Any, dims: Mapping[str, int]) -> bool:
    if backend == "cuda" and hasattr(art, "sim_seconds"):
        return art.sim_seconds() <= SIM_SECONDS
    return _largest(tensor_shapes(op), dims) <= TWIN_ELEMENTS


def _float_dtype(op: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
    """The element type of the call's first float array whose annotation names none (the inputs' dtype)."""
    try:
        bound = op.signature.bind(*args, **kwargs)
    except TypeError:
        return None
    for name, value in bound.arguments.items():
        spec = op.params.get(name)
        if spec is not None and spec.dtype is None and isinstance(value, np.ndarray) and \
                np.issubdtype(value.dtype, np.floating):
            return str(D.canonical(value.dtype.name))
    return None


__all__ = ["DEFAULT_SIZES", "SIM_ELEMENTS", "SIM_SIZES", "Check", "InputError", "Inputs", "Loop", "call_dims", "check",
           "default_size", "dim_names", "loop_trips", "make_inputs", "random_array", "sim_dims", "tensor_shapes"]

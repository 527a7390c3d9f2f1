"""Checking a backend against the float64 reference, with one tolerance table.

`|out - ref| <= atol + rtol * |ref|` elementwise, where for a float dtype with resolution R (fp16 1e-3,
bf16 1.6e-2, fp32 1.3e-6, fp64 1e-7) and reduction length K (the longest sum, product or contraction feeding
the output; 1 for elementwise operators):

    rtol = R * c * sqrt(K)        atol = rtol * scale

with `c` the operator class factor (2 for elementwise math, whose fast approximations are allowed a few ulp;
4 when reductions are involved) and `scale` the largest finite |ref| — rounding errors of a sum grow with the
magnitude of its terms, not of its result. Integers and bools must match exactly; NaN must be NaN where the
reference has NaN, and infinities must match (a reference value beyond the range of a 16- or 32-bit output
type is expected as the infinity it rounds to).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .dtypes import canonical, is_float, to_numpy

RESOLUTION = {"float16": 1e-3, "bfloat16": 1.6e-2, "float32": 1.3e-6, "float64": 1e-7}


def tolerance(dtype: str, reduction: int = 1, klass: str = "elementwise") -> tuple[float, float]:
    """(rtol, atol_factor) for outputs of `dtype` from reductions of length `reduction`."""
    if not is_float(dtype):
        return 0.0, 0.0
    c = {"elementwise": 2.0, "reduction": 4.0, "contraction": 4.0}.get(klass, 4.0)
    rtol = RESOLUTION[dtype] * c * math.sqrt(max(reduction, 1))
    return rtol, rtol


@dataclass
class Comparison:
    ok: bool
    max_abs_error: float
    max_rel_error: float
    worst_index: tuple | None
    rtol: float
    atol: float
    mismatches: int
    message: str = ""
    ratio: float = 0.0          # the largest |out - ref| / (atol + rtol * |ref|): <= 1 passes


    def __bool__(self) -> bool:
        return self.ok


def compare(out: np.ndarray, ref: np.ndarray, dtype: str | None = None, reduction: int = 1,
            klass: str | None = None, scale: float | None = None) -> Comparison:
    """`out` against `ref` within the tolerance of `dtype`; the absolute part is relative to `scale` (default:
    the largest finite magnitude in `ref`)."""
    out = np.asarray(out)
    ref = np.asarray(ref)
    dtype = dtype or ("bool" if out.dtype == np.bool_ else str(out.dtype))
    if out.shape != ref.shape:
        return Comparison(False, math.inf, math.inf, None, 0, 0, out.size,
                          f"shape {out.shape} differs from the reference's {ref.shape}")
    klass = klass or ("elementwise" if reduction <= 1 else "reduction")
    if not is_float(dtype):
        bad = out.astype(np.int64) != ref.astype(np.int64) if out.dtype != np.bool_ else out != ref
        n = int(bad.sum())
        idx = tuple(int(i) for i in np.argwhere(bad)[0]) if n else None
        diff = np.abs(out.astype(np.float64) - ref.astype(np.float64))
        err = float(diff.max()) if diff.size else 0.0
        return Comparison(n == 0, err, err, idx, 0, 0, n,
                          "" if n == 0 else f"{n} of {out.size} values differ (first at {idx}: {out[idx]} vs {ref[idx]})",
                          0.0 if n == 0 else math.inf)
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    out_dtype = canonical(out.dtype)
    if out_dtype in ("float16", "bfloat16", "float32"):
        # a value beyond the output type's range rounds to +-inf there: expect that infinity
        with np.errstate(over="ignore", invalid="ignore"):
            rounded = r.astype(to_numpy(out_dtype)).astype(np.float64)
        r = np.where(np.isinf(rounded) & np.isfinite(r), rounded, r)
    rtol, factor = tolerance(dtype, reduction, klass)
    finite = np.isfinite(r)
    if scale is None:
        scale = float(np.max(np.abs(r[finite]))) if finite.any() else 0.0
    atol = factor * max(scale, 1e-30)
    nan_ok = np.isnan(o) == np.isnan(r)
    inf_ok = np.where(np.isinf(r), o == r, ~np.isinf(o) | ~finite)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite & np.isfinite(o), np.abs(o - r), 0.0)
        rel = np.where(finite & (r != 0), diff / np.abs(np.where(r == 0, 1, r)), 0.0)
    allowed = atol + rtol * np.abs(np.where(finite, r, 0))
    close = diff <= allowed
    good = nan_ok & inf_ok & (close | ~finite)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(diff > 0, diff / allowed, 0.0)
    ratio = float(ratios.max()) if ratios.size else 0.0
    if not (nan_ok & inf_ok).all():
        ratio = math.inf
    n = int((~good).sum())
    worst = None
    if n:
        worst = tuple(int(i) for i in np.argwhere(~good)[0])
    elif diff.size:
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    msg = "" if n == 0 else (f"{n} of {out.size} values outside tolerance (rtol {rtol:.2g}, atol {atol:.2g}); "
                             f"first at {worst}: {out[worst]!r} vs reference {ref[worst]!r}")
    return Comparison(n == 0, max_abs, max_rel, worst, rtol, atol, n, msg, ratio)


def reduction_length(graph) -> int:
    """The longest reduction or contraction in a graph (1 when there is none)."""
    k = 1
    for e in graph.eqns:
        if e.prim.name == "reduce":
            k = max(k, int(np.prod([e.inputs[0].shape[a] for a in e.params["axes"]], dtype=np.int64)))
        elif e.prim.name == "contract":
            k = max(k, int(np.prod([e.inputs[0].shape[a] for a in e.params["lhs_contract"]], dtype=np.int64)))
        elif e.prim.name == "scan":
            k = max(k, e.inputs[0].shape[e.params["axis"]])
    return k


def weakest_float(graph) -> str | None:
    """The least precise float type anywhere in the graph: rounding there bounds every float output's accuracy
    (the reference computes in float64 throughout)."""
    floats = {v.dtype for v in graph.vars() if is_float(v.dtype)}
    return max(floats, key=lambda d: RESOLUTION[d]) if floats else None


def op_class(graph) -> str:
    names = {e.prim.name for e in graph.eqns}
    if "contract" in names:
        return "contraction"
    if names & {"reduce", "scan"}:
        return "reduction"
    return "elementwise"


def verify(op, *args, backend: str = "cpu", schedule=None, raise_on_fail: bool = False,
           **kwargs) -> list[Comparison]:
    """Run `op` on `backend` (with `schedule`, if given) and on the reference; compare every output."""
    arrays = op.arrays(*args, **kwargs)
    art = op.compile(backend, *args, schedule=schedule, **kwargs)
    return check(art, arrays, raise_on_fail=raise_on_fail)


def reference_outputs(graph, arrays) -> list[np.ndarray]:
    """The float64 reference's outputs for `graph` on `arrays`."""
    from .backends.reference import evaluate
    return evaluate(graph, *arrays)


def peak(a) -> float:
    """The largest finite magnitude in `a` (0 if none)."""
    a = np.abs(np.asarray(a, np.float64))
    return float(np.max(a, where=np.isfinite(a), initial=0.0))


def check(art, arrays, refs: list[np.ndarray] | None = None, raise_on_fail: bool = False) -> list[Comparison]:
    """Compare an artifact's outputs on `arrays` with the reference's (computed unless given)."""
    from .errors import VerificationError
    graph = art.program.graph
    outs = art.run(*arrays)
    refs = reference_outputs(graph, arrays) if refs is None else refs
    k = reduction_length(graph)
    klass = op_class(graph)
    weakest = weakest_float(graph)
    # an output that is zero everywhere by cancellation (the gradient of a one-key attention's query) is
    # judged at the scale of the largest output: its rounding error comes from terms of that size
    peaks = [peak(r) if is_float(v.dtype) else 0.0 for r, v in zip(refs, graph.outputs)]
    results = [compare(o, r, weakest if is_float(v.dtype) and weakest else v.dtype, k, klass,
                       scale=max(peaks) if is_float(v.dtype) and p == 0.0 else None)
               for o, r, v, p in zip(outs, refs, graph.outputs, peaks)]
    if raise_on_fail:
        for i, c in enumerate(results):
            if not c.ok:
                raise VerificationError(f"{graph.name} on {art.backend}, output {i}: {c.message}")
    return results

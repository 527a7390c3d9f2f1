"""The judge: which outputs of a generated operator are well defined, and whether a backend's agree.

The reference computes in float64 (int64 for integers). A backend rounds every value to its dtype, fuses
differently, sums in another order: at values where that matters (an intermediate past float32's range, a
floor at an exact integer, a sum that cancels, integer wrap-around) the reference and an honest backend differ.
Such elements are found by evaluating the graph three more times: as PyTorch's eager mode does (each
primitive computing in its operands' dtypes, rounding to its own, integers wrapping), and with each computed
value moved up and down by the error the tolerance table allows that equation (by a hash of the value, so equal
values stay equal). An element is judged where all four agree within the tolerance table;
elsewhere it is sensitive to rounding itself, and any of the answers is right. On judged elements a backend
must agree with the reference by `verify.compare`: exactly for integers and bools, NaN for NaN, equal
infinities, and within the table's tolerance for finite floats.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass

import numpy as np

from ..backends.reference import NARROW_INTS, evaluate, exact
from ..dtypes import is_float, to_numpy
from ..verify import compare, op_class, reduction_length, tolerance, weakest_float

COMPUTING = {"unary", "binary", "reduce", "contract", "scan", "cast"}
LARGEST = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38, "float32": 3.4028234663852886e38,
           "float64": 1.7976931348623157e308}


def _native(a: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(a).astype(np.bool_ if dtype == "bool" else to_numpy(dtype))


def evaluate_eager(graph, arrays, reverse: bool = False) -> list[np.ndarray]:
    """PyTorch's eager mode: every primitive computes in its operands' own dtypes (float32 products and sums,
    integers wrapping) and rounds its result to its dtype. With `reverse`, sums, products and contractions take
    their terms in the other order (a product that overflows before or after reaching a 0 is NaN or 0: no
    order is the right one, and backends vectorise)."""
    env: dict[int, np.ndarray] = {v.id: _native(a, v.dtype) for v, a in zip(graph.inputs, arrays)}
    with np.errstate(all="ignore"):
        for e in graph.eqns:
            ins = [env[v.id] for v in e.inputs]
            if reverse and e.prim.name == "reduce" and e.params["kind"] in ("sum", "prod"):
                ins[0] = np.flip(ins[0], axis=tuple(e.params["axes"]))
            elif reverse and e.prim.name == "contract":
                ins = [np.flip(ins[0], axis=tuple(e.params["lhs_contract"])),
                       np.flip(ins[1], axis=tuple(e.params["rhs_contract"]))]
            out = e.prim.reference(*ins, **e.params)
            outs = out if e.prim.multiple_results else (out,)
            if reverse and e.prim.name == "contract" and is_float(e.out.dtype):
                outs = (_unless_products_overflow(e, ins, outs[0]),)
            for v, o in zip(e.outputs, outs):
                env[v.id] = _native(o, v.dtype)
    return [exact(env[v.id]) for v in graph.outputs]


def _unless_products_overflow(e, ins, out: np.ndarray) -> np.ndarray:
    """NaN where a product of the contraction may pass the dtype's range: a backend multiplying before adding
    gets +-inf there (and inf - inf), one with fused multiply-adds need not."""
    p = e.params
    with np.errstate(all="ignore"):
        a = np.max(np.abs(ins[0].astype(np.float64)), axis=tuple(p["lhs_contract"]), keepdims=True)
        b = np.max(np.abs(ins[1].astype(np.float64)), axis=tuple(p["rhs_contract"]), keepdims=True)
        bound = e.prim.reference(a, b, **p)
    return np.where(bound > LARGEST[e.out.dtype], np.nan, out)


def _hash_unit(o: np.ndarray) -> np.ndarray:
    """A number in [0.5, 1] from each value's bits (equal values, equal numbers)."""
    bits = np.array(o, dtype=np.float64).view(np.uint64)       # (ascontiguousarray makes 0-d arrays 1-d)
    h = (bits * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(54)
    return 0.5 + h.astype(np.float64) / 2048.0


def _length(e) -> int:
    """The reduction length of one equation (1 for elementwise ones)."""
    x = e.inputs[0] if e.inputs else None
    if e.prim.name == "reduce":
        return int(np.prod([x.shape[a] for a in e.params["axes"]], dtype=np.int64))
    if e.prim.name == "contract":
        return int(np.prod([x.shape[a] for a in e.params["lhs_contract"]], dtype=np.int64))
    if e.prim.name == "scan":
        return x.shape[e.params["axis"]]
    return 1


def _perturb(sign: float):
    """Each computed float moved by the error the tolerance table allows that one equation (relative, and
    relative to the largest magnitude it computed), up or down by a hash of the value; NaN gets the sign of the
    direction."""
    def hook(e, v, o: np.ndarray) -> np.ndarray:
        if not is_float(v.dtype) or e.prim.name not in COMPUTING:
            return o
        k = _length(e)
        rtol, _ = tolerance(v.dtype, k, "elementwise" if k == 1 else "reduction")
        finite = np.isfinite(o)
        scale = float(np.max(np.abs(o[finite]))) if finite.any() else 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            h = _hash_unit(o)
            p = o * (1.0 + sign * rtol * h) + sign * rtol * scale * (h - 0.5)
        # a NaN's sign bit is no answer (x86's inf - inf sets it): the variants make every NaN negative and
        # positive, so what reads one (signbit, copysign) is not judged
        return np.where(finite, p, np.where(np.isnan(o), np.copysign(np.nan, sign), o))
    return hook


def evaluate_with(graph, arrays, hook) -> list[np.ndarray]:
    """The reference interpreter with `hook(eqn, var, value)` applied to every result."""
    env: dict[int, np.ndarray] = {v.id: exact(a) for v, a in zip(graph.inputs, arrays)}
    with np.errstate(all="ignore"):
        for e in graph.eqns:
            ins = [env[v.id] for v in e.inputs]
            out = e.prim.reference(*ins, **e.params)
            outs = out if e.prim.multiple_results else (out,)
            for v, o in zip(e.outputs, outs):
                o = exact(np.asarray(o))
                if v.dtype in NARROW_INTS:                  # as the reference: narrow integers wrap
                    o = o.astype(v.dtype).astype(np.int64)
                env[v.id] = hook(e, v, o)
    return [env[v.id] for v in graph.outputs]


def _in_range(r: np.ndarray, dtype: str) -> np.ndarray:
    """A float64 reference as an output of `dtype` holds it: values past the range become the infinity."""
    if dtype not in ("float16", "bfloat16", "float32"):
        return r
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = r.astype(to_numpy(dtype)).astype(np.float64)
    return np.where(np.isinf(rounded) & np.isfinite(r), rounded, r)


@dataclass
class Expected:
    """The reference's outputs and, per output, the mask of judged elements and the comparison settings."""
    values: list[np.ndarray]
    masks: list[np.ndarray]
    dtypes: list[str]
    tol_dtype: list[str]
    reduction: int
    klass: str
    scales: list[float]

    @property
    def judged(self) -> int:
        return int(sum(int(m.sum()) for m in self.masks))

    @property
    def total(self) -> int:
        return int(sum(m.size for m in self.masks))


def expected(graph, arrays: list[np.ndarray]) -> Expected:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)       # numpy's IEEE warnings say nothing here
        with np.errstate(all="ignore"):
            return _expected(graph, arrays)


def _expected(graph, arrays: list[np.ndarray]) -> Expected:
    ref = evaluate(graph, *arrays)
    variants = [evaluate_with(graph, arrays, _perturb(1.0)), evaluate_with(graph, arrays, _perturb(-1.0))]
    for reverse in (False, True):
        with contextlib.suppress(TypeError, ValueError):   # a rule taking float64 / int64 only: the others judge
            variants.append(evaluate_eager(graph, arrays, reverse))
    k = reduction_length(graph)
    klass = op_class(graph)
    weakest = weakest_float(graph)
    masks, tols, scales = [], [], []
    for i, v in enumerate(graph.outputs):
        r = ref[i]
        tol_dt = weakest if is_float(v.dtype) and weakest else v.dtype
        if is_float(v.dtype):
            r = ref[i] = _in_range(r.astype(np.float64), v.dtype)
            finite = np.isfinite(r)
            scale = float(np.max(np.abs(r[finite]))) if finite.any() else 0.0
        else:
            scale = 0.0
        mask = np.ones(r.shape, bool)
        for var in variants:
            mask &= agree(var[i], r, v.dtype, tol_dt, k, klass, scale)
        masks.append(mask)
        tols.append(tol_dt)
        scales.append(scale)
    return Expected(ref, masks, [v.dtype for v in graph.outputs], tols, k, klass, scales)


def agree(a: np.ndarray, r: np.ndarray, dtype: str, tol_dtype: str, k: int, klass: str, scale: float) -> np.ndarray:
    """Elementwise: does `a` agree with the reference `r` (already in the output's range)?"""
    if not is_float(dtype):
        return np.asarray(a == r) if dtype == "bool" else np.asarray(a.astype(np.int64) == r.astype(np.int64))
    a = _in_range(np.asarray(a, np.float64), dtype)
    rtol, factor = tolerance(tol_dtype, k, klass)
    atol = factor * max(scale, 1e-30)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(a - r) <= atol + rtol * np.abs(r)
    same_special = (np.isnan(a) & np.isnan(r)) | (np.isinf(r) & (a == r))
    return np.where(np.isfinite(r) & np.isfinite(a), close, same_special)


@dataclass
class Verdict:
    ok: bool
    message: str = ""
    output: int = -1
    mismatches: int = 0


def judge(exp: Expected, outs: list[np.ndarray]) -> Verdict:
    """A backend's outputs against the expectation, on the judged elements."""
    if len(outs) != len(exp.values):
        return Verdict(False, f"{len(outs)} outputs, the reference has {len(exp.values)}")
    for i, (o, r, m, dt) in enumerate(zip(outs, exp.values, exp.masks, exp.dtypes)):
        o = np.asarray(o)
        if o.shape != r.shape:
            return Verdict(False, f"output {i}: shape {o.shape}, the reference's is {r.shape}", i, o.size)
        want = to_numpy(dt) if dt != "bool" else np.dtype(np.bool_)
        if o.dtype != want:
            return Verdict(False, f"output {i}: dtype {o.dtype}, expected {dt}", i, o.size)
        if not m.any():
            continue
        if is_float(dt):
            oo = np.where(m, o.astype(np.float64), 0.0)
            rr = np.where(m, r.astype(np.float64), 0.0)
        else:
            oo = np.where(m, o, np.zeros((), o.dtype))
            rr = np.where(m, r, np.zeros((), r.dtype)).astype(o.dtype)
        c = compare(oo.astype(o.dtype) if not is_float(dt) else oo, rr, exp.tol_dtype[i], exp.reduction, exp.klass,
                    scale=exp.scales[i] if is_float(dt) else None)
        if not c.ok:
            return Verdict(False, f"output {i}: {c.message}", i, c.mismatches)
    return Verdict(True)

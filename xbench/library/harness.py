"""Verification of library operators, FlagGems-style: every operator's registered samples, on every backend and
dtype, against the float64 reference with the one tolerance table (`xbench/verify.py`); the reference itself
against PyTorch; gradients against finite differences and `torch.autograd`.

    check("abs", "cpu", "float16")          -> Cell(status="pass", error=..., samples=7)
    check("abs", "torch", "int32")          -> the reference against PyTorch (values and result dtypes)
    check("gelu", "grad", "float64")        -> xb.vjp against central differences and torch.autograd

A `Cell` is "pass", "fail" (with the worst error and the sample that showed it) or "unsupported" (with the
reason the backend, PyTorch or the operator gave). Nothing is left out silently.
"""
from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import dtypes as D
from ..errors import BackendError, XbenchError
from ..ops import SHAPES, NoTorch, OpInfo, Sample, ShapeSet, info
from ..verify import compare, op_class, peak, reduction_length

PSEUDO = ("torch", "grad")          # columns that check the reference itself rather than a backend
UNSUPPORTED = object()              # a sample check's answer: the backend declined; stop this cell


@dataclass
class Cell:
    """One operator x backend x dtype result."""

    op: str
    backend: str
    dtype: str
    status: str                    # pass | fail | unsupported
    error: float = 0.0             # worst max-abs error over the samples (inf for an exception)
    ratio: float = 0.0             # worst error as a fraction of its tolerance (<= 1 passes)
    reason: str = ""               # why unsupported, or what failed
    sample: str = ""               # the sample that gave the worst error (or the failure)
    samples: int = 0               # how many samples were checked
    seconds: float = 0.0
    notes: str = ""                # what the check could not cover (e.g. PyTorch lacks a float16 kernel)
    failed: list = field(default_factory=list)   # every failing sample: {"sample", "reason", "error"}

    @property
    def ok(self) -> bool:
        return self.status != "fail"

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("error", "ratio"):
            if not math.isfinite(d[k]):
                d[k] = str(d[k])
        return d

    def short(self) -> str:
        if self.status == "pass":
            return "pass"
        if self.status == "fail":
            return f"FAIL (error {_fmt(self.error)}, {_fmt(self.ratio)}x tolerance)"
        return f"unsupported ({self.reason})"


def _fmt(x: float) -> str:
    return f"{x:.2g}" if math.isfinite(x) else str(x)


def _one_line(exc: BaseException) -> str:
    msg = exc.message if isinstance(exc, XbenchError) else str(exc)
    msg = " ".join(msg.replace("xbench: ", "").split())
    return msg[:300]


def _shapes(shapes: ShapeSet | str) -> ShapeSet:
    return SHAPES[shapes] if isinstance(shapes, str) else shapes


def samples_of(inf: OpInfo, dtype: str, shapes: ShapeSet | str, limit: int | None = None) -> list[Sample]:
    """The operator's samples for `dtype`; with `limit`, that many spread evenly over the list (first and
    last included, so a short run still sees the plain shapes and the special-value and strided samples)."""
    if inf.samples is None:
        return []
    out = list(inf.samples(dtype, _shapes(shapes)))
    if limit is None or len(out) <= limit:
        return out
    if limit <= 1:
        return out[:max(limit, 0)]
    return [out[round(i * (len(out) - 1) / (limit - 1))] for i in range(limit)]


class _Acc:
    """Accumulates sample results into a cell."""

    def __init__(self, op: str, backend: str, dtype: str):
        self.cell = Cell(op, backend, dtype, "pass")
        self.t0 = time.perf_counter()

    def sample_ok(self, s: Sample, err: float, ratio: float = 0.0) -> None:
        self.cell.samples += 1
        if self.cell.status == "fail":
            return
        if ratio > self.cell.ratio or not self.cell.sample:
            self.cell.sample = repr(s)
        self.cell.error = max(self.cell.error, err)
        self.cell.ratio = max(self.cell.ratio, ratio)

    def fail(self, s: Sample | None, reason: str, err: float = math.inf, ratio: float = math.inf) -> Cell:
        """Record a failing sample (the cell fails; the first failure gives its reason and sample)."""
        self.cell.samples += 1
        if self.cell.status != "fail":
            self.cell.reason = reason
            self.cell.sample = repr(s) if s is not None else ""
            self.cell.error, self.cell.ratio = err, ratio
        else:
            self.cell.error, self.cell.ratio = max(self.cell.error, err), max(self.cell.ratio, ratio)
        self.cell.status = "fail"
        self.cell.failed.append({"sample": repr(s) if s is not None else "", "reason": reason,
                                 "error": err if math.isfinite(err) else str(err)})
        return self.cell

    def unsupported(self, reason: str) -> Cell:
        if self.cell.status == "fail":      # a backend that declines after failing samples still failed
            return self.done()
        if self.cell.samples:
            reason += f" (after {self.cell.samples} sample(s) passed)"
        self.cell.status = "unsupported"
        self.cell.reason = reason
        return self.done()

    def note(self, text: str) -> None:
        if text and text not in self.cell.notes:
            self.cell.notes = f"{self.cell.notes}; {text}" if self.cell.notes else text

    def done(self) -> Cell:
        self.cell.seconds = round(time.perf_counter() - self.t0, 3)
        if self.cell.status == "pass" and self.cell.samples == 0:
            self.cell.status = "fail"
            self.cell.reason = "the operator's sample generator gave no samples for this dtype"
            self.cell.error = math.inf
        return self.cell


# ---- backends against the reference ------------------------------------------------------------------

def check_backend(inf: OpInfo, backend: str, dtype: str, shapes: ShapeSet | str = "quick",
                  limit: int | None = None) -> Cell:
    """Run every sample on `backend`; compare with the float64 reference (`xb.verify`)."""
    from ..backends import get
    from ..verify import verify
    acc = _Acc(inf.name, backend, dtype)
    try:
        ok, why = get(backend).available()
    except Exception as exc:         # a broken plugin is reported, not raised
        ok, why = False, _one_line(exc)
    if not ok:
        return acc.unsupported(f"backend unavailable: {why}")
    if inf.samples is None:
        acc.fail(None, "no samples registered (register(..., samples=...))")
        return acc.done()

    def one(s) -> Cell | None:
        try:
            with np.errstate(all="ignore"):
                results = verify(inf.op, *s.args, backend=backend, **s.kwargs)
        except BackendError as exc:
            acc.unsupported(_one_line(exc))
            return UNSUPPORTED
        except Exception as exc:
            return acc.fail(s, f"{type(exc).__name__}: {_one_line(exc)}")
        worst = max(results, key=lambda c: (not c.ok, c.max_abs_error), default=None)
        if worst is None:
            acc.sample_ok(s, 0.0)
            return None
        if not worst.ok:
            i = results.index(worst)
            return acc.fail(s, f"output {i}: {worst.message}", worst.max_abs_error, worst.ratio)
        acc.sample_ok(s, max(c.max_abs_error for c in results), max(c.ratio for c in results))

    for s in samples_of(inf, dtype, shapes, limit):
        if one(s) is UNSUPPORTED:
            return acc.done()
    return acc.done()


# ---- the reference against PyTorch -------------------------------------------------------------------

_TORCH_DT = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
             "int8": "int8", "uint8": "uint8", "int16": "int16", "int32": "int32", "int64": "int64", "bool": "bool"}


def _torch():
    import torch
    return torch


def _to_torch(x, float64: bool):
    torch = _torch()
    if isinstance(x, np.ndarray):
        dt = D.canonical(x.dtype)
        if D.is_float(dt) and float64:
            return torch.from_numpy(np.array(x, dtype=np.float64, order="C"))
        if dt == "bfloat16":
            return torch.from_numpy(np.array(x, order="C").view(np.int16)).view(torch.bfloat16)   # bit-exact
        return torch.from_numpy(np.array(x, order="C"))
    if isinstance(x, (list, tuple)) and any(isinstance(e, np.ndarray) for e in x):
        return type(x)(_to_torch(e, float64) for e in x)
    return x


def _from_torch(t) -> tuple[np.ndarray, str]:
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t)
    dt = str(t.dtype).removeprefix("torch.")
    t = t.detach()
    if dt == "bfloat16":
        return t.to(torch.float32).numpy(), dt
    return t.numpy(), dt


def torch_fn(inf: OpInfo) -> Callable:
    """The registered PyTorch counterpart as a function of the operator's own arguments."""
    t = inf.torch
    torch = _torch()
    if isinstance(t, str):
        obj = torch
        parts = t.split(".")
        if parts[0] != "torch":
            raise ValueError(f"{inf.name}: torch={t!r} must be a dotted path starting with 'torch.'")
        for p in parts[1:]:
            obj = getattr(obj, p)
        return obj
    return lambda *a, **k: t(torch, *a, **k)


def _torch_outputs(res) -> list:
    if isinstance(res, (tuple, list)):
        return list(res)
    return [res]


def _call_torch(fn, s: Sample, float64: bool) -> list[tuple[np.ndarray, str]]:
    args = [_to_torch(a, float64) for a in s.args]
    kwargs = {k: _to_torch(v, float64) for k, v in s.kwargs.items()}
    return [_from_torch(r) for r in _torch_outputs(fn(*args, **kwargs))]


def check_torch(inf: OpInfo, dtype: str, shapes: ShapeSet | str = "quick", limit: int | None = None) -> Cell:
    """The reference against PyTorch, called on the same inputs: the result dtypes must be PyTorch's, integer
    and bool results must match exactly, float results within the tolerance of their dtype (for float64
    inputs: float64's, so this is the precise check of the reference's values). Where PyTorch has no kernel
    for `dtype`, the inputs are upcast to float64 instead (and that is noted)."""
    from ..backends import get
    acc = _Acc(inf.name, "torch", dtype)
    if isinstance(inf.torch, NoTorch):
        return acc.unsupported(f"no PyTorch counterpart: {inf.torch.reason}")
    if inf.torch is None:
        return acc.unsupported("no PyTorch counterpart registered")
    try:
        fn = torch_fn(inf)
    except ImportError as exc:
        return acc.unsupported(f"PyTorch is not installed ({exc})")
    except (AttributeError, ValueError) as exc:
        acc.fail(None, f"torch={inf.torch!r} does not resolve: {exc}")
        return acc.done()
    if inf.samples is None:
        acc.fail(None, "no samples registered (register(..., samples=...))")
        return acc.done()
    ref = get("reference")

    def one(s) -> Cell | None:
        try:
            with np.errstate(all="ignore"):
                graph = inf.op.trace(*s.args, **s.kwargs)
                arrays = inf.op.arrays(*s.args, **s.kwargs)
                refs = ref.compile(inf.op.lower(*s.args, **s.kwargs)).run_exact(*arrays)
        except Exception as exc:
            return acc.fail(s, f"the reference failed: {type(exc).__name__}: {_one_line(exc)}")
        out_dtypes = [str(v.dtype) for v in graph.outputs]
        upcast = False
        try:
            theirs = _call_torch(fn, s, float64=False)
        except Exception as exc:
            if dtype in ("float64",) or not D.is_float(dtype):
                return acc.fail(s, f"PyTorch failed: {type(exc).__name__}: {_one_line(exc)}")
            acc.note(f"PyTorch has no {dtype} kernel ({type(exc).__name__}: {_one_line(exc)[:100]}); "
                     "compared in float64")
            try:
                theirs = _call_torch(fn, s, float64=True)
            except Exception as exc2:
                return acc.fail(s, f"PyTorch failed in float64: {type(exc2).__name__}: {_one_line(exc2)}")
            upcast = True
        if len(theirs) != len(refs):
            return acc.fail(s, f"PyTorch returns {len(theirs)} outputs, xbench {len(refs)}")
        if not upcast:
            tdts = [dt for _, dt in theirs]
            if tdts != out_dtypes:
                return acc.fail(s, f"result dtypes differ: xbench {out_dtypes}, PyTorch {tdts}")
        k, klass = reduction_length(graph), op_class(graph)
        # an output that is zero by cancellation (a gradient through a softmax over one key) comes back from
        # PyTorch as rounding residue: judged at the scale of the sample's largest output, as gradients are
        largest = max((peak(r) for r, odt in zip(refs, out_dtypes) if D.is_float(odt)), default=0.0)
        errs = []
        for i, ((tv, tdt), r, odt) in enumerate(zip(theirs, refs, out_dtypes)):
            if D.is_float(odt):
                cmp_dtype = "float64" if upcast else tdt
                c = compare(tv.astype(np.float64) if cmp_dtype == "float64" else tv, r, cmp_dtype, k, klass,
                            scale=None if peak(r) else largest)
            else:
                c = compare(tv, r, odt)
            if not c.ok:
                return acc.fail(s, f"output {i}: PyTorch differs from the reference: {c.message}", c.max_abs_error,
                                c.ratio)
            errs.append((c.max_abs_error, c.ratio))
        acc.sample_ok(s, max((e for e, _ in errs), default=0.0), max((r for _, r in errs), default=0.0))

    for s in samples_of(inf, dtype, shapes, limit):
        if one(s) is UNSUPPORTED:
            return acc.done()
    return acc.done()


# ---- gradients ---------------------------------------------------------------------------------------

GRAD_MAX_ELEMENTS = 4096
GRAD_SAMPLES = 3
FD_STEP = 1e-6
FD_DIRECTIONS = 2


def _positional(op, s: Sample) -> tuple[list, dict, list[str]]:
    """The sample as positional arguments up to the last array (so xb.vjp sees every tensor argument),
    the rest as keywords; and the parameter names of the positional part."""
    bound = op.signature.bind(*s.args, **s.kwargs)
    bound.apply_defaults()
    names = list(op.signature.parameters)
    last = max((i for i, n in enumerate(names) if isinstance(bound.arguments.get(n), np.ndarray)), default=-1)
    pos = [bound.arguments[n] for n in names[:last + 1]]
    kw = {n: bound.arguments[n] for n in names[last + 1:]}
    return pos, kw, names[:last + 1]


def _float_array(x) -> bool:
    return isinstance(x, np.ndarray) and D.is_float(D.canonical(x.dtype))


def grad_samples(inf: OpInfo, shapes: ShapeSet | str = "quick", n: int = GRAD_SAMPLES) -> list[Sample]:
    out = []
    for s in samples_of(inf, "float64", shapes):
        if not s.grad:
            continue
        arrays = [a for a in list(s.args) + list(s.kwargs.values()) if isinstance(a, np.ndarray)]
        if any(a.size == 0 for a in arrays) or sum(a.size for a in arrays) > GRAD_MAX_ELEMENTS:
            continue
        out.append(s)
        if len(out) >= n:
            break
    return out


def _loss_operator(inf: OpInfo, names: list[str], kw: dict, cts: list[np.ndarray]):
    """sum_i <op(*args, **kw)_i, cts_i> over the float outputs, as an operator of the positional arguments."""
    from ..lang.functions import sum as xsum
    from ..lang.operator import Operator

    def body(*args):
        res = inf.op(*args, **kw)
        res = list(res) if isinstance(res, (tuple, list)) else [res]
        total = None
        for r, c in zip(res, cts):
            if D.is_float(r.dtype):
                term = xsum(r * c)
                total = term if total is None else total + term
        return total

    body.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    return Operator(body, name=f"loss_{inf.name}")


def _wrt(inf: OpInfo, names: list[str], pos: list) -> list[str]:
    """The differentiable arguments this sample passes float arrays to (optional ones may be absent)."""
    want = None if inf.grad is True else set(inf.grad_args())
    return [n for n, a in zip(names, pos) if _float_array(a) and (want is None or n in want)]


def check_grad(inf: OpInfo, shapes: ShapeSet | str = "quick", n: int = GRAD_SAMPLES,
               verify_backend: str | None = "cpu", verify_limit: int | None = None) -> Cell:
    """Gradients of the differentiable arguments in float64: `xb.grad` of <op(args), random cotangents>
    (run on the reference) against central finite differences along random directions and against
    `torch.autograd`; with `verify_backend`, the gradient operator is also verified on that backend (for the
    first `verify_limit` samples: compiling it is the cost)."""
    from ..lang.autodiff import grad
    from ..verify import verify
    acc = _Acc(inf.name, "grad", "float64")
    if not inf.grad:
        return acc.unsupported("not differentiable (the operator declares no grad arguments)"
                               + (f"; {inf.notes}" if inf.notes else ""))
    if "float64" not in inf.dtypes:
        return acc.unsupported("the operator does not take float64, which the gradient check needs")
    samples = grad_samples(inf, shapes, n)
    if not samples:
        acc.fail(None, "no float64 samples usable for the gradient check (all grad=False, empty or large)")
        return acc.done()

    def xb_grad(pos, kw, names, wrt, cts):
        """The loss operator, its gradient operator and the gradients (on the reference) by argument name."""
        loss = _loss_operator(inf, names, kw, cts)
        g_op = grad(loss, tuple(names.index(nm) for nm in wrt))
        g = g_op.run(*pos, backend="reference")
        return loss, g_op, dict(zip(wrt, g if isinstance(g, tuple) else (g,)))

    def one(s, verify_on: str | None) -> Cell | None:
        try:
            pos, kw, names = _positional(inf.op, s)
            wrt = _wrt(inf, names, pos)
            if not wrt:
                return acc.fail(s, f"none of the differentiable arguments {inf.grad_args() or inf.grad!r} is a "
                                   "float array in this sample")
            outs = inf.op.run(*pos, backend="reference", **kw)
            outs = list(outs) if isinstance(outs, tuple) else [outs]
            rng = np.random.default_rng(len(outs) * 7919 + sum(np.asarray(o).size for o in outs))
            cts = [rng.standard_normal(np.shape(o)) if D.is_float(D.canonical(np.asarray(o).dtype))
                   else np.zeros(np.shape(o)) for o in outs]
            loss, g_op, grads = xb_grad(pos, kw, names, wrt, cts)
        except Exception as exc:
            return acc.fail(s, f"xb.grad failed: {type(exc).__name__}: {_one_line(exc)}")
        worst, worst_ratio = 0.0, 0.0
        # finite differences along random directions, one argument at a time
        for nm in wrt:
            i = names.index(nm)
            x = pos[i]
            for d in range(FD_DIRECTIONS):
                v = np.random.default_rng(1000 * i + d).standard_normal(x.shape)

                def f(t, i=i, x=x, v=v, pos=pos, loss=loss):
                    args = list(pos)
                    args[i] = np.asarray(x + t * v)
                    return float(loss.run(*args, backend="reference"))
                fd = (f(FD_STEP) - f(-FD_STEP)) / (2 * FD_STEP)
                an = float(np.sum(np.asarray(grads[nm], np.float64) * v))
                scale = sum(float(np.sum(np.abs(np.asarray(r, np.float64) * c))) for r, c in zip(outs, cts)
                            if D.is_float(D.canonical(np.asarray(r).dtype)) and np.all(np.isfinite(r)))
                tol = 1e-6 * (abs(fd) + abs(an) + scale + 1.0)
                err = abs(fd - an)
                if not err <= tol:
                    return acc.fail(s, f"d/d{nm} along a random direction: finite differences {fd:.10g}, "
                                       f"xb.grad {an:.10g} (tolerance {tol:.2g})", err, err / tol)
                worst, worst_ratio = max(worst, err), max(worst_ratio, err / tol)
        # torch.autograd
        if not inf.torch_grad:
            acc.note("PyTorch's backward is not the derivative of its forward here: checked against finite "
                     "differences only")
        elif inf.torch is not None and not isinstance(inf.torch, NoTorch):
            try:
                torch = _torch()
                fn = torch_fn(inf)
                targs = [_to_torch(a, True) for a in pos]
                tkw = {k: _to_torch(v, True) for k, v in kw.items()}
                leaves = []
                for nm in wrt:
                    t = targs[names.index(nm)].clone().requires_grad_(True)
                    targs[names.index(nm)] = t
                    leaves.append(t)
                res = _torch_outputs(fn(*targs, **tkw))
                total = sum((r * torch.from_numpy(np.asarray(c, np.float64))).sum() for r, c in zip(res, cts)
                            if r.dtype.is_floating_point)
                tg = torch.autograd.grad(total, leaves, allow_unused=True)
                # PyTorch differentiates only the outputs it marks so (not the statistics native_layer_norm and
                # the like return): xb.grad is compared with a zero cotangent on the others (the finite
                # differences above checked every output)
                fixed = [i for i, r in enumerate(res) if r.dtype.is_floating_point and not r.requires_grad
                         and np.any(cts[i])]
                ours = grads
                if fixed:
                    acc.note(f"PyTorch does not differentiate output(s) {', '.join(map(str, fixed))}: compared "
                             "with torch.autograd with a zero cotangent there")
                    ours = xb_grad(pos, kw, names, wrt, [0 * c if i in fixed else c for i, c in enumerate(cts)])[2]
            except Exception as exc:
                acc.note(f"torch.autograd could not run: {type(exc).__name__}: {_one_line(exc)[:120]}")
                tg = None
            if tg is not None:
                # every argument's gradient at the scale of the sample's largest: one that is zero by
                # cancellation (a normalisation over one element) comes back from PyTorch as rounding residue
                gscale = max((peak(g) for g in ours.values()), default=0.0)
                for nm, t in zip(wrt, tg):
                    theirs = np.zeros_like(ours[nm]) if t is None else t.detach().numpy(force=True)
                    c = compare(np.asarray(ours[nm], np.float64), theirs, "float64",
                                max(1, sum(np.asarray(o).size for o in outs)), "reduction",
                                scale=max(gscale, peak(theirs)))
                    if not c.ok:
                        return acc.fail(s, f"d/d{nm} differs from torch.autograd: {c.message}", c.max_abs_error,
                                        c.ratio)
                    worst, worst_ratio = max(worst, c.max_abs_error), max(worst_ratio, c.ratio)
        else:
            acc.note("no PyTorch counterpart: checked against finite differences only")
        if verify_on:
            try:
                res = verify(g_op, *pos, backend=verify_on)
            except BackendError as exc:
                acc.note(f"gradient on {verify_on}: unsupported ({_one_line(exc)})")
                res = []
            except Exception as exc:
                return acc.fail(s, f"the gradient operator failed on {verify_on}: {type(exc).__name__}: "
                                   f"{_one_line(exc)}")
            for c in res:
                if not c.ok:
                    return acc.fail(s, f"the gradient operator on {verify_on} differs from the reference: "
                                       f"{c.message}", c.max_abs_error, c.ratio)
        acc.sample_ok(s, worst, worst_ratio)

    for i, s in enumerate(samples):
        if one(s, verify_backend if verify_limit is None or i < verify_limit else None) is UNSUPPORTED:
            return acc.done()
    return acc.done()


# ---- one entry point ---------------------------------------------------------------------------------

def check(name: str, backend: str, dtype: str = "float32", shapes: ShapeSet | str = "quick",
          limit: int | None = None) -> Cell:
    """One grid cell: `backend` is a backend name, "torch" (the reference against PyTorch) or "grad"."""
    inf = info(name)
    if backend != "grad" and dtype not in inf.dtypes:
        return Cell(inf.name, backend, dtype, "unsupported",
                    reason=f"the operator takes {', '.join(inf.dtypes)}, not {dtype}")
    t0 = time.perf_counter()
    try:
        if backend == "torch":
            return check_torch(inf, dtype, shapes, limit)
        if backend == "grad":
            return check_grad(inf, shapes, verify_limit=limit)
        return check_backend(inf, backend, dtype, shapes, limit)
    except Exception as exc:         # a broken sample generator or harness bug: a failing cell, not a crash
        return Cell(inf.name, backend, dtype, "fail", math.inf, math.inf,
                    f"the check itself failed: {type(exc).__name__}: {_one_line(exc)}",
                    seconds=round(time.perf_counter() - t0, 3),
                    failed=[{"sample": "", "reason": f"{type(exc).__name__}: {_one_line(exc)}", "error": "inf"}])


def signature_of(name: str) -> str:
    inf = info(name)
    return f"{name}{inspect.signature(inf.op.fn)}"


def iter_cells(names: Iterable[str], backends: Iterable[str], dtypes: Iterable[str] | None,
               shapes: dict[str, ShapeSet | str], limits: dict[str, int | None] | None = None):
    """(name, backend, dtype) triples of a grid, in order: every declared dtype (or those asked for)."""
    limits = limits or {}
    for name in names:
        inf = info(name)
        want = [d for d in inf.dtypes if dtypes is None or d in dtypes]
        for backend in backends:
            if backend == "grad":
                if dtypes is None or "float64" in dtypes:
                    yield name, backend, "float64"
                continue
            for d in want:
                yield name, backend, d

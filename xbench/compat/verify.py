"""A lifted operator against the kernel it came from: the same inputs through both, compared with the
tolerance table (`xbench.verify`); and the random inputs `from_cuda` checks on when given none."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..verify import compare, op_class, reduction_length
from .errors import LiftMismatch
from .original import run_original


@dataclass
class Check:
    """One output of a lifted operator on one backend against the original kernel."""
    output: str
    backend: str
    ok: bool
    max_abs_error: float
    message: str
    inputs: str
    seconds: float = 0.0

    def __str__(self) -> str:
        verdict = "matches the kernel" if self.ok else f"DIFFERS: {self.message}"
        return f"{self.output} on {self.backend} ({self.inputs}): {verdict} (max |error| {self.max_abs_error:.2g})"


def describe(inputs: dict) -> str:
    parts = []
    for k, v in inputs.items():
        if isinstance(v, np.ndarray) and v.ndim:
            parts.append(f"{k}: {v.dtype}{list(v.shape)}")
        else:
            parts.append(f"{k}={v!r}" if not isinstance(v, np.ndarray) else f"{k}={v.item()!r}")
    return ", ".join(parts)


def check_against_kernel(op, args, kwargs, backends) -> list[Check]:
    bound = op.signature.bind(*args, **kwargs)
    bound.apply_defaults()
    inputs = dict(bound.arguments)
    spec = op.spec
    graph = op.trace(**inputs)
    lifted = spec.last
    key = _inputs_key(inputs)
    theirs = op._kernel_outputs.get(key)
    if theirs is None:
        theirs = run_original(spec, inputs, lifted.out_shapes, lifted.out_dtypes, lifted.launch)
        op._kernel_outputs[key] = theirs
    k, klass = reduction_length(graph), op_class(graph)
    out = []
    for b in backends:
        t0 = time.perf_counter()
        ours = op.run(**inputs, backend=b)
        ours = ours if isinstance(ours, tuple) else (ours,)
        secs = time.perf_counter() - t0
        for name, mine in zip(spec.outs, ours):
            ref = theirs[name]
            c = compare(np.asarray(mine), ref, lifted.out_dtypes[name], k, klass)
            out.append(Check(name, b, c.ok, c.max_abs_error, c.message, describe(inputs), round(secs, 3)))
    return out


def _inputs_key(inputs: dict):
    """The kernel's outputs are kept per inputs (by content), so checking more backends runs it once."""
    import hashlib
    h = hashlib.sha256()
    for k, v in inputs.items():
        a = np.asarray(v)
        h.update(f"{k}:{a.dtype}:{a.shape}:".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def raise_on_mismatch(op, checks: list[Check]) -> None:
    bad = [c for c in checks if not c.ok]
    if bad:
        lines = "\n  ".join(str(c) for c in bad)
        raise LiftMismatch(f"the operator lifted from {op.spec.src.name} differs from the kernel:\n  {lines}",
                           hint="this is a defect in xbench's lifting: please report the kernel; meanwhile keep "
                                "running the kernel itself", loc=op.spec.src.location(op.spec.src.tree.lineno))


def synthesize(spec, seed: int = 0) -> dict:
    """Random inputs for every parameter of the kernel (outputs included): float32 arrays, index arrays in range,
    integer scalars equal to the arrays' size. Every axis gets the same size, so shapes agree however the kernel
    pairs them."""
    u = spec.usage
    rng = np.random.default_rng(seed)
    rank = max([u.ranks.get(p, 0) for p in spec.src.params] + [1])
    n = {1: 77, 2: 19, 3: 7}.get(rank, 5)
    if u.shared_shapes:
        tile = max(max(s) for s in u.shared_shapes)
        n = max(3, min(tile + 3, 2 * tile - 1)) if rank > 1 else max(n, tile + 5)
    out = {}
    for p in spec.src.params:
        if p in spec.outs:
            continue                 # shaped by the lifting; added when the kernel reads it (an in-out array)
        if p in u.ranks:
            shape = (n,) * u.ranks[p]
            if p in u.index_arrays:
                out[p] = rng.integers(0, n, size=shape).astype(np.int64)
            else:
                out[p] = rng.standard_normal(shape).astype(np.float32)
        elif p in u.int_scalars:
            out[p] = n
        else:
            out[p] = float(np.round(rng.uniform(0.5, 2.0), 3))
    return out

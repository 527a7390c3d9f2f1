"""The quick-start story in a terminal (`make demo`): one operator written once, traced, fused, compiled for
every backend installed here, verified against the float64 reference, timed and profiled."""
from __future__ import annotations

import inspect
import textwrap
import time

import numpy as np

import xbench as xb
from xbench import Tensor

N, D = xb.dims("N D")


@xb.tensor_op
def softmax(x: Tensor[N, D]) -> Tensor[N, D]:
    e = xb.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _head(title: str) -> None:
    print(f"\n\033[1m== {title} ==\033[0m")


def _excerpt(text: str, lines: int = 18) -> str:
    out = text.splitlines()
    more = f"\n    ... ({len(out) - lines} more lines)" if len(out) > lines else ""
    return textwrap.indent("\n".join(out[:lines]), "    ") + more


def main(quick: bool = False) -> int:
    from . import backends
    from .profile.timing import bench

    rng = np.random.default_rng(0)
    n, d = (64, 256) if quick else (2048, 2048)
    x = rng.standard_normal((n, d)).astype(np.float32)

    _head("1. an operator, written once")
    print(_excerpt(inspect.getsource(softmax.fn)))

    _head(f"2. traced for N={n}, D={d}: the graph IR")
    print(_excerpt(str(softmax.trace(x))))

    _head("3. lowered and fused: the loop IR (one kernel per row, the row kept in a scratch buffer)")
    print(_excerpt(str(softmax.lower(x))))

    _head("4. compiled for every backend installed here, verified against the float64 reference")
    small = x[:16, :64].copy()
    for name in backends.names():
        if name == "reference":
            continue
        ok, why = backends.get(name).available()
        if not ok:
            print(f"  {name:8s} not available here: {why}")
            continue
        t0 = time.perf_counter()
        try:
            art = softmax.compile(name, small)
            res = xb.verify(softmax, small, backend=name)[0]
        except xb.XbenchError as exc:
            print(f"  {name:8s} failed: {exc}")
            continue
        verdict = "pass" if res.ok else "FAIL"
        print(f"  {name:8s} {verdict}  max abs error {res.max_abs_error:.2e}  max rel error {res.max_rel_error:.2e}  "
              f"({(time.perf_counter() - t0) * 1e3:.0f} ms incl. compile)")
        interesting = {k: v for k, v in art.resources.items() if not isinstance(v, (dict, list)) and k != "file"}
        if interesting:
            print(f"           resources: {interesting}")
    print("\n  the cpu kernel (numba):")
    print(_excerpt(softmax.compile("cpu", small).kernels[0].source, 24))

    _head(f"5. timed on this machine ({n}x{d} float32, median of several runs)")
    softmax(x)
    t_xb = bench(lambda: softmax(x))

    def np_softmax(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    t_np = bench(lambda: np_softmax(x))
    gbs = 2 * x.nbytes / (t_xb.median_ms * 1e-3) / 1e9
    print(f"  xbench cpu  {t_xb}   ({gbs:.1f} GB/s of input+output)")
    print(f"  numpy       {t_np}   -> xbench is {t_np.median_ms / t_xb.median_ms:.1f}x faster")
    try:
        import torch
        tx = torch.from_numpy(x)
        t_t = bench(lambda: torch.softmax(tx, -1))
        print(f"  torch eager {t_t}   -> xbench is {t_t.median_ms / t_xb.median_ms:.1f}x faster")
    except ImportError:
        print("  torch not installed: no PyTorch peer in this run")

    _profile_step(softmax, x[: min(n, 512)])
    print("\nNext: `make lab` opens the same story as notebooks (notebooks/01-quickstart.ipynb).")
    return 0


def _profile_step(op, x) -> None:
    try:
        from .profile import profile
    except ImportError:
        return
    _head("6. profiled: metrics from every source, and the roofline on targets you don't have")
    rep = profile(op, x)
    print(_excerpt(rep.table(), 40))

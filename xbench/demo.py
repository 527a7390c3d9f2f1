"""The quick-start story in a terminal (`make demo`): one operator written once, traced, fused, compiled for
every backend installed here, verified against the float64 reference, timed and profiled, at one size
throughout (a simulated backend is checked at sizes of its own, and says which)."""
from __future__ import annotations

import linecache
import textwrap
import time

import numpy as np

import xbench as xb
from xbench import Tensor

# The operator is the user's code of this story: compiled from its own text, so the IR names its lines.
OPERATOR = '''\
@xb.tensor_op
def softmax(x: Tensor[N, D]) -> Tensor[N, D]:
    e = xb.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)
'''
OPERATOR_FILE = "<xbench demo: softmax.py>"


def _operator():
    linecache.cache[OPERATOR_FILE] = (len(OPERATOR), None, OPERATOR.splitlines(True), OPERATOR_FILE)
    namespace = {"xb": xb, "Tensor": Tensor, "N": xb.dims("N D")[0], "D": xb.dims("N D")[1]}
    exec(compile(OPERATOR, OPERATOR_FILE, "exec"), namespace)   # the fixed text above
    return namespace["softmax"]


def _head(title: str) -> None:
    print(f"\n\033[1m== {title} ==\033[0m")


def _excerpt(text: str, lines: int = 18) -> str:
    out = text.splitlines()
    more = f"\n    ... ({len(out) - lines} more lines)" if len(out) > lines else ""
    return textwrap.indent("\n".join(out[:lines]), "    ") + more


def versus(peer_ms: float, xb_ms: float) -> str:
    """'xbench 4.6x faster' or 'xbench 1.3x slower' (never '0.4x faster')."""
    r = peer_ms / xb_ms
    return f"xbench {r:.1f}x faster" if r >= 1 else f"xbench {1 / r:.1f}x slower"


def main(quick: bool = False, targets: tuple[str, ...] | None = None) -> int:
    """The story (module docstring); `targets` are the profile's (default: the profiler's, the local CPU
    calibrated on first use included)."""
    from . import backends
    from .profile.checks import check
    from .profile.resources import resource_tables, text_table
    from .profile.timing import bench, fmt_time

    softmax = _operator()
    rng = np.random.default_rng(0)
    n, d = (64, 256) if quick else (2048, 2048)
    x = rng.standard_normal((n, d)).astype(np.float32)

    _head("1. an operator, written once")
    print(textwrap.indent(OPERATOR.rstrip(), "    "))

    _head(f"2. traced for N={n}, D={d}: the graph IR (each line tagged with the operator's line)")
    print(_excerpt(str(softmax.trace(x))))

    _head("3. lowered and fused: the loop IR (one kernel per row, the row kept in a scratch buffer)")
    print(_excerpt(str(softmax.lower(x))))

    _head(f"4. compiled for every backend installed here at N={n}, D={d}, verified against the float64 reference")
    rows, notes, tables, arts, checks = [], [], [], {}, {}
    order = ("cpu", "cuda", "ascend")
    for name in sorted((b for b in backends.names() if b != "reference"),
                       key=lambda b: (order.index(b) if b in order else len(order), b)):
        ok, why = backends.get(name).available()
        if not ok:
            notes.append(f"{name}: not available here: {why}")
            continue
        t0 = time.perf_counter()
        try:
            art = softmax.compile(name, x)
            c = check(softmax, [x], {}, name, artifact=art)
        except xb.XbenchError as exc:
            rows.append([name, "error", "—", "—", "—", "—"])
            notes.append(f"{name}: {exc.message}")
            continue
        arts[name], checks[name] = art, c
        at = ", ".join(f"{k}={v}" for k, v in (c.dims or {}).items())
        rows.append([name, "pass" if c.ok else "FAIL", f"{c.max_abs_error:.2e}", f"{c.max_rel_error:.2e}", at,
                     f"{(time.perf_counter() - t0) * 1e3:.0f} ms"])
        if c.resized:
            where = {"cuda": "numba's CUDA simulator", "ascend": "the Ascend C CPU twin"}.get(name, "a simulator")
            loops = ("every loop ran more than one trip" if not c.once else
                     "ran once: " + ", ".join(f"{lp.kernel} {lp.loop}" for lp in c.once))
            notes.append(f"{name}: runs in {where} here, so it is checked at {at} ({loops})")
        tables += resource_tables(name, art)
    print(text_table(["backend", "result", "max abs error", "max rel error", "checked at", "compile + check"],
                     rows, "  "))
    for note in notes:
        print(f"  {note}")
    print("\n  what each toolchain reported:")
    for title, header, trows in tables:
        print(f"\n  {title}")
        print(text_table(header, trows, "    "))
    if "cpu" in arts:
        print(f"\n  the cpu kernel (numba), compiled for N={n}, D={d}:")
        print(_excerpt(arts["cpu"].kernels[0].source, 24))

    _head(f"5. timed on this machine ({n}x{d} float32, median of several runs)")
    softmax(x)
    t_xb = bench(lambda: softmax(x))

    def np_softmax(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    t_np = bench(lambda: np_softmax(x))
    gbs = 2 * x.nbytes / (t_xb.median_ms * 1e-3) / 1e9
    print(f"  xbench cpu   {fmt_time(t_xb.median_ms)}  ±{t_xb.spread * 50:.0f}%   ({gbs:.1f} GB/s of input + output)")
    print(f"  numpy        {fmt_time(t_np.median_ms)}  ±{t_np.spread * 50:.0f}%   {versus(t_np.median_ms, t_xb.median_ms)}")
    try:
        import torch
        tx = torch.from_numpy(x)
        t_t = bench(lambda: torch.softmax(tx, -1))
        print(f"  torch eager  {fmt_time(t_t.median_ms)}  ±{t_t.spread * 50:.0f}%   "
              f"{versus(t_t.median_ms, t_xb.median_ms)}")
    except ImportError:
        print("  torch not installed: no PyTorch peer in this run")

    _profile_step(softmax, x, targets, checks)
    print("\nNext: `make lab` opens the same story as notebooks (notebooks/01-quickstart.ipynb).")
    return 0


def _profile_step(op, x, targets: tuple[str, ...] | None, checks: dict) -> None:
    from .config import cache_dir
    from .profile import profile
    from .viz.roofline import roofline, roofline_text

    n, d = x.shape
    _head(f"6. profiled at N={n}, D={d}: metrics from every source, grouped by where they apply")
    rep = profile(op, x, checks=checks, **({"targets": targets} if targets else {}))   # the checks above
    print(rep.grouped_text(indent="  "))

    _head("7. the roofline: the operator against the roofs of every target, including ones not here")
    targets = list(dict.fromkeys(m.target for m in rep.records if m.target))
    print(roofline_text(rep, targets, indent="  "))
    path = cache_dir("demo") / "roofline.png"
    roofline(rep, targets=targets, path=str(path))
    print(f"\n  the figure: {path}")

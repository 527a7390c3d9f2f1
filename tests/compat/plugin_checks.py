"""Run in a child process that has the example plugin package installed (tests/compat/test_plugins.py): what
an installed operator and target package looks like to xbench, printed as one JSON object."""
import contextlib
import io
import json

import numpy as np

import xbench as xb
from xbench import ops
from xbench.hw import get_target, list_targets
from xbench.library import coverage

NAMES = ["squareplus", "axpby"]


def main() -> dict:
    out: dict = {"load_errors": dict(ops.LOAD_ERRORS)}
    names = xb.ops.list()
    out["listed"] = [n for n in NAMES if n in names]
    out["info"] = {n: [ops.info(n).plugin, ops.info(n).module, ops.info(n).category] for n in out["listed"]}
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    y = np.cos(x)
    out["squareplus_error"] = float(np.abs(xb.ops.squareplus(x) - (x + np.sqrt(x * x + 4)) / 2).max())
    out["axpby_error"] = float(np.abs(xb.ops.axpby(x, y, alpha=2.0, beta=3.0) - (2 * x + 3 * y)).max())
    # the library's own grid: the reference against PyTorch, gradients, cpu; then the slow backends on tiny shapes
    g = coverage.run(ops=NAMES, backends=["reference", "cpu"], shapes="quick", limit=2, progress=False, save=False)
    out["grid"] = [[c.op, c.backend, c.dtype, c.status, c.reason] for c in g.cells]
    slow = coverage.run(ops=NAMES, backends=["cuda", "ascend"], dtypes=["float32"], slow_limit=1, torch=False,
                        grad=False, progress=False, save=False)
    out["slow_grid"] = [[c.op, c.backend, c.dtype, c.status, c.reason] for c in slow.cells]
    with contextlib.redirect_stdout(io.StringIO()) as text, contextlib.redirect_stderr(io.StringIO()):
        out["cli_exit"] = coverage.main(["--ops", "squareplus", "--backends", "cpu", "--quick", "--limit", "1",
                                         "--no-grad"])
    out["cli_text"] = text.getvalue()
    out["targets"] = list_targets()
    t = get_target("l4")
    out["l4"] = {"peak_f16_tensor": t.peak_flops("float16", unit="tensor"), "dram": t.bandwidth("dram"),
                 "source": t.source("memory.dram.bandwidth_bytes_per_s"), "kind": t.kind,
                 "cc": list(t.compute_capability), "origin": t.origin}
    return out


if __name__ == "__main__":
    print("XBENCH-PLUGIN-CHECKS " + json.dumps(main()))

"""Layering: `import xbench` (and the topology and cost models) stay torch-free, nothing below xbench/dist
imports it, and the hierarchical AllReduce's per-size choice follows the cost model."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import xbench
from xbench.dist import cost
from xbench.dist.topology import Topology

ROOT = Path(xbench.__file__).parent


def test_import_xbench_and_the_cost_model_without_torch():
    code = ("import sys, xbench as xb; t = xb.dist.Topology.from_cluster('dgx-h100', 16); "
            "xb.dist.choose('allreduce', 1 << 20, t); import xbench.dist.predict, xbench.dist.search; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_nothing_below_imports_dist():
    pattern = re.compile(r"^\s*(from\s+(xbench\.dist|\.+dist)\b|import\s+xbench\.dist)", re.M)
    offenders = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py")
                 if "dist" not in p.relative_to(ROOT).parts[:1] and p.name != "__main__.py"
                 and pattern.search(p.read_text())]
    assert offenders == []


def test_auto_mode_follows_the_cost_model():
    from xbench.dist.hier import HierarchicalAllReduce

    state = object.__new__(HierarchicalAllReduce)          # the decision alone, without a process group
    state.topology = Topology.from_cluster("atlas-800t-a2", accelerators=16)
    state.mode, state.g = "auto", 8
    for n in (4 << 10, 64 << 20):
        flat = cost.estimate("allreduce", n, state.topology, "ring").time
        hier = cost.estimate("allreduce", n, state.topology, "hier").time
        assert state.decide(n) == ("hier" if hier < flat else "flat")
    state.mode = "flat"
    assert state.decide(64 << 20) == "flat"

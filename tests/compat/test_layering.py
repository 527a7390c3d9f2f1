"""xbench/compat is a front end beside the language, above the runtime: nothing below it imports it, it imports
nothing above it (the torch bridge, dist, the notebook layer), and `import xbench` leaves it (and numba.cuda)
unloaded until `xb.compat` is used."""
import re
import subprocess
import sys
from pathlib import Path

import xbench

ROOT = Path(xbench.__file__).parent
BELOW = ("lang", "ir", "backends", "hw", "runtime", "profile", "tune", "viz", "library", "ops")


def imports(path: Path, package: str) -> bool:
    pattern = re.compile(rf"^\s*(from\s+(xbench\.{package}|\.+{package})\b|import\s+xbench\.{package})", re.M)
    return bool(pattern.search(path.read_text()))


def test_nothing_below_imports_compat():
    offenders = [str(p.relative_to(ROOT)) for layer in BELOW for p in (ROOT / layer).rglob("*.py")
                 if imports(p, "compat")]
    assert offenders == []


def test_compat_imports_nothing_above_it():
    offenders = [(str(p.relative_to(ROOT)), up) for p in (ROOT / "compat").rglob("*.py")
                 for up in ("torch", "dist", "notebook", "suite") if imports(p, up)]
    assert offenders == []


def test_import_xbench_leaves_compat_and_numba_cuda_unloaded():
    code = "import sys, xbench; print('xbench.compat' in sys.modules, 'numba.cuda' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]

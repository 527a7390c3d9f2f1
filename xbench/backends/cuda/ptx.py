"""PTX and `ptxas -v` resources for generated CUDA kernels, cached by hash.

numba's CUDA simulator and `numba.cuda.compile_ptx` cannot share a process, so PTX is produced by a helper
process started without the simulator:

    python -m xbench.backends.cuda.ptx request.json result.json

The request names the generated module file and, per kernel, its argument types, the compute capability and
the fast-math flag; the result holds the PTX text per kernel, or the error and what to install. The parent
starts the helper once (`--serve`: one JSON request per line) and keeps it for the session; it asks only for
kernels missing from the cache, then runs `ptxas -arch=sm_XX -v` on each PTX (`resources`) and parses what it
reports. Both results are stored under `cache_dir("cuda")`.
"""
from __future__ import annotations

import atexit
import functools
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

NVRTC_PIP = 'pip install "nvidia-cuda-nvrtc==13.0.*"'


# ---- the helper process ------------------------------------------------------------------------------------

def _classify(exc: BaseException) -> tuple[str, str]:
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if "nvrtc" in low:
        return "nvrtc", text
    if "nvvm" in low or "libdevice" in low:
        return "nvvm", text
    if isinstance(exc, ImportError):
        return "import", text
    return "compile", text


def _compile(req: dict) -> dict:
    """PTX for every item of one request (a generated module file and its kernels)."""
    out: dict[str, Any] = {"ok": True, "ptx": {}}
    try:
        from numba import cuda
        from numba.core import config
        from numba.cuda import types
        if config.ENABLE_CUDASIM:
            raise RuntimeError("the PTX helper started under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
        module = sys.modules.get(req["module_name"])
        if module is None:
            from ...cache import import_source
            module = import_source(req["module_name"], req["module"])
        for item in req["items"]:
            fn = getattr(module, item["function"])
            sig = tuple(types.Array(getattr(types, "boolean" if dt == "bool" else dt), nd, "C")
                        for dt, nd in item["sig"])
            try:
                bounds = tuple(item.get("launch_bounds") or ()) or None
                ptx, _ = cuda.compile_ptx(fn.py_func, sig, cc=tuple(item["cc"]), fastmath=item["fastmath"],
                                          launch_bounds=bounds)
            except Exception as exc:  # report which kernel failed
                kind, text = _classify(exc)
                return {"ok": False, "kind": kind, "function": item["function"], "message": text}
            out["ptx"][item["key"]] = ptx
    except Exception as exc:
        kind, text = _classify(exc)
        return {"ok": False, "kind": kind, "function": None, "message": text}
    return out


def _worker(request_path: str, result_path: str) -> int:
    with open(request_path) as f:
        req = json.load(f)
    out = _compile(req)
    with open(result_path, "w") as f:
        json.dump(out, f)
    return 0


def _serve() -> int:
    """One JSON request per line on stdin, one JSON result per line on stdout (anything else that would
    print to stdout goes to stderr)."""
    reply = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        reply.write(json.dumps(_compile(json.loads(line))) + "\n")
        reply.flush()
    return 0


# ---- the parent side ---------------------------------------------------------------------------------------

def find_ptxas() -> str | None:
    """ptxas on PATH, else in $CUDA_HOME/bin or $CUDA_PATH/bin, else in /usr/local/cuda/bin when neither is set."""
    found = shutil.which("ptxas")
    if found:
        return found
    homes = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    if not homes:
        homes = ["/usr/local/cuda"]
    for home in homes:
        cand = Path(home, "bin", "ptxas")
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return None


PTXAS_HINT = ("install the CUDA toolkit and put its bin/ folder first on PATH (or set CUDA_HOME); or run without PTX "
              "resources: XBENCH_CUDA_PTX=0 in the environment, or ptx=False to op.compile")


@functools.cache
def _ptxas_version(path: str, stamp: tuple) -> str:
    from ... import toolchain
    return toolchain.version(path, tool="ptxas", hint=f"{path} is not a working ptxas: {PTXAS_HINT}", whole=True)


def ptxas_version(path: str) -> str:
    """ptxas's version (`V13.0.88`), asked once per ptxas file; ToolError when it fails or hangs."""
    from ... import toolchain
    try:
        st = os.stat(path)
    except OSError as exc:
        raise toolchain.ToolError(f"ptxas at {path} cannot be read: {exc.strerror}", tool="ptxas",
                                  hint=PTXAS_HINT) from None
    out = _ptxas_version(path, (st.st_ino, st.st_size, st.st_mtime_ns))
    m = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    return m.group(2) if m else (out.strip().splitlines()[-1] if out.strip() else "unknown")


def numba_cuda_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("numba-cuda")
    except PackageNotFoundError:
        return "none"


def generate(items: list[dict], module_path: str, module_name: str, error) -> dict[str, str]:
    """PTX for each item (key, function, sig, cc, fastmath), from the cache or the helper process.

    `error(message, hint)` builds the exception raised when the helper fails."""
    from ...cache import load_text, store
    from ...config import cache_dir

    folder = cache_dir("cuda", "ptx")
    result: dict[str, str] = {}
    missing = []
    for it in items:
        text = load_text(folder / f"{it['key']}.ptx")      # None: not there, or damaged (then removed)
        if text is not None:
            result[it["key"]] = text
        else:
            missing.append(it)
    if not missing:
        return result
    out = _helper().request({"module": module_path, "module_name": module_name, "items": missing}, error)
    if not out["ok"]:
        kind, msg, fn = out["kind"], out["message"], out.get("function")
        where = f" for kernel {fn}" if fn else ""
        first = msg.splitlines()[0] if msg else ""
        if kind == "nvrtc":
            raise error(f"numba-cuda cannot load NVRTC to compile PTX{where}: {first}",
                        f"install it: {NVRTC_PIP}; or pass ptx=False to compile for running only")
        if kind == "nvvm":
            raise error(f"numba-cuda cannot find NVVM / libdevice to compile PTX{where}: {first}",
                        "install the CUDA toolkit (it ships nvvm/ and nvvm/libdevice/) and set CUDA_HOME to it, or "
                        'pip install "numba-cuda[cu13]"; or pass ptx=False to compile for running only')
        if kind == "import":
            raise error(f"numba-cuda is not usable here: {first}", 'pip install "numba-cuda>=0.30" '
                        f'"{NVRTC_PIP.split(" ", 2)[2]}"')
        raise error(f"numba-cuda could not compile the generated kernel{where}: {first}",
                    f"the generated source is {module_path}")
    for key, text in out["ptx"].items():
        store(folder / f"{key}.ptx", text)
        result[key] = text
    return result


# The least time the PTX helper gets to answer (generating PTX for a module's kernels takes 1-3 s, longer when
# other work holds the cores)
HELPER_MIN_S = 60.0


class _Helper:
    """The PTX helper process, started once and reused; restarted when the CUDA environment changes."""

    KEYS = ("CUDA_HOME", "CUDA_PATH", "PATH", "LD_LIBRARY_PATH", "NUMBA_CUDA_DEFAULT_PTX_CC")

    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.env_key: tuple = ()
        self.lock = threading.Lock()

    def _start(self) -> None:
        env = dict(os.environ)
        env["NUMBA_ENABLE_CUDASIM"] = "0"
        self.stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - lives as long as the helper
        self.proc = subprocess.Popen([sys.executable, "-m", "xbench.backends.cuda.ptx", "--serve"], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, bufsize=1)
        self.env_key = tuple(os.environ.get(k) for k in self.KEYS)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None

    def request(self, req: dict, error) -> dict:
        with self.lock:
            if self.proc is not None and (self.proc.poll() is not None or
                                          self.env_key != tuple(os.environ.get(k) for k in self.KEYS)):
                self.stop()
            if self.proc is None:
                self._start()
            from ... import toolchain
            # numba-cuda's own compile, not an external tool: a short tool limit does not cut it under load
            limit = max(toolchain.timeout_s(), HELPER_MIN_S)
            try:
                self.proc.stdin.write(json.dumps(req) + "\n")
                self.proc.stdin.flush()
                ready, _, _ = select.select([self.proc.stdout], [], [], limit)
                line = self.proc.stdout.readline() if ready else None
            except (BrokenPipeError, OSError):
                line = ""
            if line is None:
                self.proc.kill()
                self.proc.wait()
                self.proc = None
                raise error(f"the PTX helper process did not answer within {limit:g} s and was stopped",
                            "numba-cuda may be stuck compiling a large kernel: a slow machine may need a longer "
                            "limit (XBENCH_TOOL_TIMEOUT=<seconds>); or run without PTX resources "
                            "(XBENCH_CUDA_PTX=0, or ptx=False to op.compile)")
            if not line:
                code = self.proc.wait()
                self.stderr.seek(0)
                tail = "\n".join(self.stderr.read().strip().splitlines()[-8:])
                self.proc = None
                raise error(f"the PTX helper process failed (exit {code}):\n{tail}",
                            "run `python -m xbench.backends.cuda.ptx REQUEST.json RESULT.json` to see the whole "
                            "error")
            return json.loads(line)


_HELPER: _Helper | None = None


def _helper() -> _Helper:
    global _HELPER
    if _HELPER is None:
        _HELPER = _Helper()
        atexit.register(_HELPER.stop)
    return _HELPER


_INFO = {
    "registers": r"Used (\d+) registers",
    "barriers": r"used (\d+) barriers",
    "smem_bytes": r"(\d+) bytes smem",
    "stack_frame_bytes": r"(\d+) bytes stack frame",
    "spill_stores_bytes": r"(\d+) bytes spill stores",
    "spill_loads_bytes": r"(\d+) bytes spill loads",
    "gmem_bytes": r"(\d+) bytes gmem",
}


def parse_ptxas(text: str) -> dict[str, int]:
    """The numbers `ptxas -v` prints for a single-kernel PTX file (0 where a line is absent)."""
    out = {}
    for name, pattern in _INFO.items():
        m = re.search(pattern, text)
        out[name] = int(m.group(1)) if m else 0
    cmem = re.findall(r"(\d+) bytes cmem\[(\d+)\]", text)
    out["cmem_bytes"] = {f"cmem[{bank}]": int(n) for n, bank in cmem}
    if not re.search(_INFO["registers"], text):
        raise ValueError(f"ptxas printed no resource usage:\n{text}")
    return out


def resources(ptx: str, cc: tuple[int, int], ptxas: str, error) -> dict[str, Any]:
    """`ptxas -arch=sm_XY -v` on one kernel's PTX, parsed (cached by the PTX, the arch and ptxas's version)."""
    from ... import toolchain
    from ...cache import digest, load_json, store_json
    from ...config import cache_dir

    arch = f"sm_{cc[0]}{cc[1]}"
    version = ptxas_version(ptxas)
    key = digest("ptxas", ptx, arch, version)
    path = cache_dir("cuda", "ptxas") / f"{key}.json"
    info = load_json(path)                      # None: not there, or damaged (then removed)
    if isinstance(info, dict) and "registers" in info:
        return info
    with tempfile.TemporaryDirectory(prefix="xbench-ptxas-") as tmp:
        src = Path(tmp, "kernel.ptx")
        src.write_text(ptx)
        proc = toolchain.run([ptxas, f"-arch={arch}", "-v", str(src), "-o", str(Path(tmp, "kernel.cubin"))],
                             tool="ptxas", what=f"assembling PTX for {arch}", hint=PTXAS_HINT)
    text = proc.stderr + proc.stdout
    if proc.returncode != 0:
        raise error(f"ptxas -arch={arch} failed (exit {proc.returncode}):\n{text.strip()}",
                    "the PTX is in the artifact's .ptx")
    try:
        info = parse_ptxas(text)
    except ValueError as exc:
        raise error(f"{str(exc).splitlines()[0]} (ptxas -arch={arch}, {ptxas})", PTXAS_HINT) from None
    info.update({"arch": arch, "ptxas": version, "ptxas_output": text.strip()})
    store_json(path, info)
    return info


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        sys.exit(_serve())
    if len(sys.argv) != 3:
        print("usage: python -m xbench.backends.cuda.ptx REQUEST.json RESULT.json  (or --serve)", file=sys.stderr)
        sys.exit(2)
    sys.exit(_worker(sys.argv[1], sys.argv[2]))

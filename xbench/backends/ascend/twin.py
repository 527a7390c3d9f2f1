"""Build and run Ascend C kernels on the CPU twin.

The twin is xbench's clean-room, header-only C++ emulation of the Ascend C API subset the ``ascend``
backend emits (``twin/include/kernel_operator.h`` documents the API, the launch convention and the rules).
A kernel source compiles with g++ into a shared library, cached under ``cache_dir("ascend")``; each launch
runs blocks ``0..block_dim-1`` on host threads over numpy buffers, enforces the hardware's rules and
returns the work each block did.

    lib = build(source, name="add")
    res = lib.launch("add_custom", 8, x, y, z, tiling_bytes)
    res.totals["mte2_bytes"], res.blocks[0]["vec_instr"]

A broken rule raises :class:`TwinError` naming the block and the rule; a compile error raises
:class:`TwinCompileError` with g++'s message and the offending source lines.
"""
from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import os
import platform
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from xbench import cache as C
from xbench import toolchain
from xbench.cache import digest, write_once
from xbench.config import cache_dir, log
from xbench.errors import BackendError

INCLUDE_DIR = Path(__file__).resolve().parent / "twin" / "include"
CXX_FLAGS: tuple[str, ...] = ("-std=c++17", "-O2", "-shared", "-fPIC", "-pthread")
ABI_VERSION = 2

# Field order of the twin's TCubeTiling (kernel_tiling/kernel_tiling.h); checked against each library.
TCUBETILING_FIELDS: tuple[str, ...] = (
    "usedCoreNum", "M", "N", "Ka", "Kb", "singleCoreM", "singleCoreN", "singleCoreK", "baseM", "baseN",
    "baseK", "depthA1", "depthB1", "stepM", "stepN", "stepKa", "stepKb", "isBias", "transLength",
    "iterateOrder", "dbL0A", "dbL0B", "dbL0C", "shareMode", "shareL1Size", "shareL0CSize", "shareUbSize",
    "batchM", "batchN", "singleBatchM", "singleBatchN", "mxTypePara",
)

_POSITIONS = ("GM", "A1", "A2", "B1", "B2", "C1", "C2", "CO1", "CO2", "VECIN", "VECOUT", "VECCALC", "SPM",
              "TSCM", "C2PIPE2GM", "C2PIPE2LOCAL")
_MAX_COUNTERS = frozenset({"ub_high_water"})  # combined over blocks by max, the others by sum


class TwinError(BackendError):
    """A kernel broke a hardware rule (or could not be launched) on the twin."""

    def __init__(self, kernel: str, block: int, rule: str, detail: str):
        self.kernel = kernel
        self.block = block
        self.rule = rule
        self.detail = detail
        where = f"block {block}" if block >= 0 else "launch"
        super().__init__(f"ascend twin: {kernel}, {where}: [{rule}] {detail}")


class TwinCompileError(BackendError):
    """g++ rejected a kernel source; the message quotes the compiler and the offending source lines."""

    def __init__(self, message: str, *, stderr: str, source_path: Path):
        self.stderr = stderr
        self.source_path = source_path
        super().__init__(message)


@dataclass(frozen=True)
class TwinConfig:
    """Per-core memory sizes and launch settings (defaults: Ascend 910B)."""

    ub_bytes: int = 196608
    l1_bytes: int = 524288
    l0a_bytes: int = 65536
    l0b_bytes: int = 65536
    l0c_bytes: int = 131072
    max_cube_cores: int = 24
    sys_workspace_bytes: int = 65536
    num_threads: int = 0  # 0: one per hardware thread
    ub_fill_byte: int = 0xFF  # UB starts as 0xFF bytes: NaN for float/half, so unwritten UB shows


class _Config(ctypes.Structure):
    _fields_ = [(f.name, ctypes.c_uint64) for f in fields(TwinConfig)]


class _Status(ctypes.Structure):
    _fields_ = [("block", ctypes.c_int64), ("rule", ctypes.c_char * 64), ("message", ctypes.c_char * 4000)]


class TCubeTiling(ctypes.Structure):
    """The twin's TCubeTiling (int32 fields in the documented order); pass it (or its bytes) through GM."""

    _fields_ = [(n, ctypes.c_int32) for n in TCUBETILING_FIELDS]


def cube_tiling(**values: int) -> TCubeTiling:
    """A TCubeTiling with single buffering (dbL0A/B/C = 1), one core and iterateOrder 0 unless given."""
    t = TCubeTiling()
    for name, value in {"usedCoreNum": 1, "dbL0A": 1, "dbL0B": 1, "dbL0C": 1, **values}.items():
        if name not in TCUBETILING_FIELDS:
            raise TypeError(f"TCubeTiling has no field {name!r}; fields: {', '.join(TCUBETILING_FIELDS)}")
        setattr(t, name, int(value))
    return t


@dataclass(frozen=True)
class BufferInfo:
    """One TPipe::InitBuffer call of a block."""

    kind: str  # "TQue" or "TBuf"
    position: str  # TPosition name
    num: int  # buffers (1 for a TBuf)
    length: int  # requested bytes per buffer
    bytes: int  # num * round_up(length, 32)
    address: int  # UB byte address of the first buffer


@dataclass
class LaunchResult:
    """Counters of one launch: per block, and combined (sums; the maximum for ub_high_water)."""

    kernel: str
    block_dim: int
    blocks: list[dict[str, int]]
    ops: list[dict[str, int]]  # per block: vector instructions by API (nonzero only)
    buffers: list[list[BufferInfo]]
    totals: dict[str, int] = field(default_factory=dict)
    op_totals: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0


class TwinLibrary:
    """A compiled kernel source: call :meth:`launch` with a kernel name exported by XBENCH_TWIN_LAUNCH."""

    def __init__(self, path: Path, source_path: Path, name: str):
        self.path = path
        self.source_path = source_path
        self.name = name
        self._lib = ctypes.CDLL(str(path))
        abi = self._lib.xbench_twin_abi_version()
        if abi != ABI_VERSION:
            raise RuntimeError(f"{path}: twin ABI {abi}, runner expects {ABI_VERSION}; rebuild the kernel")
        self._counter_names = _names(self._lib, "xbench_twin_counter_names")
        self._op_names = _names(self._lib, "xbench_twin_op_names")
        nbuf = _u64(self._lib, "xbench_twin_max_buffers")
        nops = _u64(self._lib, "xbench_twin_num_ops")
        arrays = ("buffer_bytes", "buffer_num", "buffer_len", "buffer_pos", "buffer_kind", "buffer_addr")
        self._counters_t = type("_Counters", (ctypes.Structure,), {"_fields_": [
            *[(n, ctypes.c_uint64) for n in self._counter_names],
            ("num_buffers", ctypes.c_uint64),
            *[(n, ctypes.c_uint64 * nbuf) for n in arrays],
            ("vec_instr_by_op", ctypes.c_uint64 * nops),
        ]})
        if ctypes.sizeof(self._counters_t) != _u64(self._lib, "xbench_twin_counters_size"):
            raise RuntimeError(f"{path}: counters layout disagrees with the runner; rebuild the kernel")
        if ctypes.sizeof(_Config) != _u64(self._lib, "xbench_twin_config_size"):
            raise RuntimeError(f"{path}: config layout disagrees with the runner; rebuild the kernel")
        if tuple(_names(self._lib, "xbench_twin_tcubetiling_fields")) != TCUBETILING_FIELDS:
            raise RuntimeError(f"{path}: TCubeTiling fields disagree with twin.TCUBETILING_FIELDS")
        self.kernels: tuple[str, ...] = tuple(re.findall(r"XBENCH_TWIN_LAUNCH\(\s*(\w+)\s*\)",
                                                         source_path.read_text()))

    def host_function(self, symbol: str, restype: Any = ctypes.c_int32,
                      argtypes: Sequence[Any] | None = None) -> Any:
        """A plain ``extern "C"`` host function compiled into the library (e.g. a generated tiling function)."""
        try:
            fn = getattr(self._lib, symbol)
        except AttributeError:
            raise KeyError(f"{self.name}: no host function {symbol!r} in {self.path}") from None
        fn.restype = restype
        if argtypes is not None:
            fn.argtypes = list(argtypes)
        return fn

    def __repr__(self) -> str:
        return f"TwinLibrary({self.name!r}, kernels={list(self.kernels)}, path={str(self.path)!r})"

    def launch(self, kernel: str, block_dim: int, *args: Any, config: TwinConfig | None = None) -> LaunchResult:
        """Run ``kernel`` on ``block_dim`` blocks. Arguments, in the kernel's parameter order: numpy arrays
        (C-contiguous; written in place), bytes / bytearray / ctypes structures (tiling), or None."""
        try:
            fn = getattr(self._lib, f"xbench_launch_{kernel}")
        except AttributeError:
            raise KeyError(f"{self.name}: no kernel {kernel!r}; the source exports {list(self.kernels)} "
                           f"(add XBENCH_TWIN_LAUNCH({kernel}) after its definition)") from None
        if int(block_dim) < 1:
            raise ValueError(f"block_dim must be at least 1, got {block_dim}")
        cfg = config or TwinConfig()
        fn.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_uint64),
                       ctypes.c_uint32, ctypes.POINTER(_Config), ctypes.POINTER(self._counters_t),
                       ctypes.POINTER(_Status)]
        fn.restype = ctypes.c_int
        keep: list[Any] = []
        ptrs = (ctypes.c_void_p * max(len(args), 1))()
        sizes = (ctypes.c_uint64 * max(len(args), 1))()
        for i, a in enumerate(args):
            ptrs[i], sizes[i] = _pointer(a, i, keep)
        c_cfg = _Config(**{f.name: int(getattr(cfg, f.name)) for f in fields(TwinConfig)})
        counters = (self._counters_t * int(block_dim))()
        status = _Status()
        t0 = time.perf_counter()
        rc = fn(int(block_dim), ptrs, sizes, len(args), ctypes.byref(c_cfg), counters, ctypes.byref(status))
        elapsed = time.perf_counter() - t0
        del keep
        if rc != 0:
            raise TwinError(kernel, int(status.block), status.rule.decode(errors="replace") or "unknown",
                            status.message.decode(errors="replace"))
        return self._result(kernel, int(block_dim), counters, elapsed)

    def _result(self, kernel: str, block_dim: int, counters: Any, elapsed: float) -> LaunchResult:
        blocks, ops, buffers = [], [], []
        for c in counters:
            blocks.append({n: int(getattr(c, n)) for n in self._counter_names})
            ops.append({n: int(c.vec_instr_by_op[i]) for i, n in enumerate(self._op_names) if c.vec_instr_by_op[i]})
            nb = min(int(c.num_buffers), len(c.buffer_bytes))
            buffers.append([BufferInfo("TBuf" if c.buffer_kind[i] else "TQue", _POSITIONS[c.buffer_pos[i]],
                                       int(c.buffer_num[i]), int(c.buffer_len[i]), int(c.buffer_bytes[i]),
                                       int(c.buffer_addr[i])) for i in range(nb)])
        totals = {n: (max if n in _MAX_COUNTERS else sum)(b[n] for b in blocks) for n in self._counter_names}
        op_totals: dict[str, int] = {}
        for o in ops:
            for n, v in o.items():
                op_totals[n] = op_totals.get(n, 0) + v
        return LaunchResult(kernel, block_dim, blocks, ops, buffers, totals, op_totals, elapsed)


def _names(lib: ctypes.CDLL, symbol: str) -> list[str]:
    fn = getattr(lib, symbol)
    fn.restype = ctypes.c_char_p
    return [n for n in fn().decode().split(",") if n]


def _u64(lib: ctypes.CDLL, symbol: str) -> int:
    fn = getattr(lib, symbol)
    fn.restype = ctypes.c_uint64
    return int(fn())


def _pointer(a: Any, index: int, keep: list[Any]) -> tuple[int | None, int]:
    """(address, bytes) of one kernel argument; `keep` holds temporaries alive through the call."""
    if a is None:
        return None, 0
    if isinstance(a, np.ndarray):
        if not a.flags.c_contiguous:
            raise ValueError(f"argument {index}: the twin needs C-contiguous arrays; pass np.ascontiguousarray(x)")
        if a.dtype.hasobject:
            raise TypeError(f"argument {index}: object arrays cannot be passed to a kernel")
        return a.ctypes.data, a.nbytes
    if isinstance(a, (ctypes.Structure, ctypes.Array, ctypes.Union)):
        return ctypes.addressof(a), ctypes.sizeof(a)
    if isinstance(a, bytearray):
        buf = (ctypes.c_char * max(len(a), 1)).from_buffer(a) if a else (ctypes.c_char * 1)()
        keep.append(buf)
        return ctypes.addressof(buf), len(a)
    if isinstance(a, (bytes, memoryview, np.generic)):
        raw = a.tobytes() if not isinstance(a, bytes) else a
        buf = (ctypes.c_char * max(len(raw), 1)).from_buffer_copy(raw.ljust(1, b"\0"))
        keep.append(buf)
        return ctypes.addressof(buf), len(raw)
    raise TypeError(f"argument {index}: cannot pass {type(a).__name__} to a kernel; use a numpy array, bytes, "
                    "a ctypes structure or None")


@functools.cache
def _compiler_id(cxx: str) -> str:
    """The first line of `g++ --version` (part of every build's cache key); ToolError when g++ does not answer."""
    return toolchain.version(cxx, tool="g++", hint=f"{cxx} is not a working g++: reinstall it (apt-get install "
                             "g++) or put a working g++ first on PATH; the Ascend C twin needs it")


def compiler() -> tuple[str, str]:
    """(path, version line) of the g++ the twin builds with; TwinCompileError / ToolError when there is none."""
    cxx = _compiler()
    return cxx, _compiler_id(cxx)


def _headers_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(INCLUDE_DIR.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(INCLUDE_DIR)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


@functools.cache
def _host_flags() -> tuple[str, ...]:
    """-mf16c where the host has it: half <-> float conversions in hardware (7x faster half kernels)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return ()
    try:
        cpu = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ()
    return ("-mf16c",) if re.search(r"^flags\s*:.*\bf16c\b", cpu, re.MULTILINE) else ()


def _compiler() -> str:
    cxx = shutil.which("g++")
    if cxx is None:
        raise TwinCompileError("ascend twin: g++ was not found on PATH; install g++ (C++17) to build "
                               "Ascend C kernels for the CPU twin", stderr="", source_path=Path())
    return cxx


def _paths(source: str, name: str, extra_flags: Sequence[str]) -> tuple[str, tuple[str, ...], Path, Path]:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"library name {name!r} may use letters, digits, '_', '.' and '-' only")
    cxx = _compiler()
    flags = (*CXX_FLAGS, *_host_flags(), *extra_flags)
    key = digest("ascend-twin", source, _headers_digest(), _compiler_id(cxx), flags)
    folder = cache_dir("ascend")
    return cxx, flags, folder / f"{name}-{key}.so", folder / f"{name}-{key}.cpp"


def is_built(source: str, *, name: str, extra_flags: Sequence[str] = ()) -> bool:
    """Whether `build` would find this source's library, sound, in the cache."""
    return C.verify(_paths(source, name, extra_flags)[2])


def _precompiled_header(cxx: str, flags: tuple[str, ...]) -> Path | None:
    """A folder holding kernel_operator.h.gch built with `flags` (searched before the headers themselves, so
    g++ uses it instead of parsing the twin again): about a second less per kernel build. None if g++ cannot
    build it."""
    hflags = tuple(f for f in flags if f != "-shared")
    folder = cache_dir("ascend") / f"pch-{digest('twin-pch', _headers_digest(), _compiler_id(cxx), hflags)}"
    gch = folder / "kernel_operator.h.gch"
    if C.verify(gch):
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with C.lock(gch):
        if C.verify(gch):
            return folder
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".gch.", suffix=".tmp")
        os.close(fd)
        try:
            proc = toolchain.run([cxx, *hflags, f"-I{INCLUDE_DIR}", "-x", "c++-header",
                                  str(INCLUDE_DIR / "kernel_operator.h"), "-o", tmp], tool="g++",
                                 what="building the twin's precompiled header", env={**os.environ, "LC_ALL": "C"})
            if proc.returncode != 0:
                log.debug("ascend twin: no precompiled header (%s)", proc.stderr.strip()[:200])
                return None
            C.install(tmp, gch)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return folder


def build(source: str, *, name: str, extra_flags: Sequence[str] = (), precompiled_header: bool = True) -> TwinLibrary:
    """Compile an Ascend C source against the twin (cached by source, headers, compiler and flags). A cached
    library is checked against its checksum before it is loaded: a damaged one is rebuilt, never loaded."""
    cxx, flags, so_path, src_path = _paths(source, name, extra_flags)
    folder = so_path.parent
    write_once(src_path, source)
    if C.verify(so_path):
        log.debug("ascend twin: cache hit %s", so_path.name)
        return TwinLibrary(so_path, src_path, name)
    with C.lock(so_path):
        if C.verify(so_path):               # built by another process while this one waited
            return TwinLibrary(so_path, src_path, name)
        pch = _precompiled_header(cxx, flags) if precompiled_header else None
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{so_path.name}.", suffix=".tmp")
        os.close(fd)
        cmd = [cxx, *flags, *([f"-I{pch}", "-Winvalid-pch"] if pch else []), f"-I{INCLUDE_DIR}", str(src_path),
               "-o", tmp]
        t0 = time.perf_counter()
        try:
            proc = toolchain.run(cmd, tool="g++", what=f"building {name} for the Ascend C twin",
                                 env={**os.environ, "LC_ALL": "C"})  # plain ASCII diagnostics
            if proc.returncode != 0:
                if "No space left on device" in proc.stderr:
                    raise C.storage_error(OSError(errno.ENOSPC, "No space left on device"), so_path)
                raise TwinCompileError(_compile_message(name, src_path, source, proc.stderr), stderr=proc.stderr,
                                       source_path=src_path)
            C.install(tmp, so_path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    log.info("ascend twin: compiled %s in %.2f s", so_path.name, time.perf_counter() - t0)
    return TwinLibrary(so_path, src_path, name)


def _compile_message(name: str, src_path: Path, source: str, stderr: str) -> str:
    """g++'s errors (paths shortened) and the source lines they point at."""
    src = re.escape(str(src_path))
    inc = str(INCLUDE_DIR) + os.sep
    errors = [ln.replace(str(src_path), "<source>").replace(inc, "")
              for ln in stderr.splitlines() if re.search(r"\b(error|fatal error):", ln)]
    lines = sorted({int(m) for m in re.findall(src + r":(\d+):", stderr)})
    text = source.splitlines()
    quoted = [f"  {n:5d} | {text[n - 1]}" for n in lines[:12] if 0 < n <= len(text)]
    out = [f"ascend twin: g++ could not compile {name} ({src_path})"]
    out += [f"  {e}" for e in errors[:12]] or [f"  {ln}" for ln in stderr.strip().splitlines()[-12:]]
    if quoted:
        out += ["source lines:", *quoted]
    return "\n".join(out)

"""Calibrate the local CPU: the 'cpu-local' target, measured on first use and cached.

What is read: cache sizes, line sizes and associativity from /sys/devices/system/cpu/cpu0/cache (else
`lscpu -C`), the usable cores (the process's CPU affinity), the model name and ISA flags from /proc/cpuinfo,
memory size from /proc/meminfo.

What is measured (each the median of several runs, with the relative spread (max - min) / median):
- peak FLOP/s for float32 and float64, on one core and on all cores: a numba kernel of independent
  multiply-add chains (4 array rows × 8 dependent FMAs per element, `fastmath`) that LLVM vectorises; the
  kernel's assembly is checked for packed FMA instructions and the vector width found is recorded; the best
  of the runs is kept (other work on the host only ever slows a run down, and a roof is what the machine can
  do), with the median and spread in its source;
- DRAM bandwidth: a STREAM-style triad a[i] = b[i] + s·c[i] over float64 arrays far larger than the last-level
  cache, on all cores, counting the bytes the memory really moves: two reads, the write, and the
  write-allocate read of a (4 × 8 B per element; the kernel's stores are ordinary, not non-temporal). As
  STREAM does, the best of its runs is kept, since other work on a shared host disturbs memory bandwidth
  most; the STREAM byte count (3 × 8 B) is kept alongside for comparison;
- cached read bandwidth of each cache level on all cores: a vectorised sum over a per-thread buffer of
  half the level's size (per core for private levels, its share for a shared one), best of its runs.

The result is stored as JSON under `cache_dir("hw")` with the date and the spreads, and reused until
`calibrate(force=True)`. A calibration with a spread above NOISY (the host was busy) is measured again when
it is next loaded by another process, up to REMEASURE times, and each roof keeps the best of the measurements (a busy host
gives roofs that are too low, and honest kernels then land above them). Every number of the Target says
"measured <date>" or where it was read.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from ..cache import atomic_write
from ..config import cache_dir
from .target import LOCAL_CPU, Target, build_target

FORMAT_VERSION = 5
_CACHE_FILE = "cpu-local.json"
NOISY = 0.2               # a spread above this is flagged, and the calibration measured again when next loaded
REMEASURE = 2             # ... at most this many times
_measurements = 0          # how many calibrations this process has measured (not loaded from the cache)
_loaded: dict[str, Target] = {}
_measured_here: set[str] = set()   # calibrations this process measured: not measured again here, even if noisy


def measurement_count() -> int:
    """Number of measuring calibrations run in this process (a cached load does not count)."""
    return _measurements


def cache_path() -> Path:
    return cache_dir("hw") / _CACHE_FILE


# --- what the system says ----------------------------------------------------------------------------------

def _size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)i?B?\s*", text, re.IGNORECASE)
    if not m:
        raise ValueError(f"cannot read cache size {text!r}")
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def _cpu_list_len(text: str) -> int:
    n = 0
    for part in text.strip().split(","):
        if "-" in part:
            lo, hi = part.split("-")
            n += int(hi) - int(lo) + 1
        elif part:
            n += 1
    return n


def read_caches() -> list[dict[str, Any]]:
    """Data and unified caches of cpu0, closest first: level, size, line, ways, sets, sharing, source."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    out = []
    if root.is_dir():
        for d in sorted(root.glob("index*")):
            def rd(name: str, d: Path = d) -> str:
                return (d / name).read_text().strip()
            try:
                kind = rd("type")
                if kind not in ("Data", "Unified"):
                    continue
                out.append({"level": int(rd("level")), "size": _size(rd("size")),
                            "line": int(rd("coherency_line_size")), "ways": int(rd("ways_of_associativity")),
                            "sets": int(rd("number_of_sets")), "sharing": _cpu_list_len(rd("shared_cpu_list")),
                            "source": f"{d}"})
            except (OSError, ValueError):
                continue
    if not out:
        try:
            js = json.loads(subprocess.run(["lscpu", "-C", "-J", "--bytes"], capture_output=True, text=True,
                                           check=True, timeout=30).stdout)
            for c in js.get("caches", []):
                if c.get("type") not in ("Data", "Unified"):
                    continue
                one, total = int(c["one-size"]), int(c["all-size"])
                out.append({"level": int(c["level"]), "size": one, "line": int(c["coherency-size"]),
                            "ways": int(c["ways"]), "sets": int(c["sets"]),
                            "sharing": max(1, os.cpu_count() or 1) * one // total if total else 1,
                            "source": "lscpu -C"})
        except (OSError, ValueError, KeyError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
    if not out:
        raise RuntimeError("xbench: cannot read the CPU caches from /sys/devices/system/cpu/cpu0/cache nor "
                           "from `lscpu -C`; calibration needs them")
    return sorted(out, key=lambda c: c["level"])


def cpu_facts() -> dict[str, Any]:
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                info.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    flags = set(info.get("flags", "").split())
    isa = [f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16",
                       "avx512_fp16", "amx_tile", "amx_bf16", "neon", "asimd", "sve") if f in flags]
    mhz = None
    mhz_src = ""
    for p in ("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq",):
        try:
            mhz = int(Path(p).read_text()) / 1000.0
            mhz_src = f"{p} (kHz)"
        except (OSError, ValueError):
            pass
    if mhz is None and "cpu MHz" in info:
        mhz = float(info["cpu MHz"])
        mhz_src = "/proc/cpuinfo cpu MHz (nominal; under a hypervisor often the TSC rate, not the boost clock)"
    mem = None
    try:
        m = re.search(r"MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text())
        mem = int(m.group(1)) * 1024 if m else None
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return {"model": info.get("model name", platform.processor() or "unknown CPU"),
            "vendor": info.get("vendor_id", ""), "isa": isa, "cores": cores, "mhz": mhz,
            "mhz_source": mhz_src, "mem_bytes": mem, "machine": platform.machine()}


# --- kernels ---------------------------------------------------------------------------------------------

_ROWS, _DEPTH = 4, 8   # independent rows per element, dependent FMAs per row


def _make_fma_kernel() -> Callable:
    """reps × (for each column j: 4 rows, 8 dependent v = v·a + b each): the j loop vectorises, and
    the 4 rows plus consecutive iterations keep enough independent chains in flight to fill the FMA units."""
    lines = ["def fma_chains(reps, y, a, b):", "    n = y.shape[1]", "    for _ in range(reps):",
             "        for j in range(n):"]
    lines += [f"            v{r} = y[{r}, j]" for r in range(_ROWS)]
    lines += [f"            v{r} = v{r} * a + b" for _ in range(_DEPTH) for r in range(_ROWS)]
    lines += [f"            y[{r}, j] = v{r}" for r in range(_ROWS)]
    lines += ["    return y[0, 0]"]
    ns: dict[str, Any] = {}
    exec("\n".join(lines), ns)   # fixed source written above
    return njit(fastmath=True, nogil=True)(ns["fma_chains"])


_fma_chains = _make_fma_kernel()
_FMA_COLUMNS = 256     # per row: 4 × 256 × 8 B = 8 KiB, resident in L1


@njit(fastmath=True, nogil=True, cache=True)
def _triad(a, b, c, s):
    # over each thread's own views, from 0: a loop over range(lo, hi) of the whole arrays indexes with values that
    # could be negative, so numba's wraparound check stays in and the loop does not vectorise (8 instead of 58 GB/s)
    for i in range(a.shape[0]):
        a[i] = b[i] + s * c[i]


@njit(fastmath=True, nogil=True, cache=True)
def _read_sum(x, reps):
    acc = 0.0
    for _ in range(reps):
        for i in range(x.shape[0]):
            acc += x[i]
    return acc


def _vector_width(dtype: type) -> int:
    """Bits of the widest packed FMA in the compiled kernel (0 when LLVM left it scalar)."""
    sig = [k for k in _fma_chains.signatures if str(k[1].dtype) == np.dtype(dtype).name]
    asm = _fma_chains.inspect_asm(sig[0]) if sig else ""
    for reg, bits in (("zmm", 512), ("ymm", 256), ("xmm", 128)):
        if re.search(rf"vfn?m(add|sub)\w*p[sd]\s[^\n]*%{reg}", asm) or re.search(rf"fmla\s[^\n]*{reg}", asm):
            return bits
    return 0


def _parallel(fn: Callable[[int], Any], threads: int) -> float:
    """Run fn(0..threads-1) at once on `threads` threads (the kernels release the GIL); wall seconds."""
    if threads == 1:
        t0 = time.perf_counter()
        fn(0)
        return time.perf_counter() - t0
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda i: None, range(threads)))   # start the workers before timing
        t0 = time.perf_counter()
        list(pool.map(fn, range(threads)))
        return time.perf_counter() - t0


def _stats(xs: list[float]) -> tuple[float, float, float]:
    med = float(np.median(xs))
    return med, (max(xs) - min(xs)) / med if med else 0.0, max(xs)


def measure_peaks(threads: int, runs: int, seconds: float) -> dict[str, Any]:
    """FLOP/s of the FMA kernel on `threads` threads for float32 and float64, measured alternately so both
    see the same background load: {dtype: (median, spread, best)} plus the median of the paired ratios
    float32 / float64 under 'ratio'."""
    per_rep = 2 * _ROWS * _DEPTH * _FMA_COLUMNS
    setup = {}
    for dt in (np.float32, np.float64):
        ys = [np.full((_ROWS, _FMA_COLUMNS), 1.0, dt) for _ in range(threads)]
        a, b = dt(0.999), dt(0.001)
        _fma_chains(1, ys[0], a, b)
        t = _parallel(lambda i, ys=ys, a=a, b=b: _fma_chains(16, ys[i], a, b), 1) / 16
        setup[dt] = (ys, a, b, max(16, int(seconds / max(t, 1e-9))))
    rates: dict[type, list[float]] = {np.float32: [], np.float64: []}
    for _ in range(runs):
        for dt, (ys, a, b, reps) in setup.items():
            wall = _parallel(lambda i, ys=ys, a=a, b=b, reps=reps: _fma_chains(reps, ys[i], a, b), threads)
            rates[dt].append(per_rep * reps * threads / wall)
    out: dict[str, Any] = {np.dtype(dt).name: _stats(r) for dt, r in rates.items()}
    out["ratio"] = float(np.median(np.array(rates[np.float32]) / np.array(rates[np.float64])))
    return out


@njit(cache=True, nogil=True)
def blas_gemm(a, b, c):
    """np.dot inside a numba function: the BLAS (SciPy's) and the call path the cpu backend's contractions use."""
    np.dot(a, b, c)


GEMM_N = 1024              # the square GEMM whose rate is a floor under the peak


def measure_gemm(runs: int) -> dict[str, float]:
    """The best FLOP/s of a GEMM_N^3 BLAS GEMM on all of the BLAS's threads, float32 and float64: a rate real
    contractions reach, so a floor under the peak. The FMA kernel measures less where LLVM compiles it narrower
    than the FMA units (256-bit vectors on Xeons with AVX-512)."""
    out = {}
    for dt in (np.float32, np.float64):
        a = np.random.default_rng(0).standard_normal((GEMM_N, GEMM_N)).astype(dt)
        c = np.empty_like(a)
        blas_gemm(a, a, c)
        best = 0.0
        for _ in range(runs):
            t0 = time.perf_counter()
            blas_gemm(a, a, c)
            best = max(best, 2.0 * GEMM_N ** 3 / (time.perf_counter() - t0))
        out[np.dtype(dt).name] = best
    return out


def measure_triad(threads: int, n: int, runs: int) -> tuple[float, float, float]:
    """(median, spread, best) of the bytes/s the triad moves through memory (write-allocate counted)."""
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    bounds = np.linspace(0, n, threads + 1).astype(np.int64)
    parts = [(a[lo:hi], b[lo:hi], c[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    _triad(a[:1024], b[:1024], c[:1024], 3.0)
    rates = [32.0 * n / _parallel(lambda i: _triad(*parts[i], 3.0), threads)
             for _ in range(1 + runs)][1:]   # the first pass also faults the pages in
    return _stats(rates)


def measure_read(bytes_per_thread: int, threads: int, runs: int, seconds: float) -> tuple[float, float, float]:
    """(median, spread, best) read bytes/s over per-thread buffers of `bytes_per_thread`."""
    xs = [np.ones(max(64, bytes_per_thread // 8)) for _ in range(threads)]
    _read_sum(xs[0], 1)
    t = _parallel(lambda i: _read_sum(xs[i], 4), 1) / 4
    reps = max(4, int(seconds / max(t, 1e-9)))
    rates = [xs[0].nbytes * reps * threads / _parallel(lambda i: _read_sum(xs[i], reps), threads)
             for _ in range(runs)]
    return _stats(rates)


# --- calibration -------------------------------------------------------------------------------------------------

def _host_key(facts: dict[str, Any], caches: list[dict[str, Any]]) -> dict[str, Any]:
    import numba

    return {"model": facts["model"], "cores": facts["cores"], "isa": facts["isa"], "machine": facts["machine"],
            "caches": [[c["level"], c["size"], c["line"], c["ways"], c["sharing"]] for c in caches],
            "numba": numba.__version__}


def _noisy(stats: tuple[float, float, float]) -> str:
    return " -- noisy: is other work running on this machine?" if stats[1] > NOISY else ""


def _say(verbose: bool, text: str) -> None:
    if verbose:
        print(f"xbench calibrate: {text}", flush=True)


def _measure(quick: bool, verbose: bool) -> dict[str, Any]:
    global _measurements
    facts = cpu_facts()
    caches = read_caches()
    cores = facts["cores"]
    runs = 3 if quick else 5
    secs = 0.02 if quick else 0.08
    date = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d")
    measured = f"measured {date}"
    raw: dict[str, Any] = {}
    _say(verbose, f"{facts['model']}, {cores} cores, caches "
         + ", ".join(f"L{c['level']} {c['size'] >> 10} KiB/{c['ways']}-way" for c in caches))

    peaks: dict[str, dict[str, Any]] = {}
    single: dict[str, dict[str, Any]] = {}
    spread: dict[str, dict[str, Any]] = {}
    one_all = measure_peaks(1, runs, secs)
    many_all = measure_peaks(cores, runs, secs) if cores > 1 else one_all
    for dt in (np.float32, np.float64):
        name = np.dtype(dt).name
        one, allc = one_all[name], many_all[name]
        width = _vector_width(dt)
        _say(verbose, f"peak {name}: 1 core {one[2] / 1e9:.1f} GFLOP/s (spread {one[1]:.0%}, "
             f"{width}-bit FMA in the kernel){_noisy(one)}")
        if cores > 1:
            _say(verbose, f"peak {name}: {cores} cores {allc[2] / 1e9:.1f} GFLOP/s (spread {allc[1]:.0%})"
                 f"{_noisy(allc)}")
        how = (f"{measured}: numba FMA chains ({_ROWS} rows x {_DEPTH} dependent FMAs per element, "
               f"{width}-bit packed FMA in the assembly), best of {runs} runs")
        peaks[name] = {"vector": {"value": allc[2], "source": f"{how}, {cores} threads (median "
                                  f"{allc[0] / 1e9:.1f} GFLOP/s, spread {allc[1]:.1%})"}}
        single[name] = {"value": one[2], "source": f"{how}, 1 thread (median {one[0] / 1e9:.1f} GFLOP/s, "
                                                  f"spread {one[1]:.1%})"}
        spread[f"peak_{name}"] = {"value": allc[1], "source": measured}
        spread[f"peak_{name}_1core"] = {"value": one[1], "source": measured}
        raw[f"peak_{name}"] = {"cores": allc, "one": one, "vector_bits": width}
    raw["fp32_over_fp64"] = {"one": one_all["ratio"], "cores": many_all["ratio"]}
    raw["gemm"] = measure_gemm(runs)
    for name, rate in raw["gemm"].items():
        fma = peaks[name]["vector"]["value"]
        if rate > fma:
            _say(verbose, f"peak {name}: BLAS GEMM {rate / 1e9:.1f} GFLOP/s, above the FMA kernel's {fma / 1e9:.1f}")
            peaks[name]["vector"] = {"value": rate, "source": (
                f"{measured}: BLAS GEMM {GEMM_N}^3 through numba's np.dot on all cores, best of {runs} runs, above "
                f"the FMA kernel's {fma / 1e9:.1f} GFLOP/s (LLVM compiled it narrower than the FMA units)")}

    llc = max(c["size"] for c in caches)
    n = (2 if quick else 4) * llc // 8     # elements per array: 2 or 4 times the last-level cache
    # the best of more runs, as STREAM reports: memory bandwidth is what other work on the host disturbs most
    triad = measure_triad(cores, n, 3 * runs)
    triad = (triad[2], triad[1], triad[2])
    _say(verbose, f"triad: {triad[0] / 1e9:.1f} GB/s on {cores} cores, write-allocate counted "
         f"({triad[0] * 0.75 / 1e9:.1f} GB/s by the STREAM convention; spread {triad[1]:.0%}){_noisy(triad)}")
    raw["triad"] = triad

    levels = []
    for c in caches:
        share = c["size"] if c["sharing"] <= 1 else c["size"] // max(1, min(c["sharing"], cores))
        per_thread = share // 2
        bw = measure_read(per_thread, cores, runs, secs)
        _say(verbose, f"L{c['level']} read: {bw[2] / 1e9:.1f} GB/s on {cores} cores ({per_thread >> 10} KiB per "
             f"thread; spread {bw[1]:.0%}){_noisy(bw)}")
        raw[f"l{c['level']}_read"] = bw
        src = c["source"]
        shared = c["sharing"] > 1
        levels.append({
            "name": f"l{c['level']}", "scope": "shared" if shared else "per_core", "managed": "hardware",
            "size_bytes": {"value": c["size"], "source": f"{src}/size"
                           + (f" (shared by {c['sharing']} CPUs)" if shared else "")},
            "line_bytes": {"value": c["line"], "source": f"{src}/coherency_line_size"},
            "associativity": {"value": c["ways"], "source": f"{src}/ways_of_associativity"},
            "write_policy": {"value": "write-back", "source": "model assumption: write-back, write-allocate"},
            "bandwidth_bytes_per_s": {"value": bw[2], "source": f"{measured}: vectorised read of "
                                      f"{per_thread >> 10} KiB per thread, {cores} threads, best of {runs} runs "
                                      f"(median {bw[0] / 1e9:.1f} GB/s, spread {bw[1]:.1%})"},
        })
        spread[f"l{c['level']}_read"] = {"value": bw[1], "source": measured}
    levels.append({
        "name": "dram", "scope": "device", "managed": "memory",
        "size_bytes": {"value": facts["mem_bytes"] or 0, "source": "/proc/meminfo MemTotal"},
        "bandwidth_bytes_per_s": {"value": triad[0], "source": (
            f"{measured}: STREAM-style triad over 3 x {n * 8 >> 20} MiB float64 arrays, {cores} threads, 32 B "
            f"per element (2 reads, write, write-allocate read), best of {3 * runs} runs, spread {triad[1]:.1%}")},
    })
    spread["triad"] = {"value": triad[1], "source": measured}
    fp32_1 = raw["peak_float32"]["one"][0]
    mhz = facts["mhz"]
    peaks.update(_matrix_peaks(facts["isa"], cores, mhz * 1e6 if mhz else fp32_1 / 32, peaks["float32"]["vector"]))
    data = {
        "schema": 1, "name": LOCAL_CPU, "kind": "cpu", "vendor": facts["vendor"],
        "full_name": f"{facts['model']} ({cores} cores, this machine)",
        "notes": (f"calibrated {'quickly ' if quick else ''}on {date}; peaks are all cores (cpu.single_core_peak: "
                  f"one core)" + ("; NOISY: some spreads exceed "
                                  f"{NOISY:.0%}" if any(v["value"] > NOISY for v in spread.values()) else "")),
        "clock": {"boost_hz": {"value": (mhz or 0) * 1e6 if mhz else fp32_1 / 32,
                               "source": facts["mhz_source"] or "derived: 1-core fp32 peak / 32 FLOP per cycle",
                               "uncertain": True}},
        "compute": {"units": {"value": cores, "source": "os.sched_getaffinity (usable CPUs)"}, "unit_name": "core"},
        "peak": peaks,
        "memory": levels,
        "cpu": {"model_name": facts["model"], "cores": {"value": cores, "source": "os.sched_getaffinity"},
                "isa": facts["isa"], "single_core_peak": single,
                "stream_triad_bytes_per_s": {"value": triad[0] * 0.75, "source": f"{measured}: triad, STREAM "
                                             f"convention (24 B per element)"},
                "spread": spread},
    }
    _measurements += 1
    return {"version": FORMAT_VERSION, "quick": quick, "measured": _dt.datetime.now(_dt.UTC).isoformat(),
            "key": _host_key(facts, caches), "raw": raw, "data": data}


def _matrix_peaks(isa: list[str], cores: int, hz: float, fp32: dict[str, Any]) -> dict[str, Any]:
    """The bfloat16 contraction peak of the units the cpu backend's bfloat16 GEMM runs on (`backends/cpu/amx`,
    `bf16gemm`), from the ISA's rates: none measured, so that no measured GEMM beats its roof."""
    if "amx_bf16" in isa:
        return {"bfloat16": {"tensor": {"value": 2 * 1024 * cores * hz, "uncertain": True, "source": (
            f"AMX-BF16: 1,024 bfloat16 multiply-adds per cycle per core (tdpbf16ps: 16 x 16 x 32 in 16 cycles) "
            f"x {cores} cores x {hz / 1e9:.2f} GHz")}}}
    if "avx512_bf16" in isa:
        return {"bfloat16": {"tensor": {"value": 2 * fp32["value"], "uncertain": True, "source": (
            "AVX512-BF16: vdpbf16ps adds two bfloat16 products into each float32 lane, twice an FMA's: 2 x the "
            "measured float32 peak")}}}
    return {}


def noisy(entry: dict[str, Any]) -> list[str]:
    """The measurements of a calibration entry whose spread exceeds NOISY."""
    spread = (entry.get("data", {}).get("cpu", {}) or {}).get("spread", {}) or {}
    return [k for k, v in spread.items() if isinstance(v, dict) and float(v.get("value", 0)) > NOISY]


def _best(old: Any, new: Any) -> Any:
    """`new` with every roof number (peaks, bandwidths) raised to `old`'s where that is higher (and its source)."""
    if isinstance(new, dict) and isinstance(old, dict):
        if "value" in new and "source" in new and isinstance(new["value"], (int, float)) and \
                isinstance(old.get("value"), (int, float)):
            return dict(old) if old["value"] > new["value"] else new
        return {k: _best(old.get(k), v) if k in old else v for k, v in new.items()}
    if isinstance(new, list) and isinstance(old, list):
        byname = {o.get("name"): o for o in old if isinstance(o, dict)}
        return [_best(byname.get(n.get("name")), n) if isinstance(n, dict) and n.get("name") in byname else n
                for n in new]
    return new


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A calibration entry measured again: each roof the best of both, the spreads and date of the new one."""
    out = dict(new)
    data = dict(new["data"])
    for part in ("peak", "memory"):
        data[part] = _best(old["data"].get(part), new["data"][part])
    cpu = dict(new["data"]["cpu"])
    for part in ("single_core_peak", "stream_triad_bytes_per_s"):
        cpu[part] = _best(old["data"]["cpu"].get(part), new["data"]["cpu"][part])
    data["cpu"] = cpu
    data["notes"] = new["data"]["notes"] + f"; roofs: the best of {old.get('remeasured', 0) + 2} calibrations " \
        "(earlier ones noisy)"
    out["data"] = data
    out["remeasured"] = old.get("remeasured", 0) + 1
    return out


def calibrate(force: bool = False, *, quick: bool = False, verbose: bool = True) -> Target:
    """The 'cpu-local' Target: loaded from the cache when this machine was calibrated before, else measured
    (a few seconds; `quick=True` for a sub-second rough pass) and stored. `force=True` measures again.
    A quick calibration in the cache does not satisfy a full request."""
    path = cache_path()
    if not force:
        entry = None
        with contextlib.suppress(OSError, ValueError):
            entry = json.loads(path.read_text())
        if (entry and entry.get("version") == FORMAT_VERSION and (quick or not entry.get("quick"))
                and entry.get("key") == _host_key(cpu_facts(), read_caches())):
            if noisy(entry) and entry.get("remeasured", 0) < REMEASURE and str(path) not in _measured_here:
                _say(verbose, f"the cached calibration is noisy ({', '.join(noisy(entry))}); measuring again "
                     "and keeping the best of both")
                entry = merge(entry, _measure(bool(entry.get("quick")), verbose))
                atomic_write(path, json.dumps(entry, indent=1))
                _measured_here.add(str(path))
            key = f"{path}:{entry['measured']}"
            if key not in _loaded:
                _loaded[key] = build_target(entry["data"], f"{path} (measured {entry['measured']})")
            return _loaded[key]
        _say(verbose and entry is not None, "the cached calibration does not fit this request or machine; measuring")
    _say(verbose, f"measuring this machine ({'quick' if quick else 'full'}); the result is cached in {path}")
    entry = _measure(quick, verbose)
    atomic_write(path, json.dumps(entry, indent=1))
    _measured_here.add(str(path))
    t = build_target(entry["data"], f"{path} (measured {entry['measured']})")
    _loaded[f"{path}:{entry['measured']}"] = t
    return t


if __name__ == "__main__":  # pragma: no cover
    target = calibrate(force="--force" in sys.argv, quick="--quick" in sys.argv)
    print(target.describe())

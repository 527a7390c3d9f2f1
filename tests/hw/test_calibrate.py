"""CPU calibration: plausible numbers within physical bounds, cache geometry as the system reports it, and the
on-disk cache (reused without measuring, re-measured on force or when the machine no longer matches)."""
from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess

import pytest

from xbench.hw import calibrate as cal
from xbench.hw import cpuid
from xbench.hw.cachesim import Hierarchy, Trace, simulate
from xbench.hw.target import get_target


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One quick calibration for the module (printing its progress), in a cache directory of its own."""
    home = tmp_path_factory.mktemp("calibration")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XBENCH_CACHE_DIR", str(home))
        before = cal.measurement_count()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            t = cal.calibrate(quick=True, verbose=True)
        assert cal.measurement_count() == before + 1
        return t, cal.cache_path(), out.getvalue()


@pytest.fixture()
def quick(measured, tmp_path, monkeypatch):
    """A fresh cache directory holding a copy of the module's calibration."""
    t, path, _ = measured
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path))
    entry = json.loads(path.read_text())
    for v in entry["data"]["cpu"]["spread"].values():      # quiet, whatever the host was doing: reused as it is
        v["value"] = 0.0
    cal.cache_path().write_text(json.dumps(entry))
    return t


def test_quick_calibration_is_physically_plausible(quick) -> None:
    t = quick
    cores = t.cpu.cores
    assert t.kind == "cpu" and t.name == "cpu-local" and t.compute_units == cores >= 1
    f32, f64 = t.peak_flops("float32"), t.peak_flops("float64")
    # at least 1 GFLOP/s per machine, at most 64 lanes × 2 FMA units × 2 FLOP × 6 GHz per core
    for v in (f32, f64):
        assert 1e9 <= v <= cores * 64 * 2 * 2 * 6e9
    for dt in ("float32", "float64"):
        assert 0.5e9 <= t.cpu.single_core_peak[dt] <= 64 * 2 * 2 * 6e9
    entry = json.loads(cal.cache_path().read_text())
    raw = entry["raw"]
    # float32 against float64, measured alternately run by run: twice the lanes per vector
    assert raw["fp32_over_fp64"]["one"] >= 1.2
    assert raw["peak_float32"]["vector_bits"] >= 128, "LLVM left the FMA kernel scalar"
    # the triad moves 32 bytes per element; STREAM's convention counts 24
    dram = t.bandwidth("dram")
    assert 1e9 <= dram <= 1e12
    assert t.cpu.stream_triad_bytes_per_s == pytest.approx(0.75 * dram)
    for m in t.caches:
        assert 1e9 <= m.bandwidth <= 1e13, m.name
    assert t.source("peak.float32.vector").startswith("measured ")
    assert t.source("memory.dram.bandwidth_bytes_per_s").startswith("measured ")
    assert set(t.cpu.spread) >= {"peak_float32", "peak_float64", "triad"}
    # no GEMM this machine runs is above its peak
    assert raw["gemm"]["float32"] <= f32 and raw["gemm"]["float64"] <= f64
    assert raw["gemm"]["float32"] >= 1e9
    if {"amx_bf16", "avx512_bf16"} & set(t.cpu.isa):     # the bfloat16 GEMM's unit is a roof of its own
        assert t.peak_flops("bfloat16", "tensor") >= 2 * f32


def test_the_bfloat16_matrix_peak_is_the_isas_rate() -> None:
    fp32 = {"value": 300e9}
    amx = cal._matrix_peaks(["avx512f", "avx512_bf16", "amx_tile", "amx_bf16"], 2, 2.5e9, fp32)
    assert amx["bfloat16"]["tensor"]["value"] == 2 * 1024 * 2 * 2.5e9      # 1,024 multiply-adds a cycle a core
    vnni = cal._matrix_peaks(["avx512f", "avx512_bf16"], 2, 2.5e9, fp32)
    assert vnni["bfloat16"]["tensor"]["value"] == 600e9
    assert cal._matrix_peaks(["avx2", "fma"], 2, 2.5e9, fp32) == {}


def test_cache_geometry_matches_cpuid_or_lscpu(quick) -> None:
    t = quick
    levels = [m for m in t.memory_levels if m.is_cache]
    assert [m.name for m in levels][:2] == ["l1", "l2"]
    for m in levels:
        assert m.size_bytes == m.associativity * m.line_bytes * (m.size_bytes // (m.associativity * m.line_bytes))
    other = _independent_cache_geometry()
    for m in levels:
        if m.name in other:
            assert (m.size_bytes, m.line_bytes, m.associativity) == other[m.name], m.name
    assert {"l1", "l2"} <= set(other)


def test_cpuid_reads_the_vendor_and_enumerates_caches_in_order() -> None:
    if not cpuid.available():
        with pytest.raises(RuntimeError, match="x86 instruction"):
            cpuid.cpuid(0)
        return
    assert cpuid.vendor() in ("GenuineIntel", "AuthenticAMD", "HygonGenuine", "CentaurHauls", "  Shanghai  ")
    caches = cpuid.data_caches()
    assert sorted(caches) == list(range(1, len(caches) + 1))
    sizes = [caches[level][0] for level in sorted(caches)]
    assert sizes == sorted(sizes) and all(line in (32, 64, 128) for _, line, _ in caches.values())


def _independent_cache_geometry() -> dict[str, tuple[int, int, int]]:
    """(size, line, ways) per data cache level, read without the sysfs files calibration reads: CPUID executed
    by xbench on x86-64 (L1 and L2 only, since a virtual machine's CPUID may describe the host's whole L3),
    else lscpu, else glibc's getconf (which reads CPUID too)."""
    if cpuid.available():
        found = {f"l{level}": g for level, g in cpuid.data_caches().items() if level <= 2}
        if len(found) == 2:
            return found
    if shutil.which("lscpu"):
        out = json.loads(subprocess.run(["lscpu", "-C", "-J", "--bytes"], capture_output=True, text=True,
                                        check=True).stdout)
        return {f"l{c['level']}": (int(c["one-size"]), int(c["coherency-size"]), int(c["ways"]))
                for c in out["caches"] if c["type"] in ("Data", "Unified")}
    if shutil.which("getconf") is None:
        pytest.fail("no description of the caches independent of sysfs: this is not x86-64 (no CPUID) and "
                    "neither lscpu (util-linux) nor glibc's getconf is installed; install util-linux")
    lines = subprocess.run(["getconf", "-a"], capture_output=True, text=True, check=True).stdout.splitlines()
    conf = {k: v.strip() for k, _, v in (line.partition(" ") for line in lines)}
    out = {}
    for name, key in (("l1", "LEVEL1_DCACHE"), ("l2", "LEVEL2_CACHE")):
        vals = [conf.get(f"{key}_{f}", "") for f in ("SIZE", "LINESIZE", "ASSOC")]
        if all(v.isdigit() and int(v) > 0 for v in vals):
            out[name] = tuple(int(v) for v in vals)
    return out


def test_second_call_reuses_the_cache_and_force_measures_again(quick) -> None:
    path = cal.cache_path()
    stamp, count = path.stat().st_mtime_ns, cal.measurement_count()
    again = cal.calibrate(quick=True, verbose=False)
    assert cal.measurement_count() == count and path.stat().st_mtime_ns == stamp
    assert again.peak_flops("float32") == quick.peak_flops("float32")
    measured = json.loads(path.read_text())["measured"]
    forced = cal.calibrate(force=True, quick=True, verbose=False)
    assert cal.measurement_count() == count + 1
    assert json.loads(path.read_text())["measured"] != measured
    assert forced.name == "cpu-local"


def test_cache_for_another_machine_is_not_reused(quick) -> None:
    path = cal.cache_path()
    entry = json.loads(path.read_text())
    entry["key"]["cores"] += 1
    path.write_text(json.dumps(entry))
    count = cal.measurement_count()
    cal.calibrate(quick=True, verbose=False)
    assert cal.measurement_count() == count + 1


def test_get_target_cpu_local_loads_a_full_calibration_from_the_cache(quick) -> None:
    path = cal.cache_path()
    entry = json.loads(path.read_text())
    count = cal.measurement_count()
    # a quick entry does not satisfy a full request; mark it full to check the loading path alone
    entry["quick"] = False
    path.write_text(json.dumps(entry))
    t = get_target("cpu-local")
    assert cal.measurement_count() == count
    assert t.peak_flops("float64") == quick.peak_flops("float64")
    h = Hierarchy.from_target(t)
    assert not h.levels[0].shared and h.levels[-1].name == t.caches[-1].name
    r = simulate(h, Trace(range(0, 1 << 16, 8), False, 8))
    assert r.levels[0].hit_rate == pytest.approx(1 - 8 / h.levels[0].line_bytes)


def test_progress_lines_are_printed(measured) -> None:
    out = measured[2]
    for step in ("measuring this machine", "peak float32", "peak float64", "triad", "L1 read", "L2 read"):
        assert f"xbench calibrate: {step}" in out


def test_a_noisy_calibration_is_measured_again_and_keeps_the_best_roofs(quick, monkeypatch) -> None:
    path = cal.cache_path()
    entry = json.loads(path.read_text())
    entry["data"]["cpu"]["spread"]["triad"]["value"] = 0.5           # measured while the host was busy
    dram = next(m for m in entry["data"]["memory"] if m["name"] == "dram")
    dram["bandwidth_bytes_per_s"]["value"] = 1e15                    # a roof no run reaches: kept as the best
    entry["data"]["peak"]["float32"]["vector"]["value"] = 1.0        # a roof every run beats: replaced
    path.write_text(json.dumps(entry))
    count = cal.measurement_count()
    monkeypatch.setattr(cal, "_measured_here", set())      # as if in a new process
    t = cal.calibrate(quick=True, verbose=False)
    assert cal.measurement_count() == count + 1
    # measured again once per process: loading it again here does not measure, noisy or not
    cal.calibrate(quick=True, verbose=False)
    assert cal.measurement_count() == count + 1
    again = json.loads(path.read_text())
    assert again["remeasured"] == 1
    assert t.level("dram").bandwidth == 1e15
    assert t.peak_flops("float32") > 1e9
    assert "best of 2 calibrations" in again["data"]["notes"]
    # still noisy: measured again until REMEASURE, then reused
    for _ in range(cal.REMEASURE + 1):
        again = json.loads(path.read_text())
        again["data"]["cpu"]["spread"]["triad"]["value"] = 0.5
        path.write_text(json.dumps(again))
        monkeypatch.setattr(cal, "_measured_here", set())
        cal.calibrate(quick=True, verbose=False)
    assert json.loads(path.read_text())["remeasured"] == cal.REMEASURE
    assert cal.measurement_count() == count + cal.REMEASURE

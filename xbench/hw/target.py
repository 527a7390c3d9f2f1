"""Hardware targets: what a chip can do, each number with where it came from.

A target is described by a TOML file in `xbench/hw/targets/` (the local CPU instead by measurement, see
`xbench.hw.calibrate`). In those files every number is a table `{ value = ..., source = "..." }` with an
optional `uncertain = true`; the loader refuses a bare number, so no figure enters the model without its
origin. Sources are a URL or document, `derived: <formula>`, a CANN platform ini field, a model assumption,
or `measured <date>`.

    >>> t = get_target("h100")
    >>> t.peak_flops("float16", unit="tensor")
    989400000000000.0
    >>> [m.name for m in t.memory_levels]
    ['l1', 'l2', 'hbm']
    >>> t.bandwidth("hbm"), t.source("memory.hbm.bandwidth_bytes_per_s")

Target packages: an installed package adds targets by naming, under the entry-point group `xbench.targets`, a
folder of such TOML files (a path, or a function returning one or a list of paths). They are checked like the
built-in ones (every number with its source); a name the built-in targets already use is refused with a warning.

    [project.entry-points."xbench.targets"]
    example = "xbench_example:targets"
"""
from __future__ import annotations

import difflib
import functools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

TARGETS_DIR = Path(__file__).parent / "targets"
LOCAL_CPU = "cpu-local"
PLUGIN_GROUP = "xbench.targets"

KINDS = ("gpu", "npu", "cpu")
UNITS = ("vector", "tensor")
_UNIT_ALIASES = {
    "vector": "vector", "cuda_core": "vector", "cuda-core": "vector", "cuda": "vector", "simd": "vector",
    "scalar": "vector", "tensor": "tensor", "tensor_core": "tensor", "tensor-core": "tensor", "cube": "tensor",
    "matrix": "tensor", "mma": "tensor",
}
_DTYPE_ALIASES = {
    "double": "float64", "fp64": "float64", "f64": "float64",
    "float": "float32", "single": "float32", "fp32": "float32", "f32": "float32",
    "tf32": "tfloat32", "tensorfloat32": "tfloat32",
    "half": "float16", "fp16": "float16", "f16": "float16",
    "bf16": "bfloat16",
    "fp8": "float8_e4m3", "float8": "float8_e4m3", "e4m3": "float8_e4m3", "float8_e4m3fn": "float8_e4m3",
    "i8": "int8",
}
_TOP_KEYS = {"schema", "name", "full_name", "kind", "vendor", "notes", "clock", "compute", "peak", "memory",
             "gpu", "npu", "cpu"}
_SCOPES = ("per_unit", "per_core", "per_cube_core", "per_vector_core", "shared", "device")
_MANAGED = ("hardware", "software", "memory")


class TargetError(ValueError):
    """A target name, key or data file that xbench cannot use; the message says what to write instead."""

    def __init__(self, message: str):
        super().__init__(f"xbench: {message}")


def normalize_dtype(dtype: Any) -> str:
    """'fp16', np.float16, np.dtype('float16') -> 'float16'; 'tf32' -> 'tfloat32'; 'bf16' -> 'bfloat16'."""
    if not isinstance(dtype, str):
        try:
            dtype = np.dtype(dtype).name
        except TypeError as e:
            raise TargetError(f"cannot read {dtype!r} as a dtype; write a name such as 'float32'") from e
    key = dtype.strip().lower()
    return _DTYPE_ALIASES.get(key, key)


def normalize_unit(unit: str) -> str:
    key = unit.strip().lower()
    if key not in _UNIT_ALIASES:
        raise TargetError(f"unknown compute unit {unit!r}; write 'vector' (CUDA cores, SIMD, vector cores) "
                          f"or 'tensor' (tensor cores, Ascend cube)")
    return _UNIT_ALIASES[key]


@dataclass(frozen=True)
class MemoryLevel:
    """One level of the memory hierarchy. `bandwidth` is bytes/s summed over all `instances`."""

    name: str
    scope: str                  # per_unit (per SM / per core), per_cube_core, per_vector_core, shared, device
    managed: str                # hardware (a cache), software (a scratchpad), memory (DRAM / HBM)
    size_bytes: int | None
    bandwidth: float | None
    instances: int
    line_bytes: int | None = None
    sector_bytes: int | None = None
    associativity: int | None = None
    write_policy: str | None = None

    @property
    def is_cache(self) -> bool:
        return self.managed == "hardware"

    @property
    def total_bytes(self) -> int | None:
        return None if self.size_bytes is None else self.size_bytes * self.instances


@dataclass(frozen=True)
class GpuLimits:
    """Per-SM resource limits (the cudaDeviceProp fields the occupancy calculator needs)."""

    warp_size: int
    max_threads_per_block: int
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int
    register_allocation_granularity: str
    sub_partitions_per_sm: int
    shared_mem_per_sm_bytes: int
    shared_mem_per_block_bytes: int
    shared_mem_per_block_optin_bytes: int
    reserved_shared_mem_per_block_bytes: int
    shared_mem_allocation_unit_bytes: int
    shared_mem_carveouts_kib: tuple[int, ...]
    l1_shared_combined_bytes: int


@dataclass(frozen=True)
class NpuSpec:
    """Ascend AI-core parameters; `rates` are bytes per cycle per AI core (CANN platform ini names)."""

    ai_cores: int
    cube_cores: int
    vector_cores: int
    ub_bytes: int
    ub_block_bytes: int
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    cube_m: int
    cube_n: int
    cube_k: int
    vector_lanes_fp16: int
    vector_bytes_per_cycle: int
    rates: Mapping[str, float]

    @property
    def cube_shape(self) -> tuple[int, int, int]:
        return (self.cube_m, self.cube_n, self.cube_k)


@dataclass(frozen=True)
class CpuSpec:
    """Host CPU facts; `single_core_peak` maps dtype -> FLOP/s of one core (the device peak is all cores)."""

    model_name: str
    cores: int
    isa: tuple[str, ...]
    single_core_peak: Mapping[str, float]
    stream_triad_bytes_per_s: float | None = None   # STREAM convention (no write-allocate), for comparison
    spread: Mapping[str, float] = field(default_factory=dict)   # relative spread (max-min)/median per number


@dataclass(frozen=True, eq=False)
class Target:
    name: str
    full_name: str
    kind: str
    vendor: str
    clock_hz: float
    compute_units: int
    unit_name: str
    peaks: Mapping[tuple[str, str], float]
    memory_levels: tuple[MemoryLevel, ...]
    sources: Mapping[str, str]
    uncertain: frozenset[str]
    compute_capability: tuple[int, int] | None = None
    gpu: GpuLimits | None = None
    npu: NpuSpec | None = None
    cpu: CpuSpec | None = None
    notes: str = ""
    origin: str = ""

    # --- numbers -------------------------------------------------------------------------------------
    def peak_flops(self, dtype: Any, unit: str | None = None) -> float:
        """Peak FLOP/s (integer ops/s for int dtypes) of the whole device for `dtype` on `unit`
        ('vector' or 'tensor'; None = the fastest unit that has the dtype)."""
        dt = normalize_dtype(dtype)
        if unit is not None:
            u = normalize_unit(unit)
            if (dt, u) in self.peaks:
                return self.peaks[(dt, u)]
        else:
            found = [v for (d, _), v in self.peaks.items() if d == dt]
            if found:
                return max(found)
        have = ", ".join(f"{d}/{u}" for d, u in sorted(self.peaks))
        what = f"{dt} on the {normalize_unit(unit)} unit" if unit is not None else dt
        raise TargetError(f"{self.name} has no peak rate for {what}; it has: {have}")

    def level(self, name: str) -> MemoryLevel:
        """The memory level called `name` ('l1', 'l2', 'hbm', 'dram', 'ub', ...)."""
        key = name.strip().lower()
        for m in self.memory_levels:
            if m.name == key:
                return m
        if key in ("dram", "hbm", "memory", "mem", "gm"):   # the device memory under whatever name
            for m in self.memory_levels:
                if m.managed == "memory":
                    return m
        names = ", ".join(m.name for m in self.memory_levels)
        raise TargetError(f"{self.name} has no memory level {name!r}; its levels are: {names}")

    def bandwidth(self, level: str) -> float:
        """Aggregate bandwidth of `level` in bytes/s."""
        m = self.level(level)
        if m.bandwidth is None:
            raise TargetError(f"{self.name} has no bandwidth figure for {m.name}; levels with one: "
                              + ", ".join(x.name for x in self.memory_levels if x.bandwidth is not None))
        return m.bandwidth

    @property
    def memory(self) -> MemoryLevel:
        """The device memory (HBM / DRAM)."""
        return self.level("memory")

    @property
    def caches(self) -> tuple[MemoryLevel, ...]:
        """Hardware-managed cache levels, closest first (what the cache simulator models)."""
        return tuple(m for m in self.memory_levels if m.is_cache)

    def ridge_point(self, dtype: Any, unit: str | None = None, level: str = "memory") -> float:
        """FLOP per byte where the roofline of `level` meets the compute peak."""
        return self.peak_flops(dtype, unit) / self.bandwidth(level)

    def source(self, key: str) -> str:
        """Where the number at dotted `key` came from, e.g. 'peak.float16.tensor', 'memory.l2.size_bytes'."""
        try:
            return self.sources[key]
        except KeyError:
            close = difflib.get_close_matches(key, list(self.sources), n=3)
            hint = f"; did you mean {', '.join(close)}" if close else ""
            raise TargetError(f"{self.name} has no number at {key!r}{hint}") from None

    def is_uncertain(self, key: str) -> bool:
        self.source(key)
        return key in self.uncertain

    # --- display -------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"Target({self.name!r}, {self.full_name!r}, kind={self.kind!r})"

    def describe(self) -> str:
        """A plain-text table of the numbers with their sources; '?' marks uncertain ones."""
        rows: list[tuple[str, str, str]] = []

        def add(key: str, text: str) -> None:
            mark = " ?" if key in self.uncertain else ""
            rows.append((key, text + mark, self.sources.get(key, "")))

        add("clock.boost_hz", f"{self.clock_hz / 1e9:.3g} GHz")
        add("compute.units", f"{self.compute_units} {self.unit_name}s")
        for (dt, u), v in sorted(self.peaks.items()):
            add(f"peak.{dt}.{u}", f"{dt} {u}: {_rate(v, 'FLOP/s')}")
        for m in self.memory_levels:
            if m.size_bytes is not None:
                add(f"memory.{m.name}.size_bytes", f"{m.name}: {_bytes(m.size_bytes)} ({m.scope})")
            if m.bandwidth is not None:
                add(f"memory.{m.name}.bandwidth_bytes_per_s", f"{m.name}: {_rate(m.bandwidth, 'B/s')}")
        width = max(len(r[1]) for r in rows)
        lines = [f"{self.full_name} ({self.name}, {self.kind})"]
        lines += [f"  {text:<{width}}  {src}" for _, text, src in rows]
        return "\n".join(lines)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} B"


def _rate(x: float, unit: str) -> str:
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6)):
        if x >= scale:
            return f"{x / scale:.4g} {prefix}{unit}"
    return f"{x:.4g} {unit}"


# --- loading -----------------------------------------------------------------------------------------

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _flatten(node: Any, path: str, origin: str, values: dict, sources: dict, uncertain: set) -> None:
    if isinstance(node, dict) and "value" in node:
        extra = set(node) - {"value", "source", "uncertain", "note"}
        if "source" not in node or not str(node["source"]).strip():
            raise TargetError(f"{origin}: {path} has a value but no source; write "
                              f"{{ value = ..., source = \"<URL, document or 'derived: formula'>\" }}")
        if extra:
            raise TargetError(f"{origin}: {path} has unknown fields {sorted(extra)}; allowed: value, source, "
                              f"uncertain, note")
        values[path] = tuple(node["value"]) if isinstance(node["value"], list) else node["value"]
        sources[path] = str(node["source"])
        if node.get("uncertain", False):
            uncertain.add(path)
        return
    if isinstance(node, dict):
        for k, v in node.items():
            _flatten(v, f"{path}.{k}" if path else k, origin, values, sources, uncertain)
        return
    if _is_number(node) or (isinstance(node, list) and any(_is_number(x) for x in node)):
        if path == "schema":
            values[path] = node
            return
        raise TargetError(f"{origin}: {path} = {node!r} has no source; write "
                          f"{path.rsplit('.', 1)[-1]} = {{ value = {node!r}, source = \"...\" }}")
    values[path] = node


def build_target(data: Mapping[str, Any], origin: str) -> Target:
    """Build a Target from the nested structure of a target file (also used for measured targets)."""
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise TargetError(f"{origin}: unknown top-level keys {sorted(unknown)}; allowed: {sorted(_TOP_KEYS)}")
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    uncertain: set[str] = set()
    memory = data.get("memory", [])
    rest = {k: v for k, v in data.items() if k != "memory"}
    _flatten(rest, "", origin, values, sources, uncertain)
    levels = []
    for i, m in enumerate(memory):
        if "name" not in m:
            raise TargetError(f"{origin}: memory entry #{i + 1} has no name")
        name = str(m["name"]).lower()
        mv: dict[str, Any] = {}
        _flatten({k: v for k, v in m.items() if k != "name"}, f"memory.{name}", origin, mv, sources, uncertain)
        values.update(mv)
        levels.append(_memory_level(name, mv, origin, values))

    def need(key: str) -> Any:
        if key not in values:
            raise TargetError(f"{origin}: missing {key}")
        return values[key]

    kind = need("kind")
    if kind not in KINDS:
        raise TargetError(f"{origin}: kind = {kind!r}; write one of {KINDS}")
    peaks: dict[tuple[str, str], float] = {}
    for key, v in values.items():
        if key.startswith("peak."):
            parts = key.split(".")
            if len(parts) != 3:
                raise TargetError(f"{origin}: {key} should be peak.<dtype>.<unit>")
            peaks[(normalize_dtype(parts[1]), normalize_unit(parts[2]))] = float(v)
    if not peaks:
        raise TargetError(f"{origin}: no [peak.<dtype>] tables")
    cc = None
    if "compute.compute_capability" in values:
        major, minor = str(values["compute.compute_capability"]).split(".")
        cc = (int(major), int(minor))
    gpu = _section(GpuLimits, "gpu", values, origin) if kind == "gpu" else None
    npu = None
    if kind == "npu":
        rates = {k.split(".", 2)[2]: float(v) for k, v in values.items() if k.startswith("npu.rates.")}
        npu = _section(NpuSpec, "npu", values, origin, rates=MappingProxyType(rates))
    cpu = None
    if kind == "cpu":
        single = {normalize_dtype(k.split(".", 2)[2]): float(v) for k, v in values.items()
                  if k.startswith("cpu.single_core_peak.")}
        spread = {k.split(".", 2)[2]: float(v) for k, v in values.items() if k.startswith("cpu.spread.")}
        cpu = CpuSpec(model_name=str(values.get("cpu.model_name", "")), cores=int(need("cpu.cores")),
                      isa=tuple(values.get("cpu.isa", ())), single_core_peak=MappingProxyType(single),
                      stream_triad_bytes_per_s=values.get("cpu.stream_triad_bytes_per_s"),
                      spread=MappingProxyType(spread))
    if not any(m.managed == "memory" for m in levels):
        raise TargetError(f"{origin}: no memory level with managed = \"memory\" (the DRAM / HBM)")
    return Target(
        name=str(need("name")), full_name=str(values.get("full_name", need("name"))), kind=kind,
        vendor=str(values.get("vendor", "")), clock_hz=float(need("clock.boost_hz")),
        compute_units=int(need("compute.units")), unit_name=str(values.get("compute.unit_name", "core")),
        peaks=MappingProxyType(peaks), memory_levels=tuple(levels), sources=MappingProxyType(sources),
        uncertain=frozenset(uncertain), compute_capability=cc, gpu=gpu, npu=npu, cpu=cpu,
        notes=str(values.get("notes", "")), origin=origin)


def _memory_level(name: str, mv: dict, origin: str, values: dict) -> MemoryLevel:
    p = f"memory.{name}"
    scope = mv.get(f"{p}.scope", "device")
    managed = mv.get(f"{p}.managed", "hardware")
    if scope not in _SCOPES:
        raise TargetError(f"{origin}: {p}.scope = {scope!r}; write one of {_SCOPES}")
    if managed not in _MANAGED:
        raise TargetError(f"{origin}: {p}.managed = {managed!r}; write one of {_MANAGED}")
    if scope == "per_unit":
        instances = values.get("compute.units")
    elif scope == "per_core":
        instances = values.get("cpu.cores", values.get("compute.units"))
    elif scope == "per_cube_core":
        instances = values.get("npu.cube_cores", values.get("compute.units"))
    elif scope == "per_vector_core":
        instances = values.get("npu.vector_cores")
    else:
        instances = 1
    if instances is None:
        raise TargetError(f"{origin}: {p}.scope = {scope!r} but the number of instances is not given")

    def opt_int(k: str) -> int | None:
        v = mv.get(f"{p}.{k}")
        return None if v is None else int(v)

    bw = mv.get(f"{p}.bandwidth_bytes_per_s")
    m = MemoryLevel(name=name, scope=scope, managed=managed, size_bytes=opt_int("size_bytes"),
                    bandwidth=None if bw is None else float(bw), instances=int(instances),
                    line_bytes=opt_int("line_bytes"), sector_bytes=opt_int("sector_bytes"),
                    associativity=opt_int("associativity"), write_policy=mv.get(f"{p}.write_policy"))
    if m.is_cache and (m.size_bytes is None or m.line_bytes is None):
        raise TargetError(f"{origin}: cache level {name} needs size_bytes and line_bytes")
    if m.write_policy not in (None, "write-back", "write-through"):
        raise TargetError(f"{origin}: {p}.write_policy = {m.write_policy!r}; write 'write-back' or 'write-through'")
    return m


def _section(cls: type, prefix: str, values: dict, origin: str, **extra: Any) -> Any:
    kwargs: dict[str, Any] = dict(extra)
    missing = []
    for f in fields(cls):
        if f.name in kwargs:
            continue
        key = f"{prefix}.{f.name}"
        if key not in values:
            missing.append(key)
            continue
        v = values[key]
        kwargs[f.name] = int(v) if f.type == "int" else v
    if missing:
        raise TargetError(f"{origin}: missing {', '.join(missing)}")
    known = {f"{prefix}.{f.name}" for f in fields(cls)}
    stray = [k for k in values if k.startswith(prefix + ".") and k not in known and not k.startswith(prefix + ".rates.")]
    if stray:
        raise TargetError(f"{origin}: unknown keys {', '.join(sorted(stray))}")
    return cls(**kwargs)


def load_target_file(path: str | Path) -> Target:
    path = Path(path)
    with open(path, "rb") as f:
        try:
            data = tomllib.load(f)
        except tomllib.TOMLDecodeError as e:
            raise TargetError(f"{path}: not valid TOML: {e}") from e
    if data.get("name") != path.stem:
        raise TargetError(f"{path}: name = {data.get('name')!r} but the file is {path.name}; make them agree")
    return build_target(data, str(path))


def list_targets() -> list[str]:
    """Names accepted by `get_target`: the data files (built in and from target packages) plus 'cpu-local'
    (calibrated on first use)."""
    return sorted([p.stem for p in TARGETS_DIR.glob("*.toml")] + list(plugin_targets()) + [LOCAL_CPU])


def plugin_targets(eps=None) -> dict[str, tuple[Path, str]]:
    """Target files from the packages installed under `xbench.targets` (or the entry points given):
    {name: (file, package)}. A package that fails to load, or names a built-in target, is skipped with a warning."""
    import warnings
    if eps is None:
        return dict(_installed_targets())
    builtin = {p.stem for p in TARGETS_DIR.glob("*.toml")} | {LOCAL_CPU}
    out: dict[str, tuple[Path, str]] = {}
    for ep in eps:
        dist = getattr(getattr(ep, "dist", None), "name", None) or ep.name
        try:
            obj = ep.load()
            paths = obj() if callable(obj) else obj
            paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        except Exception as exc:
            warnings.warn(f"xbench target package {ep.name!r} ({ep.value}) failed to load: {type(exc).__name__}: "
                          f"{exc}", RuntimeWarning, stacklevel=2)
            continue
        for p in map(Path, paths):
            for f in sorted(p.glob("*.toml")) if p.is_dir() else [p]:
                if f.stem in builtin or f.stem in out:
                    warnings.warn(f"xbench target package {dist!r}: target {f.stem!r} ({f}) is already defined; "
                                  "the first definition is kept", RuntimeWarning, stacklevel=2)
                    continue
                out[f.stem] = (f, dist)
    return out


@functools.cache
def _installed_targets() -> dict[str, tuple[Path, str]]:
    """The installed target packages' files, read once per process (as the operator packages are)."""
    from importlib.metadata import entry_points
    return plugin_targets(entry_points(group=PLUGIN_GROUP))


@functools.cache
def _load_named(name: str) -> Target:
    path = TARGETS_DIR / f"{name}.toml"
    if not path.is_file():
        path = plugin_targets()[name][0]
    return load_target_file(path)


def get_target(name: str) -> Target:
    """The target called `name` (see `list_targets()`); 'cpu-local' measures this machine on first use."""
    if isinstance(name, Target):
        return name
    key = str(name).strip().lower().replace("_", "-")
    if key == LOCAL_CPU:
        from .calibrate import calibrate

        return calibrate()
    if not (TARGETS_DIR / f"{key}.toml").is_file() and key not in plugin_targets():
        known = list_targets()
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise TargetError(f"unknown target {name!r}{hint}; known targets: {', '.join(known)}")
    return _load_named(key)

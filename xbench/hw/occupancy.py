"""Theoretical occupancy of a CUDA kernel: how many blocks and warps fit on one SM, and what limits them.

The rules are those of NVIDIA's occupancy calculator (`cuda_occupancy.h`, `cudaOccMaxActiveBlocksPerMultiprocessor`)
and the tests compare this module with that header case by case:

- warps: `max_threads_per_sm / 32 // ceil(threads / 32)`;
- registers: registers are allocated per warp, `regs × 32` rounded up to 256; each of the 4 SM sub-partitions
  holds `registers_per_sm / 4 // regs_per_warp` warps; a block is refused when `regs_per_warp × (warps rounded
  up to a multiple of 4)` exceeds the per-block register file;
- shared memory: `static + dynamic + 1 KiB reserved` (8.x/9.0) rounded up to the allocation unit (128 B);
  the SM's shared-memory size is the carveout preference rounded up to a supported configuration, or,
  when that is too small for one block, the smallest configuration that fits one block;
- blocks: the per-SM block limit of the architecture; barriers (9.0): 2 × that limit, one barrier per block.

Per-SM limits for sm_80 and sm_90 come from the A100 and H100 target files; sm_75, sm_86 and sm_89 from the
table below (CUDA C++ Programming Guide, technical specifications per compute capability).
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .target import GpuLimits, Target, get_target

LIMITERS = ("warps", "registers", "shared_memory", "blocks", "barriers")   # cuda_occupancy.h flag order
_INT_MAX = 2**31 - 1
_KIB = 1024
_GUIDE = "CUDA C++ Programming Guide, technical specifications per compute capability"


class OccupancyError(ValueError):
    """A launch configuration that cannot run; `limit` names the resource that refused it."""

    def __init__(self, message: str, limit: str):
        self.limit = limit
        super().__init__(f"xbench: {message}")


def _builtin(threads_per_sm: int, smem_per_sm: int, optin: int, reserved: int, blocks: int,
             carveouts: tuple[int, ...], smem_unit: int) -> GpuLimits:
    return GpuLimits(
        warp_size=32, max_threads_per_block=1024, max_threads_per_sm=threads_per_sm,
        max_warps_per_sm=threads_per_sm // 32, max_blocks_per_sm=blocks, registers_per_sm=65536,
        registers_per_block=65536, max_registers_per_thread=255, register_allocation_unit=256,
        register_allocation_granularity="warp", sub_partitions_per_sm=4, shared_mem_per_sm_bytes=smem_per_sm,
        shared_mem_per_block_bytes=49152, shared_mem_per_block_optin_bytes=optin,
        reserved_shared_mem_per_block_bytes=reserved, shared_mem_allocation_unit_bytes=smem_unit,
        shared_mem_carveouts_kib=carveouts, l1_shared_combined_bytes=0)


# Architectures without a target file here (values: CUDA C++ Programming Guide technical specifications;
# carveouts and allocation units as in cuda_occupancy.h).
_BUILTIN: dict[tuple[int, int], tuple[GpuLimits, str]] = {
    (7, 5): (_builtin(1024, 64 * _KIB, 64 * _KIB, 0, 16, (32, 64), 256), f"{_GUIDE} (7.5, Turing)"),
    (8, 6): (_builtin(1536, 100 * _KIB, 99 * _KIB, _KIB, 16, (0, 8, 16, 32, 64, 100), 128),
             f"{_GUIDE} (8.6, GA10x)"),
    (8, 9): (_builtin(1536, 100 * _KIB, 99 * _KIB, _KIB, 24, (0, 8, 16, 32, 64, 100), 128),
             f"{_GUIDE} (8.9, Ada)"),
}
_FROM_TARGET = {(8, 0): "a100", (9, 0): "h100"}
SUPPORTED = tuple(sorted(set(_BUILTIN) | set(_FROM_TARGET)))


def parse_cc(cc: Any) -> tuple[int, int]:
    """(9, 0), '9.0', 'sm_90', 'sm_90a', 90, '90', a GPU Target -> (9, 0)."""
    if isinstance(cc, Target):
        if cc.compute_capability is None:
            raise OccupancyError(f"{cc.name} is not a CUDA GPU; occupancy needs a compute capability", "arch")
        return cc.compute_capability
    if isinstance(cc, tuple) and len(cc) >= 2:
        return int(cc[0]), int(cc[1])
    text = str(cc).strip().lower().removeprefix("sm_").removeprefix("sm").removeprefix("compute_")
    text = text.rstrip("af")
    try:
        if "." in text:
            major, minor = text.split(".")
            return int(major), int(minor)
        n = int(text)
        return n // 10, n % 10
    except ValueError:
        raise OccupancyError(f"cannot read {cc!r} as a compute capability; write e.g. 'sm_90', '9.0' or (9, 0)",
                             "arch") from None


def device_limits(cc: Any) -> tuple[GpuLimits, str]:
    """The per-SM limits used for `cc` and where they came from."""
    return _device_limits(parse_cc(cc))


@functools.cache
def _device_limits(key: tuple[int, int]) -> tuple[GpuLimits, str]:
    if key in _FROM_TARGET:
        t = get_target(_FROM_TARGET[key])
        assert t.gpu is not None
        return t.gpu, f"target {t.name}"
    if key in _BUILTIN:
        return _BUILTIN[key]
    known = ", ".join(f"sm_{a}{b}" for a, b in SUPPORTED)
    raise OccupancyError(f"no occupancy rules for sm_{key[0]}{key[1]}; supported: {known}", "arch")


@dataclass(frozen=True)
class Occupancy:
    cc: tuple[int, int]
    threads_per_block: int
    registers_per_thread: int
    shared_mem_per_block: int
    dynamic_smem: int
    blocks_per_sm: int
    warps_per_block: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    occupancy: float                       # active warps / max warps, 0..1
    limiter: str                           # first of `limiters` in cuda_occupancy.h order
    limiters: tuple[str, ...]              # every limit that equals blocks_per_sm
    block_limits: Mapping[str, int | None]  # blocks allowed by each resource; None = not limited by it
    allocated_registers_per_block: int
    allocated_shared_mem_per_block: int    # incl. the reserved bytes, rounded to the allocation unit
    shared_mem_config_bytes: int           # the SM's shared-memory carveout this launch runs with

    @property
    def blocks_limit_warps(self) -> int | None:
        return self.block_limits["warps"]

    @property
    def blocks_limit_registers(self) -> int | None:
        return self.block_limits["registers"]

    @property
    def blocks_limit_shared_memory(self) -> int | None:
        return self.block_limits["shared_memory"]

    @property
    def blocks_limit_blocks(self) -> int | None:
        return self.block_limits["blocks"]

    def as_metrics(self) -> dict[str, Any]:
        """Report columns (Nsight Compute's name in the comment where it has one)."""
        return {
            "theoretical_occupancy": self.occupancy,    # sm__maximum_warps_per_active_cycle_pct / 100
            "occupancy_limiter": self.limiter,
            "blocks_per_sm": self.blocks_per_sm,
            "active_warps_per_sm": self.active_warps_per_sm,
            "registers_per_thread": self.registers_per_thread,   # launch__registers_per_thread
            "shared_mem_per_block": self.shared_mem_per_block + self.dynamic_smem,
        }

    def __str__(self) -> str:
        limits = ", ".join(f"{k} {'-' if v is None else v}" for k, v in self.block_limits.items())
        return (f"sm_{self.cc[0]}{self.cc[1]}: {self.occupancy:.1%} occupancy, {self.blocks_per_sm} blocks × "
                f"{self.warps_per_block} warps = {self.active_warps_per_sm}/{self.max_warps_per_sm} warps per SM, "
                f"limited by {self.limiter} (blocks allowed by {limits})")


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _smem_config(size: int, carveouts_kib: tuple[int, ...]) -> int | None:
    """The smallest supported shared-memory configuration >= size (cudaOccAlignUpShmemSizeVoltaPlus)."""
    for kib in sorted(carveouts_kib):
        if size <= kib * _KIB:
            return kib * _KIB
    return None


def _carveout_preference(carveout: Any, d: GpuLimits, cc: tuple[int, int]) -> int:
    top = d.shared_mem_per_sm_bytes
    if carveout is None:
        pref = top
    elif isinstance(carveout, str) and carveout.strip().endswith("%"):
        try:
            percent = int(carveout.strip()[:-1])
        except ValueError:
            raise OccupancyError(f"carveout {carveout!r}: write an integer percentage such as '50%'",
                                 "shared_memory") from None
        if not 0 <= percent <= 100:
            raise OccupancyError(f"carveout {carveout!r} is outside 0%..100%", "shared_memory")
        pref = percent * top // 100
    elif isinstance(carveout, int) and not isinstance(carveout, bool):
        if not 0 <= carveout <= top:
            raise OccupancyError(f"carveout of {carveout} bytes is outside 0..{top} (the shared memory of one "
                                 f"sm_{cc[0]}{cc[1]} SM)", "shared_memory")
        pref = carveout
    else:
        raise OccupancyError(f"carveout={carveout!r}: write None (the driver's default), a number of bytes, or "
                             f"a percentage string such as '50%'", "shared_memory")
    aligned = _smem_config(pref, d.shared_mem_carveouts_kib)
    assert aligned is not None
    return aligned


def occupancy(cc: Any, threads_per_block: int, registers_per_thread: int, shared_mem_per_block: int = 0, *,
              carveout: int | str | None = None, dynamic_smem: int = 0) -> Occupancy:
    """Blocks and warps per SM for a kernel on compute capability `cc` ('sm_80', '9.0', (9, 0), ...).

    `shared_mem_per_block` is the static shared memory (at most 48 KiB, as ptxas allows); `dynamic_smem` the
    dynamic shared memory of the launch (above 48 KiB needs the opt-in attribute, which is assumed set).
    `carveout` is the preferred shared-memory carveout: None (the driver's default, the maximum), a number of
    bytes, or a percentage such as '50%' (cudaFuncAttributePreferredSharedMemoryCarveout); the SM uses the
    next supported configuration. Raises OccupancyError when not even one block fits, naming the limit.
    """
    key = parse_cc(cc)
    d, _ = _device_limits(key)
    name = f"sm_{key[0]}{key[1]}"
    for label, v in (("threads_per_block", threads_per_block), ("registers_per_thread", registers_per_thread),
                     ("shared_mem_per_block", shared_mem_per_block), ("dynamic_smem", dynamic_smem)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise OccupancyError(f"{label} = {v!r}; write a non-negative integer", label)
    if threads_per_block <= 0:
        raise OccupancyError("threads_per_block must be at least 1", "warps")
    if threads_per_block > d.max_threads_per_block:
        raise OccupancyError(f"{threads_per_block} threads per block exceeds the {d.max_threads_per_block} "
                             f"allowed on {name}; use at most {d.max_threads_per_block}", "warps")
    if registers_per_thread > d.max_registers_per_thread:
        raise OccupancyError(f"{registers_per_thread} registers per thread exceeds the {d.max_registers_per_thread} "
                             f"allowed on {name}; ptxas spills above that (-maxrregcount, __launch_bounds__)",
                             "registers")
    if shared_mem_per_block > d.shared_mem_per_block_bytes:
        raise OccupancyError(f"{shared_mem_per_block} bytes of static shared memory exceeds the "
                             f"{d.shared_mem_per_block_bytes} a block may declare statically; request it as "
                             f"dynamic shared memory (dynamic_smem=...) with the opt-in attribute", "shared_memory")

    warp = d.warp_size
    warps = -(-threads_per_block // warp)
    max_warps = d.max_threads_per_sm // warp

    # warps
    lim_warps = max_warps // warps

    # registers
    regs_per_warp = _round_up(registers_per_thread * warp, d.register_allocation_unit)
    regs_per_block = regs_per_warp * warps
    regs_assumed = regs_per_warp * _round_up(warps, d.sub_partitions_per_sm)
    if d.registers_per_block < regs_assumed or d.registers_per_block < regs_per_block:
        lim_regs: int = 0
    elif regs_per_warp > 0:
        warps_per_sub = d.registers_per_sm // d.sub_partitions_per_sm // regs_per_warp
        lim_regs = warps_per_sub * d.sub_partitions_per_sm // warps
    else:
        lim_regs = _INT_MAX

    # shared memory
    reserved = d.reserved_shared_mem_per_block_bytes
    static = shared_mem_per_block + reserved
    smem_alloc = _round_up(static + dynamic_smem, d.shared_mem_allocation_unit_bytes)
    per_block_limit = (d.shared_mem_per_block_optin_bytes if static + dynamic_smem > d.shared_mem_per_block_bytes
                       else d.shared_mem_per_block_bytes)
    if key[0] >= 8:
        per_block_limit += reserved
    preference = _carveout_preference(carveout, d, key)
    if smem_alloc > per_block_limit:
        lim_smem: int = 0
        smem_config = preference
    else:
        if preference >= smem_alloc:
            smem_config = preference
        else:
            aligned = _smem_config(smem_alloc, d.shared_mem_carveouts_kib)
            assert aligned is not None
            smem_config = aligned
        lim_smem = smem_config // smem_alloc if smem_alloc > 0 else _INT_MAX

    lim_blocks = d.max_blocks_per_sm
    blocks = min(lim_regs, lim_smem, lim_warps, lim_blocks)
    lim_bars = 2 * lim_blocks if key[0] >= 9 else _INT_MAX   # one barrier per block
    blocks = min(blocks, lim_bars)
    raw = {"warps": lim_warps, "registers": lim_regs, "shared_memory": lim_smem, "blocks": lim_blocks,
           "barriers": lim_bars}
    limiters = tuple(k for k in LIMITERS if raw[k] == blocks)

    if blocks == 0:
        if lim_regs == 0:
            raise OccupancyError(
                f"{threads_per_block} threads × {registers_per_thread} registers need {regs_per_block} registers "
                f"per block ({regs_assumed} as the hardware counts them: {regs_per_warp} per warp, warps rounded "
                f"up to {d.sub_partitions_per_sm}) but {name} has {d.registers_per_block}; use fewer registers "
                f"per thread or fewer threads per block", "registers")
        if lim_smem == 0:
            raise OccupancyError(
                f"{shared_mem_per_block + dynamic_smem} bytes of shared memory per block ({smem_alloc} with the "
                f"{reserved} reserved bytes) exceed the {per_block_limit - (reserved if key[0] >= 8 else 0)} a "
                f"block may use on {name}; use less shared memory", "shared_memory")
        raise OccupancyError(f"no block fits on an {name} SM (limits: {raw})", limiters[0])

    return Occupancy(
        cc=key, threads_per_block=threads_per_block, registers_per_thread=registers_per_thread,
        shared_mem_per_block=shared_mem_per_block, dynamic_smem=dynamic_smem, blocks_per_sm=blocks,
        warps_per_block=warps, active_warps_per_sm=blocks * warps, max_warps_per_sm=max_warps,
        occupancy=blocks * warps / max_warps, limiter=limiters[0], limiters=limiters,
        block_limits=MappingProxyType({k: (None if v >= _INT_MAX else v) for k, v in raw.items()}),
        allocated_registers_per_block=regs_per_block, allocated_shared_mem_per_block=smem_alloc,
        shared_mem_config_bytes=smem_config)

"""The occupancy calculator against NVIDIA's own: cuda_occupancy.h, compiled with the host C++ compiler into a
small oracle program (no GPU needed) and fed a grid of launch configurations. The header comes from the CUDA
toolkit at $CUDA_HOME or /usr/local/cuda when there is one, else from the nvidia-cuda-runtime wheel that the test
dependencies install (the same CUDA release as the NVRTC the cuda backend uses)."""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xbench.hw.occupancy import OccupancyError, device_limits, occupancy
from xbench.hw.target import get_target

HERE = Path(__file__).parent
CCS = [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0)]
FLAGS = {0x01: "warps", 0x02: "registers", 0x04: "shared_memory", 0x08: "blocks", 0x10: "barriers"}
INT_MAX = 2**31 - 1


def _cuda_include() -> Path | None:
    roots = [Path(r) / "include" for r in (os.environ.get("CUDA_HOME"), "/usr/local/cuda-13.0", "/usr/local/cuda") if r]
    roots += [Path(p) / "nvidia" / "cu13" / "include" for p in sys.path if p]
    return next((r for r in roots if (r / "cuda_occupancy.h").is_file()), None)


@pytest.fixture(scope="session")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    include = _cuda_include()
    assert include is not None, ("cuda_occupancy.h not found: install the test dependencies (make install, or pip "
                                 "install -e '.[test]') or set CUDA_HOME to a CUDA toolkit")
    cxx = shutil.which("g++") or shutil.which("c++")
    assert cxx is not None, "a host C++ compiler (g++) is needed to build the occupancy oracle"
    exe = tmp_path_factory.mktemp("occupancy") / "occupancy_oracle"
    subprocess.run([cxx, "-O1", "-std=c++17", f"-I{include}", str(HERE / "occupancy_oracle.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    return exe


def _ask(exe: Path, lines: list[str]) -> list[list[int]]:
    out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    rows = [list(map(int, ln.split())) for ln in out.stdout.splitlines()]
    assert len(rows) == len(lines)
    return rows


def _occ_line(cc: tuple[int, int], threads: int, regs: int, static: int, dyn: int, mode: int, carve: int) -> str:
    d, _ = device_limits(cc)
    return (f"occ {cc[0]} {cc[1]} {d.max_threads_per_sm} {d.registers_per_block} {d.registers_per_sm} "
            f"{d.shared_mem_per_block_bytes} {d.shared_mem_per_sm_bytes} {d.shared_mem_per_block_optin_bytes} "
            f"{d.reserved_shared_mem_per_block_bytes} {threads} {regs} {static} {dyn} {mode} {carve}")


def _cases(cc: tuple[int, int]) -> list[tuple[int, int, int, int, object, int, int]]:
    """(threads, regs, static, dynamic, carveout for xbench, oracle mode, oracle carveout)."""
    d, _ = device_limits(cc)
    threads = [1, 32, 33, 64, 96, 128, 160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024, 1025]
    regs = [0, 16, 24, 32, 37, 40, 48, 56, 64, 72, 80, 96, 112, 128, 168, 200, 232, 255]
    out: list[tuple[int, int, int, int, object, int, int]] = [
        (t, r, 0, 0, None, 0, 0) for t, r in itertools.product(threads, regs)]
    statics = [0, 1, 1000, 4096, 16384, 40000, 49152]
    optin = d.shared_mem_per_block_optin_bytes
    dynamics = [0, 1, 2048, 10000, 32768, 65536, 100000, 131072, optin - 1024, optin - 1, optin, optin + 1, 300000]
    carveouts: list[tuple[object, int, int]] = [(None, 0, 0)]
    carveouts += [(f"{p}%", 1, p) for p in (0, 10, 33, 50, 75, 100)]
    carveouts += [(b, 2, b) for b in (1, 8192, 8193, 50000, d.shared_mem_per_sm_bytes)]
    for t, r, s, dyn, (carve, mode, value) in itertools.product(
            [64, 128, 256, 512, 1024], [32, 64, 128], statics, dynamics, carveouts):
        out.append((t, r, s, dyn, carve, mode, value))
    return out


@pytest.mark.parametrize("cc", CCS, ids=lambda c: f"sm_{c[0]}{c[1]}")
def test_matches_cuda_occupancy_header(oracle: Path, cc: tuple[int, int]) -> None:
    cases = _cases(cc)
    rows = _ask(oracle, [_occ_line(cc, t, r, s, dyn, mode, value) for t, r, s, dyn, _, mode, value in cases])
    checked = refused = 0
    for (t, r, s, dyn, carve, _, _), row in zip(cases, rows):
        status, blocks, flags, lim_regs, lim_smem, lim_warps, lim_blocks, lim_bars, alloc_regs, alloc_smem = row
        assert status == 0, f"oracle error {status} for {(t, r, s, dyn, carve)}"
        header_limiters = {name for bit, name in FLAGS.items() if flags & bit}
        if blocks == 0:
            with pytest.raises(OccupancyError) as err:
                occupancy(cc, t, r, s, dynamic_smem=dyn, carveout=carve)
            assert err.value.limit in header_limiters, (t, r, s, dyn, carve, header_limiters, str(err.value))
            refused += 1
            continue
        o = occupancy(cc, t, r, s, dynamic_smem=dyn, carveout=carve)
        case = (t, r, s, dyn, carve)
        assert o.blocks_per_sm == blocks, case
        assert set(o.limiters) == header_limiters, case
        assert o.limiter == next(name for bit, name in sorted(FLAGS.items()) if flags & bit), case
        expect = {"warps": lim_warps, "registers": lim_regs, "shared_memory": lim_smem, "blocks": lim_blocks,
                  "barriers": lim_bars}
        assert {k: (INT_MAX if v is None else v) for k, v in o.block_limits.items()} == expect, case
        assert o.allocated_registers_per_block == alloc_regs, case
        assert o.allocated_shared_mem_per_block == alloc_smem, case
        assert o.active_warps_per_sm == blocks * -(-t // 32)
        assert o.occupancy == pytest.approx(o.active_warps_per_sm / o.max_warps_per_sm)
        checked += 1
    # the grid must exercise every limiter and the refusals, or it proves little
    assert checked > 3000 and refused > 100


@pytest.mark.parametrize("name", ["a100", "h100", "h200"])
def test_target_limits_match_header_constants(oracle: Path, name: str) -> None:
    t = get_target(name)
    g = t.gpu
    assert g is not None and t.compute_capability is not None
    major, minor = t.compute_capability
    (row,) = _ask(oracle, [f"arch {major} {minor}"])
    smem_gran, reg_gran, max_regs, sub_parts, max_blocks, *configs = row
    assert g.shared_mem_allocation_unit_bytes == smem_gran
    assert g.register_allocation_unit == reg_gran
    assert g.sub_partitions_per_sm == sub_parts
    assert g.max_blocks_per_sm == max_blocks
    assert [k * 1024 for k in g.shared_mem_carveouts_kib] == configs
    assert g.shared_mem_per_sm_bytes == max(configs)
    # the header allows 256 registers per thread; ptxas and the programming guide cap it at 255
    assert g.max_registers_per_thread == 255 and max_regs == 256
    assert g.max_warps_per_sm * g.warp_size == g.max_threads_per_sm
    assert g.shared_mem_per_block_optin_bytes == g.shared_mem_per_sm_bytes - g.reserved_shared_mem_per_block_bytes


@pytest.mark.parametrize("cc", [(7, 5), (8, 6), (8, 9)], ids=lambda c: f"sm_{c[0]}{c[1]}")
def test_builtin_limits_match_header_constants(oracle: Path, cc: tuple[int, int]) -> None:
    g, _ = device_limits(cc)
    (row,) = _ask(oracle, [f"arch {cc[0]} {cc[1]}"])
    smem_gran, reg_gran, _, sub_parts, max_blocks, *configs = row
    assert (g.shared_mem_allocation_unit_bytes, g.register_allocation_unit, g.sub_partitions_per_sm,
            g.max_blocks_per_sm) == (smem_gran, reg_gran, sub_parts, max_blocks)
    assert [k * 1024 for k in g.shared_mem_carveouts_kib] == configs


def test_hand_computed_examples() -> None:
    # 256 threads, 64 registers, 48 KiB dynamic shared memory: A100 fits 3 blocks (3 × 49 KiB of 164 KiB),
    # H100 is held at 4 by registers (64 × 32 = 2048 per warp, 16384 per sub-partition -> 8 warps each)
    a = occupancy("sm_80", 256, 64, dynamic_smem=48 * 1024)
    h = occupancy("9.0", 256, 64, dynamic_smem=48 * 1024)
    assert (a.blocks_per_sm, a.occupancy, a.limiter) == (3, 0.375, "shared_memory")
    assert (h.blocks_per_sm, h.occupancy) == (4, 0.5)
    assert set(h.limiters) == {"registers", "shared_memory"}
    # 1024 threads with 32 registers: 2 blocks, warps and registers both at the limit
    o = occupancy((9, 0), 1024, 32)
    assert (o.blocks_per_sm, o.occupancy, o.limiters) == (2, 1.0, ("warps", "registers"))
    # tiny blocks run into the 32-blocks-per-SM limit: 32 × 1 warp = 50 %
    o = occupancy("sm_90", 32, 16)
    assert (o.blocks_per_sm, o.occupancy, o.limiter) == (32, 0.5, "blocks")
    # a 50 % carveout on A100: 82 KiB rounds up to the 100 KiB configuration -> 100 // 17 = 5 blocks of 17 KiB
    o = occupancy("sm_80", 128, 32, dynamic_smem=16 * 1024, carveout="50%")
    assert (o.shared_mem_config_bytes, o.blocks_per_sm, o.limiter) == (100 * 1024, 5, "shared_memory")


@pytest.mark.parametrize("threads, regs, static, dynamic, limit", [
    (1025, 32, 0, 0, "warps"),
    (128, 256, 0, 0, "registers"),
    (1024, 255, 0, 0, "registers"),
    (128, 32, 48 * 1024 + 1, 0, "shared_memory"),
    (128, 32, 0, 228 * 1024, "shared_memory"),
])
def test_impossible_configs_are_refused_with_the_limit_named(threads: int, regs: int, static: int, dynamic: int,
                                                             limit: str) -> None:
    with pytest.raises(OccupancyError) as err:
        occupancy("sm_90", threads, regs, static, dynamic_smem=dynamic)
    assert err.value.limit == limit
    assert "xbench:" in str(err.value)


def test_bad_inputs_say_what_to_write() -> None:
    with pytest.raises(OccupancyError, match="sm_90"):
        occupancy("sm_70", 128, 32)
    with pytest.raises(OccupancyError, match="'50%'"):
        occupancy("sm_90", 128, 32, carveout="half")
    with pytest.raises(OccupancyError, match="compute capability"):
        occupancy("hopper", 128, 32)

"""PTX, ptxas resources and occupancy of generated CUDA kernels; schedules refused over the device limits; the
messages when a tool is missing (simulated by taking it away: PATH without ptxas, CUDA_HOME without NVVM)."""
import re

import numpy as np
import pytest

import xbench as xb
from xbench.backends import get as get_backend
from xbench.backends.cuda import ptx as P
from xbench.errors import BackendError
from xbench.hw.occupancy import occupancy

rng = np.random.default_rng(99)
ops = xb.ops


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("cc,arch", [("sm_80", "sm_80"), ((9, 0), "sm_90"), ("9.0", "sm_90"), ("8.0", "sm_80")])
def test_ptx_and_ptxas_resources_per_cc(cc, arch):
    x = f32(16, 96)
    art = ops.softmax.compile("cuda", x, cc=cc, ptx=True)
    assert art.cc == arch and art.resources["cc"] == arch
    (name, text), = art.ptx.items()
    assert name == "k0_row"
    assert re.search(rf"^\.target {arch}\b", text, re.M)
    assert ".entry" in text and "bar.sync" in text            # the reduction tree synchronises the block
    r = art.kernels[0].resources
    assert r["registers"] > 0 and r["barriers"] == 1
    assert r["spill_stores_bytes"] == 0 and r["stack_frame_bytes"] == 0
    assert r["smem_bytes"] == r["smem_allocated_bytes"] > 0   # ptxas agrees with the arrays as allocated
    assert "Compiling entry function" in r["ptxas_output"] and arch in r["ptxas_output"]
    occ = occupancy(arch, r["threads_per_block"], r["registers"], r["smem_bytes"])
    assert r["theoretical_occupancy"] == occ.occupancy and r["occupancy_limiter"] == occ.limiter
    assert r["blocks_per_sm"] == occ.blocks_per_sm
    assert art.resources["registers_max"] == r["registers"]


def test_tiled_matmul_shared_memory_is_exactly_its_tiles():
    a, b = f32(40, 24), f32(24, 72)
    for sched in ({"BM": 32, "BN": 64, "BK": 8, "TM": 2, "TN": 4, "pad": 1},
                  {"BM": 64, "BN": 16, "BK": 16, "TM": 4, "TN": 2, "pad": 0}):
        art = ops.mm.compile("cuda", a, b, cc="sm_90", schedule={"k0_contract": sched})
        r = art.kernels[0].resources
        tiles = (sched["BK"] * (sched["BM"] + sched["pad"]) + sched["BK"] * (sched["BN"] + sched["pad"])) * 4
        assert r["smem_bytes"] == tiles                     # ptxas -v, parsed
        assert r["threads_per_block"] == (sched["BM"] // sched["TM"]) * (sched["BN"] // sched["TN"])
        assert r["grid"] == [-(-72 // sched["BN"]), -(-40 // sched["BM"]), 1]
        assert r["registers"] > 0
        occ = occupancy("sm_90", r["threads_per_block"], r["registers"], tiles)
        assert (r["theoretical_occupancy"], r["blocks_per_sm"]) == (occ.occupancy, occ.blocks_per_sm)
        out = art.run(a, b)[0]
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, atol=1e-4)


def test_launch_bounds_cap_registers():
    a, b = f32(20, 20), f32(20, 20)
    sched = {"BM": 128, "BN": 128, "BK": 8, "TM": 8, "TN": 8, "min_blocks": 0}
    free = ops.mm.compile("cuda", a, b, cc="sm_80", schedule={"k0_contract": sched}).kernels[0].resources
    capped = ops.mm.compile("cuda", a, b, cc="sm_80",
                            schedule={"k0_contract": {**sched, "min_blocks": 2}}).kernels[0].resources
    assert free["registers"] > 128                           # 64 accumulators per thread and their operands
    assert free["blocks_per_sm"] == 1 and free["occupancy_limiter"] == "registers"
    assert capped["registers"] <= 65536 // (2 * 256)         # 256 threads x 2 blocks: at most 128 registers
    assert capped["blocks_per_sm"] >= 2


def test_parse_ptxas_output():
    text = ("ptxas info    : 8 bytes gmem\n"
            "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
            "ptxas info    : Function properties for _Z1kPf\n"
            "    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
            "ptxas info    : Used 38 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]\n")
    info = P.parse_ptxas(text)
    assert info == {"registers": 38, "barriers": 1, "smem_bytes": 2048, "stack_frame_bytes": 24,
                    "spill_stores_bytes": 8, "spill_loads_bytes": 12, "gmem_bytes": 8,
                    "cmem_bytes": {"cmem[0]": 400}}
    with pytest.raises(ValueError, match="no resource usage"):
        P.parse_ptxas("ptxas fatal   : Unresolved extern function")


def test_elementwise_and_scatter_launches():
    x = f32(300, 7)
    art = ops.gelu.compile("cuda", x, cc="sm_80")
    r = art.kernels[0].resources
    assert r["template"] == "point" and r["block"] == [256, 1, 1] and r["grid"] == [-(-2100 // 256), 1, 1]
    assert r["smem_bytes"] == 0 and r["barriers"] == 0

    @xb.tensor_op
    def sc(x, i, u):
        return xb.scatter_add(x, i, u, axis=0)

    art = sc.compile("cuda", f32(6, 4), rng.integers(0, 6, (5,)), f32(5, 4), cc="sm_80")
    assert set(art.ptx) == {"k0_scatter", "k0_scatter_1"}
    assert "atom.global.add.f32" in art.ptx["k0_scatter_1"]


# ---- limits ---------------------------------------------------------------------------------------------------

def test_too_many_threads_per_block_is_refused():
    x = f32(4, 64)
    with pytest.raises(BackendError, match=r"2048 threads .* 1024"):
        ops.softmax.compile("cuda", x, schedule={"k0_row": {"threads_per_point": 1024, "points_per_block": 2}})
    with pytest.raises(BackendError, match=r"1280 threads .* 1024"):
        ops.gelu.compile("cuda", x, schedule={"k0_elementwise": {"block": 1280}})


def test_too_much_shared_memory_is_refused():
    a, b = f32(8, 8), f32(8, 8)
    with pytest.raises(BackendError, match=r"(?s)bytes of shared memory per block exceed the 49152 bytes.*"
                                           r"_As \[64, 257\] float32 = 65792 B"):
        ops.mm.compile("cuda", a, b, cc="sm_90", schedule={"k0_contract": {"BM": 256, "BN": 256, "BK": 64,
                                                                            "TM": 16, "TN": 16}})
    x = f32(2, 16384)                                        # a 64 KiB softmax row kept in shared memory
    with pytest.raises(BackendError, match=r"shared_mem_per_block_bytes.*_sh_tmp1_row \[1, 16384\] float32"):
        ops.softmax.compile("cuda", x, cc="sm_80", schedule={"k0_row": {"scratch": "shared"}})
    art = ops.softmax.compile("cuda", x, cc="sm_80", ptx=False)
    assert art.kernels[0].resources["row_scratch"] == {"tmp1_row": "global"}   # 'auto' moves it to global


def test_tile_shape_must_divide():
    a, b = f32(8, 8), f32(8, 8)
    with pytest.raises(BackendError, match="multiple of the thread tile"):
        ops.mm.compile("cuda", a, b, schedule={"k0_contract": {"BM": 48, "TM": 32}})


@pytest.mark.parametrize("cc", ["sm_70", "sm_100", (6, 1), "banana"])
def test_unsupported_cc_lists_the_supported_ones(cc):
    with pytest.raises(BackendError, match=r"sm_75, sm_80, sm_86, sm_89, sm_90"):
        ops.gelu.compile("cuda", f32(4), cc=cc)


def test_unknown_compile_option():
    with pytest.raises(BackendError, match="no compile option 'arch'"):
        get_backend("cuda").compile(ops.gelu.lower(f32(4)), arch="sm_90")


# ---- missing tools --------------------------------------------------------------------------------------------

def test_missing_ptxas_names_the_cuda_toolkit(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))               # no ptxas anywhere on PATH
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))
    assert P.find_ptxas() is None
    with pytest.raises(BackendError, match=r"(?s)ptxas .* was not found.*install the CUDA toolkit.*ptx=False"):
        ops.gelu.compile("cuda", f32(3, 3), cc="sm_80")
    art = ops.gelu.compile("cuda", f32(3, 3), cc="sm_80", ptx=False)   # still compiles and runs
    assert art.ptx == {} and "registers" not in art.kernels[0].resources
    np.testing.assert_allclose(art.run(np.ones((3, 3), np.float32))[0], np.full((3, 3), 0.8413447), rtol=1e-6)


def test_missing_nvvm_names_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path / "cache"))   # nothing cached: PTX must be made
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "no-cuda"))        # NVVM and libdevice are looked up here
    with pytest.raises(BackendError, match=r"(?s)NVVM / libdevice.*CUDA toolkit.*CUDA_HOME"):
        ops.gelu.compile("cuda", f32(5, 3), cc="sm_80")

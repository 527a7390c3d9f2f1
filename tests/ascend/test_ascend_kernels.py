"""What the generated Ascend C does on the twin: official kernel structure, double buffering that really cycles,
UB plans (kept rows, streamed rows, shrunk or refused schedules) checked against the twin's own accounting,
Cube counters, DataCopyPad on tails, the host tiling functions, and the compile cache."""
from __future__ import annotations

import re

import numpy as np
import pytest

import xbench as xb
from xbench.backends.ascend import twin
from xbench.errors import BackendError

ops = xb.ops
rng = np.random.default_rng(7)
UB = 196608


def arr(*shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def ok(op, *args, **kw):
    for r in xb.verify(op, *args, backend="ascend", **kw):
        assert r.ok, r.message
    return op.compile("ascend", *args, **kw)


def test_source_is_in_the_official_kernel_style():
    x = arr(64, 96)
    art = ops.softmax.compile("ascend", x)
    src = art.source
    for pattern in [r'#include "kernel_operator\.h"', r'extern "C" __global__ __aicore__ void softmax_k0_row\(',
                    r"class KernelSoftmaxK0Row", r"__aicore__ inline void Init\(", r"__aicore__ inline void Process\(",
                    r"void CopyIn\(\)", r"void Compute\(\)", r"void CopyOut\(\)", r"TPipe pipe;",
                    r"TQue<QuePosition::VECIN, BUFFER_NUM> inQueue0;", r"TQue<QuePosition::VECOUT, BUFFER_NUM>",
                    r"static constexpr int32_t BUFFER_NUM = 2;", r"GlobalTensor<float> inputGm;",
                    r"ReduceMax\(red, x0, redTmp, 96\);", r"ReduceSum\(", r"GetBlockIdx\(\)",
                    r"struct SoftmaxK0RowTiling", r'extern "C" uint32_t softmax_k0_row_tiling\(',
                    r"DataCopyPad\(", r"#ifndef __CCE_AICORE__"]:
        assert re.search(pattern, src), pattern
    # the kernel's own part of the source is listed per loop-IR kernel
    assert art.kernels[0].source.startswith("// Tiling of softmax_k0_row")


def test_double_buffering_cycles_through_the_queues():
    """64 x 2048 floats in 1024-element tiles on 4 cores: 32 tiles per core pass through 2-deep queues."""
    x = arr(64, 2048, scale=2)
    art = ok(ops.gelu, x, schedule={"k0_elementwise": {"block_dim": 4, "tile_length": 1024}})
    (launch,) = art.resources["launches"]
    assert launch["block_dim"] == 4 and launch["tile_length"] == 1024 and launch["buffer_num"] == 2
    assert launch["tiling"]["tilesPerBlock"] == 32 and launch["tiling"]["extraTiles"] == 0
    c = art.last_counters["launches"][0]
    for core in c["per_core"]:
        tiles = 32
        assert tiles > launch["buffer_num"]
        assert core["que_enque"] == core["que_deque"] == 2 * tiles          # one input and one output queue
        assert core["mte2_bytes"] == tiles * 1024 * 4 == core["mte3_bytes"]
        assert core["mte2_instr"] == tiles and core["datacopy_truncated"] == 0
        assert core["ub_high_water"] == launch["ub_total"]                  # the plan is what the twin carved
    ub = launch["ub"]
    assert ub["inQueue0"] == {"kind": "TQue", "position": "VECIN", "num": 2, "bytes": 4096, "total": 8192}
    assert ub["outQueue0"]["num"] == 2 and ub["outQueue0"]["bytes"] == 4096
    measured = c["buffers"][0]
    assert [(b["kind"], b["position"], b["num"]) for b in measured[:2]] == [("TQue", "VECIN", 2), ("TQue", "VECOUT", 2)]


def test_single_buffering_halves_the_queues():
    x = arr(64, 2048)
    art = ok(ops.gelu, x, schedule={"k0_elementwise": {"block_dim": 4, "tile_length": 1024, "buffer_num": 1}})
    (launch,) = art.resources["launches"]
    assert "BUFFER_NUM = 1;" in art.source
    assert launch["ub"]["inQueue0"]["num"] == 1 and launch["ub"]["inQueue0"]["total"] == 4096


def test_softmax_rows_of_4096_stay_in_the_ub():
    x = arr(96, 4096, scale=3)
    art = ok(ops.softmax, x, schedule={"k0_row": {"block_dim": 8}})
    (launch,) = art.resources["launches"]
    assert launch["row_mode"] == "resident" and launch["tile_length"] == 4096
    ub = launch["ub"]
    assert ub["inQueue0"]["total"] == 2 * 4096 * 4 and ub["outQueue0"]["total"] == 2 * 4096 * 4
    assert launch["ub_total"] <= UB
    c = art.last_counters["launches"][0]
    assert c["totals"]["mte2_bytes"] == x.nbytes                    # every row read once
    assert c["totals"]["mte3_bytes"] == x.nbytes
    for core in c["per_core"]:
        assert core["que_deque"] == 2 * 12 and core["ub_high_water"] == launch["ub_total"]
    assert c["ops"]["ReduceMax"] > 0 and c["ops"]["ReduceSum"] > 0 and c["ops"]["Exp"] > 0


@pytest.mark.parametrize("op_name", ["softmax", "layer_norm"])
def test_rows_too_wide_for_the_ub_are_streamed(op_name):
    x = arr(3, 50001, scale=3)
    if op_name == "softmax":
        art = ok(ops.softmax, x)
    else:
        art = ok(ops.layer_norm, x, 50001, arr(50001), arr(50001))
    row = [ln for ln in art.resources["launches"] if ln["form"] == "row"]
    assert row and all(ln["row_mode"] == "stream" for ln in row)
    assert art.last_counters["totals"]["mte2_bytes"] > x.nbytes        # one pass per statistic


def test_a_resident_row_that_cannot_fit_is_refused_with_the_numbers():
    x = arr(2, 70001)
    with pytest.raises(BackendError) as err:
        ops.rms_norm.compile("ascend", x, 70001, arr(70001), schedule={"k0_row": {"row_mode": "resident"}})
    msg = str(err.value)
    assert "196608" in msg and "70016 elements" in msg and "bytes of UB" in msg


def test_an_oversized_tile_is_shrunk_to_fit():
    x = arr(16, 8192)
    art = ok(ops.gelu, x, schedule={"k0_elementwise": {"tile_length": 200000}})
    (launch,) = art.resources["launches"]
    assert launch["tile_length"] < 200000 and launch["ub_total"] <= UB - 8192   # 8 KiB left free for Select
    (note,) = launch["notes"]
    assert note.startswith("tile_length 200000 shrunk to ") and "bytes of UB needed" in note
    assert art.last_counters["totals"]["ub_high_water"] == launch["ub_total"]


def test_a_missing_datacopypad_shows_up_as_wrong_answers():
    """The same generated kernel with the tail copies forced to plain DataCopy: the twin rounds the transfer
    down to 32-byte blocks as the hardware does, and the result is wrong where the tail was dropped."""
    x = arr(5, 13)
    art = ok(ops.gelu, x)
    broken = re.sub(r"if \(\(count \* sizeof\(T\)\) % 32 == 0\)", "if (true)", art.source)
    assert broken != art.source
    art.lib = twin.build(broken, name="gelu-no-pad", extra_flags=("-Og",))
    (y,) = art.run(x)
    assert art.last_counters["totals"]["datacopy_truncated"] > 0
    ref = ops.gelu.compile("reference", x).run_exact(x)[0]
    assert not np.allclose(y, ref, equal_nan=False)


def test_matmul_counters():
    """mm of 256 x 192 by 192 x 320 in float16: C goes straight to the output, cube MACs are M*N*K in all."""
    a, b = arr(256, 192, dtype=np.float16), arr(192, 320, dtype=np.float16)
    art = ok(ops.mm, a, b)
    (launch,) = art.resources["launches"]
    assert launch["c"]["direct"] and not launch["epilogue"] and launch["in_dtype"] == "float16"
    t = launch["tiling"]
    assert t["units"] == t["mBlocks"] * t["nBlocks"] and launch["block_dim"] <= 24
    for level in ("l0a", "l0b", "l0c", "l1"):
        assert 0 < launch[f"{level}_bytes"] <= launch[f"{level}_budget"]
    c = art.last_counters["launches"][0]
    assert c["totals"]["cube_macs"] == 256 * 320 * 192
    assert c["totals"]["fixpipe_bytes"] == 256 * 320 * 2
    assert c["totals"]["matmul_calls"] == t["units"]
    per_core = [core["cube_macs"] for core in c["per_core"]]
    assert len(per_core) == launch["block_dim"] and sum(per_core) == 256 * 320 * 192


def test_matmul_with_an_epilogue_keeps_c_in_float32():
    x, w, b = arr(40, 72, dtype=np.float16), arr(24, 72, dtype=np.float16), arr(24, dtype=np.float16)
    art = ok(ops.linear, x, w, b)
    (launch,) = art.resources["launches"]
    assert launch["b"]["transposed"] and launch["epilogue"] and launch["c"]["dtype"] == "float32"
    assert art.resources["workspaces"]["k0_contract_c"] == {"shape": [1, 40, 24], "dtype": "float32"}


def test_scalar_path_is_reported():
    x = arr(4, 30)
    art = ok(ops.cumsum, x, 1)
    assert art.resources["scalar_path"] and "scalar unit" in art.resources["scalar_path"][0]
    c = art.last_counters["totals"]
    assert c["scalar_gm_reads"] == x.size and c["scalar_gm_writes"] == x.size


def test_embedding_reads_rows_with_one_datacopy_each():
    ids, table = rng.integers(0, 50, (6, 9)), arr(50, 64)
    art = ok(ops.embedding, ids, table)
    c = art.last_counters["totals"]
    assert c["scalar_gm_reads"] == ids.size                  # the ids, on the scalar unit
    assert c["mte2_bytes"] == ids.size * 64 * 4              # each row of the table by DataCopy


def test_compile_cache_and_host_tiling():
    x = arr(30, 70)
    first = ops.rms_norm.compile("ascend", x, 70, arr(70))
    again = xb.ops.rms_norm.compile("ascend", x.copy(), 70, arr(70), schedule={"k0_row": {"buffer_num": 2}})
    assert again.cache_hit and again.source == first.source
    (launch,) = again.resources["launches"]
    t = launch["tiling"]
    assert t["rows"] == 30 and t["blockDim"] == 30 and t["rowsPerBlock"] == 1 and launch["block_dim"] == 30


def test_twin_errors_are_backend_errors():
    assert issubclass(twin.TwinError, BackendError) and issubclass(twin.TwinCompileError, BackendError)


def test_unknown_options_are_refused():
    with pytest.raises(BackendError, match="takes no option"):
        ops.gelu.compile("ascend", arr(4), bogus=1)

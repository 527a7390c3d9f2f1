"""Correct vector kernels on the Ascend C twin, checked against numpy and hand-computed counters."""
from __future__ import annotations

import struct

import ml_dtypes
import numpy as np
import pytest

from xbench.backends.ascend.twin import TwinConfig, TwinError

RNG = np.random.default_rng(20240611)
ROUND = {"CAST_NONE": 0, "CAST_RINT": 1, "CAST_FLOOR": 2, "CAST_CEIL": 3, "CAST_ROUND": 4, "CAST_TRUNC": 5,
         "CAST_ODD": 6}


def u32(*values: int) -> bytes:
    return struct.pack(f"{len(values)}I", *values)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_double_buffered_add_matches_numpy_and_counts_the_work(libs, dtype):
    blocks, tile_num, block_len = 8, 8, 4096
    n = blocks * block_len
    x = RNG.standard_normal(n).astype(dtype)
    y = RNG.standard_normal(n).astype(dtype)
    z = np.zeros(n, dtype)
    kernel = "add_float" if dtype == np.float32 else "add_half"
    res = libs["vector"].launch(kernel, blocks, x, y, z, u32(n, tile_num))
    np.testing.assert_array_equal(z, x + y)  # numpy rounds each sum to the element type, as the vector unit

    size = np.dtype(dtype).itemsize
    tile = block_len // tile_num // 2  # two buffers per queue: 16 tiles per block cycle through them
    loops = tile_num * 2
    for b in res.blocks:
        assert b["mte2_bytes"] == 2 * block_len * size
        assert b["mte3_bytes"] == block_len * size
        assert b["mte2_instr"] == 2 * loops and b["mte3_instr"] == loops
        assert b["vec_calls"] == loops
        assert b["vec_instr"] == loops * (tile * size // 256)
        assert b["vec_elems"] == block_len
        assert b["ub_high_water"] == 3 * 2 * tile * size
        assert b["datacopy_truncated"] == 0
    assert [(f.kind, f.position, f.num, f.bytes, f.address) for f in res.buffers[3]] == [
        ("TQue", "VECIN", 2, 2 * tile * size, 0),
        ("TQue", "VECIN", 2, 2 * tile * size, 2 * tile * size),
        ("TQue", "VECOUT", 2, 2 * tile * size, 4 * tile * size),
    ]
    assert res.totals["mte2_bytes"] == x.nbytes + y.nbytes
    assert res.totals["mte3_bytes"] == z.nbytes
    assert res.op_totals == {"Add": blocks * loops * (tile * size // 256)}


def test_ub_budget_is_a_launch_setting(libs):
    n = 8 * 4096
    x = np.ones(n, np.float32)
    with pytest.raises(TwinError) as err:
        libs["vector"].launch("add_float", 8, x, x, np.zeros_like(x), u32(n, 8), config=TwinConfig(ub_bytes=4096))
    assert err.value.rule == "ub-capacity"
    assert "6144" in err.value.detail and "4096" in err.value.detail


def test_row_softmax_in_ub(libs):
    rows, cols, blocks = 64, 200, 8
    x = (RNG.standard_normal((rows, cols)) * 4).astype(np.float32)
    y = np.zeros_like(x)
    res = libs["vector"].launch("softmax_rows", blocks, x, y, u32(rows, cols))
    ref = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref /= ref.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y, ref, rtol=2e-6, atol=1e-9)
    # Per row: ReduceMax 4 repeats of 64 floats + 1 for the 8 partial results, Adds/Exp/Muls 800 B -> 4 each,
    # ReduceSum 4 + 1; two scalar reads (the max and the sum).
    per_row = {"ReduceMax": 5, "Adds": 4, "Exp": 4, "ReduceSum": 5, "Muls": 4}
    assert res.op_totals == {k: v * rows for k, v in per_row.items()}
    assert all(b["scalar_ub_reads"] == 2 * rows // blocks for b in res.blocks)
    assert res.totals["mte2_bytes"] == x.nbytes and res.totals["mte3_bytes"] == y.nbytes


def test_datacopypad_moves_an_unaligned_tail_exactly(libs):
    n = 1003  # three 256-float tiles and a 235-float (940-byte) tail
    x = RNG.standard_normal(n).astype(np.float32)
    y = np.full(n, -7.0, np.float32)
    res = libs["vector"].launch("scale_tail", 1, x, y, u32(n, 256))
    np.testing.assert_array_equal(y, 2 * x)
    assert res.totals["mte2_bytes"] == 4012 and res.totals["mte3_bytes"] == 4012
    assert res.totals["datacopy_truncated"] == 0
    assert res.totals["mte2_instr"] == 4 and res.totals["mte3_instr"] == 4


def test_datacopypad_padding_value_and_dummy_fill(libs):
    rows, cols = 4, 13  # 26-byte rows land in 32-byte UB rows
    x = RNG.standard_normal((rows, cols)).astype(np.float16)

    padded = np.zeros((rows, 16), np.float16)
    back = np.zeros_like(x)
    libs["vector"].launch("pad_rows", 1, x, padded, back, u32(rows, cols, 3, 1))
    np.testing.assert_array_equal(padded[:, :cols], x)
    np.testing.assert_array_equal(padded[:, cols:], -1.0)  # isPad: rightPadding takes paddingValue
    np.testing.assert_array_equal(back, x)  # DataCopyPad UB -> GM drops the padding again

    padded[:] = 0
    back[:] = 0
    libs["vector"].launch("pad_rows", 1, x, padded, back, u32(rows, cols, 0, 0))
    np.testing.assert_array_equal(padded[:, :cols], x)
    np.testing.assert_array_equal(padded[:, cols:], np.repeat(x[:, :1], 16 - cols, axis=1))  # dummy = 1st element
    np.testing.assert_array_equal(back, x)


def _cast(libs, kernel: str, x: np.ndarray, out_dtype, mode: str) -> np.ndarray:
    y = np.zeros(x.shape, out_dtype)
    libs["vector"].launch(kernel, 1, x, y, u32(x.size, ROUND[mode]))
    return y


def test_cast_fp32_to_fp16_rint_matches_numpy(libs):
    x = np.concatenate([RNG.standard_normal(4000) * 10.0 ** RNG.integers(-9, 5, 4000),
                        RNG.uniform(-65504, 65504, 96)]).astype(np.float32)
    got = _cast(libs, "cast_f32_f16", x, np.float16, "CAST_RINT")
    np.testing.assert_array_equal(got.view(np.uint16), x.astype(np.float16).view(np.uint16))


def test_cast_fp32_to_fp16_rounding_modes_by_hand(libs):
    tie_half, tie_one, near_hi = 0.5 + 2.0**-12, 1 + 2.0**-11, 1 + 3 * 2.0**-12
    up_half, up_one = 0.5 + 2.0**-11, 1 + 2.0**-10  # the next half values above 0.5 and 1
    x = np.zeros(16, np.float32)
    x[:7] = [tie_half, tie_one, -tie_one, near_hi, 70000.0, -70000.0, 3.0]
    expected = {  # hand-worked from the rounding rules (ties, direction, odd mantissa, saturation)
        "CAST_RINT": [0.5, 1.0, -1.0, up_one, 65504, -65504, 3.0],
        "CAST_NONE": [0.5, 1.0, -1.0, up_one, 65504, -65504, 3.0],
        "CAST_ROUND": [up_half, up_one, -up_one, up_one, 65504, -65504, 3.0],
        "CAST_FLOOR": [0.5, 1.0, -up_one, 1.0, 65504, -65504, 3.0],
        "CAST_CEIL": [up_half, up_one, -1.0, up_one, 65504, -65504, 3.0],
        "CAST_TRUNC": [0.5, 1.0, -1.0, 1.0, 65504, -65504, 3.0],
        "CAST_ODD": [up_half, up_one, -up_one, up_one, 65504, -65504, 3.0],
    }
    for mode, want in expected.items():
        got = _cast(libs, "cast_f32_f16", x, np.float16, mode)
        np.testing.assert_array_equal(got[:7], np.array(want, np.float16), err_msg=mode)


def test_cast_fp16_to_fp32_is_exact(libs):
    x = (RNG.standard_normal(1024) * 100).astype(np.float16)
    got = _cast(libs, "cast_f16_f32", x, np.float32, "CAST_NONE")
    np.testing.assert_array_equal(got, x.astype(np.float32))
    with pytest.raises(TwinError) as err:
        _cast(libs, "cast_f16_f32", x, np.float32, "CAST_RINT")
    assert err.value.rule == "cast-round-mode" and "CAST_NONE" in err.value.detail


def test_cast_fp32_to_int32_modes_and_saturation(libs):
    x = np.zeros(32, np.float32)
    x[:12] = [2.5, -2.5, 3.5, -0.5, 1.25, -1.75, 7.0, -7.0, 3e9, -3e9, 4194304.5, 0.49999997]
    away = np.where(x >= 0, np.floor(x.astype(np.float64) + 0.5), np.ceil(x.astype(np.float64) - 0.5))
    refs = {"CAST_RINT": np.rint, "CAST_FLOOR": np.floor, "CAST_CEIL": np.ceil, "CAST_TRUNC": np.trunc,
            "CAST_ROUND": lambda v: away}
    for mode, fn in refs.items():
        want = np.clip(fn(x.astype(np.float64)), -2**31, 2**31 - 1).astype(np.int32)
        np.testing.assert_array_equal(_cast(libs, "cast_f32_i32", x, np.int32, mode), want, err_msg=mode)


def test_cast_fp32_to_bf16(libs):
    x = (RNG.standard_normal(512) * 1000).astype(np.float32)
    rint = _cast(libs, "cast_f32_bf16", x, ml_dtypes.bfloat16, "CAST_RINT")
    np.testing.assert_array_equal(rint.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    trunc = _cast(libs, "cast_f32_bf16", x, ml_dtypes.bfloat16, "CAST_TRUNC")
    np.testing.assert_array_equal(trunc.view(np.uint16), (x.view(np.uint32) >> 16).astype(np.uint16))


def test_compare_and_select_give_elementwise_max(libs):
    n = 256
    x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    z = np.zeros(n, np.float32)
    res = libs["vector"].launch("select_max", 1, x, y, z, u32(n))
    np.testing.assert_array_equal(z, np.maximum(x, y))
    assert res.op_totals == {"Compare": 4, "Select": 4}
    assert res.totals["compare_truncated"] == 0


def test_compare_computes_whole_256_byte_repeats_only(libs):
    n = 200  # 800 bytes: Compare writes bits for the first 192 floats only
    x, y = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    z = np.zeros(n, np.float32)
    res = libs["vector"].launch("select_max", 1, x, y, z, u32(n))
    np.testing.assert_array_equal(z[:192], np.maximum(x, y)[:192])
    assert res.totals["compare_truncated"] == 1


def test_compares_with_scalar_and_select_tensor_scalar_mode(libs):
    n = 512  # 1024 bytes of half: four whole repeats
    x = RNG.standard_normal(n).astype(np.float16)
    z = np.full(n, 9.0, np.float16)
    res = libs["vector"].launch("relu_select", 1, x, z, u32(n))
    np.testing.assert_array_equal(z, np.maximum(x, np.float16(0)))
    assert res.op_totals == {"Compares": 4, "Select": 4}


def test_reduce_max_and_min_with_index(libs):
    n = 4000  # 31 full repeats of 128 halves and a partial one
    x = RNG.uniform(-10, 10, n).astype(np.float16)
    x[1234] = x[3000] = 100.0  # a tie: the first index wins
    x[77] = -100.0
    out = np.zeros(32, np.float16)
    res = libs["vector"].launch("reduce_index", 1, x, out, u32(n))
    idx = out.view(np.uint16)
    assert out[0] == 100.0 and idx[1] == 1234
    assert out[16] == -100.0 and idx[17] == 77
    # ReduceSum in half: a pairwise tree inside each 128-lane repeat, the repeat sums added in order,
    # every addition rounded to half.
    total = np.float16(0)
    for r in range(0, n, 128):
        lane = np.zeros(128, np.float16)
        lane[: min(128, n - r)] = x[r:r + 128]
        while lane.size > 1:
            lane = lane[0::2] + lane[1::2]
        total = lane[0] if r == 0 else total + lane[0]
    assert out[8] == total and abs(float(out[8]) - x.astype(np.float64).sum()) < 2.0
    assert res.op_totals == {"ReduceMax": 33, "ReduceMin": 33, "ReduceSum": 33}


def test_every_vector_api_in_float(libs):
    n = 256
    a = RNG.uniform(-2, 2, n).astype(np.float32)
    b = (RNG.uniform(0.5, 2, n) * RNG.choice([-1, 1], n)).astype(np.float32)
    out = np.zeros((18, n), np.float32)
    res = libs["vector"].launch("ops_float", 1, a, b, out, u32(n))
    f = np.float32
    exact = [a + b, a - b, a * b, a / b, np.maximum(a, b), np.minimum(a, b), a + f(1.5), a * f(-3),
             np.maximum(a, f(0.25)), np.minimum(a, f(0.25))]
    for row, want in enumerate(exact):
        np.testing.assert_array_equal(out[row], want, err_msg=f"row {row}")
    np.testing.assert_allclose(out[10], np.exp(a), rtol=2e-7)
    np.testing.assert_array_equal(out[11], np.abs(a))
    np.testing.assert_array_equal(out[12], np.maximum(a, 0))
    np.testing.assert_allclose(out[14], np.log(np.abs(b)), rtol=2e-7, atol=1e-7)
    np.testing.assert_array_equal(out[15], np.sqrt(np.abs(b)))
    np.testing.assert_array_equal(out[16], f(1) / np.sqrt(np.abs(b)))
    np.testing.assert_array_equal(out[17], f(1) / b)
    assert res.totals["vec_calls"] == 18 and res.totals["vec_instr"] == 18 * 4


def test_every_vector_api_in_half_rounds_each_instruction(libs):
    n = 256
    a = RNG.uniform(-2, 2, n).astype(np.float16)
    b = (RNG.uniform(0.5, 2, n) * RNG.choice([-1, 1], n)).astype(np.float16)
    out = np.zeros((18, n), np.float16)
    libs["vector"].launch("ops_half", 1, a, b, out, u32(n))
    h, af, bf = np.float16, a.astype(np.float32), b.astype(np.float32)
    exact = [a + b, a - b, a * b, a / b, np.maximum(a, b), np.minimum(a, b), a + h(1.5), a * h(-3),
             np.maximum(a, h(0.25)), np.minimum(a, h(0.25))]
    for row, want in enumerate(exact):
        np.testing.assert_array_equal(out[row], want, err_msg=f"row {row}")
    np.testing.assert_allclose(out[10], np.exp(af).astype(h), rtol=1e-3)
    np.testing.assert_array_equal(out[13], np.abs(b))
    np.testing.assert_allclose(out[14], np.log(np.abs(bf)).astype(h), rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(out[15], np.sqrt(np.abs(bf)).astype(h))
    np.testing.assert_array_equal(out[17], (1 / bf).astype(h))


def test_duplicate_axpy_and_bitwise_ops(libs):
    n = 64
    xh = RNG.standard_normal(n).astype(np.float16)
    acc = RNG.standard_normal(n).astype(np.float32)
    bits = RNG.integers(-2**15, 2**15, n).astype(np.int16)
    out = np.zeros((4, n), np.int16)
    want_acc = xh.astype(np.float32) * np.float32(2) + acc
    libs["vector"].launch("misc_ops", 1, xh, acc, bits, out, u32(n))
    np.testing.assert_array_equal(acc, want_acc)
    np.testing.assert_array_equal(out[0], np.int16(0x0F0F))
    np.testing.assert_array_equal(out[1], bits & np.int16(0x0F0F))
    np.testing.assert_array_equal(out[2], bits | np.int16(0x0F0F))
    np.testing.assert_array_equal(out[3], ~bits)

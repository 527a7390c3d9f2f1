"""Deliberately broken kernels: the twin must name the rule, the block and the numbers."""
from __future__ import annotations

import numpy as np
import pytest

from xbench.backends.ascend.twin import TwinError


def fail(libs, kernel: str, *args, block_dim: int = 1) -> TwinError:
    with pytest.raises(TwinError) as err:
        libs["rules"].launch(kernel, block_dim, *args)
    return err.value


def scratch() -> np.ndarray:
    return np.zeros(64, np.float32)


def test_ub_overflow_names_buffers_and_total(libs):
    e = fail(libs, "ub_overflow", scratch())
    assert e.rule == "ub-capacity" and e.block == 0
    assert "201024 bytes" in e.detail and "196608" in e.detail and "4416 over" in e.detail
    assert "TQue<VECOUT> 1 x 1024 B" in e.detail and "TQue<VECIN> 2 x 100000 B = 200000 B (this call)" in e.detail


def test_more_than_eight_queue_buffers_on_one_position(libs):
    e = fail(libs, "too_many_que_buffers", scratch())
    assert e.rule == "que-buffer-limit" and "VECIN would number 10" in e.detail


def test_misaligned_ub_operand_names_the_offset(libs):
    e = fail(libs, "misaligned_add", scratch())
    assert e.rule == "ub-alignment"
    assert "operand dst" in e.detail and "offset 12 bytes into" in e.detail and "not 32-byte aligned" in e.detail


def test_datacopy_tail_is_rounded_down_like_the_hardware(libs):
    x = np.arange(1003, dtype=np.float32)
    y = np.full(1003, -1.0, np.float32)
    res = libs["rules"].launch("copy_tail_truncated", 1, x, y)
    np.testing.assert_array_equal(y[:1000], 2 * x[:1000])
    np.testing.assert_array_equal(y[1000:], -1.0)  # the 3-float tail never moved: wrong data, as on the device
    assert res.totals["datacopy_truncated"] == 2
    assert res.totals["datacopy_truncated_bytes"] == 2 * 12
    assert res.totals["mte2_bytes"] == 4000 and res.totals["mte3_bytes"] == 4000


@pytest.mark.parametrize(("kernel", "rule", "words"), [
    ("deque_empty", "deque-empty", "DeQue on an empty queue"),
    ("free_twice", "free-twice", "already freed"),
    ("free_foreign", "free-foreign", "does not belong to this queue"),
    ("alloc_exhausted", "alloc-exhausted", "all 1 of its buffers"),
    ("enque_unallocated", "enque-unallocated", "not allocated from this queue"),
    ("enque_full", "enque-full", "queue depth (template argument) is 1"),
    ("use_after_free", "use-after-free", "already released with FreeTensor"),
])
def test_queue_misuse(libs, kernel, rule, words):
    e = fail(libs, kernel, scratch())
    assert e.rule == rule and e.block == 0
    assert words in e.detail


def test_ub_access_outside_the_buffer(libs):
    e = fail(libs, "ub_out_of_bounds", scratch())
    assert e.rule == "ub-out-of-bounds"
    assert "accesses 512 bytes" in e.detail and "256 bytes past the buffer" in e.detail


def test_set_global_buffer_past_the_argument_names_the_block(libs):
    x = np.zeros(4096, np.float32)
    e = fail(libs, "gm_block_overrun", x, block_dim=5)
    assert e.rule == "gm-out-of-bounds" and e.block == 4
    assert "kernel argument 0 (16384 bytes)" in e.detail and "starting at byte 16384" in e.detail


def test_gm_read_past_the_set_global_buffer_length(libs):
    e = fail(libs, "gm_read_overrun", np.zeros(1024, np.float32))
    assert e.rule == "gm-out-of-bounds"
    assert "elements [768, 1024)" in e.detail and "length is 1000 elements" in e.detail


def test_error_reports_the_failing_block(libs):
    e = fail(libs, "fails_on_block_2", scratch(), block_dim=4)
    assert (e.block, e.rule) == (2, "deque-empty")
    assert "fails_on_block_2, block 2: [deque-empty]" in str(e)


def test_reduce_work_area_too_small(libs):
    e = fail(libs, "reduce_small_work", scratch())
    assert e.rule == "reduce-workspace" and "at least 128 float elements (512 bytes)" in e.detail


def test_cast_mode_and_datacopypad_parameters(libs):
    assert fail(libs, "cast_bad_mode", scratch()).rule == "cast-round-mode"
    e = fail(libs, "pad_bad_blocklen", scratch())
    assert e.rule == "datacopy-params" and "blockLen 30 bytes" in e.detail


def test_launch_argument_errors(libs):
    e = fail(libs, "deque_empty")
    assert e.rule == "launch-args" and "takes 1 arguments; the launch passed 0" in e.detail
    with pytest.raises(KeyError, match="no kernel 'nope'"):
        libs["rules"].launch("nope", 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        libs["rules"].launch("deque_empty", 1, np.zeros((8, 8), np.float32)[:, ::2])

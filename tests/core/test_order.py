"""Kernel order for peak memory (`xbench/ir/order.py`): an output made early while a big input waits for its one
reader is made after that reader instead, the values stay the reference's, and the order respects every
read-after-write, write-after-read and write-after-write between kernels."""
import numpy as np
import pytest

import xbench as xb
import xbench.ir.lower as lower_mod
from xbench.ir.order import dependencies, peak

N = 384                                       # one N x N float32 buffer is 576 KiB


def early_output(x: xb.Tensor, a: xb.Tensor):
    square = x @ x                             # an output written first in the graph's order...
    col = a.sum(axis=0)                        # ...while `a` is held for this, its only reader
    return square, col


kept = xb.tensor_op(early_output, name="early_output_kept")
handed_over = xb.tensor_op(early_output, name="early_output_handed_over")
handed_over.donates_inputs = True              # its caller gives `a` up: freeing it after its reader counts


def _inputs():
    rng = np.random.default_rng(3)
    return (rng.standard_normal((N, N)).astype(np.float32), rng.standard_normal((4 * N, N)).astype(np.float32))


def test_an_early_output_moves_after_the_reader_that_frees_a_big_input(monkeypatch):
    x, a = _inputs()
    prog = handed_over.lower(x, a)
    assert [k.kind for k in prog.kernels] == ["reduce", "contract"]      # the reduction that frees `a` runs first
    assert [k.kind for k in kept.lower(x, a).kernels] == ["contract", "reduce"]   # held by the caller: no gain
    monkeypatch.setattr(lower_mod, "for_memory", lambda kernels, *args: kernels)
    as_written = lower_mod.lower(prog.graph)
    assert [k.kind for k in as_written.kernels] == ["contract", "reduce"]
    x_, a_, square, col = (4 * N * N, 4 * 4 * N * N, 4 * N * N, 4 * N)
    # as written: x, a and the square at once; reordered: x, a and the column, then x, the column and the square
    assert peak(as_written.kernels, as_written.buffers, as_written.inputs, as_written.outputs, ["x", "a"]) == \
        x_ + a_ + square
    assert peak(prog.kernels, prog.buffers, prog.inputs, prog.outputs, ["x", "a"]) == \
        max(x_ + a_ + col, x_ + col + square)


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_the_reordered_program_computes_the_same_values(backend):
    x, a = _inputs()
    square, col = handed_over.run(x, a, backend=backend)
    np.testing.assert_allclose(square, x.astype(np.float64) @ x, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(col, a.astype(np.float64).sum(axis=0), rtol=1e-4, atol=1e-3)


class _K:
    def __init__(self, reads, writes):
        self._r, self._w = reads, writes

    def reads(self):
        return list(self._r)

    def writes(self):
        return list(self._w)


def test_dependencies_keep_each_buffers_writes_and_reads_in_order():
    ks = [_K([], ["t"]),            # 0 writes t
          _K(["t"], ["u"]),         # 1 reads t: after 0
          _K(["v"], ["t"]),         # 2 rewrites t: after 0 (write after write) and 1 (write after read)
          _K(["t"], ["w"]),         # 3 reads the new t: after 2 only
          _K(["u"], ["u"])]         # 4 updates u in place: after 1
    assert dependencies(ks) == [set(), {0}, {0, 1}, {2}, {1}]

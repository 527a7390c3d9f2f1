"""A cpu program holds each temporary only from its first user to its last: the blocks go back to the host pool
for the kernels after, so a chain of products peaks at a few of its buffers, not all of them."""

import tracemalloc

import numpy as np

import xbench as xb
from xbench.backends.cpu.runtime import POOL

MIB = 1 << 20


@xb.tensor_op
def chain(a: xb.Tensor["N", "N"], b: xb.Tensor["N", "N"]):
    x = xb.tanh(a @ b)
    x = xb.tanh(x @ b)
    x = xb.tanh(x @ b)
    x = xb.tanh(x @ b)
    return xb.tanh(x @ b)


def _peak(fn) -> int:
    tracemalloc.start()
    start = tracemalloc.get_traced_memory()[0]
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_a_chain_of_five_products_peaks_at_two_temporaries_and_its_output():
    rng = np.random.default_rng(0)
    n = 512                                          # every buffer 1 MiB of float32
    a = (rng.standard_normal((n, n)) / 20).astype(np.float32)
    b = (rng.standard_normal((n, n)) / 20).astype(np.float32)
    art = chain.compile("cpu", a, b)
    temps = [name for name, buf in art.program.buffers.items() if buf.role == "temp"]
    assert len(temps) == 4 and len(art.program.kernels) == 5

    want = a.astype(np.float64)
    for _ in range(5):
        want = np.tanh(want @ b)
    np.testing.assert_allclose(art.run(a, b)[0], want, rtol=1e-4, atol=1e-5)

    limit, POOL.limit = POOL.limit, 0               # freed blocks go back to numpy, where tracemalloc sees them
    POOL.clear()
    try:
        # the output and the product being read and written, plus one product's scratch for its epilogue
        assert _peak(lambda: art.run(a, b)) <= 4 * MIB + MIB // 8
        # `buffers` (for profiles) keeps every buffer to the end: the output and all four temporaries
        assert _peak(lambda: art.module.buffers(a, b)) >= 5 * MIB
    finally:
        POOL.limit = limit

    POOL.clear()
    fresh = POOL.fresh
    kept = art.run(a, b)
    # ten 1 MiB allocations (the output, four temporaries, five epilogues' scratch) from four blocks
    assert POOL.fresh - fresh == 4 and kept[0].shape == (n, n)

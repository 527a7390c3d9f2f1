"""Building kernels for the twin: the compile cache, compiler errors, and the block/thread launcher."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from xbench.backends.ascend import twin

FILL = r"""
#include "kernel_operator.h"
using namespace AscendC;

// Block b writes b + 1 into its slice of n floats.
extern "C" __global__ __aicore__ void fill(GM_ADDR y, GM_ADDR tiling) {
    uint32_t n = *reinterpret_cast<__gm__ uint32_t*>(tiling);
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, n * sizeof(float));
    GlobalTensor<float> yGm;
    yGm.SetGlobalBuffer((__gm__ float*)y + n * GetBlockIdx(), n);
    LocalTensor<float> t = buf.Get<float>();
    Duplicate(t, static_cast<float>(GetBlockIdx() + 1), n);
    DataCopy(yGm, t, n);
}

#ifdef XBENCH_TWIN
XBENCH_TWIN_LAUNCH(fill)
#endif
"""


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XBENCH_CACHE_DIR", str(tmp_path))
    return tmp_path / "ascend"


def test_build_is_cached_by_content_and_written_atomically(cache):
    lib = twin.build(FILL, name="fill", extra_flags=("-O0",))  # -O0: quick to compile
    assert lib.path.parent == cache and lib.path.suffix == ".so" and lib.kernels == ("fill",)
    stamp = lib.path.stat().st_mtime_ns
    again = twin.build(FILL, name="fill", extra_flags=("-O0",))
    assert again.path == lib.path and again.path.stat().st_mtime_ns == stamp  # no recompilation
    assert not [p.name for p in cache.iterdir() if p.name.endswith(".tmp")]
    other = twin.build(FILL, name="fill", extra_flags=("-O0", "-DXBENCH_TEST_FLAG=1"))
    assert other.path != lib.path  # flags are part of the key

    blocks, n = 16, 64
    y = np.zeros(blocks * n, np.float32)
    res = other.launch("fill", blocks, y, struct.pack("I", n), config=twin.TwinConfig(num_threads=3))
    np.testing.assert_array_equal(y.reshape(blocks, n), np.repeat(np.arange(1, blocks + 1, dtype=np.float32)[:, None],
                                                                   n, axis=1))
    assert [b["vec_elems"] for b in res.blocks] == [n] * blocks
    assert res.totals["mte3_bytes"] == y.nbytes


def test_compile_errors_quote_the_source_line_and_the_rule(cache):
    broken = FILL.replace("    DataCopy(yGm, t, n);", "    DataCopy(yGm, t, n);\n    int z = undefined_symbol;\n"
                          "    LocalTensor<int32_t> i = buf.Get<int32_t>();\n    Exp(i, i, n);")
    line = broken.splitlines().index("    int z = undefined_symbol;") + 1
    with pytest.raises(twin.TwinCompileError) as err:
        twin.build(broken, name="broken", extra_flags=("-O0",))
    text = str(err.value)
    assert "'undefined_symbol' was not declared" in text
    assert f"{line:5d} |     int z = undefined_symbol;" in text
    assert "Exp on Atlas A2 supports half, float" in text  # an unsupported type names the data-type table
    assert not list(cache.glob("broken-*.so"))

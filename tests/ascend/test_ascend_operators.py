"""The core operators on the ascend backend (generated Ascend C run on the CPU twin), against the float64
reference backend: shapes that are and are not whole 32-byte blocks, float32 and float16, and the kernel form
the generator picked for each (row kernel kept in the UB, Matmul on the Cube, packed operands, scalar path)."""
import math

import numpy as np
import pytest
from scipy.special import erf

import xbench as xb

ops = xb.ops
rng = np.random.default_rng(20240611)


def arr(*shape, dtype=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


def verify(op, *args, **kw):
    """ascend == reference within the tolerance table; returns the artifact."""
    results = xb.verify(op, *args, backend="ascend", **kw)
    for r in results:
        assert r.ok, r.message
    return op.compile("ascend", *args, **kw)


def forms(art) -> list[tuple[str, str]]:
    return [(ln["role"], ln["form"]) for ln in art.resources["launches"]]


def check_forms(art, expected) -> None:
    got = forms(art)
    if isinstance(expected, set):
        assert expected <= set(got) and all(f != "scalar" for _, f in got), got
    else:
        assert got == expected


@xb.tensor_op
def linear_gelu_erf(x: xb.Tensor["B", "I"], w: xb.Tensor["O", "I"], b: xb.Tensor["O"]):
    return ops.gelu(ops.linear(x, w, b))


@xb.tensor_op
def linear_gelu_tanh(x: xb.Tensor["B", "I"], w: xb.Tensor["O", "I"], b: xb.Tensor["O"]):
    return ops.gelu(ops.linear(x, w, b), approximate="tanh")


# name -> (operator, arguments builder, keyword arguments, expected launch forms: the exact list, or a set of
# forms that must all appear -- the library's attention may split its work differently -- with no scalar path)
CASES = {
    "mm": (ops.mm, lambda d: (arr(33, 17, dtype=d), arr(17, 9, dtype=d)), {}, [("matmul", "matmul")]),
    "bmm": (ops.bmm, lambda d: (arr(3, 17, 9, dtype=d), arr(3, 9, 5, dtype=d)), {}, [("matmul", "matmul")]),
    "matmul_broadcast": (ops.matmul, lambda d: (arr(2, 1, 5, 7, dtype=d), arr(3, 7, 4, dtype=d)), {},
                         [("matmul", "matmul")]),
    "linear": (ops.linear, lambda d: (arr(37, 24, dtype=d), arr(19, 24, dtype=d), arr(19, dtype=d)), {},
               [("matmul", "matmul")]),
    "linear_gelu_erf": (linear_gelu_erf, lambda d: (arr(37, 24, dtype=d), arr(19, 24, dtype=d), arr(19, dtype=d)),
                        {}, [("matmul", "matmul")]),
    "linear_gelu_tanh": (linear_gelu_tanh, lambda d: (arr(37, 24, dtype=d), arr(19, 24, dtype=d),
                                                      arr(19, dtype=d)), {}, [("matmul", "matmul")]),
    "softmax": (ops.softmax, lambda d: (arr(13, 50, dtype=d, scale=4),), {}, [("main", "row")]),
    "log_softmax": (ops.log_softmax, lambda d: (arr(13, 50, dtype=d, scale=4),), {}, [("main", "row")]),
    "layer_norm": (ops.layer_norm, lambda d: (arr(7, 31, dtype=d, scale=2), 31, arr(31, dtype=d), arr(31, dtype=d)),
                   {}, [("main", "row")]),
    "rms_norm": (ops.rms_norm, lambda d: (arr(7, 31, dtype=d, scale=2), 31, arr(31, dtype=d)), {},
                 [("main", "row")]),
    "gelu": (ops.gelu, lambda d: (arr(37, 19, dtype=d, scale=3),), {}, [("main", "tiles")]),
    "gelu_tanh": (ops.gelu, lambda d: (arr(37, 19, dtype=d, scale=3),), {"approximate": "tanh"},
                  [("main", "tiles")]),
    "attention": (ops.scaled_dot_product_attention, lambda d: (arr(2, 3, 17, 8, dtype=d), arr(2, 3, 17, 8, dtype=d),
                                                               arr(2, 3, 17, 8, dtype=d)), {},
                  {("matmul", "matmul"), ("main", "row")}),
    "attention_causal": (ops.scaled_dot_product_attention,
                         lambda d: (arr(2, 3, 17, 8, dtype=d), arr(2, 3, 17, 8, dtype=d), arr(2, 3, 17, 8, dtype=d)),
                         {"is_causal": True}, {("matmul", "matmul"), ("main", "row")}),
    "conv2d": (ops.conv2d, lambda d: (arr(2, 3, 11, 13, dtype=d), arr(5, 3, 3, 3, dtype=d), arr(5, dtype=d)),
               {"stride": 2, "padding": 1}, [("pack", "tiles"), ("matmul", "matmul")]),
    "max_pool2d": (ops.max_pool2d, lambda d: (arr(2, 3, 11, 13, dtype=d), 3, 2, 1), {}, [("main", "tiles")]),
    "avg_pool2d": (ops.avg_pool2d, lambda d: (arr(2, 3, 11, 13, dtype=d), 3, 2, 1), {}, [("main", "tiles")]),
    "cumsum": (ops.cumsum, lambda d: (arr(5, 40, dtype=d), 1), {}, [("main", "scalar")]),
    "embedding": (ops.embedding, lambda d: (rng.integers(-20, 20, (4, 7)), arr(20, 8, dtype=d)), {},
                  [("main", "tiles")]),
}
HALF = ["mm", "linear_gelu_erf", "softmax", "layer_norm", "rms_norm", "gelu", "attention_causal", "conv2d",
        "max_pool2d"]


@pytest.mark.parametrize("name", list(CASES))
def test_operator_float32(name):
    op, build, kw, expected = CASES[name]
    art = verify(op, *build(np.float32), **kw)
    check_forms(art, expected)
    assert art.predicted and art.backend == "ascend"
    # every tail went through DataCopyPad: the twin saw no truncated DataCopy
    assert art.last_counters["totals"]["datacopy_truncated"] == 0


@pytest.mark.parametrize("name", HALF)
def test_operator_float16(name):
    op, build, kw, expected = CASES[name]
    art = verify(op, *build(np.float16), **kw)
    check_forms(art, expected)
    assert art.last_counters["totals"]["datacopy_truncated"] == 0


def test_gelu_matches_an_independent_oracle_and_runs_on_the_vector_unit_only():
    x = arr(37, 19, scale=3)                      # the shape of the float32 case: the same artifact
    art = ops.gelu.compile("ascend", x)
    (y,) = art.run(x)
    np.testing.assert_allclose(y, 0.5 * x * (1 + erf(x.astype(np.float64) / math.sqrt(2))), rtol=1e-5, atol=1e-6)
    c = art.last_counters["totals"]
    assert c["scalar_gm_reads"] == 0 and c["scalar_ub_writes"] == 0       # no scalar path
    assert c["mte2_bytes"] == x.nbytes and c["mte3_bytes"] == y.nbytes      # one read, one write
    assert art.resources["scalar_path"] == []


@pytest.mark.parametrize("stride,padding,dilation", [(1, 2, 2), (3, 1, 2)])
def test_conv2d_variants_pack_windows_for_the_cube(stride, padding, dilation):
    x, w, b = arr(2, 3, 11, 13), arr(5, 3, 3, 3), arr(5)
    art = verify(ops.conv2d, x, w, b, stride=stride, padding=padding, dilation=dilation)
    pack, mm = art.resources["launches"]
    assert pack["role"] == "pack" and mm["b"]["packed"] and not mm["a"]["packed"]
    assert mm["K"] == 27 and mm["M"] == 5 and mm["batch"] == 2
    # the bias runs on the vector unit after the cube
    assert mm["epilogue"] and not mm["c"]["direct"]


def test_causal_mask_is_a_vector_select_on_an_index_ramp():
    q = arr(2, 3, 17, 8)                          # the shape of the float32 case: the same artifact
    art = verify(ops.scaled_dot_product_attention, q, q, q, is_causal=True)
    rows = [i for i, ln in enumerate(art.resources["launches"]) if ln["form"] == "row"]
    assert rows and all(art.resources["launches"][i]["scalar_path"] == [] for i in rows)
    assert "Compares(" in art.source and "rampTile" in art.source
    assert sum(art.last_counters["launches"][i]["ops"].get("Select", 0) for i in rows) > 0

"""Every part-B operator through the library harness with its registered samples: the reference against
PyTorch (all quick samples, the first declared dtype and an integer dtype where declared), the cpu backend
against the reference (the first tiny sample, every declared dtype class), and the slow backends (cuda in the
simulator, the Ascend twin) and gradients for representative operators."""

import numpy as np
import pytest

import xbench as xb
from xbench.library.harness import check
from xbench.ops import SHAPES

MODULES = {"blas", "convolution", "pooling", "vision", "padding", "indexing", "embeddings", "attention", "sorting",
           "shape_ops", "fused"}


def part_b_ops() -> list[str]:
    names = []
    for name in xb.ops.list(aliases=False):
        inf = xb.ops.info(name)
        if inf.module.rsplit(".", 1)[-1] in MODULES and inf.module.startswith("xbench.ops."):
            names.append(name)
    return names


OPS = part_b_ops()


def test_every_category_is_covered():
    cats = {xb.ops.info(n).category for n in OPS}
    assert {"blas", "convolution", "pooling", "resample", "padding", "indexing", "embedding", "attention", "sort",
            "shape", "fused"} <= cats
    assert len(OPS) >= 130
    for n in OPS:
        inf = xb.ops.info(n)
        assert inf.samples is not None and inf.torch is not None, n


def _dtypes(name):
    d = xb.ops.info(name).dtypes
    first = [d[0]]
    ints = [t for t in d if t in ("int64", "int32")][:1]
    return first + [t for t in ints if t not in first]


@pytest.mark.parametrize("name", OPS)
def test_reference_matches_pytorch(name):
    for dtype in _dtypes(name):
        cell = check(name, "torch", dtype, "quick")
        assert cell.status == "pass", f"{name} {dtype}: {cell.reason} {cell.sample}"


TINY = SHAPES["tiny"]


@pytest.mark.parametrize("name", OPS)
def test_cpu_matches_reference(name):
    cell = check(name, "cpu", xb.ops.info(name).dtypes[0], TINY, limit=1)
    assert cell.status == "pass", f"{name}: {cell.reason} {cell.sample}"


def test_zero_dim_input_on_cpu():
    out = xb.ops.masked_fill.run(np.asarray(np.float32(1.5)), np.asarray(True), 2.5, backend="cpu")
    assert out.shape == () and float(out) == 2.5


SLOW = ["mm", "conv2d", "conv_transpose2d", "max_pool2d_with_indices", "avg_pool2d", "upsample_bilinear2d",
        "grid_sample", "pad", "gather", "scatter_add", "nonzero", "embedding", "scaled_dot_product_attention",
        "sort", "topk", "searchsorted", "flip", "tril", "silu_and_mul", "fused_add_rms_norm", "cross_entropy_loss"]


@pytest.mark.parametrize("backend", ["cuda", "ascend"])
@pytest.mark.parametrize("name", SLOW)
def test_slow_backends_match_reference(name, backend):
    cell = check(name, backend, "float32", "tiny", limit=1)
    assert cell.status in ("pass", "unsupported"), f"{name} on {backend}: {cell.reason} {cell.sample}"
    if cell.status == "unsupported":
        assert cell.reason, f"{name} on {backend}: unsupported without a reason"


GRAD = ["addmm", "conv2d", "conv_transpose1d", "max_pool2d", "adaptive_avg_pool2d", "upsample_bicubic2d",
        "grid_sample", "reflection_pad2d", "scatter_reduce", "masked_scatter", "embedding", "_flash_attention_forward",
        "sort", "quantile", "roll", "diag_embed", "apply_rotary_pos_emb", "cross_entropy_loss", "instance_norm"]


@pytest.mark.parametrize("name", GRAD)
def test_gradients(name):
    cell = check(name, "grad", "float64", "tiny")
    assert cell.status == "pass", f"{name}: {cell.reason} {cell.sample}"

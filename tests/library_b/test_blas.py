"""Category 7 (matmul / BLAS) against the reference backend and PyTorch."""
import numpy as np
import pytest
import torch

import xbench as xb

from .helpers import check, f32

ops = xb.ops


def test_mm_bmm_mv_dot():
    a, b = f32(13, 7), f32(7, 5)
    check(ops.mm, a, b, torch_fn=torch.mm)
    x, y = f32(3, 6, 4), f32(3, 4, 9)
    check(ops.bmm, x, y, torch_fn=torch.bmm)
    v = f32(7)
    check(ops.mv, a, v, torch_fn=torch.mv)
    u, w = f32(33), f32(33)
    out = check(ops.dot, u, w, torch_fn=torch.dot)
    assert out[0].shape == ()
    check(ops.vdot, u, w, torch_fn=torch.vdot)
    check(ops.outer, u, f32(4), torch_fn=torch.outer)


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, -2.0), (0, 1.5)])
def test_addmm_family(beta, alpha):
    inp, m1, m2 = f32(6, 5), f32(6, 4), f32(4, 5)
    kw = dict(beta=beta, alpha=alpha)
    check(ops.addmm, inp, m1, m2, torch_fn=lambda *a: torch.addmm(*a, **kw), **kw)
    check(ops.addmm, f32(5), m1, m2, torch_fn=lambda *a: torch.addmm(*a, **kw), **kw)     # broadcast bias
    check(ops.addmv, f32(6), m1, f32(4), torch_fn=lambda *a: torch.addmv(*a, **kw), **kw)
    check(ops.addr, inp, f32(6), f32(5), torch_fn=lambda *a: torch.addr(*a, **kw), **kw)
    check(ops.baddbmm, f32(2, 6, 5), f32(2, 6, 4), f32(2, 4, 5), torch_fn=lambda *a: torch.baddbmm(*a, **kw), **kw)
    check(ops.addbmm, inp, f32(3, 6, 4), f32(3, 4, 5), torch_fn=lambda *a: torch.addbmm(*a, **kw), **kw)


def test_beta_zero_ignores_nan_input():
    inp = np.full((3, 2), np.nan, np.float32)
    m1, m2 = f32(3, 4), f32(4, 2)
    out = ops.addmm(inp, m1, m2, beta=0)
    np.testing.assert_allclose(out, m1.astype(np.float64) @ m2, rtol=1e-5, atol=1e-5)


def test_linear_bilinear_kron():
    x, w, b = f32(4, 3, 8), f32(6, 8), f32(6)
    check(ops.linear, x, w, b, torch_fn=torch.nn.functional.linear)
    x1, x2, wb, bb = f32(5, 3), f32(5, 4), f32(2, 3, 4), f32(2)
    check(ops.bilinear, x1, x2, wb, bb, torch_fn=torch.nn.functional.bilinear)
    check(ops.kron, f32(2, 3), f32(4, 5), torch_fn=torch.kron)
    check(ops.kron, f32(3), f32(2, 2), torch_fn=torch.kron)


def test_grouped_mm_all_layouts():
    # torch's CPU kernel wants 16-byte aligned strides: sizes that are multiples of 4 floats
    offs = np.array([3, 5, 8], np.int32)
    a, b = f32(8, 4), f32(3, 4, 8)
    check(ops._grouped_mm, a, b, offs, torch_fn=lambda a, b, o: torch._grouped_mm(a.float(), b.float(), offs=o),
          rtol=1e-4, atol=1e-4)
    offs_k = np.array([4, 8, 12], np.int32)
    a, b = f32(4, 12), f32(12, 8)
    check(ops._grouped_mm, a, b, offs_k, torch_fn=lambda a, b, o: torch._grouped_mm(a.float(), b.float(), offs=o),
          rtol=1e-4, atol=1e-4)
    a, b = f32(3, 4, 8), f32(8, 12)
    check(ops._grouped_mm, a, b, offs_k, torch_fn=lambda a, b, o: torch._grouped_mm(a.float(), b.float(), offs=o),
          rtol=1e-4, atol=1e-4)
    a, b = f32(2, 4, 8), f32(2, 8, 4)
    check(ops._grouped_mm, a, b, torch_fn=lambda a, b: torch._grouped_mm(a.float(), b.float()), rtol=1e-4,
          atol=1e-4)


def test_grouped_mm_rows_past_last_offset_are_zero():
    a, b = f32(8, 4), f32(2, 4, 4)
    out = ops._grouped_mm(a, b, np.array([2, 5], np.int32))
    want = np.concatenate([a[:2] @ b[0], a[2:5] @ b[1], np.zeros((3, 4), np.float32)])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_mm_shape_error_names_the_operand():
    with pytest.raises(ValueError, match="mat2 must be 2-D"):
        ops.mm(f32(2, 3), f32(3))

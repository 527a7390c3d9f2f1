"""Matrix products (PyTorch's BLAS-like operators): every one is a single contraction, with scaling and bias
added as epilogues."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor

register = xb.ops.register


def _scaled_sum(input, product, beta, alpha):
    """beta * input + alpha * product, with PyTorch's rule that beta == 0 ignores `input` (NaN included)."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return xb.broadcast_to(product, np.broadcast_shapes(input.shape, product.shape)) \
            if input.ndim > product.ndim else product
    return product + (input if beta == 1 else input * beta)


def _need(name: str, t, ndim: int, what: str) -> None:
    if t.ndim != ndim:
        raise ValueError(f"{name}: {what} must be {ndim}-D, got shape {tuple(t.shape)}")


@register("blas")
def mm(input: Tensor, mat2: Tensor):
    """input [n, m] @ mat2 [m, p]."""
    _need("mm", input, 2, "input")
    _need("mm", mat2, 2, "mat2")
    return input @ mat2


@register("blas")
def bmm(input: Tensor, mat2: Tensor):
    """Batched: input [b, n, m] @ mat2 [b, m, p]."""
    _need("bmm", input, 3, "input")
    _need("bmm", mat2, 3, "mat2")
    return input @ mat2


@register("blas")
def matmul(input: Tensor, other: Tensor):
    """numpy/PyTorch matmul: 1-D operands promoted, batch dims broadcast."""
    return input @ other


@register("blas")
def linear(input: Tensor, weight: Tensor, bias: Tensor = None):
    """input @ weight.T + bias (weight is [out_features, in_features])."""
    out = input @ weight.mT
    return out if bias is None else out + bias


@register("blas")
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * (mat1 @ mat2); `input` broadcasts to [n, p]."""
    _need("addmm", mat1, 2, "mat1")
    _need("addmm", mat2, 2, "mat2")
    return _scaled_sum(input, mat1 @ mat2, beta, alpha)


@register("blas")
def addmv(input: Tensor, mat: Tensor, vec: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * (mat @ vec)."""
    _need("addmv", mat, 2, "mat")
    _need("addmv", vec, 1, "vec")
    return _scaled_sum(input, mat @ vec, beta, alpha)


@register("blas")
def mv(input: Tensor, vec: Tensor):
    """Matrix [n, m] times vector [m]."""
    _need("mv", input, 2, "input")
    _need("mv", vec, 1, "vec")
    return input @ vec


@register("blas")
def dot(input: Tensor, tensor: Tensor):
    """Inner product of two 1-D tensors of one length (a 0-d result)."""
    _need("dot", input, 1, "input")
    _need("dot", tensor, 1, "tensor")
    return xb.dot(input, tensor)


@register("blas")
def vdot(input: Tensor, other: Tensor):
    """Inner product of two 1-D tensors (the first conjugated; xbench tensors are real, so this is `dot`)."""
    _need("vdot", input, 1, "input")
    _need("vdot", other, 1, "other")
    return xb.dot(input, other)


@register("blas")
def outer(input: Tensor, vec2: Tensor):
    """Outer product of two vectors: [n] x [m] -> [n, m]."""
    _need("outer", input, 1, "input")
    _need("outer", vec2, 1, "vec2")
    return input[:, None] * vec2[None, :]


@register("blas")
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@register("blas")
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * (batch1 @ batch2) over [b, n, m] @ [b, m, p]."""
    _need("baddbmm", batch1, 3, "batch1")
    _need("baddbmm", batch2, 3, "batch2")
    return _scaled_sum(input, batch1 @ batch2, beta, alpha)


@register("blas")
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * sum_b (batch1[b] @ batch2[b]): one contraction over the batch and inner axes."""
    _need("addbmm", batch1, 3, "batch1")
    _need("addbmm", batch2, 3, "batch2")
    return _scaled_sum(input, xb.einsum("bnm,bmp->np", batch1, batch2), beta, alpha)


@register("blas")
def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor = None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]."""
    if weight.ndim != 3 or weight.shape[1] != input1.shape[-1] or weight.shape[2] != input2.shape[-1]:
        raise ValueError(f"bilinear: weight {tuple(weight.shape)} must be [out, {input1.shape[-1]}, "
                         f"{input2.shape[-1]}]")
    lead = np.broadcast_shapes(input1.shape[:-1], input2.shape[:-1])
    a = xb.broadcast_to(input1, lead + input1.shape[-1:]).reshape(-1, input1.shape[-1])
    b = xb.broadcast_to(input2, lead + input2.shape[-1:]).reshape(-1, input2.shape[-1])
    t = xb.einsum("ni,oij->noj", a, weight)
    out = (t * b[:, None, :]).sum(axis=-1).reshape(lead + (weight.shape[0],))
    return out if bias is None else out + bias


@register("blas")
def kron(input: Tensor, other: Tensor):
    """Kronecker product: out[i * m + k] = input[i] * other[k] along every axis (ranks padded with 1s)."""
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    ea = a.reshape(tuple(x for n in a.shape for x in (n, 1)))
    eb = b.reshape(tuple(x for n in b.shape for x in (1, n)))
    return (ea * eb).reshape(tuple(m * n for m, n in zip(a.shape, b.shape)))


def _group_of(position, offs):
    """The group each position belongs to: the number of group ends (`offs`, cumulative) at or before it."""
    return (offs[None, :] <= position[:, None]).astype("int64").sum(axis=1)


@register("blas")
def _grouped_mm(mat_a: Tensor, mat_b: Tensor, offs: Tensor = None, bias: Tensor = None, out_dtype=None):
    """Grouped GEMM (MoE experts), PyTorch's `torch._grouped_mm`; `offs` [G] holds cumulative group ends.

    - 2-D x 3-D: rows of mat_a [M, K] in group g multiply mat_b[g] [K, N] -> [M, N];
    - 2-D x 2-D: the shared K axis is split into groups -> [G, M, N];
    - 3-D x 2-D: mat_b's columns are split, group g uses mat_a[g] [M, K] -> [M, N];
    - 3-D x 3-D: a batched matmul (no offs).
    Rows or columns past the last offset belong to no group and are 0 (PyTorch leaves them unwritten)."""
    da, db = mat_a.ndim, mat_b.ndim
    if (da, db) == (3, 3):
        if offs is not None:
            raise ValueError("_grouped_mm: 3-D x 3-D is a batched matmul and takes no offs")
        out = mat_a @ mat_b
    else:
        if offs is None:
            raise ValueError(f"_grouped_mm: {da}-D x {db}-D operands need offs (cumulative group ends)")
        groups = offs.shape[0]
        if (da, db) == (2, 3):
            if mat_b.shape[0] != groups:
                raise ValueError(f"_grouped_mm: {groups} offsets for {mat_b.shape[0]} matrices in mat_b")
            g = _group_of(xb.arange(mat_a.shape[0]), offs)                       # [M]
            inside = (g < groups)[:, None]
            picked = mat_b[xb.minimum(g, groups - 1)]                            # [M, K, N]
            out = xb.where(inside, xb.einsum("mk,mkn->mn", mat_a, picked), 0)
        elif (da, db) == (2, 2):
            g = _group_of(xb.arange(mat_a.shape[1]), offs)                       # [K]
            member = (g[None, :] == xb.arange(groups)[:, None]).astype(mat_a.dtype)   # [G, K]
            out = (member[:, None, :] * mat_a[None]) @ mat_b                     # [G, M, K] @ [K, N]
        elif (da, db) == (3, 2):
            if mat_a.shape[0] != groups:
                raise ValueError(f"_grouped_mm: {groups} offsets for {mat_a.shape[0]} matrices in mat_a")
            g = _group_of(xb.arange(mat_b.shape[1]), offs)                       # [N]
            member = (g[None, :] == xb.arange(groups)[:, None]).astype(mat_a.dtype)   # [G, N]
            out = xb.einsum("gmk,gkn->mn", mat_a, member[:, None, :] * mat_b[None])
        else:
            raise ValueError(f"_grouped_mm: operands must be 2-D or 3-D, got {da}-D and {db}-D")
    if bias is not None:
        out = out + bias
    return out if out_dtype is None else out.astype(out_dtype)

"""Matrix products (PyTorch's BLAS-like operators): every one is a single contraction, with scaling and bias
added as epilogues."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import FLOATS, INTS

from ._samples import blas as S
from ._samples import chain

register = xb.ops.register
NUM = FLOATS + INTS


def _torch_grouped_mm(torch, mat_a, mat_b, offs=None, bias=None, out_dtype=None):
    """torch._grouped_mm spelled with torch.mm per group (PyTorch's CPU kernel wants 16-byte aligned strides
    and leaves rows past the last offset unwritten; xbench defines those as 0)."""
    if offs is None:
        out = torch.bmm(mat_a, mat_b)
    else:
        ends = [int(e) for e in offs]
        starts = [0] + ends[:-1]
        if mat_a.dim() == 2 and mat_b.dim() == 3:
            out = torch.zeros(mat_a.shape[0], mat_b.shape[-1], dtype=mat_a.dtype)
            for g, (s, e) in enumerate(zip(starts, ends)):
                out[s:e] = mat_a[s:e] @ mat_b[g]
        elif mat_a.dim() == 2:
            out = torch.stack([mat_a[:, s:e] @ mat_b[s:e] for s, e in zip(starts, ends)])
        else:
            out = torch.zeros(mat_a.shape[1], mat_b.shape[1], dtype=mat_a.dtype)
            for g, (s, e) in enumerate(zip(starts, ends)):
                out[:, s:e] = mat_a[g] @ mat_b[:, s:e]
    if bias is not None:
        out = out + bias
    return out


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


@register("blas", samples=S.mm_cases, torch="torch.mm", grad=True, dtypes=NUM)
def mm(input: Tensor, mat2: Tensor):
    """input [n, m] @ mat2 [m, p]."""
    _need("mm", input, 2, "input")
    _need("mm", mat2, 2, "mat2")
    return input @ mat2


@register("blas", samples=S.bmm_cases, torch="torch.bmm", grad=True, dtypes=NUM)
def bmm(input: Tensor, mat2: Tensor):
    """Batched: input [b, n, m] @ mat2 [b, m, p]."""
    _need("bmm", input, 3, "input")
    _need("bmm", mat2, 3, "mat2")
    return input @ mat2


@register("blas", samples=chain(S.mm_cases, S.bmm_cases, S.mv_cases), torch="torch.matmul", grad=True, dtypes=NUM)
def matmul(input: Tensor, other: Tensor):
    """numpy/PyTorch matmul: 1-D operands promoted, batch dims broadcast."""
    return input @ other


@register("blas", samples=S.linear_cases, torch="torch.nn.functional.linear", grad=True)
def linear(input: Tensor, weight: Tensor, bias: Tensor = None):
    """input @ weight.T + bias (weight is [out_features, in_features])."""
    out = input @ weight.mT
    return out if bias is None else out + bias


@register("blas", samples=S.addmm_cases, torch="torch.addmm", grad=True)
def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * (mat1 @ mat2); `input` broadcasts to [n, p]."""
    _need("addmm", mat1, 2, "mat1")
    _need("addmm", mat2, 2, "mat2")
    return _scaled_sum(input, mat1 @ mat2, beta, alpha)


@register("blas", samples=S.addmv_cases, torch="torch.addmv", grad=True)
def addmv(input: Tensor, mat: Tensor, vec: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * (mat @ vec)."""
    _need("addmv", mat, 2, "mat")
    _need("addmv", vec, 1, "vec")
    return _scaled_sum(input, mat @ vec, beta, alpha)


@register("blas", samples=S.mv_cases, torch="torch.mv", grad=True, dtypes=NUM)
def mv(input: Tensor, vec: Tensor):
    """Matrix [n, m] times vector [m]."""
    _need("mv", input, 2, "input")
    _need("mv", vec, 1, "vec")
    return input @ vec


@register("blas", samples=S.dot_cases, torch="torch.dot", grad=True, dtypes=NUM)
def dot(input: Tensor, tensor: Tensor):
    """Inner product of two 1-D tensors of one length (a 0-d result)."""
    _need("dot", input, 1, "input")
    _need("dot", tensor, 1, "tensor")
    return xb.dot(input, tensor)


@register("blas", samples=S.dot_cases, torch="torch.vdot", grad=True, dtypes=NUM)
def vdot(input: Tensor, other: Tensor):
    """Inner product of two 1-D tensors (the first conjugated; xbench tensors are real, so this is `dot`)."""
    _need("vdot", input, 1, "input")
    _need("vdot", other, 1, "other")
    return xb.dot(input, other)


@register("blas", aliases=("ger",), samples=S.outer_cases, torch="torch.outer", grad=True, dtypes=NUM)
def outer(input: Tensor, vec2: Tensor):
    """Outer product of two vectors: [n] x [m] -> [n, m]."""
    _need("outer", input, 1, "input")
    _need("outer", vec2, 1, "vec2")
    return input[:, None] * vec2[None, :]


@register("blas", samples=S.addr_cases, torch="torch.addr", grad=True)
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * outer(vec1, vec2)."""
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@register("blas", samples=S.baddbmm_cases, torch="torch.baddbmm", grad=True)
def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * (batch1 @ batch2) over [b, n, m] @ [b, m, p]."""
    _need("baddbmm", batch1, 3, "batch1")
    _need("baddbmm", batch2, 3, "batch2")
    return _scaled_sum(input, batch1 @ batch2, beta, alpha)


@register("blas", samples=S.addbmm_cases, torch="torch.addbmm", grad=True)
def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, beta: float = 1, alpha: float = 1):
    """beta * input + alpha * sum_b (batch1[b] @ batch2[b]): one contraction over the batch and inner axes."""
    _need("addbmm", batch1, 3, "batch1")
    _need("addbmm", batch2, 3, "batch2")
    return _scaled_sum(input, xb.einsum("bnm,bmp->np", batch1, batch2), beta, alpha)


@register("blas", samples=S.bilinear_cases, torch="torch.nn.functional.bilinear", grad=True)
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


@register("blas", samples=S.kron_cases, torch="torch.kron", grad=True, dtypes=NUM)
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


@register("blas", aliases=("grouped_mm",), samples=S.grouped_mm_cases, torch=_torch_grouped_mm,
          grad=("mat_a", "mat_b", "bias"), dtypes=("float32", "bfloat16", "float64"),
          notes="rows/columns past the last offset are 0 (PyTorch leaves them unwritten)")
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

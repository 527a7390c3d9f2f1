"""`contract` (dot_general): batch and contracting dims of two operands. Output axes are
batch dims, then the lhs free dims, then the rhs free dims — matmul, bmm, einsum and (over windows)
convolution all lower to it."""
from __future__ import annotations

import numpy as np

from ...dtypes import accumulator
from ..expr import Cast, Local
from ..kernel import Contract, Kernel, Store
from . import Primitive

contract = Primitive("contract", root=True)


def free_dims(ndim: int, batch: tuple[int, ...], contracting: tuple[int, ...]) -> list[int]:
    return [i for i in range(ndim) if i not in batch and i not in contracting]


@contract.def_abstract
def _abstract(a, b, *, lhs_contract, rhs_contract, lhs_batch, rhs_batch):
    if a.dtype != b.dtype:
        raise TypeError(f"contract needs equal dtypes, got {a.dtype} and {b.dtype}")
    for i, j in zip(lhs_contract, rhs_contract):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"contracting sizes differ: {a.shape[i]} and {b.shape[j]}")
    for i, j in zip(lhs_batch, rhs_batch):
        if a.shape[i] != b.shape[j]:
            raise ValueError(f"batch sizes differ: {a.shape[i]} and {b.shape[j]}")
    shape = ([a.shape[i] for i in lhs_batch]
             + [a.shape[i] for i in free_dims(a.ndim, lhs_batch, lhs_contract)]
             + [b.shape[i] for i in free_dims(b.ndim, rhs_batch, rhs_contract)])
    out = "int64" if a.dtype == "bool" else a.dtype
    return [(tuple(shape), out)]


@contract.def_reference
def _ref(a, b, *, lhs_contract, rhs_contract, lhs_batch, rhs_batch):
    letters = iter("abcdefghijklmnopqrstuvwxyz")
    la = [None] * a.ndim
    lb = [None] * b.ndim
    batch = []
    for i, j in zip(lhs_batch, rhs_batch):
        la[i] = lb[j] = c = next(letters)
        batch.append(c)
    for i, j in zip(lhs_contract, rhs_contract):
        la[i] = lb[j] = next(letters)
    fa = []
    for i in range(a.ndim):
        if la[i] is None:
            la[i] = c = next(letters)
            fa.append(c)
    fb = []
    for j in range(b.ndim):
        if lb[j] is None:
            lb[j] = c = next(letters)
            fb.append(c)
    if a.dtype == np.bool_:
        a, b = a.astype(np.int64), b.astype(np.int64)
    spec = f"{''.join(la)},{''.join(lb)}->{''.join(batch + fa + fb)}"
    return np.einsum(spec, a, b, optimize=True)


@contract.def_flops
def _flops(eqn):
    a = eqn.inputs[0]
    k = int(np.prod([a.shape[i] for i in eqn.params["lhs_contract"]], dtype=np.int64))
    return 2 * eqn.out.size * k


@contract.def_build
def _build(eqn, ctx):
    a, b = eqn.inputs
    p = eqn.params
    batch = [ctx.axis(a.shape[i], "b") for i in p["lhs_batch"]]
    k = [ctx.axis(a.shape[i], "k") for i in p["lhs_contract"]]
    fa = [ctx.axis(a.shape[i], "m") for i in free_dims(a.ndim, p["lhs_batch"], p["lhs_contract"])]
    fb = [ctx.axis(b.shape[i], "n") for i in free_dims(b.ndim, p["rhs_batch"], p["rhs_contract"])]

    def operand(v, batch_dims, contract_dims, free):
        index = [None] * v.ndim
        for d, ax in zip(batch_dims, batch):
            index[d] = ax.var
        for d, ax in zip(contract_dims, k):
            index[d] = ax.var
        for d, ax in zip(free_dims(v.ndim, batch_dims, contract_dims), free):
            index[d] = ax.var
        return ctx.expr(v, tuple(index))

    acc = accumulator(a.dtype)
    lhs = operand(a, p["lhs_batch"], p["lhs_contract"], fa)
    rhs = operand(b, p["rhs_batch"], p["rhs_contract"], fb)
    if lhs.dtype != acc and a.dtype in ("bool",):
        lhs, rhs = Cast(lhs, acc), Cast(rhs, acc)
    local = ctx.local("acc", acc)
    outer = tuple(batch + fa + fb)
    value = Local(local, acc)
    if acc != eqn.out.dtype:
        value = Cast(value, eqn.out.dtype)
    stages = [Contract(local, tuple(k), lhs, rhs, acc, (len(batch), len(fa), len(fb))),
              Store(ctx.buffer(eqn.out), (), tuple(ax.var for ax in outer), value)]
    return Kernel(ctx.kernel_name("contract"), "contract", outer, stages)

"""Movement primitives: they only re-index their operand, so they always fuse into their consumer.

broadcast (JAX's broadcast_in_dim), reshape, permute, slice (start/step/size per axis, negative steps flip),
pad (constant, reflect, edge, circular), concat, and window (sliding windows: the index map that turns
convolution and pooling into contractions and reductions, numpy's `sliding_window_view` plus strides and
dilation).
"""
from __future__ import annotations

import numpy as np

from .. import expr as E
from ..expr import Const, Select
from . import Primitive

broadcast = Primitive("broadcast")
reshape = Primitive("reshape")
permute = Primitive("permute")
slice_ = Primitive("slice")
pad = Primitive("pad")
concat = Primitive("concat")
window = Primitive("window")


# ---- broadcast -------------------------------------------------------------------------------------------

@broadcast.def_abstract
def _bc_abstract(x, *, shape, dims):
    if len(dims) != x.ndim:
        raise ValueError("broadcast dims must name one output axis per operand axis")
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise ValueError(f"cannot broadcast axis of size {x.shape[i]} to {shape[d]}")
    return [(tuple(shape), x.dtype)]


@broadcast.def_reference
def _bc_ref(x, *, shape, dims):
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = x.shape[i]
    return np.broadcast_to(np.reshape(x, expanded), shape)


@broadcast.def_lower
def _bc_lower(eqn, index, ctx):
    x = eqn.inputs[0]
    shape, dims = eqn.params["shape"], eqn.params["dims"]
    sub = tuple(E.ZERO if x.shape[i] == 1 and shape[d] != 1 else index[d] for i, d in enumerate(dims))
    return ctx.expr(x, sub)


# ---- reshape ---------------------------------------------------------------------------------------------

@reshape.def_abstract
def _rs_abstract(x, *, shape):
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ValueError(f"cannot reshape {x.shape} to {shape}")
    return [(tuple(shape), x.dtype)]


@reshape.def_reference
def _rs_ref(x, *, shape):
    return np.reshape(x, shape)


def reshape_groups(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple[list[int], list[int]]]:
    """Pair runs of source axes with runs of destination axes of equal product (size-1 axes on their own)."""
    groups = []
    i = j = 0
    while i < len(src) or j < len(dst):
        if i < len(src) and src[i] == 1:
            groups.append(([i], []))
            i += 1
            continue
        if j < len(dst) and dst[j] == 1:
            groups.append(([], [j]))
            j += 1
            continue
        gi, gj = [i], [j]
        ps, pd = src[i], dst[j]
        i += 1
        j += 1
        while ps != pd:
            if ps < pd:
                gi.append(i)
                ps *= src[i]
                i += 1
            else:
                gj.append(j)
                pd *= dst[j]
                j += 1
        groups.append((gi, gj))
    return groups


@reshape.def_lower
def _rs_lower(eqn, index, ctx):
    x = eqn.inputs[0]
    src, dst = x.shape, eqn.out.shape
    sub: list[E.Expr] = [E.ZERO] * len(src)
    if 0 in src:
        return ctx.expr(x, tuple(sub))
    for gi, gj in reshape_groups(src, dst):
        if not gi:
            continue
        flat = E.linear(tuple(index[j] for j in gj), tuple(dst[j] for j in gj)) if gj else E.ZERO
        parts = (flat,) if len(gi) == 1 else E.unravel(flat, tuple(src[i] for i in gi))
        for i, p in zip(gi, parts):
            sub[i] = p
    return ctx.expr(x, tuple(sub))


# ---- permute ---------------------------------------------------------------------------------------------

@permute.def_abstract
def _pm_abstract(x, *, perm):
    if sorted(perm) != list(range(x.ndim)):
        raise ValueError(f"{perm} is not a permutation of {x.ndim} axes")
    return [(tuple(x.shape[p] for p in perm), x.dtype)]


@permute.def_reference
def _pm_ref(x, *, perm):
    return np.transpose(x, perm)


@permute.def_lower
def _pm_lower(eqn, index, ctx):
    perm = eqn.params["perm"]
    sub = [None] * len(perm)
    for i, p in enumerate(perm):
        sub[p] = index[i]
    return ctx.expr(eqn.inputs[0], tuple(sub))


# ---- slice -----------------------------------------------------------------------------------------------

@slice_.def_abstract
def _sl_abstract(x, *, start, step, size):
    for n, s0, st, sz in zip(x.shape, start, step, size):
        if sz and not (0 <= s0 < n and 0 <= s0 + (sz - 1) * st < n):
            raise ValueError("slice out of bounds")
    return [(tuple(size), x.dtype)]


@slice_.def_reference
def _sl_ref(x, *, start, step, size):
    idx = tuple(np.arange(sz) * st + s0 for s0, st, sz in zip(start, step, size))
    return x[np.ix_(*idx)] if idx else x


@slice_.def_lower
def _sl_lower(eqn, index, ctx):
    p = eqn.params
    sub = tuple(E.add(E.mul(i, E.const(st)), E.const(s0)) for i, s0, st in zip(index, p["start"], p["step"]))
    return ctx.expr(eqn.inputs[0], sub)


# ---- pad -------------------------------------------------------------------------------------------------

PAD_MODES = ("constant", "reflect", "edge", "circular")


@pad.def_abstract
def _pad_abstract(x, *, lo, hi, value, mode):
    if mode not in PAD_MODES:
        raise ValueError(f"pad mode {mode!r} is not one of {PAD_MODES}")
    if min(lo + hi, default=0) < 0:
        raise ValueError("pad widths must be non-negative")
    if mode == "reflect" and any((l or h) and (l >= n or h >= n) for l, h, n in zip(lo, hi, x.shape)):
        raise ValueError("reflect padding must be smaller than the axis")
    if mode != "constant" and any((l or h) and n == 0 for l, h, n in zip(lo, hi, x.shape)):
        raise ValueError(f"an empty axis has no values to pad with in mode {mode!r}; use mode='constant'")
    return [(tuple(n + l + h for n, l, h in zip(x.shape, lo, hi)), x.dtype)]


@pad.def_reference
def _pad_ref(x, *, lo, hi, value, mode):
    widths = list(zip(lo, hi))
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode={"reflect": "reflect", "edge": "edge", "circular": "wrap"}[mode])


@pad.def_lower
def _pad_lower(eqn, index, ctx):
    x = eqn.inputs[0]
    p = eqn.params
    mode = p["mode"]
    sub = []
    valid = None
    for i, n, l, h in zip(index, x.shape, p["lo"], p["hi"]):
        j = E.sub(i, E.const(l))
        if not (l or h):
            sub.append(j)
        elif mode == "constant":
            if l:
                valid = E.logical_and(valid, E.ge(j, E.ZERO))
            if h:
                valid = E.logical_and(valid, E.lt(j, E.const(n)))
            sub.append(j)
        elif mode == "edge":
            sub.append(E.clamp(j, 0, n - 1))
        elif mode == "circular":
            sub.append(E.mod(E.add(j, E.const(n * (1 + max(l, h) // max(n, 1)))), n))
        else:  # reflect about the edge elements: -1 -> 1, n -> n - 2
            neg = Select(E.lt(j, E.ZERO), E.sub(E.ZERO, j), j, E.INDEX)
            sub.append(Select(E.ge(neg, E.const(n)), E.sub(E.const(2 * (n - 1)), neg), neg, E.INDEX))
    inner = ctx.expr(x, tuple(sub))
    if valid is None:
        return inner
    return Select(valid, inner, Const(p["value"], x.dtype), x.dtype)


# ---- concat ----------------------------------------------------------------------------------------------

@concat.def_abstract
def _cat_abstract(*xs, axis):
    first = xs[0]
    for x in xs[1:]:
        if x.dtype != first.dtype or x.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != axis):
            raise ValueError("concat operands must agree in dtype and in every axis but the joined one")
    shape = list(first.shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return [(tuple(shape), first.dtype)]


@concat.def_reference
def _cat_ref(*xs, axis):
    return np.concatenate(xs, axis=axis)


@concat.def_lower
def _cat_lower(eqn, index, ctx):
    axis = eqn.params["axis"]
    pieces = []
    offset = 0
    for x in eqn.inputs:
        n = x.shape[axis]
        if n:
            sub = list(index)
            sub[axis] = E.sub(index[axis], E.const(offset))
            pieces.append((offset + n, ctx.expr(x, tuple(sub))))
        offset += n
    if not pieces:          # every operand is empty along the axis, and so is the result: never evaluated
        dt = eqn.out.dtype
        return Const(False if dt == "bool" else 0.0 if dt.startswith(("float", "bfloat")) else 0, dt)
    out = pieces[-1][1]
    for end, value in reversed(pieces[:-1]):
        out = Select(E.lt(index[axis], E.const(end)), value, out, eqn.out.dtype)
    return out


# ---- window ----------------------------------------------------------------------------------------------

def window_out(n: int, w: int, stride: int, dilation: int) -> int:
    return max(0, (n - dilation * (w - 1) - 1) // stride + 1)


@window.def_abstract
def _win_abstract(x, *, axes, size, stride, dilation):
    shape = list(x.shape)
    for a, w, s, d in zip(axes, size, stride, dilation):
        if d * (w - 1) + 1 > x.shape[a]:
            raise ValueError(f"window of {w} (dilation {d}) is larger than the axis ({x.shape[a]})")
        shape[a] = window_out(x.shape[a], w, s, d)
    return [(tuple(shape) + tuple(size), x.dtype)]


@window.def_reference
def _win_ref(x, *, axes, size, stride, dilation):
    out = x
    for a, w, s, d in zip(axes, size, stride, dilation):
        n = x.shape[a]
        m = window_out(n, w, s, d)
        starts = np.arange(m) * s
        taps = np.arange(w) * d
        idx = starts[:, None] + taps[None, :]                 # [m, w]
        out = np.take(out, idx, axis=a)                        # axis a -> (m, w)
        out = np.moveaxis(out, a + 1, -1)
    return out


@window.def_lower
def _win_lower(eqn, index, ctx):
    x = eqn.inputs[0]
    p = eqn.params
    sub = list(index[:x.ndim])
    taps = index[x.ndim:]
    for a, t, s, d in zip(p["axes"], taps, p["stride"], p["dilation"]):
        sub[a] = E.add(E.mul(index[a], E.const(s)), E.mul(t, E.const(d)))
    return ctx.expr(x, tuple(sub))

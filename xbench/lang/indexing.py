"""`x[...]` on traced tensors: numpy's basic indexing with static bounds (ints, slices, None, ...), and
integer-array indexing through `gather`. Boolean masks would give a data-dependent size and are refused."""
from __future__ import annotations

import numpy as np

from ..errors import ShapeError, TraceError, user_location
from .tensor import Tensor
from .trace import bind


def _err(cls, msg, hint=None):
    return cls(msg, hint=hint, loc=user_location())


def getitem(x: Tensor, key) -> Tensor:
    from . import functions as F

    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise _err(TraceError, "an index can hold at most one `...`")
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > x.ndim:
        raise _err(ShapeError, f"too many indices ({consumed}) for a tensor with {x.ndim} dims")
    if any(k is Ellipsis for k in key):
        i = next(j for j, k in enumerate(key) if k is Ellipsis)
        key = key[:i] + (slice(None),) * (x.ndim - consumed) + key[i + 1:]
    else:
        key = key + (slice(None),) * (x.ndim - consumed)

    start, step, size = [], [], []
    out_shape: list[int] = []          # shape after basic indexing (None entries add axes)
    drop: list[int] = []               # axes indexed by an int (removed)
    advanced: dict[int, object] = {}   # source axis -> index array / tensor
    axis = 0
    for k in key:
        if k is None:
            out_shape.append(-1)
            continue
        n = x.shape[axis]
        if isinstance(k, (bool, np.bool_)):
            raise _err(TraceError, "indexing with a Python bool", "use x[None] to add an axis")
        if isinstance(k, (int, np.integer)):
            i = int(k)
            if not -n <= i < n:
                raise _err(ShapeError, f"index {i} is out of bounds for axis {axis} with size {n}",
                           f"use an index in [{-n}, {n - 1}]")
            start.append(i % n)
            step.append(1)
            size.append(1)
            drop.append(axis)
        elif isinstance(k, slice):
            if any(isinstance(v, Tensor) for v in (k.start, k.stop, k.step)):
                raise _err(TraceError, "slice bounds must be static Python ints",
                           "use xb.gather / xb.where for data-dependent positions")
            s0, s1, st = k.indices(n)
            cnt = len(range(s0, s1, st))
            start.append(s0 if cnt else 0)
            step.append(st)
            size.append(cnt)
            out_shape.append(axis)
        elif isinstance(k, (Tensor, np.ndarray, list)):
            arr = k
            if not isinstance(k, Tensor):
                arr = np.asarray(k)
                if arr.dtype == np.bool_:
                    if arr.shape != (n,):
                        raise _err(ShapeError, f"a boolean mask for axis {axis} must have shape ({n},)")
                    arr = np.nonzero(arr)[0]
            elif k.dtype == "bool":
                raise _err(TraceError, "indexing with a traced boolean mask gives a data-dependent size",
                           "use xb.where(mask, x, 0) to keep the shape")
            advanced[axis] = arr
            start.append(0)
            step.append(1)
            size.append(n)
            out_shape.append(axis)
        else:
            raise _err(TraceError, f"cannot index a tensor with {type(k).__name__}",
                       "use ints, slices, None, ..., or integer index arrays")
        axis += 1

    y = x
    if (tuple(start), tuple(step), tuple(size)) != ((0,) * x.ndim, (1,) * x.ndim, x.shape):
        y = bind("slice", x, start=tuple(start), step=tuple(step), size=tuple(size))
    if advanced:
        kept = [a for a in range(x.ndim) if a not in drop]           # axes of y after dropping ints
        idx_tensors = [F._index_tensor(advanced[a]) for a in sorted(advanced)]
        shape = F.broadcast_shapes(*(t.shape for t in idx_tensors))
        idx_tensors = [F.broadcast_to(t, shape) for t in idx_tensors]
        y = F.reshape(y, tuple(n for a, n in zip(range(x.ndim), y.shape) if a not in drop)) if drop else y
        adv_pos = [kept.index(a) for a in sorted(advanced)]
        g = bind("gather", y, *idx_tensors, axes=tuple(adv_pos))    # shape + remaining kept axes
        # numpy: adjacent advanced indices put the result dims where they were; otherwise in front
        if adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos))) and adv_pos[0] > 0:
            k = len(shape)
            p = adv_pos[0]
            perm = list(range(k, k + p)) + list(range(k)) + list(range(k + p, g.ndim))
            g = F.transpose(g, perm)
        if any(e == -1 for e in out_shape):
            raise _err(TraceError, "mixing None with integer-array indexing is not supported",
                       "add the axis afterwards with x[..., None]")
        return g
    final = []
    for e in out_shape:
        final.append(1 if e == -1 else y.shape[e])
    return F.reshape(y, tuple(final))

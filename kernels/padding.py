"""Padding (PyTorch's `pad` argument: (left, right) pairs starting from the last dim; negative values crop)."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import BOOL, FLOATS, INTS

from ._samples import padding as S

register = xb.ops.register

_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "circular"}


def _widths(name: str, x, pad, max_dims: int | None = None) -> tuple[tuple[int, int], ...]:
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"{name}: pad {pad} must hold (left, right) pairs for at most {x.ndim} trailing dims")
    if max_dims is not None and len(pad) != 2 * max_dims:
        raise ValueError(f"{name}: padding must have {2 * max_dims} values, got {pad}")
    k = len(pad) // 2
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in range(k)]          # last dim first
    return ((0, 0),) * (x.ndim - k) + tuple(reversed(pairs))


def _source(mode: str, n: int, lo: int, hi: int) -> np.ndarray:
    """Where each of the n + lo + hi outputs along a dim reads the input from, as PyTorch indexes it: output i is
    input i - lo, reflected about the edges (reflect) or clamped to them (replicate). Counting from the
    original edges, not the cropped ones, is what makes a negative width on one side and a positive one on the
    other agree with PyTorch."""
    j = np.arange(n + lo + hi) - lo
    if mode == "reflect":
        j = np.abs(j)
        j = np.where(j > n - 1, 2 * (n - 1) - j, j)
    return np.clip(j, 0, n - 1).astype(np.int64)


def _pad(name, x, pad, mode: str, value=0.0, spatial: int | None = None):
    if spatial is not None and x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{name}: input must be [N, C, {spatial} dims] or [C, {spatial} dims], got "
                         f"{tuple(x.shape)}")
    widths = _widths(name, x, pad, spatial)
    for d, ((lo, hi), n) in enumerate(zip(widths, x.shape)):
        if n + lo + hi < 0:
            raise ValueError(f"{name}: padding ({lo}, {hi}) leaves dim {d} of size {n} with {n + lo + hi} elements")
        if mode == "reflect" and (lo or hi) and max(lo, hi) >= n:
            raise ValueError(f"{name}: reflection padding {max(lo, hi)} must be smaller than dim {d} ({n})")
        if mode == "circular":
            kept = n - max(-lo, 0) - max(-hi, 0)
            if max(lo, hi) > kept:
                raise ValueError(f"{name}: circular padding ({lo}, {hi}) wraps dim {d} ({n} elements, {kept} after "
                                 "the crop) more than once")
    out = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, widths))
    if 0 in out:                               # an empty result (an empty batch, or a dim cropped away)
        return xb.zeros(out, x.dtype)
    if mode in ("reflect", "replicate"):
        # a dim with a negative width: read it through PyTorch's index map; the others pad as usual
        for d, ((lo, hi), n) in enumerate(zip(widths, x.shape)):
            if min(lo, hi) < 0:
                x = xb.gather(x, _source(mode, n, lo, hi), axis=d)
        widths = tuple((0, 0) if min(lo, hi) < 0 else (lo, hi) for lo, hi in widths)
    if not any(lo or hi for lo, hi in widths):
        return x
    return xb.pad(x, widths, mode=_MODES[mode], value=value)


@register("padding", samples=S.constant_pad_cases, torch="torch.constant_pad_nd", grad=True,
          dtypes=FLOATS + INTS + BOOL)
def constant_pad_nd(self: Tensor, pad, value: float = 0):
    """Pads the trailing len(pad) / 2 dims with `value`; negative widths crop."""
    return _pad("constant_pad_nd", self, pad, "constant", value)


def _torch_pad(torch, input, pad, mode="constant", value=None):
    return torch.nn.functional.pad(input, pad, mode, value)


@register("padding", samples=S.pad_cases, torch=_torch_pad, grad=True, dtypes=FLOATS + INTS)
def pad(input: Tensor, pad, mode: str = "constant", value: float = None):
    """torch.nn.functional.pad: modes constant (with `value`, default 0), reflect (mirror without repeating
    the edge), replicate (repeat the edge) and circular (wrap around)."""
    if mode not in _MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if mode != "constant" and value not in (None, 0):
        raise ValueError(f"pad: value applies only to mode='constant', not {mode!r}")
    return _pad("pad", input, pad, mode, 0 if value is None else value)


def _fixed(mode: str, nd: int):
    aten = {"reflect": "reflection", "replicate": "replication"}[mode]
    name = f"{aten}_pad{nd}d"

    def op(self: Tensor, padding):
        return _pad(name, self, padding, mode, spatial=nd)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"{'Mirror' if mode == 'reflect' else 'Edge-replicating'} padding of the last {nd} dim(s) of "
                  f"[N, C, ...] or [C, ...] input; padding = (left, right{', top, bottom' if nd > 1 else ''}"
                  f"{', front, back' if nd > 2 else ''}).")
    register("padding", samples=S.fixed_pad_cases(nd, mode), torch=f"torch.ops.aten.{name}", grad=True)(op)
    return op


reflection_pad1d = _fixed("reflect", 1)
reflection_pad2d = _fixed("reflect", 2)
reflection_pad3d = _fixed("reflect", 3)
replication_pad1d = _fixed("replicate", 1)
replication_pad2d = _fixed("replicate", 2)
replication_pad3d = _fixed("replicate", 3)

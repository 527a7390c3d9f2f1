"""Padding (PyTorch's `pad` argument: (left, right) pairs starting from the last dim; negative values crop)."""
from __future__ import annotations

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


def _pad(name, x, pad, mode: str, value=0.0, spatial: int | None = None):
    if spatial is not None and x.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{name}: input must be [N, C, {spatial} dims] or [C, {spatial} dims], got "
                         f"{tuple(x.shape)}")
    widths = _widths(name, x, pad, spatial)
    if mode == "reflect":
        for (lo, hi), n in zip(widths, x.shape):
            if max(lo, hi) >= n:
                raise ValueError(f"{name}: reflection padding {max(lo, hi)} must be smaller than the dim ({n})")
    if mode == "circular":
        for (lo, hi), n in zip(widths, x.shape):
            if max(lo, hi) > n:
                raise ValueError(f"{name}: circular padding {max(lo, hi)} must be at most the dim ({n})")
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

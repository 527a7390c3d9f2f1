"""Resampling: upsampling (nearest, linear, cubic; ATen's upsample_* and F.interpolate), grid_sample,
affine grids and pixel (un)shuffle.

Upsampling reads each output point from a few source points per axis whose positions and weights depend only
on the shapes: they are computed here in numpy with PyTorch's formulas, and the kernel is one gather with a
weighted sum. Linear and cubic source positions are computed in float64 (PyTorch uses the input's precision);
nearest indices in float32, as PyTorch does for every dtype. grid_sample's positions come from the grid tensor,
so it gathers at computed indices."""
from __future__ import annotations

import math

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import FLOATS, INTS

from ._samples import vision as S

register = xb.ops.register

_A = -0.75          # PyTorch's bicubic convolution coefficient


# ---- source positions (PyTorch's area_pixel_compute_scale / area_pixel_compute_source_index) -------------

def _scale(n_in: int, n_out: int, align_corners: bool, scale: float | None) -> float:
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale is not None and scale > 0 else n_in / n_out


def _nearest_table(n_in: int, n_out: int, scale: float | None, exact: bool) -> np.ndarray:
    s = np.float32(1.0 / scale if scale is not None and scale > 0 else n_in / n_out)
    dst = np.arange(n_out, dtype=np.float32)
    src = np.floor(((dst + np.float32(0.5)) if exact else dst) * s).astype(np.int64)
    return np.minimum(src, n_in - 1)


def _linear_table(n_in: int, n_out: int, align_corners: bool, scale: float | None):
    """Two taps per output point: indices [n_out, 2] and weights [n_out, 2]. An axis that keeps its size is
    copied, its second tap the first point again (weight 0), as PyTorch's kernels: a NaN beside a point does
    not reach it."""
    if n_in == n_out:
        dst = np.arange(n_out)
        return np.stack([dst, dst], 1), np.stack([np.ones(n_out), np.zeros(n_out)], 1)
    s = _scale(n_in, n_out, align_corners, scale)
    dst = np.arange(n_out, dtype=np.float64)
    src = s * dst if align_corners else np.maximum(s * (dst + 0.5) - 0.5, 0)
    i0 = np.floor(src).astype(np.int64)
    i0 = np.minimum(i0, n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = np.clip(src - i0, 0, 1).astype(np.float64)
    return np.stack([i0, i1], 1), np.stack([1 - lam, lam], 1)


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution weights (A = -0.75) of the four taps around a point at fraction t."""
    def near(x):        # |x| <= 1
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):         # 1 < |x| < 2
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], -1)


def _cubic_table(n_in: int, n_out: int, align_corners: bool, scale: float | None):
    s = _scale(n_in, n_out, align_corners, scale)
    dst = np.arange(n_out, dtype=np.float64)
    src = s * dst if align_corners else s * (dst + 0.5) - 0.5
    i = np.floor(src).astype(np.int64)
    t = (src - i).astype(np.float64)
    idx = np.clip(i[:, None] + np.arange(-1, 3)[None, :], 0, n_in - 1)
    return idx, _cubic_weights(t)


def _taps(x, tables, last_first: bool = True):
    """sum over taps of x[..., idx_1[o1, t1], ..., idx_d[od, td]] * w_1[o1, t1] * ... * w_d[od, td], for the
    d = len(tables) last axes, one axis at a time (a gather along it and a weighted sum, in float32 or wider;
    the last axis first, or the first): T_1 + ... + T_d reads per point, not T_1 · ... · T_d, and along every
    axis but the last a run of points reads a contiguous run. A table may add a third array, which taps are
    real: the others read nothing (not 0 times a point, which is NaN at an infinite one)."""
    nd = len(tables)
    wdtype = np.float64 if x.dtype == "float64" else np.float32
    out = x
    for i in (reversed(range(nd)) if last_first else range(nd)):
        idx, w, *real = tables[i]
        axis = x.ndim - nd + i
        gathered = out[(slice(None),) * axis + (idx,)]                 # ... o_i t_i ...
        weight = w.reshape(idx.shape + (1,) * (nd - 1 - i))
        if real and not real[0].all():
            gathered = xb.where(xb.asarray(real[0].reshape(weight.shape)), gathered, 0)
        out = (gathered * xb.asarray(weight.astype(wdtype))).sum(axis=axis + 1)
    return out.astype(x.dtype) if out.dtype != x.dtype and x.dtype in FLOATS else out


def _transpose(idx: np.ndarray, w: np.ndarray, n_in: int):
    """A tap table's transpose: for each of the n_in source points, the output points that read it (in output
    order) and their weights, as a table with its real taps marked (each row padded to the longest)."""
    n_out, taps = idx.shape
    src, dst, wt = idx.ravel(), np.repeat(np.arange(n_out), taps), w.ravel()
    order = np.argsort(src, kind="stable")
    counts = np.bincount(src, minlength=n_in)
    rank = np.arange(src.size) - np.repeat(np.cumsum(counts) - counts, counts)
    width = max(1, int(counts.max()))
    t_idx, t_w, real = np.zeros((n_in, width), np.int64), np.zeros((n_in, width)), np.zeros((n_in, width), bool)
    at = (src[order], rank)
    t_idx[at], t_w[at], real[at] = dst[order], wt[order], True
    return t_idx, t_w, real


def _check(name: str, x, nd: int, output_size) -> tuple[int, ...]:
    if x.ndim < nd + 1:
        raise ValueError(f"{name}: input must have at least {nd + 1} dims ([N, C, {nd} spatial dims]), got "
                         f"{tuple(x.shape)}")
    out = (output_size,) * nd if isinstance(output_size, int) else tuple(int(o) for o in output_size)
    if len(out) != nd or min(out) <= 0:
        raise ValueError(f"{name}: output_size must be {nd} positive sizes, got {output_size}")
    return out


def _nearest(name, x, nd, output_size, scales, exact=False):
    out = _check(name, x, nd, output_size)
    tables = [_nearest_table(n, o, s, exact) for n, o, s in zip(x.shape[-nd:], out, scales)]
    index = []
    for i, t in enumerate(tables):
        shape = [1] * nd
        shape[i] = t.shape[0]
        index.append(t.reshape(shape))
    return x[(slice(None),) * (x.ndim - nd) + tuple(index)]


def _linear(name, x, nd, output_size, align_corners, scales):
    out = _check(name, x, nd, output_size)
    return _taps(x, [_linear_table(n, o, align_corners, s) for n, o, s in zip(x.shape[-nd:], out, scales)])


def _backward(name, grad, nd, output_size, input_size, table):
    """An upsampling's gradient: each input point sums the output gradients of the points that read it, times
    their weights (the transposed taps of `table(n_in, n_out, axis)`), as one gather, as the forward."""
    out = _check(name, grad, nd, output_size)
    size = tuple(int(n) for n in input_size)
    if len(size) != grad.ndim or tuple(grad.shape) != size[:-nd] + out:
        raise ValueError(f"{name}: grad_output {tuple(grad.shape)} is not the output of an input of size {size} "
                         f"upsampled to {out}")
    return _taps(grad, [_transpose(*table(n, o, i), n) for i, (n, o) in enumerate(zip(size[-nd:], out))],
                 last_first=False)


# ---- ATen's upsample_* ------------------------------------------------------------------------------------

_NEAR = dict(grad=("self",))


@register("resample", samples=S.upsample_cases(1, "nearest"), torch="torch.ops.aten.upsample_nearest1d", **_NEAR)
def upsample_nearest1d(self: Tensor, output_size, scales: float = None):
    """out[..., i] = self[..., min(floor(i * scale), L - 1)], scale = L / out (or 1 / scales)."""
    return _nearest("upsample_nearest1d", self, 1, output_size, (scales,))


@register("resample", samples=S.upsample_cases(2, "nearest"), torch="torch.ops.aten.upsample_nearest2d", **_NEAR)
def upsample_nearest2d(self: Tensor, output_size, scales_h: float = None, scales_w: float = None):
    """Nearest-neighbour upsampling of the last two dims (PyTorch's legacy `nearest`: floor(i * scale))."""
    return _nearest("upsample_nearest2d", self, 2, output_size, (scales_h, scales_w))


@register("resample", samples=S.upsample_cases(3, "nearest"), torch="torch.ops.aten.upsample_nearest3d", **_NEAR)
def upsample_nearest3d(self: Tensor, output_size, scales_d: float = None, scales_h: float = None,
                       scales_w: float = None):
    return _nearest("upsample_nearest3d", self, 3, output_size, (scales_d, scales_h, scales_w))


@register("resample", samples=S.upsample_cases(2, "nearest"), torch="torch.ops.aten._upsample_nearest_exact2d",
          **_NEAR)
def _upsample_nearest_exact2d(self: Tensor, output_size, scales_h: float = None, scales_w: float = None):
    """`nearest-exact`: the source pixel is the one whose centre is nearest, floor((i + 0.5) * scale)."""
    return _nearest("_upsample_nearest_exact2d", self, 2, output_size, (scales_h, scales_w), exact=True)


@register("resample", samples=S.upsample_cases(1, "linear"), torch="torch.ops.aten.upsample_linear1d", grad=True)
def upsample_linear1d(self: Tensor, output_size, align_corners: bool, scales: float = None):
    return _linear("upsample_linear1d", self, 1, output_size, align_corners, (scales,))


@register("resample", samples=S.upsample_cases(2, "linear"), torch="torch.ops.aten.upsample_bilinear2d", grad=True)
def upsample_bilinear2d(self: Tensor, output_size, align_corners: bool, scales_h: float = None,
                        scales_w: float = None):
    """Bilinear upsampling of the last two dims: source position (i + 0.5) * scale - 0.5 (clamped at 0), or
    i * (in - 1) / (out - 1) with align_corners."""
    return _linear("upsample_bilinear2d", self, 2, output_size, align_corners, (scales_h, scales_w))


@register("resample", samples=S.upsample_cases(3, "linear"), torch="torch.ops.aten.upsample_trilinear3d",
          grad=True)
def upsample_trilinear3d(self: Tensor, output_size, align_corners: bool, scales_d: float = None,
                         scales_h: float = None, scales_w: float = None):
    return _linear("upsample_trilinear3d", self, 3, output_size, align_corners, (scales_d, scales_h, scales_w))


@register("resample", samples=S.upsample_cases(2, "linear"), torch="torch.ops.aten.upsample_bicubic2d", grad=True)
def upsample_bicubic2d(self: Tensor, output_size, align_corners: bool, scales_h: float = None,
                       scales_w: float = None):
    """Bicubic upsampling (Keys' kernel, A = -0.75, border pixels repeated), PyTorch's formula."""
    out = _check("upsample_bicubic2d", self, 2, output_size)
    tables = [_cubic_table(n, o, align_corners, s) for n, o, s in zip(self.shape[-2:], out, (scales_h, scales_w))]
    return _taps(self, tables)


# ---- their gradients (what a training graph's backward calls) --------------------------------------------

def _nearest_backward(name, grad, nd, output_size, input_size, scales, exact=False):
    def table(n, o, i):
        return _nearest_table(n, o, scales[i], exact)[:, None], np.ones((o, 1))
    return _backward(name, grad, nd, output_size, input_size, table)


def _linear_backward(name, grad, nd, output_size, input_size, align_corners, scales, table=_linear_table):
    return _backward(name, grad, nd, output_size, input_size,
                     lambda n, o, i: table(n, o, align_corners, scales[i]))


@register("resample", samples=S.upsample_backward_cases(1, "nearest"),
          torch="torch.ops.aten.upsample_nearest1d_backward")
def upsample_nearest1d_backward(grad_output: Tensor, output_size, input_size, scales: float = None):
    """The gradient of upsample_nearest1d with respect to its input, of size `input_size`."""
    return _nearest_backward("upsample_nearest1d_backward", grad_output, 1, output_size, input_size, (scales,))


@register("resample", samples=S.upsample_backward_cases(2, "nearest"),
          torch="torch.ops.aten.upsample_nearest2d_backward")
def upsample_nearest2d_backward(grad_output: Tensor, output_size, input_size, scales_h: float = None,
                                scales_w: float = None):
    return _nearest_backward("upsample_nearest2d_backward", grad_output, 2, output_size, input_size,
                             (scales_h, scales_w))


@register("resample", samples=S.upsample_backward_cases(3, "nearest"),
          torch="torch.ops.aten.upsample_nearest3d_backward")
def upsample_nearest3d_backward(grad_output: Tensor, output_size, input_size, scales_d: float = None,
                                scales_h: float = None, scales_w: float = None):
    return _nearest_backward("upsample_nearest3d_backward", grad_output, 3, output_size, input_size,
                             (scales_d, scales_h, scales_w))


@register("resample", samples=S.upsample_backward_cases(2, "nearest"),
          torch="torch.ops.aten._upsample_nearest_exact2d_backward")
def _upsample_nearest_exact2d_backward(grad_output: Tensor, output_size, input_size, scales_h: float = None,
                                       scales_w: float = None):
    return _nearest_backward("_upsample_nearest_exact2d_backward", grad_output, 2, output_size, input_size,
                             (scales_h, scales_w), exact=True)


@register("resample", samples=S.upsample_backward_cases(1, "linear"),
          torch="torch.ops.aten.upsample_linear1d_backward")
def upsample_linear1d_backward(grad_output: Tensor, output_size, input_size, align_corners: bool,
                               scales: float = None):
    return _linear_backward("upsample_linear1d_backward", grad_output, 1, output_size, input_size, align_corners,
                            (scales,))


@register("resample", samples=S.upsample_backward_cases(2, "linear"),
          torch="torch.ops.aten.upsample_bilinear2d_backward")
def upsample_bilinear2d_backward(grad_output: Tensor, output_size, input_size, align_corners: bool,
                                 scales_h: float = None, scales_w: float = None):
    return _linear_backward("upsample_bilinear2d_backward", grad_output, 2, output_size, input_size,
                            align_corners, (scales_h, scales_w))


@register("resample", samples=S.upsample_backward_cases(3, "linear"),
          torch="torch.ops.aten.upsample_trilinear3d_backward")
def upsample_trilinear3d_backward(grad_output: Tensor, output_size, input_size, align_corners: bool,
                                  scales_d: float = None, scales_h: float = None, scales_w: float = None):
    return _linear_backward("upsample_trilinear3d_backward", grad_output, 3, output_size, input_size,
                            align_corners, (scales_d, scales_h, scales_w))


@register("resample", samples=S.upsample_backward_cases(2, "linear"),
          torch="torch.ops.aten.upsample_bicubic2d_backward")
def upsample_bicubic2d_backward(grad_output: Tensor, output_size, input_size, align_corners: bool,
                                scales_h: float = None, scales_w: float = None):
    return _linear_backward("upsample_bicubic2d_backward", grad_output, 2, output_size, input_size,
                            align_corners, (scales_h, scales_w), table=_cubic_table)


# ---- F.interpolate ----------------------------------------------------------------------------------------

_MODES = {"nearest": 0, "nearest-exact": 0, "linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3, "area": 0}


def _torch_interpolate(torch, input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                       recompute_scale_factor=None):
    return torch.nn.functional.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor)


@register("resample", samples=S.interpolate_cases, torch=_torch_interpolate, grad=("input",))
def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool = None,
                recompute_scale_factor: bool = None):
    """torch.nn.functional.interpolate over [N, C, spatial...] inputs: modes nearest, nearest-exact, linear,
    bilinear, bicubic, trilinear and area (adaptive average pooling)."""
    nd = input.ndim - 2
    if mode not in _MODES:
        raise ValueError(f"interpolate: unknown mode {mode!r}; use one of {', '.join(_MODES)}")
    if _MODES[mode] and _MODES[mode] != nd:
        raise ValueError(f"interpolate: mode {mode!r} needs {_MODES[mode]} spatial dims, the input has {nd}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate: give exactly one of size and scale_factor")
    if align_corners is not None and mode not in ("linear", "bilinear", "bicubic", "trilinear"):
        raise ValueError(f"interpolate: align_corners only applies to the linear and cubic modes, not {mode!r}")
    spatial = tuple(input.shape[2:])
    if size is not None:
        out = (size,) * nd if isinstance(size, int) else tuple(size)
        scales = (None,) * nd
    else:
        factors = (float(scale_factor),) * nd if isinstance(scale_factor, (int, float)) else \
            tuple(float(f) for f in scale_factor)
        out = tuple(int(math.floor(n * f)) for n, f in zip(spatial, factors))
        scales = (None,) * nd if recompute_scale_factor else factors
    if mode in ("nearest", "nearest-exact"):
        return _nearest("interpolate", input, nd, out, scales, exact=mode == "nearest-exact")
    if mode == "area":
        return xb.ops.get(f"adaptive_avg_pool{nd}d")(input, out)
    if mode == "bicubic":
        return upsample_bicubic2d(input, out, bool(align_corners), *scales)
    return _linear("interpolate", input, nd, out, bool(align_corners), scales)


# ---- grid_sample and affine grids -------------------------------------------------------------------------

def _unnormalize(coord, size: int, align_corners: bool):
    return (coord + 1) * (0.5 * (size - 1)) if align_corners else ((coord + 1) * size - 1) * 0.5


def _reflect(coord, low2: int, high2: int):
    """Reflect into [low2 / 2, high2 / 2] (PyTorch's reflect_coordinates)."""
    if low2 == high2:
        return xb.zeros_like(coord)
    lo, span = low2 / 2, (high2 - low2) / 2
    c = xb.abs(coord - lo)
    extra = xb.fmod(c, span)
    flips = xb.floor(c / span)
    return xb.where(xb.remainder(flips, 2) == 0, extra + lo, span - extra + lo)


def _source(coord, size: int, padding_mode: str, align_corners: bool):
    c = _unnormalize(coord, size, align_corners)
    if padding_mode == "border":
        c = xb.clamp(c, 0, size - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        c = xb.clamp(c, 0, size - 1)
    return c


def _torch_grid_sample(torch, input, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """F.grid_sample with 16-bit inputs computed in float32 and rounded once, as PyTorch's CUDA kernel does (its
    opmath type; the CPU kernel computes the source positions in 16 bits, a pixel or more off at bfloat16)."""
    wide = input.dtype in (torch.float16, torch.bfloat16)
    out = torch.nn.functional.grid_sample(input.float() if wide else input, grid.float() if wide else grid, mode,
                                          padding_mode, align_corners)
    return out.to(input.dtype)


@register("resample", samples=S.grid_sample_cases, torch=_torch_grid_sample, grad=True)
def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool = False):
    """Samples input [N, C, H, W] at grid [N, Ho, Wo, 2] points ((x, y) in [-1, 1]): modes bilinear, nearest
    (ties to even) and bicubic; padding zeros, border or reflection. 4-D inputs only. 16-bit inputs have their
    positions and weights computed in float32, as PyTorch's CUDA kernel."""
    if input.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise ValueError(f"grid_sample: input must be [N, C, H, W] and grid [N, Ho, Wo, 2]; got "
                         f"{tuple(input.shape)} and {tuple(grid.shape)} (volumetric 5-D sampling is not provided)")
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"grid_sample: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"grid_sample: padding_mode must be 'zeros', 'border' or 'reflection', got "
                         f"{padding_mode!r}")
    n, c, h, w = input.shape
    _, ho, wo, _ = grid.shape
    grid = grid.astype("float32" if input.dtype in ("float16", "bfloat16") else input.dtype)
    batch = xb.iota((n, ho, wo), 0)

    def read(iy, ix):
        """input[n, :, iy, ix] as [N, C, Ho, Wo], 0 outside the image (indices are int64 tensors)."""
        inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
        v = input[batch, :, xb.clamp(iy, 0, h - 1), xb.clamp(ix, 0, w - 1)]          # [N, Ho, Wo, C]
        return xb.where(inside[..., None], v, 0).permute(0, 3, 1, 2)

    if mode == "bicubic":
        x = _unnormalize(grid[..., 0], w, align_corners)
        y = _unnormalize(grid[..., 1], h, align_corners)
        x0, y0 = xb.floor(x), xb.floor(y)
        tx, ty = x - x0, y - y0
        wx, wy = _cubic_terms(tx), _cubic_terms(ty)
        out = None
        for j in range(4):
            for i in range(4):
                cx = _bound(x0 + (i - 1), w, padding_mode, align_corners)
                cy = _bound(y0 + (j - 1), h, padding_mode, align_corners)
                term = read(cy, cx) * (wx[i] * wy[j])[:, None]
                out = term if out is None else out + term
        return out.astype(input.dtype)

    x = _source(grid[..., 0], w, padding_mode, align_corners)
    y = _source(grid[..., 1], h, padding_mode, align_corners)
    if mode == "nearest":
        return read(xb.round(y).astype("int64"), xb.round(x).astype("int64"))
    x0, y0 = xb.floor(x), xb.floor(y)
    fx, fy = x - x0, y - y0
    ix, iy = x0.astype("int64"), y0.astype("int64")
    return (read(iy, ix) * ((1 - fx) * (1 - fy))[:, None] + read(iy, ix + 1) * (fx * (1 - fy))[:, None]
            + read(iy + 1, ix) * ((1 - fx) * fy)[:, None] + read(iy + 1, ix + 1) * (fx * fy)[:, None]
            ).astype(input.dtype)


def _cubic_terms(t):
    def near(x):
        return ((_A + 2) * x - (_A + 3)) * x * x + 1

    def far(x):
        return ((_A * x - 5 * _A) * x + 8 * _A) * x - 4 * _A
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bound(coord, size: int, padding_mode: str, align_corners: bool):
    """A bicubic tap's index after padding (PyTorch's compute_coordinates on integer positions)."""
    if padding_mode == "border":
        coord = xb.clamp(coord, 0, size - 1)
    elif padding_mode == "reflection":
        coord = _reflect(coord, 0, 2 * (size - 1)) if align_corners else _reflect(coord, -1, 2 * size - 1)
        coord = xb.clamp(coord, 0, size - 1)
    return coord.astype("int64")


def _base_grid(size, align_corners: bool) -> np.ndarray:
    """[*spatial, nd + 1] homogeneous coordinates (x, y[, z], 1) of every output point, x fastest."""
    def lin(n):
        if n <= 1:
            return np.zeros(max(n, 0))
        v = np.linspace(-1.0, 1.0, n)
        return v if align_corners else v * (n - 1) / n
    spatial = tuple(size[2:])
    axes = [lin(n) for n in spatial]                       # d, h, w order
    mesh = np.meshgrid(*axes, indexing="ij")
    coords = [mesh[i] for i in reversed(range(len(spatial)))] + [np.ones(spatial)]
    return np.stack(coords, -1)


@register("resample", aliases=("affine_grid",), samples=S.affine_grid_cases,
          torch="torch.nn.functional.affine_grid", grad=("theta",))
def affine_grid_generator(theta: Tensor, size, align_corners: bool = False):
    """Sampling grids for grid_sample from affine matrices: theta [N, 2, 3] and size (N, C, H, W) give
    [N, H, W, 2]; theta [N, 3, 4] and size (N, C, D, H, W) give [N, D, H, W, 3]."""
    nd = len(size) - 2
    if nd not in (2, 3) or tuple(theta.shape) != (size[0], nd, nd + 1):
        raise ValueError(f"affine_grid_generator: theta must be [N, {nd}, {nd + 1}] for size {tuple(size)}, got "
                         f"{tuple(theta.shape)}")
    base = _base_grid(size, align_corners).astype(np.float64 if theta.dtype == "float64" else np.float32)
    letters = "dhw"[3 - nd:]
    return xb.einsum(f"{letters}k,njk->n{letters}j", xb.asarray(base).astype(theta.dtype), theta)


# ---- pixel shuffle ----------------------------------------------------------------------------------------

@register("resample", samples=S.pixel_shuffle_cases, torch="torch.nn.functional.pixel_shuffle", grad=True,
          dtypes=FLOATS + INTS)
def pixel_shuffle(self: Tensor, upscale_factor: int):
    """[..., C * r * r, H, W] -> [..., C, H * r, W * r]."""
    r = int(upscale_factor)
    *lead, crr, h, w = self.shape
    if crr % (r * r):
        raise ValueError(f"pixel_shuffle: {crr} channels are not divisible by upscale_factor^2 = {r * r}")
    c = crr // (r * r)
    k = len(lead)
    x = self.reshape(tuple(lead) + (c, r, r, h, w))
    x = x.permute(tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
    return x.reshape(tuple(lead) + (c, h * r, w * r))


@register("resample", samples=S.pixel_unshuffle_cases, torch="torch.nn.functional.pixel_unshuffle", grad=True,
          dtypes=FLOATS + INTS)
def pixel_unshuffle(self: Tensor, downscale_factor: int):
    """[..., C, H * r, W * r] -> [..., C * r * r, H, W]."""
    r = int(downscale_factor)
    *lead, c, hr, wr = self.shape
    if hr % r or wr % r:
        raise ValueError(f"pixel_unshuffle: {hr}x{wr} is not divisible by downscale_factor {r}")
    h, w = hr // r, wr // r
    k = len(lead)
    x = self.reshape(tuple(lead) + (c, h, r, w, r))
    x = x.permute(tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return x.reshape(tuple(lead) + (c * r * r, h, w))

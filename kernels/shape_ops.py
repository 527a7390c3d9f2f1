"""Shape, layout and copy operators (PyTorch's views are copies here: xbench operators return new tensors).

Operators that take a list of tensors (cat, stack, hstack, vstack) are not here: an operator's arguments are
single tensors and static values (see docs/library.md)."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import BOOL, FLOATS, INTS

from ._samples import shape as S

register = xb.ops.register
ALL = FLOATS + INTS + BOOL


def _dim(dim: int, ndim: int, name: str) -> int:
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise ValueError(f"{name}: dim {dim} is out of range for a tensor with {ndim} dims")
    return dim % max(ndim, 1)


def _dims(dims, ndim: int, name: str) -> tuple[int, ...]:
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return tuple(_dim(d, ndim, name) for d in dims)


def _along(x, d: int, start: int, stop: int, step: int = 1):
    return x[(slice(None),) * d + (slice(start, stop, step),)]


# ---- splitting ------------------------------------------------------------------------------------------

@register("shape", samples=S.chunk_cases, torch="torch.chunk", grad=True, dtypes=ALL)
def chunk(self: Tensor, chunks: int, dim: int = 0):
    """Pieces of ceil(n / chunks) along dim (the last one smaller; fewer pieces when they run out)."""
    d = _dim(dim, self.ndim, "chunk")
    n = self.shape[d]
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    step = max(-(-n // chunks), 1)
    return tuple(_along(self, d, s, min(s + step, n)) for s in range(0, max(n, 1), step))


@register("shape", samples=S.tensor_split_cases, torch="torch.tensor_split", grad=True, dtypes=ALL)
def tensor_split(self: Tensor, indices_or_sections, dim: int = 0):
    """`sections` (an int) nearly equal pieces along dim (the first n % sections one longer), or pieces cut at
    the given indices. PyTorch also takes them as a tensor (tensor_indices_or_sections), whose values it reads
    on the host; here they must be numbers (numpy integers too), since the pieces' shapes depend on them."""
    if isinstance(indices_or_sections, Tensor) or (isinstance(indices_or_sections, (list, tuple)) and any(
            isinstance(i, Tensor) for i in indices_or_sections)):
        raise ValueError("tensor_split: indices_or_sections given as a tensor decide the pieces' shapes by their "
                         "values, which an operator fixes when it is traced; pass them as Python or numpy integers "
                         "(e.g. int(t) for sections, tuple(t.tolist()) for indices)")
    d = _dim(dim, self.ndim, "tensor_split")
    n = self.shape[d]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError(f"tensor_split: sections must be positive, got {k}")
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        cuts = list(np.cumsum([0] + sizes))
    else:
        cuts = [0] + [min(max(int(i), 0), n) for i in indices_or_sections] + [n]
    return tuple(_along(self, d, min(a, b), b) for a, b in zip(cuts[:-1], cuts[1:]))


@register("shape", samples=S.unbind_cases, torch="torch.unbind", grad=True, dtypes=ALL)
def unbind(self: Tensor, dim: int = 0):
    """The slices along dim, each without that dim."""
    d = _dim(dim, self.ndim, "unbind")
    return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))


# ---- reordering and repeating -----------------------------------------------------------------------------

@register("shape", samples=S.flip_cases, torch="torch.flip", grad=True, dtypes=ALL)
def flip(self: Tensor, dims):
    """self reversed along each of `dims`."""
    return xb.flip(self, _dims(dims, self.ndim, "flip")) if self.ndim else self


@register("shape", samples=S.roll_cases, torch="torch.roll", grad=True, dtypes=ALL)
def roll(self: Tensor, shifts, dims=None):
    """Elements shifted by `shifts` along `dims` (cyclically); with dims=None, along the flattened tensor."""
    if dims is None:
        s = (shifts if isinstance(shifts, int) else shifts[0]) % max(self.size, 1)
        flat = self.reshape(-1)
        return xb.concat([flat[flat.shape[0] - s:], flat[:flat.shape[0] - s]], 0).reshape(self.shape) if s else self
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = _dims(dims, self.ndim, "roll")
    if len(shifts) != len(dims):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    out = self
    for s, d in zip(shifts, dims):
        n = out.shape[d]
        s %= max(n, 1)
        if s:
            out = xb.concat([_along(out, d, n - s, n), _along(out, d, 0, n - s)], d)
    return out


@register("shape", samples=S.rot90_cases, torch="torch.rot90", grad=True, dtypes=ALL)
def rot90(self: Tensor, k: int = 1, dims=(0, 1)):
    """Rotation by k quarter turns in the plane of `dims`, from the first towards the second."""
    a, b = _dims(dims, self.ndim, "rot90")
    if a == b:
        raise ValueError(f"rot90: dims must differ, got {dims}")
    k %= 4
    if k == 0:
        return self
    if k == 2:
        return xb.flip(self, (a, b))
    if k == 1:
        return xb.swapaxes(xb.flip(self, b), a, b)
    return xb.flip(xb.swapaxes(self, a, b), b)


@register("shape", samples=S.repeat_cases, torch="torch.Tensor.repeat", grad=True, dtypes=ALL)
def repeat(self: Tensor, repeats):
    """self tiled `repeats[i]` times along each dim (extra leading repeats add dims)."""
    repeats = tuple(int(r) for r in repeats)
    if len(repeats) < self.ndim:
        raise ValueError(f"repeat: {len(repeats)} repeats for a tensor with {self.ndim} dims")
    x = self.reshape((1,) * (len(repeats) - self.ndim) + tuple(self.shape))
    pairs = tuple(v for r, n in zip(repeats, x.shape) for v in (r, n))           # r0 n0 r1 n1 ...
    y = xb.broadcast_to(x.reshape(tuple(v for n in x.shape for v in (1, n))), pairs)
    return y.reshape(tuple(r * n for r, n in zip(repeats, x.shape)))


@register("shape", samples=S.tile_cases, torch="torch.tile", grad=True, dtypes=ALL)
def tile(self: Tensor, dims):
    """repeat, with fewer repeats than dims allowed (they apply to the trailing dims)."""
    dims = tuple(int(r) for r in dims)
    return repeat(self, (1,) * (self.ndim - len(dims)) + dims)


@register("shape", samples=S.repeat_interleave_cases, torch="torch.repeat_interleave", grad=("self",), dtypes=ALL,
          notes="tensor repeats need output_size (the result's length must be static)")
def repeat_interleave(self: Tensor, repeats, dim: int = None, output_size: int = None):
    """Each element (or slice along dim) repeated `repeats` times in place: an int, or an integer tensor of one
    count per element. With tensor repeats the result's length depends on their values, so `output_size`
    (their sum) must be given; positions past the true total repeat the last element."""
    x = self.reshape(-1) if dim is None else self
    d = 0 if dim is None else _dim(dim, self.ndim, "repeat_interleave")
    n = x.shape[d]
    if not isinstance(repeats, Tensor):
        r = int(repeats)
        y = xb.broadcast_to(xb.expand_dims(x, d + 1), tuple(x.shape[:d + 1]) + (r,) + tuple(x.shape[d + 1:]))
        return y.reshape(tuple(x.shape[:d]) + (n * r,) + tuple(x.shape[d + 1:]))
    if output_size is None:
        raise ValueError("repeat_interleave: with tensor repeats, pass output_size (the sum of the repeats); the "
                         "result's length would otherwise depend on the data")
    reps = xb.broadcast_to(repeats.reshape(-1), (n,))
    ends = xb.cumsum(reps.astype("int64"), 0)
    pos = xb.arange(int(output_size))
    source = (ends[None, :] <= pos[:, None]).astype("int64").sum(axis=1)
    return xb.gather(x, xb.minimum(source, n - 1), axis=d)


@register("shape", samples=S.expand_cases, torch="torch.Tensor.expand", grad=True, dtypes=ALL)
def expand(self: Tensor, size):
    """self broadcast to `size` (-1 keeps a dim; new dims are added in front)."""
    size = tuple(int(s) for s in size)
    lead = len(size) - self.ndim
    if lead < 0:
        raise ValueError(f"expand: size {size} has fewer dims than the tensor {tuple(self.shape)}")
    full = tuple(self.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size))
    return xb.broadcast_to(self, full)


@register("shape", aliases=("permute",), samples=S.permute_cases, torch="torch.permute_copy", grad=True,
          dtypes=ALL)
def permute_copy(self: Tensor, dims):
    """self with its dims reordered to `dims`."""
    return self.permute(_dims(dims, self.ndim, "permute_copy")) if self.ndim else self


@register("shape", aliases=("swapaxes", "swapdims"), samples=S.transpose_cases, torch="torch.transpose", grad=True,
          dtypes=ALL)
def transpose(self: Tensor, dim0: int, dim1: int):
    """self with dims dim0 and dim1 swapped."""
    if self.ndim < 2:
        return self
    return xb.swapaxes(self, _dim(dim0, self.ndim, "transpose"), _dim(dim1, self.ndim, "transpose"))


@register("shape", samples=S.movedim_cases, torch="torch.movedim", grad=True, dtypes=ALL)
def movedim(self: Tensor, source, destination):
    """self with the dims `source` moved to positions `destination` (the others keep their order)."""
    src, dst = _dims(source, self.ndim, "movedim"), _dims(destination, self.ndim, "movedim")
    if len(src) != len(dst):
        raise ValueError(f"movedim: {len(src)} source dims and {len(dst)} destinations")
    order = [None] * self.ndim
    for s, t in zip(src, dst):
        order[t] = s
    rest = iter(d for d in range(self.ndim) if d not in src)
    return self.permute(tuple(o if o is not None else next(rest) for o in order)) if self.ndim else self


# ---- copies -----------------------------------------------------------------------------------------------

@register("shape", aliases=("clone",), samples=S.copy_cases, torch="torch.Tensor.contiguous", grad=True,
          dtypes=ALL)
def contiguous(self: Tensor):
    """A dense copy of self (every xbench result is contiguous)."""
    return self


def _torch_to_copy(torch, self, dtype=None):
    return torch.ops.aten._to_copy(self, dtype=None if dtype is None else getattr(torch, dtype))


@register("shape", samples=S.to_copy_cases, torch=_torch_to_copy, grad=True, dtypes=ALL)
def _to_copy(self: Tensor, dtype: str = None):
    """A copy of self, converted to `dtype` (a dtype name such as "float16"; None keeps self's): floats to
    integers truncate toward zero, anything to bool tests != 0."""
    return self if dtype is None or self.dtype == dtype else self.astype(dtype)


def _torch_copy(torch, self, src, non_blocking=False):
    return self.clone().copy_(src)


@register("shape", samples=S.copy__cases, torch=_torch_copy, grad=("src",), dtypes=ALL)
def copy_(self: Tensor, src: Tensor, non_blocking: bool = False):
    """The value `self.copy_(src)` leaves in self: src broadcast to self's shape and converted to its dtype
    (xbench operators have no side effects, so the result is a new tensor)."""
    return xb.broadcast_to(src.astype(self.dtype), tuple(self.shape))


# ---- reshaping --------------------------------------------------------------------------------------------

@register("shape", samples=S.flatten_cases, torch="torch.flatten", grad=True, dtypes=ALL)
def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1):
    """self with dims start_dim..end_dim merged into one."""
    if self.ndim == 0:
        return self.reshape(1)
    a, b = _dim(start_dim, self.ndim, "flatten"), _dim(end_dim, self.ndim, "flatten")
    if a > b:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shape = tuple(self.shape)
    return self.reshape(shape[:a] + (int(np.prod(shape[a:b + 1])),) + shape[b + 1:])


@register("shape", samples=S.unflatten_cases, torch="torch.unflatten", grad=True, dtypes=ALL)
def unflatten(self: Tensor, dim: int, sizes):
    """dim split into `sizes` (one of them may be -1)."""
    d = _dim(dim, self.ndim, "unflatten")
    shape = tuple(self.shape)
    return self.reshape(shape[:d] + tuple(int(s) for s in sizes) + shape[d + 1:])


@register("shape", aliases=("view",), samples=S.reshape_cases, torch="torch.reshape", grad=True, dtypes=ALL)
def reshape(self: Tensor, shape):
    """self's elements in row-major order, in `shape` (one size may be -1)."""
    return self.reshape(tuple(int(s) for s in shape))


@register("shape", samples=S.unsqueeze_cases, torch="torch.unsqueeze", grad=True, dtypes=ALL)
def unsqueeze(self: Tensor, dim: int):
    """self with a size-1 dim inserted at `dim`."""
    return xb.expand_dims(self, _dim(dim, self.ndim + 1, "unsqueeze"))


@register("shape", samples=S.squeeze_cases, torch="torch.squeeze", grad=True, dtypes=ALL)
def squeeze(self: Tensor, dim=None):
    """self without its size-1 dims (only those among `dim` when given; others are left alone)."""
    if dim is None:
        return xb.squeeze(self)
    dims = [d for d in _dims(dim, self.ndim, "squeeze") if self.shape[d] == 1] if self.ndim else []
    return xb.squeeze(self, tuple(dims)) if dims else self


@register("shape", samples=S.narrow_cases, torch="torch.narrow", grad=True, dtypes=ALL)
def narrow(self: Tensor, dim: int, start: int, length: int):
    """self[..., start:start + length, ...] along dim (start may be negative, and a 0-d integer tensor: PyTorch's
    narrow.Tensor, read at run time; out of range there, it is clamped into the dim)."""
    d = _dim(dim, self.ndim, "narrow")
    n = self.shape[d]
    if isinstance(start, Tensor):
        if start.ndim != 0 or start.dtype not in INTS:
            raise ValueError(f"narrow: a tensor start must be a 0-d integer tensor, got {start.dtype} of shape "
                             f"{tuple(start.shape)}")
        if length < 0 or length > n:
            raise ValueError(f"narrow: length {length} does not fit dim {d} of size {n}")
        first = xb.clamp(xb.where(start < 0, start + n, start).astype("int64"), 0, n - length)
        return xb.gather(self, first + xb.arange(length), axis=d)
    start = start + n if start < 0 else start
    if start < 0 or length < 0 or start + length > n:
        raise ValueError(f"narrow: start {start} and length {length} do not fit dim {d} of size {n}")
    return _along(self, d, start, start + length)


@register("shape", samples=S.select_cases, torch="torch.select", grad=True, dtypes=ALL)
def select(self: Tensor, dim: int, index: int):
    """The slice at `index` along dim, without that dim."""
    d = _dim(dim, self.ndim, "select")
    n = self.shape[d]
    if not -n <= index < n:
        raise ValueError(f"select: index {index} is out of range for dim {d} of size {n}")
    return self[(slice(None),) * d + (index,)]


@register("shape", samples=S.select_backward_cases, torch="torch.ops.aten.select_backward", dtypes=ALL)
def select_backward(grad_output: Tensor, input_sizes, dim: int, index: int):
    """The gradient of select(input, dim, index): zeros of input_sizes with grad_output at `index` along dim."""
    sizes = tuple(int(n) for n in input_sizes)
    d = _dim(dim, len(sizes), "select_backward")
    n = sizes[d]
    if not -n <= index < n:
        raise ValueError(f"select_backward: index {index} is out of range for dim {d} of size {n}")
    i = index % n
    widths = [(0, 0)] * len(sizes)
    widths[d] = (i, n - 1 - i)
    return xb.pad(xb.expand_dims(grad_output, d), widths)


@register("shape", samples=S.slice_backward_cases, torch="torch.ops.aten.slice_backward", dtypes=ALL)
def slice_backward(grad_output: Tensor, input_sizes, dim: int, start: int, end: int, step: int):
    """The gradient of input[start:end:step] along dim: zeros of input_sizes with grad_output where the slice
    read (start and end clamped as Python slices; end may be huge, as ATen's INT64_MAX)."""
    sizes = tuple(int(n) for n in input_sizes)
    d = _dim(dim, len(sizes), "slice_backward")
    n = sizes[d]
    positions = np.arange(n)[slice(start, end, step)]
    if grad_output.shape[d] != len(positions):
        raise ValueError(f"slice_backward: grad_output has {grad_output.shape[d]} entries along dim {d}, the slice "
                         f"{len(positions)}")
    if not len(positions):
        return xb.zeros(sizes, grad_output.dtype)
    if step == 1:
        widths = [(0, 0)] * len(sizes)
        widths[d] = (int(positions[0]), n - 1 - int(positions[-1]))
        return xb.pad(grad_output, widths)
    inside = np.zeros(n, bool)
    inside[positions] = True
    source = np.zeros(n, np.int64)
    source[positions] = np.arange(len(positions))
    picked = xb.gather(grad_output, source, axis=d)
    return xb.where(xb.asarray(inside).reshape((n,) + (1,) * (len(sizes) - 1 - d)), picked, 0).astype(
        grad_output.dtype)


@register("shape", samples=S.unfold_cases, torch="torch.Tensor.unfold", grad=True, dtypes=ALL)
def unfold(self: Tensor, dimension: int, size: int, step: int):
    """Windows of `size` every `step` along `dimension`: that dim becomes the window count and a last dim of
    `size` holds each window (Tensor.unfold)."""
    if self.ndim == 0:
        return self.reshape(1)
    d = _dim(dimension, self.ndim, "unfold")
    return xb.sliding_window(self, (size,), axes=(d,), stride=step)


# ---- triangles and diagonals ------------------------------------------------------------------------------

def _tri_mask(shape, diagonal: int, lower: bool):
    r, c = shape[-2], shape[-1]
    i, j = xb.iota((r, c), 0), xb.iota((r, c), 1)
    return (j - i <= diagonal) if lower else (j - i >= diagonal)


@register("shape", samples=S.tri_cases, torch="torch.tril", grad=True, dtypes=ALL)
def tril(self: Tensor, diagonal: int = 0):
    """The lower triangle (j - i <= diagonal) of the last two dims; zeros elsewhere."""
    return xb.where(_tri_mask(self.shape, diagonal, True), self, xb.zeros((), self.dtype))


@register("shape", samples=S.tri_cases, torch="torch.triu", grad=True, dtypes=ALL)
def triu(self: Tensor, diagonal: int = 0):
    """The upper triangle (j - i >= diagonal) of the last two dims; zeros elsewhere."""
    return xb.where(_tri_mask(self.shape, diagonal, False), self, xb.zeros((), self.dtype))


def _embed(src, offset: int, n1_first: bool = True):
    """[..., m] -> [..., n, n] with src on the `offset` diagonal (n = m + |offset|)."""
    m = src.shape[-1]
    n = m + abs(offset)
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    on = (j - i) == offset
    k = np.where(on, i if offset >= 0 else j, 0)
    picked = xb.gather(src, k, axis=-1) if m else xb.zeros(tuple(src.shape[:-1]) + (n, n), src.dtype)
    return xb.where(xb.asarray(on), picked, xb.zeros((), src.dtype))


@register("shape", samples=S.diag_cases, torch="torch.diag", grad=True, dtypes=ALL)
def diag(self: Tensor, diagonal: int = 0):
    """1-D: a square matrix with self on the `diagonal`; 2-D: that diagonal of self, as a vector."""
    if self.ndim == 1:
        return _embed(self, diagonal)
    if self.ndim != 2:
        raise ValueError(f"diag: self must be 1-D or 2-D, got {tuple(self.shape)}")
    r, c = self.shape
    i0, j0 = (0, diagonal) if diagonal >= 0 else (-diagonal, 0)
    m = max(0, min(r - i0, c - j0))
    if m == 0:
        return xb.zeros((0,), self.dtype)
    ii, jj = np.arange(m) + i0, np.arange(m) + j0
    return self[ii, jj]


@register("shape", samples=S.diag_embed_cases, torch="torch.diag_embed", grad=True, dtypes=ALL)
def diag_embed(self: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Matrices whose `offset` diagonal (in dims dim1, dim2 of the result) holds self's last dim."""
    out = _embed(self, offset)                                               # ... n n
    nd = out.ndim
    d1, d2 = _dim(dim1, nd, "diag_embed"), _dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise ValueError("diag_embed: dim1 and dim2 must differ")
    rest = iter(range(nd - 2))
    order = [nd - 2 if a == d1 else nd - 1 if a == d2 else next(rest) for a in range(nd)]
    return out.permute(tuple(order))


# ---- joining a list of tensors ----------------------------------------------------------------------------
# The grid's gradient check differentiates array arguments, not lists of them; gradients of these flow through
# concat's VJP like any other (tests/core/test_autodiff.py).
_LIST_GRAD = "differentiable through concat's VJP; the grid's gradient check takes array arguments, not lists"


def _tensors(tensors, name: str) -> list:
    ts = [xb.asarray(t) for t in tensors]
    if not ts:
        raise ValueError(f"{name}: expected a non-empty list of tensors")
    return ts


@register("shape", aliases=("concat", "concatenate"), samples=S.cat_cases, torch="torch.cat", grad=False,
          dtypes=ALL, notes=_LIST_GRAD)
def cat(tensors, dim: int = 0):
    """The tensors joined along `dim` (every other dim equal); 1-D empty tensors are skipped, as in PyTorch."""
    ts = _tensors(tensors, "cat")
    kept = [t for t in ts if not (t.ndim == 1 and t.shape[0] == 0)] or ts[:1]
    return xb.concat(kept, axis=_dim(dim, kept[0].ndim, "cat"))


@register("shape", samples=S.stack_cases, torch="torch.stack", grad=False, dtypes=ALL, notes=_LIST_GRAD)
def stack(tensors, dim: int = 0):
    """The tensors (all of one shape) stacked along a new dim `dim`."""
    ts = _tensors(tensors, "stack")
    return xb.stack(ts, axis=_dim(dim, ts[0].ndim + 1, "stack"))


@register("shape", samples=S.hstack_cases, torch="torch.hstack", grad=False, dtypes=ALL, notes=_LIST_GRAD)
def hstack(tensors):
    """Joined along dim 1 (along dim 0 for 1-D tensors)."""
    ts = [t.reshape((1,)) if t.ndim == 0 else t for t in _tensors(tensors, "hstack")]
    return xb.concat(ts, axis=0 if ts[0].ndim == 1 else 1)


@register("shape", samples=S.vstack_cases, torch="torch.vstack", grad=False, dtypes=ALL, notes=_LIST_GRAD)
def vstack(tensors):
    """Joined along dim 0, 0-D and 1-D tensors first made rows."""
    ts = [t.reshape((1, int(np.prod(t.shape)))) if t.ndim < 2 else t for t in _tensors(tensors, "vstack")]
    return xb.concat(ts, axis=0)

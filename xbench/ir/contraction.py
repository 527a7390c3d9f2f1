"""How a contraction kernel reads and writes: shared by the backends that generate contraction templates and by
the models (traces, predictor) that price them, so the plan is decided in one place."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from . import expr as E
from .expr import Call, Const, Expr, Idx, Load, Local, Select, free_indices
from .kernel import Assign, Axis, Buffer, Contract, Kernel, Store


def roles(kernel: Kernel) -> tuple[Contract, list[Axis], list[Axis], list[Axis]] | None:
    """(contract stage, batch axes, M axes, N axes) when the kernel is a contraction followed only by per-point
    epilogue stages (`Contract.roles` splits the outer axes); None otherwise."""
    if not kernel.stages or not isinstance(kernel.stages[0], Contract):
        return None
    for s in kernel.stages[1:]:
        if not isinstance(s, (Assign, Store)) or (isinstance(s, Store) and (s.axes or s.scope == "row")):
            return None
    c = kernel.stages[0]
    nb, nm, nn = c.roles
    if nb + nm + nn != len(kernel.outer) or not nm or not nn:
        return None
    o = kernel.outer
    return c, list(o[:nb]), list(o[nb:nb + nm]), list(o[nb + nm:])


def without_units(e: Expr, axes: Sequence[Axis]) -> Expr:
    """`e` with the variables of `axes` of extent 1 set to 0 and its index arithmetic folded (a 1x1 window's
    `y + r` is `y`)."""
    units = {a.name for a in axes if a.extent == 1}
    if not units:
        return e

    def fold(n: Expr) -> Expr | None:
        if isinstance(n, Idx) and n.name in units:
            return E.ZERO
        if isinstance(n, Call) and n.dtype == E.INDEX and n.fn in ("add", "mul"):
            return getattr(E, n.fn)(*n.args)
        return None
    return e.map(fold)


def _call(e: Expr, fn: str) -> bool:
    return isinstance(e, Call) and e.fn == fn and len(e.args) == 2


def _scaled_sum(e: Expr) -> tuple[Expr, int, Expr] | None:
    """(b, S, m) when `e` is b * S + m (either order)."""
    if not _call(e, "add"):
        return None
    for hi, lo in (e.args, e.args[::-1]):
        if _call(hi, "mul"):
            for v, s in (hi.args, hi.args[::-1]):
                if isinstance(s, Const) and isinstance(v, Idx) and isinstance(lo, Idx):
                    return v, int(s.value), lo
    return None


def reshaped(index: Sequence[Expr], shape: Sequence[int]) -> tuple[tuple[int, ...], tuple[Expr, ...]]:
    """The same elements of a C-contiguous buffer, reshaped so that each flattened axis indexes its own
    dimensions: `x[m // S, m % S]` is `x.reshape(.., S·..)[m]`, and `x[b·S + m]` is `x.reshape(.., S)[b, m]`
    (a linear layer over [batch, sequence, hidden] activations, a batch of rows in a flat matrix)."""
    index, shape = list(index), list(shape)
    d = 0
    while d < len(index):
        i, split = index[d], _scaled_sum(index[d])
        if split is not None and shape[d] % split[1] == 0:
            b, size, m = split
            index[d:d + 1], shape[d:d + 1] = [b, m], [shape[d] // size, size]
            continue
        nxt = index[d + 1] if d + 1 < len(index) else None
        if (_call(i, "floordiv") and nxt is not None and _call(nxt, "mod") and i.args == nxt.args
                and isinstance(i.args[1], Const) and shape[d + 1] == i.args[1].value):
            index[d:d + 2], shape[d:d + 2] = [i.args[0]], [shape[d] * shape[d + 1]]
            continue
        d += 1
    return tuple(shape), tuple(index)


def operand_view(e: Expr, buffers: Mapping[str, Buffer], rows: Sequence[Axis], cols: Sequence[Axis],
                 batch: Sequence[Axis]) -> tuple[str, bool] | None:
    """(buffer, transposed) when operand `e` is a plain load of a whole buffer that reads, per batch point, as a
    row-major [rows, cols] matrix (transposed: stored as [cols, rows]), the buffer `reshaped` first; None when it
    must be packed. Axes of extent 1, and the dimensions of extent 1 they index, do not count."""
    e = without_units(e, (*rows, *cols, *batch))
    rows, cols, batch = ([a for a in axes if a.extent > 1] for axes in (rows, cols, batch))
    if not isinstance(e, Load) or e.buf not in buffers:
        return None
    shape, index = reshaped(e.index, buffers[e.buf].shape)
    kept = [d for d, i in enumerate(index) if not (shape[d] == 1 and isinstance(i, Const) and i.value == 0)]
    if not all(isinstance(index[d], Idx) for d in kept):
        return None
    names = [index[d].name for d in kept]
    b = [a.name for a in batch if a.name in names]
    r, c = [a.name for a in rows], [a.name for a in cols]
    if len(set(names)) != len(names) or sorted(names) != sorted(b + r + c) or names[:len(b)] != b:
        return None
    extent = {a.name: a.extent for a in (*batch, *rows, *cols)}
    if tuple(extent[n] for n in names) != tuple(shape[d] for d in kept):
        return None
    rest = names[len(b):]
    if rest == r + c:
        return e.buf, False
    if rest == c + r:
        return e.buf, True
    return None


def direct_output(kernel: Kernel, c: Contract, buffers: Mapping[str, Buffer]) -> str | None:
    """The output buffer when the epilogue is a plain store of the accumulator at the outer point, or at its
    axes of extent > 1 (the GEMM can write it in place); None when an epilogue must run."""
    st = kernel.stages[1:]
    names = {c.local}
    if len(st) == 2 and isinstance(st[0], Assign) and st[0].value == Local(c.local, c.dtype):
        names.add(st.pop(0).local)          # a copy fused after the product (a reshape): `v = acc; out[..] = v`
    if len(st) != 1 or not isinstance(st[0], Store):
        return None
    s = st[0]
    if not (isinstance(s.value, Local) and s.value.name in names):
        return None
    at = (tuple(a.var for a in kernel.outer), tuple(a.var for a in kernel.outer if a.extent != 1))
    if tuple(s.index) not in at or buffers[s.buf].dtype != c.dtype:
        return None
    return s.buf



def outer_factors(kernel: Kernel) -> Kernel | None:
    """The kernel with the factors of its operands that do not move along the contracted axes applied to the
    accumulator instead, sum_k (x / y) * z = (sum_k x * z) / y (attention's probabilities divided by their
    row's sum, a query scaled before its product with the keys), so that x may be read in place; None when no
    operand has such a factor."""
    r = roles(kernel)
    if r is None:
        return None
    c = r[0]
    summed = {a.name for a in c.axes}
    factors: list[tuple[str, Expr]] = []

    def outer(e: Expr) -> bool:
        return e.dtype == c.dtype and not free_indices(e) & summed

    def rest(e: Expr) -> Expr:
        if isinstance(e, Call) and e.fn in ("mul", "div") and e.dtype == c.dtype:
            a, b = e.args
            if outer(b):
                factors.append((e.fn, b))
                return rest(a)
            if e.fn == "mul" and outer(a):
                factors.append(("mul", a))
                return rest(b)
        return e

    lhs, rhs = rest(c.lhs), rest(c.rhs)
    if not factors:
        return None
    acc = Local(c.local, c.dtype)
    scaled: Expr = acc
    for fn, f in factors:
        scaled = Call(fn, (scaled, f), c.dtype)
    epilogue = [s.replace(lambda e: e.map(lambda x: scaled if x == acc else None)) for s in kernel.stages[1:]]
    return replace(kernel, stages=[Contract(c.local, c.axes, lhs, rhs, c.dtype, c.roles), *epilogue])


def read_in_place(kernel: Kernel, buffers: Mapping[str, Buffer]) -> Kernel:
    """`outer_factors`'s kernel where that lets more of the operands be multiplied where they lie
    (`operand_view`), else the kernel as it is."""
    factored = outer_factors(kernel)
    if factored is None:
        return kernel

    def views(k: Kernel) -> int:
        c, batch, m, n = roles(k)
        return sum(e.dtype == c.dtype and operand_view(e, buffers, rows, cols, batch) is not None
                   for e, rows, cols in ((c.lhs, m, c.axes), (c.rhs, c.axes, n)))
    return factored if views(factored) > views(kernel) else kernel

# ---- windowed contractions as shifted GEMMs ------------------------------------------------------------------

@dataclass(frozen=True)
class ShiftPlan:
    """A stride-1 windowed contraction (a convolution) as one GEMM per window tap over a zero-padded copy of
    its input, without im2col: with the input's planes padded to `padded` = (Hp, Wp) and flattened, the window
    at tap (r, s) for every output point (h, w) is the contiguous run starting at r·dr·Wp + s·ds, read as a
    [channels, Hout·Wp] matrix (row stride `row`); the Wp - Wout columns past each output row are computed and
    dropped. out[m, h, w] = sum over taps of W[:, :, r, s] @ that run."""
    buf: str                      # the windowed input, indexed [batch?, channel, y, x]
    chan: Axis | None             # the contraction axis over channels (None: one plane, `plane_plan`)
    taps: tuple[Axis, Axis]       # the contraction axes over the window's rows and columns
    dil: tuple[int, int]
    off: tuple[int, int]          # input y = sy·h + dr·r + off[0], x = sx·w + ds·s + off[1]
    size: tuple[int, int]         # the input plane's extent the window may read (zero beyond it)
    out: tuple[int, int]          # Hout, Wout (the N axes' extents)
    stride: tuple[int, int] = (1, 1)    # (sy, sx): `shift_plan`'s are 1; `plane_plan` splits a plane in phases

    @property
    def padded(self) -> tuple[int, int]:
        """The padded plane's extent (with a stride, one phase's: the rows y ≡ p and columns x ≡ q apart)."""
        return tuple(self.out[i] + self.dil[i] * (self.taps[i].extent - 1) // self.stride[i] for i in range(2))

    @property
    def row(self) -> int:
        """Elements per padded channel plane, with room for the last tap's run to end past the last row."""
        hp, wp = self.padded
        return hp * wp + wp - self.out[1]

    @property
    def winograd(self) -> bool:
        """3x3 taps without dilation: the shape Winograd's F(2x2, 3x3) computes."""
        return (self.taps[0].extent, self.taps[1].extent, self.dil) == (3, 3, (1, 1))

    def offset(self, r: int, s: int) -> int:
        return r * self.dil[0] * self.padded[1] + s * self.dil[1]


def affine(e: Expr) -> dict[str, int] | None:
    """Integer coefficients of an index expression linear in loop variables ('' holds the constant), or None."""
    if isinstance(e, Idx):
        return {e.name: 1}
    if isinstance(e, Const) and isinstance(e.value, int):
        return {"": e.value}
    if isinstance(e, Call) and e.fn in ("add", "sub", "mul") and len(e.args) == 2:
        a, b = affine(e.args[0]), affine(e.args[1])
        if a is None or b is None:
            return None
        if e.fn == "mul":
            if set(b) <= {""}:
                a, b = b, a
            if not set(a) <= {""}:
                return None
            return {k: v * a.get("", 0) for k, v in b.items()}
        sign = -1 if e.fn == "sub" else 1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    return None


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Call) and e.fn == "logical_and":
        return [x for a in e.args for x in _conjuncts(a)]
    return [e]


def bounds_checked(e: Expr) -> tuple[Expr, list[dict[str, int]]] | None:
    """A zero-padded read, `x[...] if (i >= 0) & (i < n) & ... else 0`, as the read and its checks, each an
    affine form f of the loop variables meaning f >= 0 (`affine`'s dicts); None unless every check is an affine
    comparison with a constant."""
    if not (isinstance(e, Select) and isinstance(e.b, Const) and e.b.value == 0):
        return None
    checks = []
    for t in _conjuncts(e.cond):
        if not (isinstance(t, Call) and t.fn in ("ge", "gt", "lt", "le") and isinstance(t.args[1], Const)
                and isinstance(t.args[1].value, int)):
            return None
        f, c = affine(t.args[0]), t.args[1].value
        if f is None:
            return None
        # f >= c, f > c, f < c, f <= c as g >= 0
        sign, shift = {"ge": (1, -c), "gt": (1, -c - 1), "lt": (-1, c - 1), "le": (-1, c)}[t.fn]
        g = {k: sign * v for k, v in f.items()}
        g[""] = g.get("", 0) + shift
        checks.append(g)
    return e.a, checks


def shift_plan(kernel: Kernel) -> ShiftPlan | None:
    """The shifted-GEMM plan of a float contraction whose right operand is a stride-1 window over an
    [batch?, channel, y, x] input (zero outside it, by an explicit bounds check or none), whose left operand does
    not depend on the batch or the window position, and whose N axes are the two output positions; else None.
    The input's extent is what the bounds check says (without one, every tap of every output point is inside)."""
    r = roles(kernel)
    if r is None:
        return None
    c, batch, m, n = r
    if c.dtype not in ("float32", "float64") or len(n) != 2 or len(c.axes) != 3 or len(batch) > 1:
        return None
    kx = {a.name: a for a in c.axes}
    if not free_indices(c.lhs) <= {a.name for a in m} | set(kx):
        return None
    e, cond = c.rhs, None
    if isinstance(e, Select):
        if not (isinstance(e.b, Const) and e.b.value == 0):
            return None
        e, cond = e.a, e.cond
    if not isinstance(e, Load) or e.dtype != c.dtype:
        return None
    idx = list(e.index)
    if len(idx) != 3 + len(batch) or (batch and idx.pop(0) != batch[0].var):
        return None
    ch, ey, ex = idx
    if not isinstance(ch, Idx) or ch.name not in kx:
        return None
    plan = _window(e.buf, kx[ch.name], ey, ex, cond, n, kx)
    return plan if plan is not None and plan.stride == (1, 1) else None


def _window(buf: str, chan: Axis | None, ey: Expr, ex: Expr, cond: Expr | None, n: Sequence[Axis],
            kx: Mapping[str, Axis]) -> ShiftPlan | None:
    """The ShiftPlan of a read at [.., ey, ex] = [h + dr·r + oy, w + ds·s + ox] (h, w the N axes, r, s two
    contraction axes other than `chan`), zero where `cond` (bounds checks on ey and ex only) fails; else None."""
    taps, dil, off, stride = [], [], [], []
    for ie, out_ax in ((ey, n[0]), (ex, n[1])):
        f = affine(ie)
        stride.append(f.pop(out_ax.name, 0) if f is not None else 0)
        if stride[-1] < 1:
            return None
        const = f.pop("", 0)
        if len(f) != 1:
            return None
        (tap, d), = f.items()
        if tap not in kx or (chan is not None and tap == chan.name) or d < 1:
            return None
        taps.append(kx[tap])
        dil.append(d)
        off.append(const)
    if taps[0].name == taps[1].name:
        return None
    out = (n[0].extent, n[1].extent)
    # the last input index read + 1
    size = [stride[i] * (out[i] - 1) + dil[i] * (taps[i].extent - 1) + off[i] + 1 for i in range(2)]
    for t in _conjuncts(cond) if cond is not None else ():
        if not (isinstance(t, Call) and len(t.args) == 2 and isinstance(t.args[1], Const)):
            return None
        dim = 0 if t.args[0] == ey else 1 if t.args[0] == ex else None
        if dim is None or not ((t.fn == "ge" and t.args[1].value == 0) or t.fn == "lt"):
            return None
        if t.fn == "lt":
            size[dim] = min(size[dim], t.args[1].value)
    return ShiftPlan(buf, chan, (taps[0], taps[1]), (dil[0], dil[1]), (off[0], off[1]), (size[0], size[1]), out,
                     (stride[0], stride[1]))


def wgrad_plane_plan(kernel: Kernel) -> tuple[Expr, Expr, tuple[Expr, Expr], ShiftPlan, tuple[Axis, Axis]] | None:
    """A depthwise convolution's weight gradient: a float product over the output positions (and the images)
    whose N axes are a window's taps (the others of extent 1), its M points one (the channel a batch index), the
    left operand read at the positions and the right a stride-1 window over the last two dimensions of its inputs
    at them: (left operand, right operand without its bounds check, the index (y, x) of the right's windowed
    reads, the ShiftPlan of one input plane with `taps` the N axes and `out` the positions' extents, the two
    position axes); else None. Each tap's gradient is then one dot product of the output gradient's plane with
    the padded input's run from the tap's offset (`plane_plan` in reverse)."""
    r = roles(kernel)
    if r is None:
        return None
    c, batch, m, n = r
    if c.dtype not in ("float32", "float64") or any(a.extent != 1 for a in m) or len(c.axes) < 2:
        return None
    kx, taps = {a.name: a for a in c.axes}, {a.name: a for a in n}
    e, cond = c.rhs, None
    if isinstance(e, Select):
        if not (isinstance(e.b, Const) and e.b.value == 0):
            return None
        e, cond = e.a, e.cond
    reads = [ld for ld in E.loads(e) if free_indices(ld) & (set(kx) | set(taps))]
    if not reads or len(reads[0].index) < 2:
        return None
    ey, ex = reads[0].index[-2:]
    pos = []
    for ie in (ey, ex):
        f = affine(ie)
        named = [v for v in (f or {}) if v in kx]
        if f is None or len(named) != 1:
            return None
        pos.append(kx[named[0]])
    if pos[0] is pos[1]:
        return None
    window = set(taps) | {a.name for a in pos}
    if any(tuple(ld.index[-2:]) != (ey, ex) or any(free_indices(i) & window for i in ld.index[:-2]) for ld in reads):
        return None
    plan = _window(reads[0].buf, None, ey, ex, cond, pos, taps)
    if plan is None or plan.stride != (1, 1) or any(a.extent > 1 for a in n if a not in plan.taps):
        return None
    at = (Idx(pos[0].name), Idx(pos[1].name))
    if free_indices(c.lhs) & set(taps) or not any(free_indices(ld) & window for ld in E.loads(c.lhs)) or any(
            free_indices(ld) & window and (tuple(ld.index[-2:]) != at or any(free_indices(i) & window
                                                                              for i in ld.index[:-2]))
            for ld in E.loads(c.lhs)):
        return None
    return c.lhs, e, (ey, ex), plan, (pos[0], pos[1])


def plane_plan(kernel: Kernel) -> tuple[Expr, tuple[Expr, Expr], ShiftPlan] | None:
    """A float product over a window's taps alone whose right operand is a window over the last two dimensions
    of its inputs, every other index free of the taps and the window position (a depthwise convolution, the
    channel a batch index, perhaps of a normalised and activated input): the operand (without its bounds
    check), the index (y, x) of its windowed reads, and the ShiftPlan of one input plane (`chan` None); else
    None. Each output plane is then a sum of
    the taps' runs over one zero-padded plane of the operand, or with a stride, over the plane's phases (the
    rows and columns congruent modulo the stride, each its own plane)."""
    r = roles(kernel)
    if r is None:
        return None
    c, batch, m, n = r
    if c.dtype not in ("float32", "float64") or len(n) != 2:
        return None
    kx = {a.name: a for a in c.axes}
    e, cond = c.rhs, None
    if isinstance(e, Select):
        if not (isinstance(e.b, Const) and e.b.value == 0):
            return None
        e, cond = e.a, e.cond
    window = {a.name for a in (*n, *c.axes)}
    reads = [ld for ld in E.loads(e) if free_indices(ld) & window]
    if not reads or len(reads[0].index) < 2:
        return None
    ey, ex = reads[0].index[-2:]
    if any(tuple(ld.index[-2:]) != (ey, ex) or any(free_indices(i) & window for i in ld.index[:-2])
           for ld in reads):
        return None
    plan = _window(reads[0].buf, None, ey, ex, cond, n, kx)
    if plan is None or any(a.extent > 1 for a in c.axes if a not in plan.taps):
        return None
    return e, (ey, ex), plan

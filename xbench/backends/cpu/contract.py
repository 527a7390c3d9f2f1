"""Contraction kernels (`[Contract, epilogue...]`) as numba source: BLAS over operands viewed in place or packed,
windowed operands (convolutions) as per-tap GEMMs, one packed window or Winograd's transforms, panels of a packed
operand multiplied from cache; integer contractions as blocked loops."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...ir import contraction
from ...ir import expr as E
from ...ir.expr import Expr, Idx, Load, Local
from ...ir.kernel import Assign, Axis, Kernel, Store
from ...ir.schedule import Schedule
from ..pyemit import NP_TYPES, Source
from . import bf16gemm, lowp, winograd
from .emit import SCRATCH, Indent, blas_serial, cast, prod, unravel, unrounded

if TYPE_CHECKING:
    from .codegen import ModuleWriter

K_SPLIT_MIN = 64                   # a sum of GEMMs over leading contraction axes needs this much contraction each
PACK_SPLIT_BYTES = 2 << 20         # a packed operand this large is packed a leading contraction point at a time
MERGE_COLS = 64                    # a GEMM per batch point narrower than this merges the batch into one (merge_batch)


def panel_rows(k: Kernel) -> tuple[int, ...]:
    """The `panel` knob's values for a float contraction whose output columns span two or more axes (a
    windowed operand such as convolution's, which must be packed): 0 packs the whole operand; r > 0 packs and
    multiplies r rows of the outermost column axis at a time (a divisor of it), so each panel stays in cache."""
    roles = contraction.roles(k) if k.kind == "contract" else None
    if roles is None or len(roles[3]) < 2 or roles[0].dtype not in ("float32", "float64"):
        return (0,)
    e = roles[3][0].extent
    return (0,) + tuple(r for r in range(1, e) if e % r == 0)


def merged_batch_pays(roles) -> bool:
    """Whether a contraction whose left operand is the same at every batch point (a convolution's weight over a
    batch of images) runs one GEMM over all the points' columns (`merge_batch`): where each point's GEMM is
    narrower than MERGE_COLS and the packed columns of every point fit PACK_SPLIT_BYTES. ResNet's 2x2 and 4x4
    feature maps give GEMMs of 4-16 columns (Winograd's: 4), which MKL runs at 7 GFLOP/s on a core of an AMD
    EPYC (OpenBLAS: 95); over a batch of 8 images, 32-128 columns run at 75-90."""
    c, batch, _, n = roles
    return prod(n) < MERGE_COLS and prod((*batch, *n, *c.axes)) * 4 <= PACK_SPLIT_BYTES


def _affine(form: dict[str, int]) -> str:
    """`contraction.affine`'s form as Python: coefficient times variable, plus the constant ('')."""
    terms = [f"{v} * {k}" if k else str(v) for k, v in form.items() if v]
    return " + ".join(terms) or "0"


# A depthwise weight gradient goes through padded planes (`wgrad_plane`) from this many output positions a plane:
# on 4 x 4 planes their fills and nine dot products of 24 cost more than the loops (0.25 -> 0.43 ms for 1,024
# channels), from 8 x 8 they cost a third (0.45 -> 0.15 ms for 640)
WGRAD_PLANE_POINTS = 64


class ContractWriter:
    """BLAS (float32/float64) or blocked loops (integers) for `[Contract, epilogue...]` kernels."""

    def __init__(self, w: ModuleWriter, k: Kernel, sched: Schedule):
        self.w, self.sched = w, sched
        self._kernel(k)

    def _kernel(self, k: Kernel) -> None:
        self.k = k
        self.c, self.batch, self.m, self.n = contraction.roles(k)
        self.kaxes = self.c.axes

    def text(self) -> str:
        plan = contraction.shift_plan(self.k)
        scalars = Source()
        scalars.depth = 1
        self.w.read_scalars(scalars, self.k)         # 0-d inputs are read once, before any (parallel) loop
        if self.c.dtype in ("float32", "float64") and self.sched.get("impl", "blas") == "blas":
            window = self.sched.get("window") if plan else None
            body = self.shifted(plan) if window == "shift" else self.winograd(plan) if window == "winograd" \
                else self.blas()
        else:
            body = self.loops()
        self.w._scalars = {}
        if scalars.lines:
            head, rest = body.split("\n", 1)
            body = "\n".join([head, *scalars.lines, rest])
        parallel = "numba.prange" in body and bool(self.sched.get("parallel", True))
        if not parallel:
            body = body.replace("numba.prange(", "range(")
        return self.w.decorator(parallel) + "\n" + body

    def _view(self, e: Expr, rows, cols, batch=None) -> str | None:
        """A numpy view of a direct operand load as a [rows, cols] matrix (per point of `batch`, default the
        kernel's batch axes), or None."""
        batch = self.batch if batch is None else batch
        view = contraction.operand_view(e, self.w.program.buffers, rows, cols, batch)
        if view is None:
            return None
        buf, transposed = view
        shape, index = contraction.reshaped(contraction.without_units(e, (*rows, *cols, *batch)).index,
                                            self.w.program.buffers[buf].shape)
        names = {a.name for a in batch}
        lead = max((d + 1 for d, i in enumerate(index) if isinstance(i, Idx) and i.name in names), default=0)
        # the batch index, and the dimensions of extent 1 among it (a unit batch axis reads at 0), select a matrix
        if not all(isinstance(i, Idx) and i.name in names or shape[d] == 1 for d, i in enumerate(index[:lead])):
            return None
        base = buf if shape == tuple(self.w.program.buffers[buf].shape) else f"{buf}.reshape{shape}"
        sub = [i.name if isinstance(i, Idx) and i.name in names else "0" for i in index[:lead]]
        base = f"{base}[{', '.join(sub)}]" if lead else base
        R, C = prod(rows), prod(cols)
        stored = shape[lead:]
        if transposed:
            return f"{base}.T" if stored == (C, R) else f"{base}.reshape({C}, {R}).T"
        return base if stored == (R, C) else f"{base}.reshape({R}, {C})"

    def _pack(self, src: Source, name: str, e: Expr, rows, cols, dtype: str) -> None:
        src(f"for _p in numba.prange({prod(rows)}):")
        with src.indent():
            unravel(src, "_p", rows, "_pr")
            self._pack_row(src, name, cast(e, dtype), rows, cols, dtype)

    def _pack_row(self, src: Source, name: str, e: Expr, rows, cols, dtype: str) -> None:
        """`name[_p, :]` = e along `cols`, their loops as one where every read walks them in order."""
        shape = (prod(rows), prod(cols))
        place = Load(name, (Idx("_p"), E.linear(tuple(a.var for a in cols), tuple(a.extent for a in cols))), dtype)
        (place, e), axes = self.w.flat(src, [place, e], tuple(cols), shapes={name: shape})
        with Indent(src, self.w.loops(src, axes)):
            (v,) = self.w.values(src, [e], set(), set())
            src(f"{name}[_p, {self.w.emitter.expr(place.index[1])}] = {self._stored(v, dtype)}")

    def _pack_lhs(self, src: Source, e: Expr, dtype: str, transposed: bool, kaxes=None) -> None:
        """`_A` as [M, K], or [K, M] where `transposed`, over `kaxes` (default: all contraction axes)."""
        kaxes = self.kaxes if kaxes is None else kaxes
        if transposed:
            self._pack_cols(src, "_A", e, self.m, kaxes, dtype)
        else:
            self._pack(src, "_A", e, self.m, kaxes, dtype)

    def _pack_rhs(self, src: Source, e: Expr, dtype: str, transposed: bool, kaxes=None) -> None:
        """`_B` as [K, N], or [N, K] where `transposed`."""
        kaxes = self.kaxes if kaxes is None else kaxes
        if transposed:
            self._pack(src, "_B", e, self.n, kaxes, dtype)
        else:
            self._pack_cols(src, "_B", e, self.n, kaxes, dtype)

    def _stored(self, value: str, dtype: str) -> str:
        """`value` (computed in float32 for a 16-bit float) as a packed operand of `dtype` holds it."""
        if dtype not in lowp.STORE:
            return value
        self.w.helpers.add("lowp")
        return f"{lowp.STORE[dtype]}({unrounded(value, dtype)})"

    def _bf16_pairs(self) -> bool:
        """Both operands bfloat16, summed in float32, on a CPU that multiplies bfloat16 pairs (`bf16gemm`)."""
        c = self.c
        return c.dtype == "float32" and c.lhs.dtype == c.rhs.dtype == "bfloat16" and bf16gemm.available()

    def blas(self) -> str:
        w, k, c = self.w, self.k, self.c
        dt = c.dtype
        pairs = self._bf16_pairs()
        od = "bfloat16" if pairs else dt          # the operands' dtype as the GEMM reads them
        if not pairs:
            w.helpers.add("dot")
        src = Source()
        src(f"def {k.name}({', '.join(w.params(k))}):")
        M, N, K = prod(self.m), prod(self.n), prod(self.kaxes)
        B = prod(self.batch)
        if not pairs:       # factors along the output applied to the product, where that reads an operand in place
            self._kernel(contraction.read_in_place(k, w.program.buffers))
        merged = bool(self.sched.get("merge_batch", False)) and B > 1
        if merged:          # the batch points' columns side by side: C[M, (batch, N)], stored by the epilogue
            self.batch, self.n = [], [*self.batch, *self.n]
            N, B = prod(self.n), 1
        c, direct_out = self.c, None if merged else self._direct_out()
        lview = self._view(cast(c.lhs, od), self.m, self.kaxes) if c.lhs.dtype == od else None
        rview = self._view(cast(c.rhs, od), self.kaxes, self.n) if c.rhs.dtype == od else None
        lhs_b = bool({a.name for a in self.batch} & E.free_indices(c.lhs))
        rhs_b = bool({a.name for a in self.batch} & E.free_indices(c.rhs))
        with src.indent():
            whole = ((lview is None) * M * K + (rview is None) * K * N) * {"bfloat16": 2, "float32": 4, "float64": 8}[od]
            split = self._k_split(whole, od) if B == 1 and (lview is None or rview is None) else None
            if split is not None:
                self._split_gemms(src, *split, direct_out, od)
                return src.text()
            per_batch = bool(self.sched.get("batch_parallel", False)) and B > 1
            panel = int(self.sched.get("panel", 0)) if rview is None and direct_out is not None and not pairs else 0
            if panel:
                rview = "_P"               # no whole packed operand
            ot = "np.uint16" if pairs else NP_TYPES[dt]
            # an operand packed along its reads' contiguous axis: A as [K, M], B as [N, K], read as transposes
            a_t = lview is None and self._runs_along(c.lhs, self.m)
            b_t = rview is None and not panel and self._runs_along(c.rhs, self.kaxes)
            alloc = {"_A": (lview is None, lhs_b, f"({K}, {M})" if a_t else f"({M}, {K})", ot),
                     "_B": (rview is None, rhs_b, f"({N}, {K})" if b_t else f"({K}, {N})", ot),
                     "_C": (direct_out is None, True, f"({M}, {N})", NP_TYPES[dt])}
            for name, (needed, varies, shape, t) in alloc.items():
                if needed and not (per_batch and varies):
                    src(f"{name} = _xb_new({shape}, {t})")
            if lview is None and not lhs_b:
                self._pack_lhs(src, c.lhs, od, a_t)
            if rview is None and not rhs_b:
                self._pack_rhs(src, c.rhs, od, b_t)
            # one GEMM per core (batch_parallel, BLAS limited to one thread by the host) or BLAS threads per GEMM
            src(f"for _b in {'numba.prange' if per_batch else 'range'}({B}):")
            with src.indent():
                for name, (needed, varies, shape, t) in alloc.items():
                    if needed and per_batch and varies:
                        src(f"{name} = _xb_new({shape}, {t})" + SCRATCH)
                unravel(src, "_b", self.batch, "_br")
                if lview is None and lhs_b:
                    self._pack_lhs(src, c.lhs, od, a_t)
                if rview is None and rhs_b:
                    self._pack_rhs(src, c.rhs, od, b_t)
                a_ = lview or ("_A.T" if a_t else "_A")
                b_ = rview or ("_B.T" if b_t else "_B")
                out = direct_out or "_C"
                if panel:
                    self._panels(src, a_, c.rhs, dt, out, panel)
                elif pairs and blas_serial(self.sched):
                    w.helpers.add("gemm_bf16_serial")
                    src(f"_xb_gemm_bf16_serial({a_}, {b_}, {out})")
                elif pairs:
                    w.helpers.add("gemm_bf16")
                    src(f"_xb_gemm_bf16({a_}, {b_}, {out}, {w.threads})")
                else:
                    src(f"_xb_dot({a_}, {b_}, {out})")
                if direct_out is None:
                    self._epilogue(src, "_C")
        return src.text()

    def _k_split(self, whole: int, od: str):
        """(leading contraction axes, left view, right view) when at each point of some leading contraction axes
        the operands are plain matrices over the rest (NCHW data summed over its batch: a 1x1 convolution's weight
        gradient), so that a sum of GEMMs with beta = 1 replaces packing both. Where only one is (a larger
        convolution's weight gradient: the gradient is, the input's windows are not) and packing the other whole
        would take `whole` bytes or more (PACK_SPLIT_BYTES), the other is packed one point at a time (view None),
        as both are where the GEMM reads bfloat16 pairs (`od`, the operands' dtype as the GEMM reads them)."""
        c = self.c
        for j in range(1, len(self.kaxes)):
            lead, rest = self.kaxes[:j], self.kaxes[j:]
            if prod(rest) < K_SPLIT_MIN:
                break
            lv = self._view(c.lhs, self.m, rest, lead) if c.lhs.dtype == od else None
            rv = self._view(c.rhs, rest, self.n, lead) if c.rhs.dtype == od else None
            if lv is not None and rv is not None and od == c.dtype or whole >= PACK_SPLIT_BYTES:
                return lead, lv, rv
        return None

    def _split_gemms(self, src: Source, lead, lview: str | None, rview: str | None, direct_out: str | None,
                     od: str) -> None:
        c, dt, rest = self.c, self.c.dtype, self.kaxes[len(lead):]
        pairs = od != dt
        if pairs and min(prod(lead), self.w.threads) > 1:
            return self._split_per_thread(src, lead, lview, rview, direct_out)
        self.w.helpers.add("gemm_bf16" if pairs else "dot_add")
        ot = "np.uint16" if pairs else NP_TYPES[dt]
        M, N, K = prod(self.m), prod(self.n), prod(rest)
        out = direct_out or "_C"
        if direct_out is None:
            src(f"_C = _xb_new(({M}, {N}), {NP_TYPES[dt]})")
        a_t = lview is None and self._runs_along(c.lhs, self.m)
        b_t = rview is None and self._runs_along(c.rhs, rest)
        if lview is None:
            src(f"_A = _xb_new({(K, M) if a_t else (M, K)}, {ot})")
        if rview is None:
            src(f"_B = _xb_new({(N, K) if b_t else (K, N)}, {ot})")
        src(f"for _k in range({prod(lead)}):")
        with src.indent():
            unravel(src, "_k", lead, "_kr")
            if lview is None:
                self._pack_lhs(src, c.lhs, od, a_t, rest)
            if rview is None:
                self._pack_rhs(src, c.rhs, od, b_t, rest)
            a_ = lview or ("_A.T" if a_t else "_A")
            b_ = rview or ("_B.T" if b_t else "_B")
            if pairs:
                src(f"_xb_gemm_bf16({a_}, {b_}, {out}, {self.w.threads}, _k > 0)")
            else:
                src("if _k == 0:")
                src(f"    _xb_dot({a_}, {b_}, {out})")
                src("else:")
                src(f"    _xb_dot_add({a_}, {b_}, {out})")
        if direct_out is None:
            src("for _b in range(1):")
            with src.indent():
                self._epilogue(src, "_C")

    def _split_per_thread(self, src: Source, lead, lview: str | None, rview: str | None,
                          direct_out: str | None) -> None:
        """`_split_gemms` for bfloat16 pairs with a point of the leading axes for every thread: each thread packs
        its own range of points and sums their GEMMs on its core into a float32 part of its own, and the parts
        are added (one image's windows packed per core instead of every core packing and multiplying each in
        turn: a 7x7 stem's weight gradient)."""
        c, rest = self.c, self.kaxes[len(lead):]
        self.w.helpers.add("gemm_bf16_serial")
        M, N, K, L = prod(self.m), prod(self.n), prod(rest), prod(lead)
        T = min(L, self.w.threads)
        a_t = lview is None and self._runs_along(c.lhs, self.m)
        b_t = rview is None and self._runs_along(c.rhs, rest)
        src(f"_Cs = _xb_new(({T}, {M}, {N}), np.float32)")
        if direct_out is None:
            src(f"_C = _xb_new(({M}, {N}), np.float32)")
        src(f"for _t in numba.prange({T}):")
        with src.indent():
            if lview is None:
                src(f"_A = _xb_new({(K, M) if a_t else (M, K)}, np.uint16)" + SCRATCH)
            if rview is None:
                src(f"_B = _xb_new({(N, K) if b_t else (K, N)}, np.uint16)" + SCRATCH)
            src(f"for _k in range(_t * {L} // {T}, (_t + 1) * {L} // {T}):")
            with src.indent():
                unravel(src, "_k", lead, "_kr")
                if lview is None:
                    self._pack_lhs(src, c.lhs, "bfloat16", a_t, rest)
                if rview is None:
                    self._pack_rhs(src, c.rhs, "bfloat16", b_t, rest)
                a_ = lview or ("_A.T" if a_t else "_A")
                b_ = rview or ("_B.T" if b_t else "_B")
                src(f"_xb_gemm_bf16_serial({a_}, {b_}, _Cs[_t], _k > _t * {L} // {T})")
        out = direct_out or "_C"
        src(f"for _p in numba.prange({M}):")
        with src.indent():
            src(f"for _j in range({N}):")
            src(f"    {out}[_p, _j] = {' + '.join(f'_Cs[{t}, _p, _j]' for t in range(T))}")
        if direct_out is None:
            src("for _b in range(1):")
            with src.indent():
                self._epilogue(src, "_C")

    def _tap_weights(self, src: Source, plan: contraction.ShiftPlan, dt: str) -> None:
        """`_W[r·S + s, m, c]`: the weights repacked per window tap (a few thousand elements: serial)."""
        w, c = self.w, self.c
        R, S = plan.taps[0].extent, plan.taps[1].extent
        M, C = prod(self.m), plan.chan.extent
        src(f"_W = _xb_new(({R * S}, {M}, {C}), {NP_TYPES[dt]})")
        src(f"for _p in range({M}):")
        with src.indent():
            unravel(src, "_p", self.m, "_pm")
            depth = w.loops(src, (plan.chan, *plan.taps))
            with Indent(src, depth):
                (v,) = w.values(src, [cast(c.lhs, dt)], set(), set())
                src(f"_W[{plan.taps[0].name} * {S} + {plan.taps[1].name}, _p, {plan.chan.name}] = {v}")

    def _pad_copy(self, src: Source, plan: contraction.ShiftPlan, hp: int, wp: int, loop: str) -> None:
        """Copy the batch point's input planes into the zero-padded `_X[c, y·wp + x]` (its borders stay 0)."""
        lead = f"{self.batch[0].name}, " if self.batch else ""
        (oy, ox), (hin, win) = plan.off, plan.size
        src(f"for _c in {loop}({plan.chan.extent}):")
        with src.indent():
            src(f"for _y in range({max(0, -oy)}, {min(hp, hin - oy)}):")
            with src.indent():
                src(f"for _x in range({max(0, -ox)}, {min(wp, win - ox)}):")
                with src.indent():
                    src(f"_X[_c, _y * {wp} + _x] = {plan.buf}[{lead}_c, _y + {oy}, _x + {ox}]")

    def _batch_loop(self, src: Source, B: int, per_batch: bool, scratch: list[str]) -> None:
        """Open the loop over batch points; each thread's scratch is allocated in it when the points run in
        parallel, once before it otherwise."""
        if not per_batch:
            for line in scratch:
                src(line)
        src(f"for _b in {'numba.prange' if per_batch else 'range'}({B}):")
        with src.indent():
            if per_batch:
                for line in scratch:
                    src(line + SCRATCH)
            unravel(src, "_b", self.batch, "_br")

    def shifted(self, plan: contraction.ShiftPlan) -> str:
        """A convolution as one GEMM per window tap (`contraction.ShiftPlan`): the weights repacked per tap, then
        per batch point the input planes copied into a zero-padded buffer and multiplied at each tap's offset,
        accumulating in `_C` [M, Hout·Wp], which the epilogue reads at the output's columns."""
        w, k, c = self.w, self.k, self.c
        dt = c.dtype
        w.helpers.add("tap_gemms")
        M, B, C = prod(self.m), prod(self.batch), plan.chan.extent
        S = plan.taps[1].extent
        (hp, wp), (hout, _) = plan.padded, plan.out
        L, row = hout * wp, plan.row
        per_batch = bool(self.sched.get("batch_parallel", False)) and B > 1
        src = Source()
        src(f"def {k.name}({', '.join(w.params(k))}):")
        with src.indent():
            self._tap_weights(src, plan, dt)
            scratch = [f"_X = _xb_new_zeros(({C}, {row}), {NP_TYPES[dt]})", f"_C = _xb_new(({M}, {L}), {NP_TYPES[dt]})"]
            self._batch_loop(src, B, per_batch, scratch)
            with src.indent():
                self._pad_copy(src, plan, hp, wp, "range")
                src(f"_xb_tap_gemms(_X, _W, _C, {S}, {plan.dil[0] * wp}, {plan.dil[1]})")
                self._epilogue(src, "_C", E.add(E.mul(self.n[0].var, E.const(wp)), self.n[1].var))
        return src.text()

    def winograd(self, plan: contraction.ShiftPlan) -> str:
        """A 3x3 stride-1 convolution by Winograd's F(2x2, 3x3) (`winograd`): the weights transformed once, then
        per batch point, a block of tile rows at a time, the padded input's 4x4 tiles transformed, 16 GEMMs over
        channels, and the products transformed back into `_C` [M, 4·tiles] (each 2x2 tile's outputs together),
        which the epilogue reads at the output's points. Batch points run in parallel (batch_parallel), or
        else the blocks of one batch point do; either way each thread calls BLAS on one thread."""
        w, k, c = self.w, self.k, self.c
        ty = NP_TYPES[c.dtype]
        w.helpers.add("winograd")
        M, B, C = prod(self.m), prod(self.batch), plan.chan.extent
        th, tw = -(-plan.out[0] // 2), -(-plan.out[1] // 2)
        T, hp, wp = th * tw, 2 * th + 2, 2 * tw + 2
        per_batch = bool(self.sched.get("batch_parallel", False)) and B > 1
        src = Source()
        src(f"def {k.name}({', '.join(w.params(k))}):")
        with src.indent():
            self._tap_weights(src, plan, c.dtype)
            src(f"_U = _xb_new((16, {M}, {C}), {ty})")
            src("_xb_wino_weights(_W, _U)")
            rows = min(th, winograd.block_rows(tw))          # a small image's block: its own tiles, no more
            block = [f"_V = _xb_new((16, {C}, {rows * tw}), {ty})", f"_T = _xb_new((16, {M}, {rows * tw}), {ty})"]
            scratch = [f"_X = _xb_new_zeros(({C}, {hp * wp}), {ty})", f"_C = _xb_new(({M}, {4 * T}), {ty})"]
            self._batch_loop(src, B, per_batch, scratch + (block if per_batch else []))
            tiles = (f"_xb_wino_tiles_{c.dtype}(_xb_data(_X), _xb_data(_U), _xb_data(_V), _xb_data(_T), "
                     f"_xb_data(_C), {C}, {M}, {hp * wp}, {rows}, {tw}, {wp}, ")
            with src.indent():
                keep = "_xb_keep((_X, _U, _V, _T, _C))"      # alive until the C function has returned
                if per_batch:
                    self._pad_copy(src, plan, hp, wp, "range")
                    src(tiles + f"0, {th}, {T})")
                    src(keep)
                else:                       # one batch point at a time: blocks of tiles in parallel
                    self._pad_copy(src, plan, hp, wp, "numba.prange")
                    src(f"for _q in numba.prange({-(-th // rows)}):")
                    with src.indent():
                        for line in block:
                            src(line)
                        src(tiles + f"_q * {rows}, min({th}, _q * {rows} + {rows}), {T})")
                        src(keep)
                y, x = self.n[0].var, self.n[1].var
                tile = E.add(E.mul(E.floordiv(y, 2), E.const(tw)), E.floordiv(x, 2))
                self._epilogue(src, "_C", E.add(E.mul(tile, E.const(4)), E.add(E.mul(E.mod(y, 2), E.const(2)),
                                                                                E.mod(x, 2))))
        return src.text()

    def _panels(self, src: Source, a_: str, e: Expr, dt: str, out: str, rows: int) -> None:
        """Pack `rows` rows of the outer column axis at a time into `_P` and multiply into `_Q`, then copy the
        panel's columns out: the packed operand is read from cache by the GEMM instead of from memory."""
        K, outer, inner = prod(self.kaxes), self.n[0], self.n[1:]
        width = rows * prod(inner)
        M = prod(self.m)
        src(f"_P = _xb_new(({K}, {width}), {NP_TYPES[dt]})")
        src(f"_Q = _xb_new(({M}, {width}), {NP_TYPES[dt]})")
        src(f"for _jc in range(0, {outer.extent}, {rows}):")
        with src.indent():
            src(f"for _p in range({K}):")
            with src.indent():
                unravel(src, "_p", self.kaxes, "_pk")
                (e2,) = self.w.hoist(src, [cast(e, dt)], {a.name for a in self.n})
                src(f"for _r in range({rows}):")
                with src.indent():
                    src(f"{outer.name} = _jc + _r")
                    depth = self.w.loops(src, tuple(inner))
                    with Indent(src, depth):
                        flat = E.linear(tuple(a.var for a in inner), tuple(a.extent for a in inner))
                        (v,) = self.w.values(src, [e2], set(), set())
                        src(f"_P[_p, _r * {prod(inner)} + {self.w.emitter.expr(flat)}] = {v}")
            src(f"_xb_dot({a_}, _P, _Q)")
            src(f"_O = {out}")
            src(f"for _m in range({M}):")
            with src.indent():
                src(f"_O[_m, _jc * {prod(inner)}:_jc * {prod(inner)} + {width}] = _Q[_m]")

    def _pack_cols(self, src: Source, name: str, e: Expr, rows, cols, dtype: str) -> None:
        """`name[q, p]` = e at (rows p, cols q), the columns outer (parallel) and the rows inner: B[k, n] (k outer,
        so reads along n stay contiguous when they are), or A transposed where its reads run along its rows (a
        weight gradient's transposed, fused operand), which the GEMM then reads as `name.T`."""
        src(f"for _p in numba.prange({prod(cols)}):")
        with src.indent():
            unravel(src, "_p", cols, "_pk")
            (e2,) = self.w.hoist(src, [cast(e, dtype)], {a.name for a in rows})
            self._pack_row(src, name, e2, cols, rows, dtype)

    def _runs_along(self, e: Expr, axes) -> bool:
        """Whether every read of a multi-dimensional buffer in `e` that moves along `axes` has its last (contiguous)
        index in `axes`, and the batch axes fixed for the GEMM, alone (a read that does not move along them, a
        softmax row's sum in its gradient, is one value for the whole run)."""
        names = {a.name for a in axes}
        fixed = names | {a.name for a in self.batch}
        reads = [ld for ld in E.loads(e) if len(ld.index) > 1
                 and names & set().union(*map(E.free_indices, ld.index))]
        return bool(reads) and all(names & E.free_indices(ld.index[-1]) and E.free_indices(ld.index[-1]) <= fixed
                                   for ld in reads)

    def _direct_out(self) -> str | None:
        """When the epilogue is a plain store of the accumulator, BLAS writes straight into the output."""
        buf = contraction.direct_output(self.k, self.c, self.w.program.buffers)
        if buf is None:
            return None
        if len(self.w.program.buffers[buf].shape) != len(self.k.outer):      # written without its unit axes
            buf = f"{buf}.reshape({tuple(a.extent for a in self.k.outer)})"
        base = f"{buf}[{', '.join(a.name for a in self.batch)}]" if self.batch else buf
        M, N = prod(self.m), prod(self.n)
        return base if len(self.m) == 1 and len(self.n) == 1 else f"{base}.reshape({M}, {N})"

    def _epilogue(self, src: Source, cbuf: str, cols: Expr | None = None) -> None:
        """The epilogue stages per output point, reading the accumulator at `cbuf[_p, cols]` (default: the N
        axes flattened)."""
        M = prod(self.m)
        src(f"for _p in numba.prange({M}):")
        with src.indent():
            unravel(src, "_p", self.m, "_er")
            nflat = cols if cols is not None else \
                E.linear(tuple(a.var for a in self.n), tuple(a.extent for a in self.n))
            acc = Load(cbuf, (Idx("_p"), nflat), self.c.dtype)
            stages = [s.replace(lambda e: e.map(
                lambda x: acc if isinstance(x, Local) and x.name == self.c.local else None)) for s in self.k.stages[1:]]
            exprs = [x for s in stages for x in s.exprs()]
            inner = {a.name for a in self.n} | {s.local for s in stages if isinstance(s, Assign)}
            hoisted = iter(self.w.hoist(src, exprs, inner))
            # each stage as a local's value, or a store's place (a read of it) and value
            items = [next(hoisted) if isinstance(s, Assign) else
                     self.w.target(s.buf, [next(hoisted) for _ in s.index]) for s in stages]
            items = [x for s, item in zip(stages, items) for x in ((item,) if isinstance(s, Assign) else
                                                                  (item, next(hoisted)))]
            axes = tuple(self.n)
            if cols is None and all(isinstance(s, Assign) or isinstance(s, Store) and not s.axes for s in stages):
                items, axes = self.w.flat(src, items, axes, shapes={cbuf: (M, prod(self.n))})
            with Indent(src, self.w.loops(src, axes)):
                it = iter(items)
                for s in stages:
                    if isinstance(s, Assign):
                        (v,) = self.w.values(src, [next(it)], set(), set())
                        src(f"{s.local} = {v}")
                    else:
                        place, value = next(it), next(it)
                        vals = self.w.values(src, [*place.index, value], set(), set())
                        src(self.w.assign(place.buf, vals[:-1], vals[-1]))

    def _checked_loops(self, src: Source, checks: list[dict[str, int]]) -> int:
        """The N loops over a right operand read only inside bounds (`contraction.bounds_checked`: a zero-padded
        window): each check narrows the range of the innermost N axis it names, or, naming none, guards all the
        N loops; the read in their body then needs no test, and vectorises."""
        names = [a.name for a in self.n]
        narrowing: dict[str, list[dict[str, int]]] = {n: [] for n in names}
        guards = []
        for g in checks:
            named = [n for n in names if g.get(n, 0)]
            (narrowing[named[-1]] if named else guards).append(g)
        depth = 0
        if guards:
            src(f"if {' and '.join(f'{_affine(g)} >= 0' for g in guards)}:")
            depth = 1
        for a in self.n:
            lo, hi = ["0"], [str(a.extent)]
            for g in narrowing[a.name]:
                c, rest = g[a.name], _affine({k: v for k, v in g.items() if k != a.name})
                if c > 0:
                    lo.append(f"-(({rest}) // {c})")       # c·n + rest >= 0: n >= ceil(-rest / c)
                else:
                    hi.append(f"({rest}) // {-c} + 1")     # n <= floor(rest / -c)
            bounds = f"{lo[0]}, {hi[0]}" if len(lo) == len(hi) == 1 else \
                f"max({', '.join(lo)}), min({', '.join(hi)})"
            with Indent(src, depth):
                src(f"for {a.name} in range({bounds}):")
            depth += 1
        return depth

    def _planes(self, src: Source, planes: dict[str, int], acc: int) -> set[str]:
        """A plane kernel's head: its def, the loop over its batch and M points, and once per thread the zeroed
        `planes` (name: elements; every plane writes the same elements, whose padding stays 0) and the
        accumulator `_acc` of `acc` elements, set to 0 per point. Returns the names bound; the body goes two
        levels in."""
        w, k, c = self.w, self.k, self.c
        pts, ty = self.batch + self.m, NP_TYPES[c.dtype]
        src(f"def {k.name}({', '.join(w.params(k))}):")
        with src.indent():
            bound = w.open_outer(src, tuple(pts), len(pts), True)
            with src.indent():
                for name, n in planes.items():
                    src(f"{name} = _xb_new_zeros(({n},), {ty})" + SCRATCH)
                src(f"_acc = _xb_new(({acc},), {ty})" + SCRATCH)
                src(f"for _j in range({acc}):")
                src(f"    _acc[_j] = {w.emitter.const(0, c.dtype)}")
        return bound

    def plane(self, operand: Expr, window: tuple[Expr, Expr], plan: contraction.ShiftPlan) -> str:
        """A depthwise convolution (`contraction.plane_plan`): per batch and M point, its operand's plane (the
        input, or an elementwise function of it) evaluated once per element into a zero-padded `_X` (with a
        stride, one padded plane per phase: the rows and columns congruent modulo it), then each tap's contiguous run of its phase, times the tap's weight, added into `_acc` [Hout·Wp],
        which the epilogue reads at the output's columns (the Wp - Wout past each row are computed and dropped):
        long unit-stride loops, where a plane's own rows (24 wide) are too short for the vector loop."""
        w, k, c = self.w, self.k, self.c
        (hp, wp), (oy, ox), (hin, win), (sy, sx) = plan.padded, plan.off, plan.size, plan.stride
        L, P = plan.out[0] * wp, plan.row
        (r, dr), (s, ds) = zip(plan.taps, plan.dil)
        src = Source()
        bound = self._planes(src, {"_X": sy * sx * P}, L)
        with Indent(src, 2):
            # phase by phase, each input row's run of a phase written contiguously (its reads a stride apart)
            depth = 0
            for v, st, lo, hi in (("y", sy, max(0, -oy), min(sy * hp, hin - oy)),
                                  ("x", sx, max(0, -ox), min(sx * wp, win - ox))):
                with Indent(src, depth):
                    if st == 1:
                        src(f"for _{v} in range({lo}, {hi}):")
                    else:       # _v = _vq·st + _pv within [lo, hi)
                        src(f"for _p{v} in range({st}):")
                        src(f"    for _{v}q in range(({lo} - _p{v} + {st - 1}) // {st}, "
                            f"({hi} - _p{v} + {st - 1}) // {st}):")
                        src(f"        _{v} = _{v}q * {st} + _p{v}")
                        depth += 1
                depth += 1
            with Indent(src, depth):
                at = (E.add(Idx("_y"), E.const(oy)), E.add(Idx("_x"), E.const(ox)))
                point = operand.map(lambda x: Load(x.buf, (*x.index[:-2], *at), x.dtype)
                                    if isinstance(x, Load) and tuple(x.index[-2:]) == window else None)
                (v,) = w.values(src, [cast(point, c.dtype)], bound, set())
                phase = "" if (sy, sx) == (1, 1) else \
                    f"({'_py' if sy > 1 else 0} * {sx} + {'_px' if sx > 1 else 0}) * {P} + "
                y, x = ("_yq" if sy > 1 else "_y"), ("_xq" if sx > 1 else "_x")
                src(f"_X[{phase}{y} * {wp} + {x}] = {v}")
            with Indent(src, w.loops(src, tuple(self.kaxes))):
                (a,) = w.values(src, [cast(c.lhs, c.dtype)], bound, set())
                src(f"_a = {a}")
                if (sy, sx) == (1, 1):
                    src(f"_o = {r.name} * {dr * wp} + {s.name} * {ds}")
                else:
                    src(f"_o = ((({r.name} * {dr}) % {sy}) * {sx} + ({s.name} * {ds}) % {sx}) * {P} + "
                        f"(({r.name} * {dr}) // {sy}) * {wp} + ({s.name} * {ds}) // {sx}")
                src(f"for _j in range({L}):")
                src("    _acc[_j] += _a * _X[_j + _o]")
            with Indent(src, w.loops(src, tuple(self.n))):
                src(f"{c.local} = _acc[{self.n[0].name} * {wp} + {self.n[1].name}]")
                for st in k.stages[1:]:
                    w.stage(src, st, bound)
        return src.text()

    def wgrad_plane(self, lhs: Expr, rhs: Expr, window: tuple[Expr, Expr], plan: contraction.ShiftPlan,
                    pos: tuple[Axis, Axis]) -> str:
        """A depthwise convolution's weight gradient (`contraction.wgrad_plane_plan`): per batch point (a channel)
        and image, the output gradient's plane into `_G` [Hout·Wp] (zero past each row's Wout) and the input's
        into a zero-padded `_X` as `plane` pads it, each evaluated once per element; then each tap's gradient
        is one contiguous dot product of `_G` with `_X` from the tap's offset, where the loops over the positions
        would run each row's 3 x 3 taps in turn (SegFormer's [4, 128, 32, 32]: 1.3 -> 0.3 ms)."""
        w, k, c = self.w, self.k, self.c
        (hp, wp), (oy, ox), (hin, win), (hout, wout) = plan.padded, plan.off, plan.size, plan.out
        (r, dr), (s, ds) = zip(plan.taps, plan.dil)
        L, zero = hout * wp, w.emitter.const(0, c.dtype)
        nflat = w.emitter.expr(E.linear(tuple(a.var for a in self.n), tuple(a.extent for a in self.n)))
        src = Source()
        bound = self._planes(src, {"_X": plan.row, "_G": L}, prod(self.n))
        with Indent(src, 2):
            with Indent(src, w.loops(src, tuple(a for a in self.kaxes if a not in pos))):
                for buf, operand, reads, lo, hi, (y0, x0) in (
                        ("_X", rhs, window, (max(0, -oy), max(0, -ox)), (min(hp, hin - oy), min(wp, win - ox)),
                         (oy, ox)),
                        ("_G", lhs, (pos[0].var, pos[1].var), (0, 0), (hout, wout), (0, 0))):
                    src(f"for _y in range({lo[0]}, {hi[0]}):")
                    src(f"    for _x in range({lo[1]}, {hi[1]}):")
                    at = (E.add(Idx("_y"), E.const(y0)), E.add(Idx("_x"), E.const(x0)))
                    point = operand.map(lambda x, reads=reads, at=at: Load(x.buf, (*x.index[:-2], *at), x.dtype)
                                        if isinstance(x, Load) and tuple(x.index[-2:]) == reads else None)
                    with Indent(src, 2):
                        (v,) = w.values(src, [cast(point, c.dtype)], bound, set())
                        src(f"{buf}[_y * {wp} + _x] = {v}")
                with Indent(src, w.loops(src, tuple(self.n))):
                    src(f"_o = {r.name} * {dr * wp} + {s.name} * {ds}")
                    src(f"_t = {zero}")
                    src(f"for _j in range({L}):")
                    src("    _t += _G[_j] * _X[_j + _o]")
                    src(f"_acc[{nflat}] += _t")
            with Indent(src, w.loops(src, tuple(self.n))):
                src(f"{c.local} = _acc[{nflat}]")
                for st in k.stages[1:]:
                    w.stage(src, st, bound)
        return src.text()

    def loops(self) -> str:
        """Blocked i-k-j loops: one accumulator row per (batch, m) point, k outer, n inner."""
        w, k, c = self.w, self.k, self.c
        plane = contraction.plane_plan(k)
        if plane is not None:
            return self.plane(*plane)
        wgrad = contraction.wgrad_plane_plan(k)
        if wgrad is not None and wgrad[3].out[0] * wgrad[3].out[1] >= WGRAD_PLANE_POINTS:
            return self.wgrad_plane(*wgrad)
        src = Source()
        src(f"def {k.name}({', '.join(w.params(k))}):")
        N = prod(self.n)
        pts = self.batch + self.m
        with src.indent():
            bound = w.open_outer(src, tuple(pts), len(pts), True)
            with src.indent():
                src(f"_acc = _xb_new_zeros(({N},), {NP_TYPES[c.dtype]})")
                checked = contraction.bounds_checked(c.rhs)
                lhs, rhs = cast(c.lhs, c.dtype), cast(checked[0] if checked else c.rhs, c.dtype)
                depth = w.loops(src, tuple(self.kaxes))
                with Indent(src, depth):
                    (a,) = w.values(src, [lhs], bound, set())
                    src(f"_a = {a}")
                    # what does not move along the row (which operand a choice reads) is decided once per k
                    (rhs_k,) = w.hoist(src, [rhs], {x.name for x in self.n})
                    d2 = self._checked_loops(src, checked[1]) if checked else w.loops(src, tuple(self.n))
                    with Indent(src, d2):
                        nflat = E.linear(tuple(x.var for x in self.n), tuple(x.extent for x in self.n))
                        (b,) = w.values(src, [rhs_k], bound, set())
                        src(f"_acc[{w.emitter.expr(nflat)}] += _a * {b}")
                d3 = w.loops(src, tuple(self.n))
                with Indent(src, d3):
                    nflat = E.linear(tuple(x.var for x in self.n), tuple(x.extent for x in self.n))
                    src(f"{c.local} = _acc[{w.emitter.expr(nflat)}]")
                    for s in k.stages[1:]:
                        w.stage(src, s, bound)
        return src.text()

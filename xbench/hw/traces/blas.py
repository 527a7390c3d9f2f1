"""The cpu backend's BLAS contractions: packing passes, a BLIS-blocked GEMM, the epilogue, and shifted-GEMM
convolutions."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...dtypes import itemsize
from ...ir import expr as E
from ...ir.contraction import ShiftPlan, direct_output, operand_view, read_in_place
from ...ir.contraction import roles as contract_roles
from ...ir.expr import Cast, Const, Expr, Idx, Load, Local, const, substitute
from ...ir.kernel import Axis, Buffer, Contract, Kernel, Program, Store
from ..cachesim import Trace
from .points import CpuPointTrace, KernelTrace, Layout, SequenceTrace, _empty_trace, _extent, _free, _unravel

# BLIS Haswell blocking (bli_cntx_init_haswell.c): MR, NR, MC, KC, NC per element size
BLIS_HASWELL = {4: (16, 6, 168, 256, 4080), 8: (8, 6, 72, 256, 4080)}


# ---- BLAS contractions on the cpu ----------------------------------------------------------------------------

@dataclass
class _Matrix:
    """A matrix operand in memory: element (r, c) at base + r * rs + c * cs (bytes)."""
    base: int
    rows: int
    cols: int
    rs: int
    cs: int
    item: int

    def runs(self, r0: int, r1: int, c0: int, c1: int, vec: int) -> np.ndarray:
        """Start addresses of vector-sized accesses reading the block [r0, r1) x [c0, c1) along its contiguous
        direction (rows when the column stride is the element size)."""
        if self.cs == self.item or self.rs != self.item:
            per = max(1, vec // self.item)
            starts = np.arange(c0, c1, per, dtype=np.int64)
            rr = np.arange(r0, r1, dtype=np.int64)
            return (self.base + rr[:, None] * self.rs + starts[None, :] * self.cs).reshape(-1)
        per = max(1, vec // self.item)
        starts = np.arange(r0, r1, per, dtype=np.int64)
        cc = np.arange(c0, c1, dtype=np.int64)
        return (self.base + cc[:, None] * self.cs + starts[None, :] * self.rs).reshape(-1)


class BlasGemmTrace(KernelTrace):
    """C[M, N] (+)= A[M, K] @ B[K, N] as a BLIS-style blocked GEMM over `cores` threads (see module doc)."""

    granularity = "vector"

    def __init__(self, name: str, a: _Matrix, b: _Matrix, c: _Matrix, lay: Layout, *, cores: int, vec: int,
                 batch: Sequence[tuple[int, int, int]] = ((0, 0, 0),)):
        self.kernel = name
        self.a, self.b, self.c = a, b, c
        self.lay = lay
        self.vec = vec
        self.item = a.item
        self.M, self.K, self.N = a.rows, a.cols, b.cols
        self.MR, self.NR, self.MC, self.KC, self.NC = BLIS_HASWELL.get(self.item, BLIS_HASWELL[4])
        self.streams = max(1, cores)
        self.batch = list(batch)                       # per batch: byte offsets added to A, B, C
        self.notes = []
        self.global_end = lay.end
        self.groups = [self._groups(s) for s in range(self.streams)]
        self.counts = [np.cumsum([g[1] for g in gs]) if gs else np.zeros(0, np.int64) for gs in self.groups]
        self.steps = int(max([int(cn[-1]) if len(cn) else 0 for cn in self.counts] + [0]))

    def _groups(self, s: int) -> list[tuple]:
        """(kind, units, params) in order for stream s."""
        out = []
        M, N, K = self.M, self.N, self.K
        for bi in range(len(self.batch)):
            for jc in range(0, N, self.NC):
                nc = min(self.NC, N - jc)
                for pc in range(0, K, self.KC):
                    kc = min(self.KC, K - pc)
                    panels = -(-nc // self.NR)
                    mine = list(range(s, panels, self.streams))
                    if mine:
                        out.append(("packB", len(mine), (bi, jc, pc, nc, kc, mine)))
                    ics = list(range(0, M, self.MC))[s::self.streams]
                    for ic in ics:
                        mc = min(self.MC, M - ic)
                        ap = -(-mc // self.MR)
                        out.append(("packA", ap, (bi, ic, pc, mc, kc)))
                        out.append(("micro", ap * panels, (bi, jc, pc, ic, nc, kc, mc)))
        return out

    def _bp(self) -> int:
        return self.lay.scratch(self.streams) + (1 << 20)        # B panel shared by the cores

    def _ap(self, s: int) -> int:
        return self.lay.scratch(s) + (1 << 20)

    def generate(self, lo: int, hi: int) -> list[Trace]:
        return [self._stream(s, lo, hi) for s in range(self.streams)]

    def _stream(self, s: int, lo: int, hi: int) -> Trace:
        gs, cn = self.groups[s], self.counts[s]
        if not len(cn) or lo >= cn[-1]:
            return _empty_trace()
        gi = int(np.searchsorted(cn, lo, side="right"))
        addrs, writes, sizes = [], [], []
        while gi < len(gs) and (cn[gi] - gs[gi][1]) < hi:
            kind, n, prm = gs[gi]
            first = int(cn[gi] - n)
            for u in range(max(lo, first) - first, min(hi, int(cn[gi])) - first):
                a, w, z = getattr(self, "_" + kind)(s, u, *prm)
                addrs.append(a)
                writes.append(w)
                sizes.append(z)
            gi += 1
        if not addrs:
            return _empty_trace()
        return Trace(np.concatenate(addrs), np.concatenate(writes), np.concatenate(sizes))

    def _off(self, bi: int) -> tuple[int, int, int]:
        return self.batch[bi]

    def _packB(self, s, u, bi, jc, pc, nc, kc, mine):
        jr = mine[u] * self.NR
        nr = min(self.NR, nc - jr)
        oa, ob, oc = self._off(bi)
        b = self.b
        src = _Matrix(b.base + ob, b.rows, b.cols, b.rs, b.cs, b.item).runs(pc, pc + kc, jc + jr, jc + jr + nr,
                                                                             self.vec)
        dst0 = self._bp() + mine[u] * self.NR * kc * self.item
        dst = dst0 + np.arange(0, kc * nr * self.item, self.vec, dtype=np.int64)
        return self._rw(src, dst)

    def _packA(self, s, u, bi, ic, pc, mc, kc):
        ir = u * self.MR
        mr = min(self.MR, mc - ir)
        oa, ob, oc = self._off(bi)
        a = self.a
        src = _Matrix(a.base + oa, a.rows, a.cols, a.rs, a.cs, a.item).runs(ic + ir, ic + ir + mr, pc, pc + kc,
                                                                             self.vec)
        dst = self._ap(s) + u * self.MR * kc * self.item + np.arange(0, kc * mr * self.item, self.vec,
                                                                     dtype=np.int64)
        return self._rw(src, dst)

    def _rw(self, src: np.ndarray, dst: np.ndarray):
        a = np.concatenate([src, dst])
        w = np.concatenate([np.zeros(len(src), bool), np.ones(len(dst), bool)])
        z = np.concatenate([np.full(len(src), min(self.vec, self.item * max(1, self.vec // self.item)), np.int32),
                            np.full(len(dst), self.vec, np.int32)])
        return a, w, z

    def _micro(self, s, u, bi, jc, pc, ic, nc, kc, mc):
        ap = -(-mc // self.MR)
        jp, ip = divmod(u, ap)
        ir, jr = ip * self.MR, jp * self.NR
        mr, nr = min(self.MR, mc - ir), min(self.NR, nc - jr)
        it = self.item
        a_row = mr * it
        na = max(1, -(-a_row // self.vec))
        k = np.arange(kc, dtype=np.int64)
        a_base = self._ap(s) + ip * self.MR * kc * it
        b_base = self._bp() + jp * self.NR * kc * it
        a_acc = a_base + k[:, None] * a_row + np.arange(na, dtype=np.int64)[None, :] * self.vec
        b_acc = b_base + k[:, None] * nr * it
        per_k = np.concatenate([a_acc, b_acc], axis=1).reshape(-1)
        sizes_k = np.tile(np.r_[np.full(na, min(self.vec, a_row), np.int32), np.int32(nr * it)], kc)
        oa, ob, oc = self._off(bi)
        rows = np.arange(ic + ir, ic + ir + mr, dtype=np.int64)
        c_acc = self.c.base + oc + rows * self.c.rs + (jc + jr) * self.c.cs
        c_two = np.repeat(c_acc, 2)
        addr = np.concatenate([per_k, c_two])
        write = np.concatenate([np.zeros(len(per_k), bool), np.tile([False, True], mr)])
        size = np.concatenate([sizes_k, np.full(2 * mr, nr * it, np.int32)])
        return addr, write, size


def blas_trace(program: Program, kernel: Kernel, lay: Layout, *, cores: int, vec: int,
               data: Mapping[str, np.ndarray] | None = None) -> KernelTrace:
    """The cpu backend's BLAS path for a contraction kernel: packing passes, blocked GEMM, epilogue."""
    kernel = read_in_place(kernel, program.buffers)
    c, batch, m, n = contract_roles(kernel)
    dt = c.dtype
    it = itemsize(dt)
    M, N, B = _extent(m), _extent(n), _extent(batch)
    phases: list[KernelTrace] = []
    lhs_b = bool({a.name for a in batch} & _free(c.lhs))
    rhs_b = bool({a.name for a in batch} & _free(c.rhs))

    def operand(e: Expr, first, second, name: str, depends_on_batch: bool):
        view = operand_view(e, program.buffers, first, second, batch) if e.dtype == dt else None
        if view is not None:
            buf, tr = view
            R, C = _extent(first), _extent(second)
            base = lay.bases[buf]
            per_batch = R * C * it if batch and any(a.name in _free(e) for a in batch) else 0
            if tr:
                return _Matrix(base, R, C, it, R * it, it), per_batch, None
            return _Matrix(base, R, C, C * it, it, it), per_batch, None
        R, C = _extent(first), _extent(second)
        lay.add(f"{kernel.name}{name}", (R, C), it)
        pack = _pack_kernel(kernel.name + name, e, first, second, batch if depends_on_batch else [],
                            f"{kernel.name}{name}", dt)
        return _Matrix(lay.bases[f"{kernel.name}{name}"], R, C, C * it, it, it), 0, pack

    A, a_step, pack_a = operand(c.lhs, m, c.axes, "_A", lhs_b)
    Bm, b_step, pack_b = operand(c.rhs, c.axes, n, "_B", rhs_b)
    cbuf = direct_output(kernel, c, program.buffers)
    if cbuf is not None:
        c_step = M * N * it                 # the output is [batch..., M..., N...] (its unit axes perhaps dropped)
        Cm = _Matrix(lay.bases[cbuf], M, N, N * it, it, it)
        epi = None
    else:
        lay.add(f"{kernel.name}_C", (M, N), it)
        Cm = _Matrix(lay.bases[f"{kernel.name}_C"], M, N, N * it, it, it)
        c_step = 0
        epi = _epilogue_kernel(kernel, c, batch, m, n, f"{kernel.name}_C")
    progs = dict(program.buffers)
    for nm_ in (f"{kernel.name}_A", f"{kernel.name}_B", f"{kernel.name}_C"):
        if nm_ in lay.bases and nm_ not in progs:
            progs[nm_] = Buffer(nm_, lay.shapes[nm_], dt, "temp")
    prog2 = Program(program.name, progs, program.inputs, program.outputs, program.kernels, program.aliases)

    def pass_trace(k: Kernel | None, b_index: int | None) -> KernelTrace | None:
        if k is None:
            return None
        kk = _fix_batch(k, batch, b_index) if b_index is not None else k
        return CpuPointTrace(prog2, kk, lay, cores=cores, parallel=True, data=data)

    def per_batch(bi: int):
        if pack_a is not None and (lhs_b or bi == 0):
            yield pass_trace(pack_a, bi if lhs_b else None)
        if pack_b is not None and (rhs_b or bi == 0):
            yield pass_trace(pack_b, bi if rhs_b else None)
        yield BlasGemmTrace(f"{kernel.name}.gemm", A, Bm, Cm, lay, cores=cores, vec=vec,
                            batch=[(bi * a_step, bi * b_step, bi * c_step)])
        if epi is not None:
            yield pass_trace(epi, bi)

    for bi in range(B):
        phases += [p for p in per_batch(bi) if p is not None]
    seq = SequenceTrace(kernel.name, phases, "vector")
    seq.notes.append("BLAS GEMM modelled with BLIS Haswell blocking; accesses are vector-sized")
    return seq


def blas_regions(program: Program, kernel: Kernel, merged: bool = False) -> int:
    """Parallel regions the cpu backend's BLAS path runs for a contraction kernel: one per packing pass of an
    operand that is not a plain view (per batch point when it depends on the batch) and one per batch point for
    an epilogue that BLAS cannot write in place (np.dot itself runs in the BLAS library's own threads). `merged`
    (the `merge_batch` knob): one GEMM over every batch point's columns, packed in one pass, stored by one
    epilogue."""
    kernel = read_in_place(kernel, program.buffers)
    c, batch, m, n = contract_roles(kernel)
    B = 1 if merged else _extent(batch)
    out = 0
    for e, first, second in ((c.lhs, m, c.axes), (c.rhs, c.axes, n)):
        if merged and e is c.rhs:
            out += 1
        elif e.dtype != c.dtype or operand_view(e, program.buffers, first, second, batch) is None:
            out += B if {a.name for a in batch} & _free(e) else 1
    if merged or direct_output(kernel, c, program.buffers) is None:
        out += B
    return out


def shift_trace(program: Program, kernel: Kernel, plan: ShiftPlan, lay: Layout, *, cores: int, vec: int,
                data: Mapping[str, np.ndarray] | None = None) -> KernelTrace:
    """The cpu backend's shifted-GEMM convolution (`ShiftPlan`): the weights repacked per tap, then per batch
    point the zeroed padded buffer, the input planes copied into it, one GEMM per tap reading the padded buffer
    at the tap's offset (leading dimension `plan.row`) and accumulating into `_C`, and the epilogue."""
    c, batch, m, n = contract_roles(kernel)
    dt = c.dtype
    it = itemsize(dt)
    M, C = _extent(m), plan.chan.extent
    (r_ax, s_ax), S = plan.taps, plan.taps[1].extent
    (hp, wp), (hin, win), (oy, ox) = plan.padded, plan.size, plan.off
    L, taps = plan.out[0] * wp, r_ax.extent * S
    names = {x: f"{kernel.name}_{x}" for x in "WXC"}
    for x, shape in (("W", (taps, M, C)), ("X", (C, plan.row)), ("C", (M, L))):
        lay.add(names[x], shape, it)
    progs = dict(program.buffers)
    for x in names.values():
        progs.setdefault(x, Buffer(x, lay.shapes[x], dt, "temp"))
    prog2 = Program(program.name, progs, program.inputs, program.outputs, program.kernels, program.aliases)
    mflat = E.linear(tuple(a.var for a in m), tuple(a.extent for a in m))
    tap = E.add(E.mul(r_ax.var, E.const(S)), s_ax.var)
    repack = Kernel(kernel.name + ".weights", "row", tuple(m),
                    [Store(names["W"], (plan.chan, r_ax, s_ax), (tap, mflat, plan.chan.var), c.lhs)])
    ch = Axis("_c", C)
    zero = Kernel(kernel.name + ".zero", "row", (ch,),
                  [Store(names["X"], (Axis("_i", plan.row),), (ch.var, Idx("_i")), Const(0.0, dt))])
    y0, x0 = max(0, -oy), max(0, -ox)
    ya, xa = Axis("_y", min(hp, hin - oy) - y0), Axis("_x", min(wp, win - ox) - x0)
    y, x = E.add(ya.var, E.const(y0)), E.add(xa.var, E.const(x0))
    lead = (batch[0].var,) if batch else ()
    copy = Kernel(kernel.name + ".pad", "row", (*batch, ch),
                  [Store(names["X"], (ya, xa), (ch.var, E.add(E.mul(y, E.const(wp)), x)),
                         Load(plan.buf, (*lead, ch.var, E.add(y, E.const(oy)), E.add(x, E.const(ox))), dt))])
    epi = _epilogue_kernel(kernel, c, batch, m, n, names["C"], E.add(E.mul(n[0].var, E.const(wp)), n[1].var))

    def point(k: Kernel, bi: int | None) -> KernelTrace:
        kk = _fix_batch(k, batch, bi) if bi is not None and batch else k
        return CpuPointTrace(prog2, kk, lay, cores=cores, parallel=True, data=data)

    wb, xb_, cb = lay.bases[names["W"]], lay.bases[names["X"]], lay.bases[names["C"]]
    phases: list[KernelTrace] = [point(repack, None)]
    for bi in range(_extent(batch)):
        phases += [point(zero, None), point(copy, bi)]
        for t in range(taps):
            off = plan.offset(t // S, t % S)
            phases.append(BlasGemmTrace(f"{kernel.name}.gemm", _Matrix(wb + t * M * C * it, M, C, C * it, it, it),
                                        _Matrix(xb_ + off * it, C, L, plan.row * it, it, it),
                                        _Matrix(cb, M, L, L * it, it, it), lay, cores=cores, vec=vec))
        phases.append(point(epi, bi))
    seq = SequenceTrace(kernel.name, phases, "vector")
    seq.notes.append(f"convolution as {taps} shifted GEMMs per batch point over a zero-padded copy; BLAS GEMM "
                     "modelled with BLIS Haswell blocking; accesses are vector-sized")
    return seq


def _pack_kernel(name: str, e: Expr, first, second, batch, buf: str, dt: str) -> Kernel:
    """`buf[flat(first), flat(second)] = e` over first (outer) x second (inner loop), per batch point."""
    fl = E.linear(tuple(a.var for a in first), tuple(a.extent for a in first))
    sl = E.linear(tuple(a.var for a in second), tuple(a.extent for a in second))
    value = e if e.dtype == dt else Cast(e, dt)
    outer = tuple(batch) + tuple(first)
    return Kernel(name, "row", outer, [Store(buf, tuple(second), (fl, sl), value)])


def _fix_batch(k: Kernel, batch, bi: int) -> Kernel:
    """The kernel restricted to one batch point (batch axes replaced by their values)."""
    vals = _unravel(np.array(bi), [a.extent for a in batch])
    mapping = {a.name: const(int(v)) for a, v in zip(batch, vals)}
    names = {a.name for a in batch}
    stages = [s.replace(lambda x: substitute(x, mapping)) for s in k.stages]
    return Kernel(k.name, k.kind, tuple(a for a in k.outer if a.name not in names), stages, dict(k.row_buffers),
                  dict(k.locals))


def _epilogue_kernel(kernel: Kernel, c: Contract, batch, m, n, cbuf: str, cols: Expr | None = None) -> Kernel:
    """The epilogue stages per output point, reading the accumulator at `cbuf[m, cols]` (default: N flattened)."""
    mflat = E.linear(tuple(a.var for a in m), tuple(a.extent for a in m))
    nflat = cols if cols is not None else E.linear(tuple(a.var for a in n), tuple(a.extent for a in n))
    acc = Load(cbuf, (mflat, nflat), c.dtype)
    stages = [s.replace(lambda e: e.map(lambda x: acc if isinstance(x, Local) and x.name == c.local else None))
              for s in kernel.stages[1:]]
    return Kernel(kernel.name + ".epilogue", "elementwise", tuple(batch) + tuple(m) + tuple(n), stages)

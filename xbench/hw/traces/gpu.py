"""The cuda backend's kernels: blocks on SMs, warps coalesced into 32-byte sectors (point, row and tiled
templates)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...dtypes import itemsize
from ...ir.contraction import roles as contract_roles
from ...ir.expr import Expr, Load
from ...ir.kernel import Assign, Kernel, Program, Sort
from ..cachesim import Trace
from .points import (
    _CHUNK,
    KernelTrace,
    Layout,
    TraceError,
    _Block,
    _Column,
    _concat,
    _empty_trace,
    _extent,
    _free,
    _Grid,
    _PointAccesses,
    _stage_axes,
    _unravel,
)

SECTOR = 32


# ---- gpu (cuda backend) --------------------------------------------------------------------------------------

def _sectors(addr: np.ndarray, mask: np.ndarray | None, write: np.ndarray) -> Trace:
    """Rows of 32 lanes (one warp access each) -> the distinct 32-byte sectors of each row, in order."""
    sec = addr >> 5
    if mask is not None:
        sec = np.where(mask, sec, -1)
    srt = np.sort(sec, axis=-1)
    keep = np.ones(srt.shape, bool)
    keep[..., 1:] = srt[..., 1:] != srt[..., :-1]
    keep &= srt >= 0
    w = np.broadcast_to(write[..., None], srt.shape)
    return Trace(srt[keep] << 5, w[keep], SECTOR)


def _next_pow2(n: int) -> int:
    return 1 << max(0, int(n - 1).bit_length())


def _contiguous_across_points(k: Kernel) -> bool:
    """Consecutive outer points read consecutive addresses (the innermost outer axis indexes the last dimension
    of every load and no stage axis does)."""
    if not k.outer:
        return False
    inner = k.outer[-1].name
    stage_names = {a.name for s in k.stages for a in _stage_axes(s)}
    loads = [n for s in k.stages for x in s.exprs() for n in x.walk()
             if isinstance(n, Load) and n.buf not in k.row_buffers and n.index]
    return bool(loads) and all(inner in _free(ld.index[-1]) and not (_free(ld.index[-1]) & stage_names)
                               for ld in loads)


def _pad_threads(addr: np.ndarray, mask: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pad axis 1 (threads) of (blocks, threads, A) arrays to n with inactive lanes."""
    nb, t, A = addr.shape
    if t == n:
        return addr, mask
    return (np.concatenate([addr, np.zeros((nb, n - t, A), np.int64)], axis=1),
            np.concatenate([mask, np.zeros((nb, n - t, A), bool)], axis=1))


def _warps(addr: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(accesses, elements) lane addresses and masks -> (warps, accesses, 32), the last warp padded with
    inactive lanes."""
    A, flat = addr.shape
    W = -(-flat // 32)
    pad = W * 32 - flat
    if pad:
        addr = np.concatenate([addr, np.zeros((A, pad), np.int64)], axis=1)
        mask = np.concatenate([mask, np.zeros((A, pad), bool)], axis=1)
    return addr.reshape(A, W, 32).transpose(1, 0, 2), mask.reshape(A, W, 32).transpose(1, 0, 2)


def _warp_rows(addr: np.ndarray, mask: np.ndarray, write: np.ndarray):
    """(blocks, rows, 32) lane addresses -> per row its distinct sectors (sorted), a keep mask and write flags."""
    sec = np.where(mask, addr >> 5, -1)
    srt = np.sort(sec, axis=-1)
    keep = np.ones(srt.shape, bool)
    keep[..., 1:] = srt[..., 1:] != srt[..., :-1]
    keep &= srt >= 0
    return srt, keep, np.broadcast_to(write[..., None], srt.shape)


def _join_rows(parts) -> Trace:
    """Concatenate `_warp_rows` results along the rows (per block), then flatten block by block."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return _empty_trace()
    srt = np.concatenate([p[0] for p in parts], axis=1)
    keep = np.concatenate([p[1] for p in parts], axis=1)
    write = np.concatenate([p[2] for p in parts], axis=1)
    return Trace(srt[keep] << 5, write[keep], SECTOR)


@dataclass
class GpuLaunch:
    """How the cuda backend launches a kernel (from the artifact's resources, or the documented default)."""
    template: str = "point"
    grid: tuple[int, int, int] = (1, 1, 1)
    block: int = 256
    threads_per_point: int = 1
    points_per_block: int = 1
    tile: dict = field(default_factory=dict)            # BM, BN, BK, lhs_k_contiguous, rhs_k_contiguous
    row_scratch: dict = field(default_factory=dict)     # row buffer -> shared | local | global
    source: str = "default"

    @staticmethod
    def from_resources(res: Mapping[str, Any]) -> GpuLaunch:
        t = res.get("template", "point")
        return GpuLaunch(template=t, grid=tuple(res.get("grid", (1, 1, 1))),
                         block=int(res.get("threads_per_block", 256)),
                         threads_per_point=int(res.get("threads_per_point", 1)),
                         points_per_block=int(res.get("points_per_block", 1)),
                         tile={k: res[k] for k in ("BM", "BN", "BK", "lhs_k_contiguous", "rhs_k_contiguous")
                               if k in res},
                         row_scratch=dict(res.get("row_scratch", {})), source="artifact")

    @staticmethod
    def default(kernel: Kernel, smem_limit: int = 48 * 1024) -> GpuLaunch:
        """The cuda backend's default schedule (knobs.default_schedule, codegen version 1), restated here:
        tiled GEMM for contractions with an epilogue (128 x 128 x 8 tiles when M, N >= 512, else 64 x 64 x 16);
        one thread per point for elementwise kernels, stages of at most 16 iterations, and loads contiguous
        across points; otherwise T threads per point (32..512, about 8 iterations each) and 256 / T points per
        block, row scratch in shared memory when it fits `smem_limit`."""
        P = max(kernel.points(), 1)
        roles = contract_roles(kernel)
        if roles is not None:
            c, batch, m, n = roles
            M, N, K, B = _extent(m), _extent(n), _extent(c.axes), _extent(batch)
            if M >= 512 and N >= 512:
                BM = BN = 128
                BK = 8
            else:
                BM = 64 if M >= 48 else max(16, _next_pow2(M))
                BN = 64 if N >= 48 else max(16, _next_pow2(N))
                BK = 16 if K >= 16 else max(4, _next_pow2(K))
            TM, TN = (8, 8) if BM == 128 else (4 if BM >= 64 else 2, 4 if BN >= 64 else 2)
            threads = (BM // TM) * (BN // TN)
            lk = bool(c.axes) and any(c.axes[-1].name in _free(ld.index[-1]) for ld in
                                      (x for x in c.lhs.walk() if isinstance(x, Load) and x.index))
            rk = bool(c.axes) and any(c.axes[-1].name in _free(ld.index[-1]) for ld in
                                      (x for x in c.rhs.walk() if isinstance(x, Load) and x.index))
            return GpuLaunch("tiled", (-(-N // BN), -(-M // BM), B), threads, 1, 1,
                             {"BM": BM, "BN": BN, "BK": BK, "lhs_k_contiguous": lk, "rhs_k_contiguous": rk})
        L = max([_extent(_stage_axes(s)) for s in kernel.stages] + [1])
        point = (kernel.kind == "elementwise" or L <= 16 or (_contiguous_across_points(kernel) and P >= 2048)
                 or (kernel.kind == "scan" and P >= 4096))
        if point:
            rows = {n: ("local" if int(np.prod(sh)) * itemsize(dt) <= 2048 else "global")
                    for n, (sh, dt) in kernel.row_buffers.items()}
            return GpuLaunch("point", (max(1, min(-(-P // 256), 1 << 20)), 1, 1), 256, row_scratch=rows)
        if any(isinstance(s, Sort) for s in kernel.stages):
            T = min(512, max(32, _next_pow2(L) // 2))
        else:
            T = min(512, max(32, _next_pow2(-(-L // 8))))
        R = max(1, min(256 // T, _next_pow2(P)))
        used = T * R * 8
        rows = {}
        for n, (sh, dt) in kernel.row_buffers.items():
            nbytes = R * int(np.prod(sh)) * itemsize(dt)
            rows[n] = "shared" if used + nbytes <= smem_limit else "global"
            used += nbytes if rows[n] == "shared" else 0
        return GpuLaunch("row", (max(1, min(-(-P // R), 1 << 20)), 1, 1), T * R, T, R, row_scratch=rows)


class GpuTrace(KernelTrace):
    """One stream per SM; block b runs on SM b mod SMs. A step is one stage segment of a block (one block of a
    tiled GEMM): step u of SM s is segment u mod U of block s + (u div U) * SMs."""

    granularity = "sector"

    def __init__(self, program: Program, kernel: Kernel, lay: Layout, launch: GpuLaunch, sms: int,
                 data: Mapping[str, np.ndarray] | None = None):
        self.kernel = kernel.name
        self.k = kernel
        self.launch = launch
        self.lay = lay
        self.streams = sms
        self.notes = []
        gx, gy, gz = launch.grid
        self.blocks = int(gx * gy * gz)
        self.program = program
        place = {n: launch.row_scratch.get(n, "global") for n in kernel.row_buffers}
        self.acc = _PointAccesses(program, kernel, lay, data or {}, row_place=place, sort_scratch=False)
        if launch.template == "tiled":
            if contract_roles(kernel) is None:
                raise TraceError(f"kernel {kernel.name} is launched tiled but is not a contraction with an "
                                 f"epilogue")
            self.units = 1
        else:
            self.units = max(1, self.acc.units)
        self.period = self.units
        self.steps = -(-self.blocks // sms) * self.units
        self.global_end = lay.end
        if launch.source != "artifact":
            self.notes.append("launch configuration: the cuda backend's default (no artifact)")

    def generate(self, lo: int, hi: int) -> list[Trace]:
        return self.generate_streams(lo, hi, range(self.streams))

    def estimate_accesses(self, probes: int = 3) -> float:
        """From a few blocks: the first, middle and last SM over a few steps at three places."""
        if self.steps == 0:
            return 0.0
        width = max(1, min(self.steps, self.period))
        sms = sorted({0, self.streams // 2, self.streams - 1})
        seen = blocks = 0.0
        for s0 in sorted({int(x) for x in np.linspace(0, self.steps - width, probes)}):
            ts = self.generate_streams(s0, s0 + width, sms)
            seen += sum(len(t) for t in ts)
            blocks += sum(1 for sm in sms for u in range(s0 // self.units, -(-(s0 + width) // self.units))
                          if sm + u * self.streams < self.blocks)
        return seen / max(blocks, 1.0) * self.blocks

    def generate_streams(self, lo: int, hi: int, streams: Sequence[int]) -> list[Trace]:
        out = []
        U = self.units
        for s in streams:
            runs: list[tuple[list[int], int, int]] = []    # (blocks, first segment, end segment)
            u = lo
            while u < hi:
                rnd, seg = divmod(u, U)
                b = s + rnd * self.streams
                if b >= self.blocks:
                    break
                end = min(hi - rnd * U, U)
                if runs and runs[-1][1] == seg == 0 and runs[-1][2] == end == U:
                    runs[-1][0].append(b)
                else:
                    runs.append(([b], seg, end))
                u = (rnd + 1) * U
            out.append(_concat([self._blocks(bs, a, e) for bs, a, e in runs]))
        return out

    def _blocks(self, blocks: list[int], seg_lo: int, seg_hi: int) -> Trace:
        t = self.launch.template
        if t == "tiled":
            return _concat([self._tiled(b) for b in blocks])
        parts = []
        step = max(1, _CHUNK // max(1, self.launch.block * self._per_thread()))
        for i in range(0, len(blocks), step):
            bs = np.array(blocks[i:i + step], np.int64)
            parts.append(self._row(bs, seg_lo, seg_hi) if t == "row" else self._point(bs, seg_lo, seg_hi))
        return _concat(parts)

    def _per_thread(self) -> int:
        if not hasattr(self, "_ppt"):
            P = self.acc.points
            self._ppt = max(1, self.acc.block(np.array([0]), 0, self.units).addr.shape[1]) if P else 1
            if self.launch.template == "row":
                self._ppt = max(1, -(-self._ppt // self.launch.threads_per_point) * self.launch.points_per_block)
        return self._ppt

    # point: thread g handles points g, g + G, ...
    def _point(self, bs: np.ndarray, seg_lo: int, seg_hi: int) -> Trace:
        B = self.launch.block
        G = self.blocks * B
        P = self.acc.points
        self.acc.set_scratch(self.lay.scratch(0))
        parts = []
        nb = len(bs)
        it = 0
        while True:
            pts = (bs[:, None] * B + np.arange(B, dtype=np.int64)[None, :] + it * G).reshape(-1)
            valid = pts < P
            if not valid.any():
                break
            blk = self.acc.block(np.minimum(pts, P - 1), seg_lo, seg_hi)
            if self.acc.rows:           # global scratch: one slot per thread of the grid
                blk = self._slots(blk, pts - it * G)
            A = blk.addr.shape[1]
            if A:
                m = self._valid_mask(blk, valid)
                W = -(-B // 32)
                addr, m = _pad_threads(blk.addr.reshape(nb, B, A), m.reshape(nb, B, A), W * 32)
                addr = addr.reshape(nb, W, 32, A).transpose(0, 3, 1, 2).reshape(nb, A * W, 32)
                m = m.reshape(nb, W, 32, A).transpose(0, 3, 1, 2).reshape(nb, A * W, 32)
                w = np.broadcast_to(np.repeat(blk.write, W)[None, :], (nb, A * W))
                parts.append(_warp_rows(addr, m, w))
            it += 1
        return _join_rows(parts)

    def _slots(self, blk: _Block, slots: np.ndarray) -> _Block:
        lo = self.lay.scratch(0)
        hi = lo + self.acc.row_bytes
        inside = (blk.addr >= lo) & (blk.addr < hi)
        addr = np.where(inside, blk.addr + slots[:, None] * self.acc.row_bytes, blk.addr)
        return _Block(addr, blk.mask, blk.write, blk.size)

    @staticmethod
    def _valid_mask(blk: _Block, valid: np.ndarray) -> np.ndarray:
        P, A = blk.addr.shape
        return np.broadcast_to(valid[:, None], (P, A)) if blk.mask is None else blk.mask & valid[:, None]

    # row: R points per block, T threads per point striding over each stage's iterations
    def _row(self, bs: np.ndarray, seg_lo: int, seg_hi: int) -> Trace:
        T, R = self.launch.threads_per_point, self.launch.points_per_block
        P = self.acc.points
        groups = -(-P // R)
        G = self.launch.grid[0]
        nb = len(bs)
        out = []
        it = 0
        while True:
            g = bs + it * G
            if not (g < groups).any():
                break
            pts = (g[:, None] * R + np.arange(R, dtype=np.int64)[None, :]).reshape(-1)
            valid = (pts < P) & np.repeat(g < groups, R)
            pts = np.minimum(pts, P - 1)
            env = self.acc._env(pts)
            parts = []
            self.acc.set_scratch(self.lay.scratch(0))
            for si, j0, j1 in self.acc.segments[seg_lo:seg_hi]:
                if si < 0:
                    continue
                hoisted, loop = self.acc.stage_parts(si, env, nb * R, j0, j1)
                if self.acc.rows:       # global row scratch: slot = block * R + r
                    slots = (np.repeat(bs, R) * R + np.tile(np.arange(R), nb)).astype(np.int64)
                    hoisted, loop = self._slots(hoisted, slots), self._slots(loop, slots)
                s = self.k.stages[si]
                if hoisted.addr.shape[1]:      # every thread of a point reads it once
                    parts.append(self._spread(hoisted, valid, nb, R, T, every=True))
                if not _stage_axes(s) or isinstance(s, Sort):
                    parts.append(self._spread(loop, valid, nb, R, T, every=False))
                else:
                    parts.append(self._strided(loop, valid, nb, R, T, j1 - j0))
            out.append(_join_rows(parts))
            it += 1
        return _concat(out) if len(out) > 1 else (out[0] if out else _empty_trace())

    def _spread(self, blk: _Block, valid: np.ndarray, nb: int, R: int, T: int, *, every: bool):
        """Per-point accesses issued by each of the T threads of a point (`every`), or by its first thread."""
        P, A = blk.addr.shape
        if A == 0:
            return None
        m = self._valid_mask(blk, valid)
        addr = np.repeat(blk.addr.reshape(nb, R, 1, A), T, axis=2)
        mm = np.repeat(m.reshape(nb, R, 1, A), T, axis=2)
        if not every:
            mm = mm.copy()
            mm[:, :, 1:, :] = False
        W = -(-(R * T) // 32)
        addr, mm = _pad_threads(addr.reshape(nb, R * T, A), mm.reshape(nb, R * T, A), W * 32)
        addr = addr.reshape(nb, W, 32, A).transpose(0, 3, 1, 2).reshape(nb, A * W, 32)
        mm = mm.reshape(nb, W, 32, A).transpose(0, 3, 1, 2).reshape(nb, A * W, 32)
        return _warp_rows(addr, mm, np.broadcast_to(np.repeat(blk.write, W)[None, :], (nb, A * W)))

    def _strided(self, blk: _Block, valid: np.ndarray, nb: int, R: int, T: int, n: int):
        """Loop accesses (P, n * per): thread t of a point runs iterations t, t + T, ...; warps are 32
        consecutive threads (thread r * T + t) of a block."""
        P, A = blk.addr.shape
        if A == 0:
            return None
        per = A // n
        addr = blk.addr.reshape(P, n, per)
        mask = self._valid_mask(blk, valid).reshape(P, n, per)
        steps = -(-n // T)
        padn = steps * T - n
        if padn:
            addr = np.concatenate([addr, np.zeros((P, padn, per), np.int64)], axis=1)
            mask = np.concatenate([mask, np.zeros((P, padn, per), bool)], axis=1)
        # (nb, R, steps, T, per) -> (nb, steps, per, R * T)
        addr = addr.reshape(nb, R, steps, T, per).transpose(0, 2, 4, 1, 3).reshape(nb, steps * per, R * T)
        mask = mask.reshape(nb, R, steps, T, per).transpose(0, 2, 4, 1, 3).reshape(nb, steps * per, R * T)
        W = -(-(R * T) // 32)
        if W * 32 != R * T:
            z = W * 32 - R * T
            addr = np.concatenate([addr, np.zeros((nb, steps * per, z), np.int64)], axis=2)
            mask = np.concatenate([mask, np.zeros((nb, steps * per, z), bool)], axis=2)
        addr = addr.reshape(nb, steps * per * W, 32)
        mask = mask.reshape(nb, steps * per * W, 32)
        write = np.broadcast_to(np.repeat(np.tile(blk.write.reshape(n, per)[0], steps), W)[None, :],
                                (nb, steps * per * W))
        return _warp_rows(addr, mask, write)

    # tiled GEMM: per block a BM x BN tile; A and B tiles per BK step; the epilogue stores the tile
    def _tiled(self, b: int) -> Trace:
        c, batch, m, n = contract_roles(self.k)
        tile = self.launch.tile
        BM, BN, BK = int(tile.get("BM", 64)), int(tile.get("BN", 64)), int(tile.get("BK", 16))
        gx, gy, _ = self.launch.grid
        bx, rest = b % gx, b // gx
        by, bz = rest % gy, rest // gy
        M, N, K = _extent(m), _extent(n), _extent(c.axes)
        m0, n0 = by * BM, bx * BN
        rows = np.arange(m0, m0 + BM, dtype=np.int64)
        cols = np.arange(n0, n0 + BN, dtype=np.int64)
        benv = {}
        for a, v in zip(batch, _unravel(np.array(bz), [a.extent for a in batch])):
            benv[a.name] = np.asarray(v)
        parts = []
        lk = bool(tile.get("lhs_k_contiguous", True))
        rk = bool(tile.get("rhs_k_contiguous", False))
        for k0 in range(0, K, BK):
            ks = np.arange(k0, k0 + BK, dtype=np.int64)
            parts.append(self._operand(c.lhs, benv, m, rows, M, c.axes, ks, K, k_fast=lk))
            parts.append(self._operand(c.rhs, benv, n, cols, N, c.axes, ks, K, k_fast=rk))
        parts.append(self._epilogue(benv, m, n, rows, cols, M, N))
        return _concat(parts)

    def _operand(self, e: Expr, benv, free, idx, F, kaxes, ks, K, *, k_fast: bool) -> Trace:
        """Load an operand tile: (free x k) elements, lanes along k when k is contiguous, else along free."""
        if k_fast:
            fv, kv = idx[:, None], ks[None, :]
        else:
            kv, fv = ks[:, None], idx[None, :]
        valid = (fv < F) & (kv < K)
        env = dict(benv)
        for a, v in zip(free, _unravel(np.minimum(fv, F - 1), [a.extent for a in free])):
            env[a.name] = v
        for a, v in zip(kaxes, _unravel(np.minimum(kv, K - 1), [a.extent for a in kaxes])):
            env[a.name] = v
        g = _Grid(env, self.acc.data, self.lay, self.acc.rows, self.acc.on_chip)
        cols = g.loads([e])
        if not cols:
            return _empty_trace()
        shape = np.broadcast_shapes(valid.shape, *(c.addr.shape for c in cols))
        addr, mask = _warps(np.stack([np.broadcast_to(c.addr, shape).reshape(-1) for c in cols]),
                            np.stack([(np.broadcast_to(valid, shape) if c.mask is None
                                       else np.broadcast_to(c.mask & valid, shape)).reshape(-1) for c in cols]))
        return _sectors(addr, mask, np.zeros(addr.shape[:2], bool))

    def _epilogue(self, benv, m, n, rows, cols, M, N) -> Trace:
        valid = (rows[:, None] < M) & (cols[None, :] < N)
        env = dict(benv)
        for a, v in zip(m, _unravel(np.minimum(rows, M - 1)[:, None], [a.extent for a in m])):
            env[a.name] = v
        for a, v in zip(n, _unravel(np.minimum(cols, N - 1)[None, :], [a.extent for a in n])):
            env[a.name] = v
        g = _Grid(env, self.acc.data, self.lay, {})
        colsx: list[_Column] = []
        for s in self.k.stages[1:]:
            if isinstance(s, Assign):
                colsx += g.loads([s.value])
            else:
                colsx += g.loads([*s.index, s.value])
                colsx.append(g.store(s.buf, s.index))
        if not colsx:
            return _empty_trace()
        shape = valid.shape
        addr, mask = _warps(np.stack([np.broadcast_to(c.addr, shape).reshape(-1) for c in colsx]),
                            np.stack([(valid if c.mask is None else np.broadcast_to(c.mask, shape) & valid).reshape(-1)
                                      for c in colsx]))
        write = np.broadcast_to(np.array([c.write for c in colsx])[None, :], addr.shape[:2])
        return _sectors(addr, mask, write)

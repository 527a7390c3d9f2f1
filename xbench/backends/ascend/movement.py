"""Data movement of a compute block: the contiguous loads and shifted windows (stencil taps, `windows.py`)
copied GM -> UB once per tile, through VECIN queues or (beyond the hardware's queue events) straight into scratch
tiles with explicit pipe syncs."""
from __future__ import annotations

from dataclasses import dataclass

from ...ir import expr as E
from ...ir.expr import Call, Const, Expr, Idx, Load
from .affine import clamped_loads
from .cpp import ScalarScope, ScalarWriter, Source, ctype, vec_scalar
from .vecexpr import Pool, Tile
from .windows import Window, rows_in_range

# C++ for the window copies (emitted once per program that has one).
WINDOW_HELPER = """\
// The positions [lo, hi) of a tile whose column (first + position) lies in [colLo, colHi).
struct XbSpan {
    uint32_t lo;
    uint32_t hi;
};
__aicore__ inline XbSpan XbWindowSpan(int64_t first, int64_t colLo, int64_t colHi, uint32_t count) {
    int64_t lo = colLo - first, hi = colHi - first;
    lo = lo < 0 ? 0 : (lo > count ? count : lo);
    hi = hi < lo ? lo : (hi > count ? count : hi);
    return {static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)};
}

// GM -> UB of a shifted window: positions [span.lo, span.hi) of dst get src[offset + span.lo ...], and with
// `fill` every other position of [0, count) gets `value`. dst starts on a 32-byte boundary: a run that starts
// inside a 32-byte block lands there through DataCopyPad's left padding, one that ends inside a block is
// completed by its right padding (both `value` with `fill`), and whole blocks outside it are Duplicated.
template <typename T>
__aicore__ inline void CopyGmToUbWindow(const LocalTensor<T>& dst, const GlobalTensor<T>& src, int64_t offset,
                                        uint32_t count, XbSpan span, bool fill, T value) {
    constexpr uint32_t B = 32 / sizeof(T);
    const uint32_t n = span.hi - span.lo;
    if (n == 0) {
        if (fill) Duplicate(dst, value, count);
        return;
    }
    const uint32_t a0 = span.lo / B * B, b1 = (span.hi + B - 1) / B * B;
    if (fill && a0 > 0) Duplicate(dst, value, a0);
    if (fill && b1 < count) Duplicate(dst[b1], value, count - b1);
    const GlobalTensor<T> from = src[static_cast<uint64_t>(offset + span.lo)];
    if (span.lo == a0 && span.hi == b1) {
        DataCopy(dst[a0], from, n);
    } else {
        DataCopyExtParams params(1, static_cast<uint32_t>(n * sizeof(T)), 0, 0, 0);
        DataCopyPadExtParams<T> pad(fill, static_cast<uint8_t>(span.lo - a0), static_cast<uint8_t>(b1 - span.hi),
                                    value);
        DataCopyPad(dst[a0], from, params, pad);
    }
}"""


@dataclass
class Entry:
    """A contiguous load copied into the UB once per tile: through its own VECIN queue, or -- beyond the
    queues the hardware has events for -- straight into a scratch tile with explicit pipe syncs."""
    key: tuple
    buf: str
    base: Expr
    dtype: str
    tile: str
    queue: str | None
    window: Window | None = None

    def copy_in(self, src: Source, gm: str, count: str, name: str | None = None) -> None:
        c, t = ctype(self.dtype), name or self.tile
        if self.queue:
            src(f"LocalTensor<{c}> {t} = {self.queue}.AllocTensor<{c}>();")
            src(f"CopyGmToUb({t}, {gm}, {count});")
            src(f"{self.queue}.EnQue({t});")
        else:
            src("XbSync<HardEvent::V_MTE2>();  // the vector unit is done with the tile")
            src(f"CopyGmToUb({self.tile}, {gm}, {count});")

    def copy_window(self, src: Source, sw: ScalarWriter, scope: ScalarScope, gm: str, v0: str, count: str,
                    name: str | None = None) -> None:
        """CopyIn of a shifted window: the run of columns inside the buffer (and inside the pad's condition) in
        one copy, the pad value around it, and for clamped / mirrored / wrapped columns the few positions outside
        the run read on the scalar unit."""
        w = self.window
        assert w is not None
        c, t = ctype(self.dtype), name or self.tile
        sw.helpers.add("window")
        if self.queue:
            src(f"LocalTensor<{c}> {t} = {self.queue}.AllocTensor<{c}>();")
        else:
            t = self.tile
            src("XbSync<HardEvent::V_MTE2>();  // the vector unit is done with the tile")
        src(f"{{  // {w.describe()}")
        src.depth += 1
        sc = scope.child()
        sc.idx[w.axis] = f"int64_t({v0})"
        src(f"const int64_t first = {sw.expr(E.add(Idx(w.axis), w.shift), sc, src)};  // column of position 0")
        col_lo = _fold("maximum", [E.const(w.lo)] + [E.add(b, w.shift) for b in w.t_lo])
        col_hi = _fold("minimum", [E.const(w.hi + 1)] + [E.add(b, E.add(w.shift, E.const(1))) for b in w.t_hi])
        rows = {}
        for j, r in enumerate(w.rows):      # each row component once, as a named constant
            if not isinstance(r, (Const, Idx)):
                # a row read from GM (a gathered index) is read at a clamped position: where the consumer pads
                # around the window (and drops what it copies) the index need not exist
                src(f"const int64_t row{j} = {sw.expr(clamped_loads(r, sw.shapes), sc, src)};")
                rows[r] = sc.memo[r] = f"row{j}"
        checks = [f"({sw.expr(p, sc, src)})" for p in w.cond]
        for r, n in zip(w.rows, sw.shapes[w.buf]):
            if r in rows_in_range(w, sw.shapes[w.buf], sc.ranges):
                code = sw.expr(r, sc, src)
                checks.append(f"({code} >= 0 && {code} < {n})")
        row = sw.expr(E.linear(tuple(w.rows) + (E.ZERO,), sw.shapes[w.buf]), sc, src)
        span = f"XbWindowSpan(first, {sw.expr(col_lo, sc, src)}, {sw.expr(col_hi, sc, src)}, {count})"
        if checks:
            src(f"const bool ok = {' && '.join(checks)};")
            src(f"const XbSpan span = ok ? {span} : XbSpan{{0, 0}};")
        else:
            src(f"const XbSpan span = {span};")
        if w.fill is not None:
            fill, value = "true", vec_scalar(sw.expr(w.fill, sc, src), self.dtype)
        else:
            fill = ("!ok" if checks else "false") if w.exact else "true"
            value = f"static_cast<{c}>(0)"
        offset = "first" if row == "0" else f"{row} + first"
        src(f"CopyGmToUbWindow({t}, {gm}, {offset}, {count}, span, {fill}, {value});")
        if w.exact:
            edges = f"span.lo > 0 || span.hi < {count}"
            with src.block(f"if (ok && ({edges}))" if checks else f"if ({edges})"):
                src("XbSync<HardEvent::MTE2_S>();  // the run has landed: complete the edges on the scalar unit")
                for a, b in (("0", "span.lo"), ("span.hi", count)):
                    with src.block(f"for (uint32_t k = {a}; k < {b}; ++k)"):
                        ks = scope.child()
                        ks.memo.update(rows)
                        ks.idx[w.axis] = f"(int64_t({v0}) + k)"
                        off = sw.offset((w.buf, w.index), ks, src)
                        src(f"{t}.SetValue(k, {gm}.GetValue({off}));")
                src("XbSync<HardEvent::S_V>();")
        src.depth -= 1
        src("}")
        if self.queue:
            src(f"{self.queue}.EnQue({t});")

    def take(self, src: Source) -> None:
        if self.queue:
            c = ctype(self.dtype)
            src(f"LocalTensor<{c}> {self.tile} = {self.queue}.DeQue<{c}>();")

    def free(self, src: Source) -> None:
        if self.queue:
            src(f"{self.queue}.FreeTensor({self.tile});")


def _fold(fn: str, xs: list[Expr]) -> Expr:
    """maximum / minimum of index expressions, constants folded."""
    pick = max if fn == "maximum" else min
    consts = [int(x.value) for x in xs if isinstance(x, Const)]
    out: Expr | None = E.const(pick(consts)) if consts else None
    for x in xs:
        if not isinstance(x, Const):
            out = x if out is None else Call(fn, (out, x), E.INDEX)
    assert out is not None
    return out


def take_all(src: Source, entries) -> None:
    entries = list(entries)
    for e in entries:
        e.take(src)
    if any(e.queue is None for e in entries):
        src("XbSync<HardEvent::MTE2_V>();  // direct copies have landed")


class Inputs:
    """The contiguous loads of a compute block, each mapped to a UB tile. Registries of one kernel share a
    budget of queues (the hardware has 8 VECIN buffer events); beyond it loads go to scratch tiles."""

    def __init__(self, prefix: str, budget: list[int], tile_prefix: str, row_tiles: dict[str, Tile] | None = None,
                 pool: Pool | None = None, windows: bool = False):
        self.windows = windows          # shifted windows (stencil taps) get tiles too
        self.prefix = prefix
        self.tile_prefix = tile_prefix
        self.budget = budget
        self.entries: dict[tuple, Entry] = {}
        self.row_tiles = row_tiles or {}
        self.pool = pool

    def __call__(self, load: Load, extra: tuple, register: bool = True) -> Tile | None:
        """The tile holding `load` along the domain (None: it cannot have one). With `register` False only
        says whether it could, without claiming a queue (the emitter asks before it decides to gather)."""
        base = extra[0]
        if load.buf in self.row_tiles:
            return self.row_tiles[load.buf] if isinstance(base, Const) and base.value == 0 else None
        if load.dtype not in ("float32", "float16", "int32", "bfloat16"):
            return None
        return self._tile((load.buf, base, load.dtype), load.buf, base, load.dtype, None, register)

    def window(self, w: Window, register: bool = True) -> Tile | None:
        """The tile holding shifted window `w` (as `__call__`)."""
        return self._tile(("window", w), w.buf, None, w.dtype, w, register) if self.windows else None

    def _tile(self, key: tuple, buf: str, base: Expr | None, dtype: str, window: Window | None,
              register: bool) -> Tile | None:
        if key not in self.entries:
            if not register:
                return Tile("?", dtype) if self.budget[0] > 0 or self.pool is not None else None
            j = len(self.entries)
            if self.budget[0] > 0:
                self.budget[0] -= 1
                self.entries[key] = Entry(key, buf, base, dtype, f"{self.tile_prefix}{j}", f"{self.prefix}{j}",
                                          window)
            elif self.pool is not None:
                # a slot no instruction emitted so far has used: CopyIn fills it before Compute runs
                t = self.pool.alloc(dtype, pinned=True, fresh=True)
                self.entries[key] = Entry(key, buf, base, dtype, t.name, None, window)
            else:
                return None
        e = self.entries[key]
        return Tile(e.tile, e.dtype)

    def queued(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.queue]


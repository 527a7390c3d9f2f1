"""Data movement of a compute block: the contiguous loads copied GM -> UB once per tile, through VECIN
queues or (beyond the hardware's queue events) straight into scratch tiles with explicit pipe syncs."""
from __future__ import annotations

from dataclasses import dataclass

from ...ir.expr import Const, Expr, Load
from .cpp import Source, ctype
from .vecexpr import Pool, Tile


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

    def copy_in(self, src: Source, gm: str, count: str, name: str | None = None) -> None:
        c, t = ctype(self.dtype), name or self.tile
        if self.queue:
            src(f"LocalTensor<{c}> {t} = {self.queue}.AllocTensor<{c}>();")
            src(f"CopyGmToUb({t}, {gm}, {count});")
            src(f"{self.queue}.EnQue({t});")
        else:
            src("XbSync<HardEvent::V_MTE2>();  // the vector unit is done with the tile")
            src(f"CopyGmToUb({self.tile}, {gm}, {count});")

    def take(self, src: Source) -> None:
        if self.queue:
            c = ctype(self.dtype)
            src(f"LocalTensor<{c}> {self.tile} = {self.queue}.DeQue<{c}>();")

    def free(self, src: Source) -> None:
        if self.queue:
            src(f"{self.queue}.FreeTensor({self.tile});")


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
                 pool: Pool | None = None):
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
        key = (load.buf, base, load.dtype)
        if key not in self.entries:
            if load.dtype not in ("float32", "float16", "int32", "bfloat16"):
                return None
            if not register:
                return Tile("?", load.dtype) if self.budget[0] > 0 or self.pool is not None else None
            j = len(self.entries)
            if self.budget[0] > 0:
                self.budget[0] -= 1
                self.entries[key] = Entry(key, load.buf, base, load.dtype, f"{self.tile_prefix}{j}",
                                          f"{self.prefix}{j}")
            elif self.pool is not None:
                # a slot no instruction emitted so far has used: CopyIn fills it before Compute runs
                t = self.pool.alloc(load.dtype, pinned=True, fresh=True)
                self.entries[key] = Entry(key, load.buf, base, load.dtype, t.name, None)
            else:
                return None
        e = self.entries[key]
        return Tile(e.tile, e.dtype)

    def queued(self) -> list[Entry]:
        return [e for e in self.entries.values() if e.queue]

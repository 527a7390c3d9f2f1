"""A deterministic, resumable data loader: its position is part of every snapshot (`checkpoint.Snapshotter`)."""
from __future__ import annotations

import torch


class ShardedLoader:
    """A deterministic data loader over `n` samples: a fresh permutation per epoch from (seed, epoch), rank r
    taking every world-th index, `batch` per step. Its position is part of every snapshot."""

    def __init__(self, n: int, batch: int, rank: int = 0, world: int = 1, seed: int = 0):
        self.n, self.batch, self.rank, self.world, self.seed = n, batch, rank, world, seed
        self.epoch, self.position = 0, 0

    def _order(self) -> torch.Tensor:
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return torch.randperm(self.n, generator=g)[self.rank::self.world]

    def next(self) -> torch.Tensor:
        order = self._order()
        if self.position + self.batch > len(order):
            self.epoch, self.position = self.epoch + 1, 0
            order = self._order()
        idx = order[self.position:self.position + self.batch]
        self.position += self.batch
        return idx

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position, "seed": self.seed, "n": self.n,
                "batch": self.batch, "world": self.world}

    def load_state_dict(self, s: dict) -> None:
        if (s["n"], s["batch"], s["world"]) != (self.n, self.batch, self.world):
            raise ValueError(f"xbench: the snapshot's loader had n={s['n']}, batch={s['batch']}, "
                             f"world={s['world']}; this one has n={self.n}, batch={self.batch}, world={self.world}")
        self.epoch, self.position, self.seed = int(s["epoch"]), int(s["position"]), int(s["seed"])

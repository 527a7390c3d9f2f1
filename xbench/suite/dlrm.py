"""DLRM (Naumov et al., "Deep Learning Recommendation Model for Personalization and Recommendation Systems",
2019), in plain PyTorch: dense features through a bottom MLP; each sparse feature a bag of ids pooled by an
EmbeddingBag table; the pairwise dot products of the dense vector and the pooled embeddings (the strict upper
triangle), with the dense vector, through a top MLP to one logit per sample (click-through), trained with
binary cross-entropy."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class DLRMConfig:
    dense_features: int = 13                  # Criteo's 13 integer features
    table_sizes: tuple[int, ...] = (1000,) * 26   # Criteo's 26 categorical features (hashed down)
    embedding_dim: int = 16
    bottom: tuple[int, ...] = (64, 16)        # the last width is embedding_dim
    top: tuple[int, ...] = (64, 32, 1)
    bag_size: int = 3                         # ids per sparse feature per sample


def _mlp(widths, last_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2 or last_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, config: DLRMConfig = DLRMConfig()):
        super().__init__()
        c = self.config = config
        if c.bottom[-1] != c.embedding_dim:
            raise ValueError(f"the bottom MLP must end at embedding_dim={c.embedding_dim}, got {c.bottom}")
        self.bottom = _mlp((c.dense_features, *c.bottom), last_activation=True)
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, c.embedding_dim, mode="sum") for n in c.table_sizes)
        f = len(c.table_sizes) + 1
        self.pairs = f * (f - 1) // 2
        self.top = _mlp((c.embedding_dim + self.pairs, *c.top), last_activation=False)
        rows, cols = torch.triu_indices(f, f, offset=1)
        self.register_buffer("rows", rows, persistent=False)
        self.register_buffer("cols", cols, persistent=False)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, offsets: torch.Tensor,
                labels: torch.Tensor | None = None):
        """dense [B, 13] floats; sparse [T, B * bag] ids and offsets [T, B] bag starts, one row per table."""
        x = self.bottom(dense)
        pooled = [table(sparse[t], offsets[t]) for t, table in enumerate(self.tables)]
        z = torch.stack([x, *pooled], dim=1)                       # [B, F, D]
        dots = torch.bmm(z, z.transpose(1, 2))[:, self.rows, self.cols]
        logits = self.top(torch.cat([x, dots], dim=1)).squeeze(1)
        if labels is None:
            return logits
        return nn.functional.binary_cross_entropy_with_logits(logits, labels), logits


def criteo_batch(config: DLRMConfig, batch: int, generator: torch.Generator | None = None) -> dict:
    """A synthetic batch shaped like Criteo's: log-normal dense counts, Zipf-like ids, balanced-ish labels."""
    g = generator or torch.Generator().manual_seed(0)
    dense = torch.log1p(torch.exp(torch.randn(batch, config.dense_features, generator=g) * 1.5))
    ids = []
    for n in config.table_sizes:
        u = torch.rand(batch * config.bag_size, generator=g)
        ids.append(torch.clamp((n ** u - 1).long(), 0, n - 1))     # heavy head, long tail
    sparse = torch.stack(ids)
    offsets = (torch.arange(batch) * config.bag_size).expand(len(config.table_sizes), batch).contiguous()
    labels = (torch.rand(batch, generator=g) < 0.25).float()
    return {"dense": dense, "sparse": sparse, "offsets": offsets, "labels": labels}

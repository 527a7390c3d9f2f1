"""DeepFM (Guo et al., "DeepFM: A Factorization-Machine based Neural Network for CTR Prediction", 2017), in plain
PyTorch. Every field (13 dense, 26 categorical, Criteo's shape) has a k-dimensional embedding shared by the two
components: a categorical field's row is looked up by its id, a dense field's vector is scaled by its value. The
FM component sums a first-order weight per feature and the pairwise interactions <v_i, v_j> x_i x_j, computed
as 0.5 * ((sum_i v_i)^2 - sum_i v_i^2); the deep component is an MLP over the concatenated embeddings. The
click logit is their sum, trained with binary cross-entropy."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class DeepFMConfig:
    dense_features: int = 13
    table_sizes: tuple[int, ...] = (1000,) * 26
    embedding_dim: int = 10                      # k = 10 in the paper's Criteo runs
    hidden: tuple[int, ...] = (400, 400, 400)    # the paper's 400-400-400 ReLU tower


class DeepFM(nn.Module):
    def __init__(self, config: DeepFMConfig = DeepFMConfig()):
        super().__init__()
        c = self.config = config
        rows = sum(c.table_sizes)
        # one table for all categorical fields, each field's ids shifted by its offset (the usual layout)
        self.embedding = nn.Embedding(rows, c.embedding_dim)
        self.first_order = nn.Embedding(rows, 1)
        self.dense_embedding = nn.Parameter(torch.randn(c.dense_features, c.embedding_dim) * 0.01)
        self.dense_first_order = nn.Linear(c.dense_features, 1)
        nn.init.normal_(self.embedding.weight, std=0.01)
        nn.init.normal_(self.first_order.weight, std=0.01)
        offsets = torch.tensor([0, *c.table_sizes[:-1]]).cumsum(0)
        self.register_buffer("offsets", offsets, persistent=False)
        fields = c.dense_features + len(c.table_sizes)
        layers: list[nn.Module] = []
        width = fields * c.embedding_dim
        for h in c.hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.deep = nn.Sequential(*layers)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor, labels: torch.Tensor | None = None):
        """dense [B, 13] floats; sparse [B, 26] ids, one per categorical field."""
        ids = sparse + self.offsets                                          # [B, F_cat]
        v = torch.cat([dense.unsqueeze(2) * self.dense_embedding, self.embedding(ids)], dim=1)   # [B, F, k]
        first = self.dense_first_order(dense).squeeze(1) + self.first_order(ids).sum(dim=(1, 2))
        second = 0.5 * (v.sum(dim=1).pow(2) - v.pow(2).sum(dim=1)).sum(dim=1)
        deep = self.deep(v.flatten(1)).squeeze(1)
        logits = first + second + deep
        if labels is None:
            return logits
        return nn.functional.binary_cross_entropy_with_logits(logits, labels), logits


def criteo_fields(config: DeepFMConfig, batch: int, generator: torch.Generator | None = None) -> dict:
    """One id per categorical field (Zipf-like), log-normal dense counts scaled to about [0, 1], labels."""
    g = generator or torch.Generator().manual_seed(0)
    dense = torch.log1p(torch.exp(torch.randn(batch, config.dense_features, generator=g) * 1.5)) / 4
    ids = [torch.clamp((n ** torch.rand(batch, generator=g) - 1).long(), 0, n - 1) for n in config.table_sizes]
    labels = (torch.rand(batch, generator=g) < 0.25).float()
    return {"dense": dense, "sparse": torch.stack(ids, dim=1), "labels": labels}

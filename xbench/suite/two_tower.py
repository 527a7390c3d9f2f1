"""A two-tower retrieval model (Yi et al., "Sampling-Bias-Corrected Neural Modeling for Large Corpus Item
Recommendations", RecSys 2019), in plain PyTorch. The query tower embeds the user, mean-pools the embeddings of
the user's recent items (an EmbeddingBag) and adds dense context features; the item tower embeds the item id and
its category. Each tower is an MLP ending in an L2-normalised vector. Training uses in-batch negatives: the
[B, B] matrix of query-item dot products over a temperature is a softmax over the batch's items, with the
paper's logQ correction (each item's logit lowered by the log of its sampling probability, so popular items are
not over-penalised as negatives), and cross-entropy against the diagonal."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class TwoTowerConfig:
    users: int = 10_000
    items: int = 20_000
    categories: int = 100
    dense_features: int = 8
    embedding_dim: int = 32
    history: int = 10                         # recent items per query
    hidden: tuple[int, ...] = (128, 64)       # per tower; the last width is the retrieval dimension
    temperature: float = 0.05


def _tower(width: int, hidden: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, h in enumerate(hidden):
        layers.append(nn.Linear(width, h))
        if i < len(hidden) - 1:
            layers.append(nn.ReLU())
        width = h
    return nn.Sequential(*layers)


class TwoTower(nn.Module):
    def __init__(self, config: TwoTowerConfig = TwoTowerConfig()):
        super().__init__()
        c = self.config = config
        d = c.embedding_dim
        self.user = nn.Embedding(c.users, d)
        self.history = nn.EmbeddingBag(c.items, d, mode="mean")
        self.item = nn.Embedding(c.items, d)
        self.category = nn.Embedding(c.categories, d)
        self.query_tower = _tower(2 * d + c.dense_features, c.hidden)
        self.item_tower = _tower(2 * d, c.hidden)

    def queries(self, user, history, context) -> torch.Tensor:
        h = self.history(history)                                             # [B, d], mean over the bag
        q = self.query_tower(torch.cat([self.user(user), h, context], dim=1))
        return nn.functional.normalize(q, dim=1)

    def candidates(self, item, category) -> torch.Tensor:
        v = self.item_tower(torch.cat([self.item(item), self.category(category)], dim=1))
        return nn.functional.normalize(v, dim=1)

    def forward(self, user, history, context, item, category, log_q, labels=None):
        """user [B]; history [B, H] item ids; context [B, dense]; item, category [B] (the positives);
        log_q [B] the log sampling probability of each positive item (the logQ correction)."""
        q, v = self.queries(user, history, context), self.candidates(item, category)
        logits = q @ v.t() / self.config.temperature - log_q.unsqueeze(0)     # [B, B]: row b's positive at b
        if labels is None:
            return logits
        return nn.functional.cross_entropy(logits, labels), logits


def interactions(config: TwoTowerConfig, batch: int, generator: torch.Generator | None = None) -> dict:
    """A batch of (user, positive item) pairs with Zipf-like item popularity and the items' sampling
    probabilities under that popularity (for the logQ correction)."""
    g = generator or torch.Generator().manual_seed(0)
    c = config

    def zipf(n: int, shape) -> torch.Tensor:
        return torch.clamp((n ** torch.rand(shape, generator=g) - 1).long(), 0, n - 1)

    item = zipf(c.items, (batch,))
    # P(id = k) under ids = floor(n^u - 1): log((k + 2) / (k + 1)) / log(n)
    log_q = torch.log(torch.log((item + 2.0) / (item + 1.0)) / math.log(c.items))
    return {"user": torch.randint(0, c.users, (batch,), generator=g), "history": zipf(c.items, (batch, c.history)),
            "context": torch.randn(batch, c.dense_features, generator=g), "item": item,
            "category": item % c.categories, "log_q": log_q, "labels": torch.arange(batch)}

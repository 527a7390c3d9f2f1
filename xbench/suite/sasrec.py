"""SASRec (Kang and McAuley, "Self-Attentive Sequential Recommendation", ICDM 2018), in plain PyTorch. A user's
item history (left-padded with item 0) is embedded with learned positions, masked to its real items, and passed
through blocks of causal self-attention and a point-wise two-layer feed-forward network, each with layer
normalisation and a residual. At every position the hidden state scores the next item by a dot product with the
shared item embeddings; training is the paper's binary cross-entropy of the true next item against one sampled
negative per position, over the non-padding positions."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class SASRecConfig:
    items: int = 10_000             # ids 1..items; 0 is padding
    max_len: int = 50
    hidden: int = 50                # the paper's d = 50
    blocks: int = 2
    heads: int = 1


class CausalSelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = (nn.Linear(hidden, hidden) for _ in range(3))
        self.out = nn.Linear(hidden, hidden)

    def forward(self, query: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        h = self.heads

        def split(t):
            return t.view(b, n, h, d // h).transpose(1, 2)                  # [B, h, n, d/h]
        q, k, v = split(self.q(query)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // h)
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return self.out(y.transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.attn_norm = nn.LayerNorm(hidden, eps=1e-8)
        self.attn = CausalSelfAttention(hidden, heads)
        self.ffn_norm = nn.LayerNorm(hidden, eps=1e-8)
        self.ffn = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        q = self.attn_norm(x)
        x = q + self.attn(q, x)                   # the paper's block: the normalised query is the residual
        x = self.ffn_norm(x)
        return (x + self.ffn(x)) * keep


class SASRec(nn.Module):
    def __init__(self, config: SASRecConfig = SASRecConfig()):
        super().__init__()
        c = self.config = config
        self.items = nn.Embedding(c.items + 1, c.hidden, padding_idx=0)
        self.positions = nn.Embedding(c.max_len, c.hidden)
        self.blocks = nn.ModuleList(Block(c.hidden, c.heads) for _ in range(c.blocks))
        self.norm = nn.LayerNorm(c.hidden, eps=1e-8)

    def encode(self, history: torch.Tensor) -> torch.Tensor:
        keep = (history != 0).unsqueeze(-1).to(self.items.weight.dtype)     # the paper's timeline mask
        pos = torch.arange(history.shape[1], device=history.device)
        x = (self.items(history) * math.sqrt(self.config.hidden) + self.positions(pos)) * keep
        for block in self.blocks:
            x = block(x, keep)
        return self.norm(x)

    def forward(self, history, positives, negatives, labels=None):
        """history [B, L] item ids (0 = padding); positives, negatives [B, L]: the next item at each position
        and one sampled item the user did not pick. `labels` is unused (the targets are the positives)."""
        h = self.encode(history)
        pos = (h * self.items(positives)).sum(-1)
        neg = (h * self.items(negatives)).sum(-1)
        logits = torch.stack([pos, neg], dim=-1)                            # [B, L, 2]
        mask = (positives != 0).to(h.dtype)
        bce = nn.functional.binary_cross_entropy_with_logits
        loss = ((bce(pos, torch.ones_like(pos), reduction="none") + bce(neg, torch.zeros_like(neg), reduction="none"))
                * mask).sum() / mask.sum()
        return loss, logits


def histories(config: SASRecConfig, batch: int, generator: torch.Generator | None = None) -> dict:
    """Left-padded histories of varied length with Zipf-like item popularity, their next items, and one
    uniformly sampled negative per position."""
    g = generator or torch.Generator().manual_seed(0)
    c = config
    seq = 1 + torch.clamp((c.items ** torch.rand(batch, c.max_len + 1, generator=g) - 1).long(), 0, c.items - 1)
    lengths = torch.randint(c.max_len // 4, c.max_len + 1, (batch,), generator=g)
    real = torch.arange(c.max_len + 1).unsqueeze(0) >= (c.max_len + 1 - lengths - 1).unsqueeze(1)
    seq = seq * real
    history, positives = seq[:, :-1], seq[:, 1:]
    negatives = torch.randint(1, c.items + 1, positives.shape, generator=g) * (positives != 0)
    return {"history": history.contiguous(), "positives": positives.contiguous(), "negatives": negatives}

"""Two training workloads in plain PyTorch, after their papers' architectures, with data to learn from.

- `bert_like`: a BERT encoder (Devlin et al. 2019): token + position embeddings, post-LN transformer layers
  (`torch.nn.TransformerEncoderLayer`, GELU), a tanh pooler on the first token, a classifier. The task: a
  sequence is positive when tokens of the first half of the vocabulary outnumber those of the second half
  among its first 8 positions (a counting task the pooler must learn through attention).
- `dlrm_like`: DLRM (Naumov et al. 2019): a bottom MLP over 13 dense features, 26 embedding tables for the
  categorical features (Criteo's shape) with Zipf-distributed, hashed ids (frequent and rare rows
  interleaved in every table, as hashing leaves them), pairwise dot-product interactions, a top
  MLP to a click logit. Labels are drawn from a fixed logistic teacher (a score per table row plus a linear
  term in the dense features), so held-out accuracy has a ceiling the student can approach.

Sizes are small here (this machine trains them in seconds); `bert_like(hidden=768, layers=12)` and
`dlrm_like(rows=10**6, dim=128)` are the real ones.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


class BertLike(nn.Module):
    def __init__(self, vocab: int = 512, hidden: int = 64, layers: int = 2, heads: int = 4, ffn: int = 256,
                 seq: int = 32, classes: int = 2):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.norm = nn.LayerNorm(hidden)
        layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(hidden, hidden)
        self.classifier = nn.Linear(hidden, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.norm(self.tok(ids) + self.pos(pos)[None])
        h = self.encoder(h)
        return self.classifier(torch.tanh(self.pooler(h[:, 0])))


class DlrmLike(nn.Module):
    def __init__(self, dense: int = 13, tables: int = 26, rows: int = 1000, dim: int = 16,
                 bottom: tuple[int, ...] = (64, 32), top: tuple[int, ...] = (64, 32), init: str = "dlrm"):
        super().__init__()
        layers, d = [], dense
        for w in bottom + (dim,):
            layers += [nn.Linear(d, w), nn.ReLU()]
            d = w
        self.bottom = nn.Sequential(*layers)
        self.emb = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(tables))
        if init == "dlrm":              # the DLRM reference implementation's: U(-sqrt(1/rows), sqrt(1/rows))
            with torch.no_grad():
                for e in self.emb:
                    e.weight.uniform_(-rows ** -0.5, rows ** -0.5)
        elif init != "torch":           # torch's nn.Embedding default, N(0, 1)
            raise ValueError(f"xbench: init = {init!r}; write 'dlrm' or 'torch'")
        f = tables + 1
        layers, d = [], dim + f * (f - 1) // 2
        for w in top:
            layers += [nn.Linear(d, w), nn.ReLU()]
            d = w
        layers.append(nn.Linear(d, 1))
        self.top = nn.Sequential(*layers)
        self._iu = torch.triu_indices(f, f, offset=1)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        z = self.bottom(dense)
        feats = torch.stack([z] + [e(sparse[:, i]) for i, e in enumerate(self.emb)], dim=1)    # [B, F, D]
        inter = torch.bmm(feats, feats.transpose(1, 2))[:, self._iu[0], self._iu[1]]
        return self.top(torch.cat([z, inter], dim=1)).squeeze(1)


@dataclass
class Data:
    inputs: tuple[torch.Tensor, ...]
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.labels)

    def batch(self, idx: torch.Tensor) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        return tuple(t[idx] for t in self.inputs), self.labels[idx]


def bert_data(n: int, vocab: int = 512, seq: int = 32, seed: int = 0) -> Data:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, seq), generator=g)
    low = (ids[:, :8] < vocab // 2).sum(dim=1)
    return Data((ids,), (low > 4).long())


def dlrm_data(n: int, tables: int = 26, rows: int = 1000, dim: int = 16, seed: int = 0, zipf: float = 1.1) -> Data:
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(n, 13, generator=g)
    ranks = torch.arange(1, rows + 1, dtype=torch.float64)
    p = ranks ** -zipf
    ranked = torch.multinomial((p / p.sum()).float(), n * tables, replacement=True, generator=g).view(n, tables)
    # ids are hashed, as in production: frequent and rare rows sit side by side in every table
    hashed = torch.randperm(rows, generator=torch.Generator().manual_seed(20_000))
    sparse = hashed[ranked]
    # the teacher: a score per (table, id) and a linear term over the dense features (a logistic model
    # the student's embeddings and MLPs can represent), fixed across seeds
    t = torch.Generator().manual_seed(10_000)
    row_score = torch.randn(tables, rows, generator=t)
    w_dense = torch.randn(13, generator=t)
    logits = row_score.gather(1, sparse.T).sum(0) / tables ** 0.5 + dense @ w_dense / 13 ** 0.5
    logits = (logits - logits.mean()) / (logits.std() + 1e-6) * 2.5
    labels = torch.bernoulli(torch.sigmoid(logits), generator=g)
    return Data((dense, sparse), labels)


def bert_like(**kw) -> BertLike:
    return BertLike(**kw)


def dlrm_like(**kw) -> DlrmLike:
    return DlrmLike(**kw)


def loss_fn(name: str):
    if name == "bert":
        return nn.functional.cross_entropy
    return nn.functional.binary_cross_entropy_with_logits


def evaluate(model: nn.Module, data: Data, name: str) -> dict:
    """Held-out loss and accuracy."""
    with torch.no_grad():
        out = model(*data.inputs)
        loss = float(loss_fn(name)(out, data.labels))
        pred = out.argmax(dim=1) if name == "bert" else (out > 0).float()
        acc = float((pred == data.labels).float().mean())
    return {"loss": loss, "accuracy": acc}

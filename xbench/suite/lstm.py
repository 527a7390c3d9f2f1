"""An LSTM language model (in the manner of Zaremba et al., "Recurrent Neural Network Regularization", 2014):
token embeddings, a stacked `torch.nn.LSTM`, and a linear decoder to the vocabulary, trained on next-token
cross-entropy."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class LSTMConfig:
    vocab: int = 10_000
    embedding: int = 200
    hidden: int = 200
    layers: int = 2


class LSTMLanguageModel(nn.Module):
    def __init__(self, config: LSTMConfig = LSTMConfig()):
        super().__init__()
        c = self.config = config
        self.embed = nn.Embedding(c.vocab, c.embedding)
        self.lstm = nn.LSTM(c.embedding, c.hidden, num_layers=c.layers, batch_first=True)
        self.decoder = nn.Linear(c.hidden, c.vocab)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None):
        """input_ids [B, T]; labels [B, T] (the next token at each position; the loss is their mean)."""
        h, _ = self.lstm(self.embed(input_ids))
        logits = self.decoder(h)
        if labels is None:
            return logits
        return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()), logits

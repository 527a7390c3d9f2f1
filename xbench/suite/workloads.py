"""Workloads: real architectures at sizes from `tiny` (tests, the simulators) to `bench` (benchmarks/), random
init from configs (nothing downloaded). Each builds `(model, batch)`: `model(**batch)` returns an object with
`.loss` and `.logits`, as transformers' models do."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

SIZES = ("tiny", "small", "bench")


@dataclass(frozen=True)
class Workload:
    name: str
    domain: str                      # "cv", "nlp" or "recsys"
    build: Callable[[str, int], tuple[torch.nn.Module, dict]]
    description: str


WORKLOADS: dict[str, Workload] = {}


def workload(name: str, domain: str, description: str):
    def deco(fn):
        WORKLOADS[name] = Workload(name, domain, fn, description)
        return fn
    return deco


def build(name: str, size: str = "tiny", seed: int = 0) -> tuple[torch.nn.Module, dict]:
    """The workload's model (random weights from `seed`) and one batch of inputs at `size`."""
    if name not in WORKLOADS:
        raise KeyError(f"no workload {name!r}; there are {', '.join(WORKLOADS)}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    torch.manual_seed(seed)
    return WORKLOADS[name].build(size, seed)


def _pick(size: str, tiny, small, bench):
    return {"tiny": tiny, "small": small, "bench": bench}[size]


def _ids(vocab: int, batch: int, seq: int, seed: int) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed + 1))


def _images(batch: int, side: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(seed + 1))


def _labels(n: int, classes: int, seed: int) -> torch.Tensor:
    return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed + 2))


@workload("bert", "nlp", "BERT sequence classification (transformers BertForSequenceClassification)")
def _bert(size: str, seed: int):
    import transformers
    h, layers, heads, batch, seq = _pick(size, (16, 1, 2, 2, 8), (64, 2, 4, 4, 32), (256, 4, 4, 8, 128))
    cfg = transformers.BertConfig(vocab_size=128, hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                                  intermediate_size=4 * h, max_position_embeddings=max(seq, 64), num_labels=3,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.BertForSequenceClassification(cfg)
    return model, {"input_ids": _ids(128, batch, seq, seed), "attention_mask": torch.ones(batch, seq, dtype=torch.long),
                   "labels": _labels(batch, 3, seed)}


@workload("gpt2", "nlp", "GPT-2 language model (transformers GPT2LMHeadModel)")
def _gpt2(size: str, seed: int):
    import transformers
    h, layers, heads, batch, seq = _pick(size, (16, 1, 2, 2, 8), (64, 2, 4, 4, 32), (256, 4, 4, 8, 128))
    cfg = transformers.GPT2Config(vocab_size=128, n_positions=max(seq, 64), n_embd=h, n_layer=layers, n_head=heads,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                                  loss_type="ForCausalLM")
    model = transformers.GPT2LMHeadModel(cfg)
    ids = _ids(128, batch, seq, seed)
    return model, {"input_ids": ids, "labels": ids}


@workload("vit", "cv", "Vision Transformer classification (transformers ViTForImageClassification)")
def _vit(size: str, seed: int):
    import transformers
    h, layers, side, patch, batch = _pick(size, (16, 1, 16, 8, 2), (64, 2, 32, 8, 4), (192, 4, 64, 8, 8))
    cfg = transformers.ViTConfig(image_size=side, patch_size=patch, num_channels=3, hidden_size=h,
                                 num_hidden_layers=layers, num_attention_heads=2, intermediate_size=4 * h, num_labels=5,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.ViTForImageClassification(cfg)
    return model, {"pixel_values": _images(batch, side, seed), "labels": _labels(batch, 5, seed)}


@workload("resnet", "cv", "ResNet classification (transformers ResNetForImageClassification)")
def _resnet(size: str, seed: int):
    import transformers
    widths, depths, layer, side, batch = _pick(size, ((8, 16), (1, 1), "basic", 16, 2),
                                               ((16, 32, 64), (1, 1, 1), "basic", 32, 4),
                                               ((64, 128, 256, 512), (3, 4, 6, 3), "bottleneck", 64, 8))
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=widths[0], hidden_sizes=list(widths),
                                    depths=list(depths), layer_type=layer, num_labels=5)
    model = transformers.ResNetForImageClassification(cfg)
    return model, {"pixel_values": _images(batch, side, seed), "labels": _labels(batch, 5, seed)}


@workload("mobilenet_v2", "cv", "MobileNetV2 classification (transformers MobileNetV2ForImageClassification)")
def _mobilenet(size: str, seed: int):
    import transformers
    mult, side, batch = _pick(size, (0.25, 16, 2), (0.35, 32, 4), (1.0, 96, 8))
    cfg = transformers.MobileNetV2Config(num_channels=3, image_size=side, depth_multiplier=mult, num_labels=5,
                                         classifier_dropout_prob=0.0)
    model = transformers.MobileNetV2ForImageClassification(cfg)
    return model, {"pixel_values": _images(batch, side, seed), "labels": _labels(batch, 5, seed)}


class _Output:
    """`.loss` and `.logits`, as transformers' model outputs have them."""

    def __init__(self, loss, logits):
        self.loss, self.logits = loss, logits


class DLRMTask(torch.nn.Module):
    """The DLRM with the batch as keyword arguments and a transformers-like output."""

    def __init__(self, config):
        super().__init__()
        from .dlrm import DLRM
        self.dlrm = DLRM(config)

    def forward(self, dense, sparse, offsets, labels):
        loss, logits = self.dlrm(dense, sparse, offsets, labels)
        return _Output(loss, logits)


@workload("dlrm", "recsys", "DLRM click-through model: EmbeddingBag tables, bottom and top MLPs, dot interaction")
def _dlrm(size: str, seed: int):
    from .dlrm import DLRMConfig, criteo_batch
    tables, dim, bottom, top, batch = _pick(size, ((50, 40, 30), 8, (16, 8), (16, 1), 8),
                                            ((1000,) * 8, 16, (64, 16), (64, 32, 1), 64),
                                            ((100_000,) * 26, 64, (512, 256, 64), (512, 256, 1), 512))
    cfg = DLRMConfig(table_sizes=tables, embedding_dim=dim, bottom=bottom, top=top)
    return DLRMTask(cfg), criteo_batch(cfg, batch, torch.Generator().manual_seed(seed + 1))

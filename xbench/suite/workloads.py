"""Workloads: real architectures at sizes from `tiny` (tests, the simulators) to `bench` (benchmarks/, the full
suite), random init from configs (nothing downloaded). Each builds `(model, batch)`: `model(**batch)` returns an
object with `.loss` and `.logits`, as transformers' models do.

The suite's twelve: CV (ResNet-50, MobileNetV2, ViT, SegFormer), NLP (BERT, GPT-2, T5, an LSTM language model)
and recommendation (DLRM, DeepFM, a two-tower retrieval model, SASRec); the four recommenders and the LSTM LM are
written here after their papers, the others come from transformers. Each has the mode the suite measures it in:
`train` (samples/s of forward, backward and optimizer step), `infer` (latency of one batch) or `decode` (GPT-2:
a prefill of the prompt, then token-by-token decoding with a static KV cache, in tokens/s)."""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

SIZES = ("tiny", "small", "bench")


MODES = ("train", "infer", "decode")


@dataclass(frozen=True)
class Workload:
    name: str
    domain: str                      # "cv", "nlp" or "recsys"
    build: Callable[[str, int], tuple[torch.nn.Module, dict]]
    description: str
    mode: str = "train"              # what the suite measures (MODES)
    title: str = ""                  # the architecture's own name, for tables
    dynamo: tuple = ()               # torch._dynamo.config settings the model needs, as (name, value) pairs
    samples: str = ""                # the batch entry whose first dimension counts the samples ("" = the first)
    decode_tokens: tuple = (4, 8, 32)   # decode mode: tokens generated after the prompt, per size
    published: Callable | None = None   # (seed) -> (model, batch) at a published size, only lowered and predicted

    @property
    def label(self) -> str:
        return self.title or self.name

    def batch_size(self, batch: dict) -> int:
        key = self.samples or next(iter(batch))
        return int(batch[key].shape[0])


WORKLOADS: dict[str, Workload] = {}


def workload(name: str, domain: str, description: str, **meta):
    def deco(fn):
        WORKLOADS[name] = Workload(name, domain, fn, description, **meta)
        return fn
    return deco


def published(name: str):
    """Register the builder of a workload's published size (too large to run through xbench here: the suite
    lowers its graphs and predicts them)."""
    def deco(fn):
        import dataclasses
        WORKLOADS[name] = dataclasses.replace(WORKLOADS[name], published=fn)
        return fn
    return deco


@contextlib.contextmanager
def dynamo_settings(w: Workload):
    """The Dynamo settings `w` needs (the LSTM: `allow_rnn`, so Dynamo traces into `nn.LSTM`), for every engine
    alike: torch.compile's first call and any recompile must happen inside."""
    import torch._dynamo
    with torch._dynamo.config.patch(**dict(w.dynamo)):
        yield


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


# transformers' classifiers set `config.problem_type` from the labels in their first loss: a compiled model's guard
# on it then fails on the second call and the whole graph is compiled again. Training scripts know their problem.
SINGLE_LABEL = "single_label_classification"


def _labels(n: int, classes: int, seed: int) -> torch.Tensor:
    return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed + 2))


def bert_config(size: str, max_positions: int):
    """The BERT workload's configuration at `size` (the variable-length stream needs longer positions)."""
    import transformers
    h, layers, heads = _pick(size, (16, 1, 2), (64, 2, 4), (256, 4, 4))
    return transformers.BertConfig(vocab_size=128, hidden_size=h, num_hidden_layers=layers, num_attention_heads=heads,
                                   intermediate_size=4 * h, max_position_embeddings=max_positions, num_labels=3,
                                   problem_type=SINGLE_LABEL,
                                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


@workload("bert", "nlp", "BERT sequence classification (transformers BertForSequenceClassification)",
          title="BERT")
def _bert(size: str, seed: int):
    import transformers
    batch, seq = _pick(size, (2, 8), (4, 32), (8, 128))
    model = transformers.BertForSequenceClassification(bert_config(size, max(seq, 64)))
    return model, {"input_ids": _ids(128, batch, seq, seed), "attention_mask": torch.ones(batch, seq, dtype=torch.long),
                   "labels": _labels(batch, 3, seed)}


@workload("gpt2", "nlp", "GPT-2 language model (transformers GPT2LMHeadModel): prefill, then decoding with a "
          "static KV cache", title="GPT-2", mode="decode")
def _gpt2(size: str, seed: int):
    import transformers
    h, layers, heads, batch, seq = _pick(size, (16, 1, 2, 2, 8), (64, 2, 4, 4, 32), (256, 4, 4, 8, 128))
    positions = max(seq + WORKLOADS["gpt2"].decode_tokens[SIZES.index(size)], 64)     # the prompt and the decode
    cfg = transformers.GPT2Config(vocab_size=128, n_positions=positions, n_embd=h, n_layer=layers, n_head=heads,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                                  loss_type="ForCausalLM")
    model = transformers.GPT2LMHeadModel(cfg)
    ids = _ids(128, batch, seq, seed)
    return model, {"input_ids": ids, "labels": ids}


@workload("vit", "cv", "Vision Transformer classification (transformers ViTForImageClassification)",
          title="ViT")
def _vit(size: str, seed: int):
    import transformers
    h, layers, side, patch, batch = _pick(size, (16, 1, 16, 8, 2), (64, 2, 32, 8, 4), (192, 4, 64, 8, 8))
    cfg = transformers.ViTConfig(image_size=side, patch_size=patch, num_channels=3, hidden_size=h,
                                 num_hidden_layers=layers, num_attention_heads=2, intermediate_size=4 * h, num_labels=5,
                                 problem_type=SINGLE_LABEL, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.ViTForImageClassification(cfg)
    return model, {"pixel_values": _images(batch, side, seed), "labels": _labels(batch, 5, seed)}


@workload("resnet", "cv", "ResNet classification (transformers ResNetForImageClassification): ResNet-50's "
          "bottleneck layout (3, 4, 6, 3) at 64x64 pixels at the bench size, smaller basic-block ResNets below it",
          title="ResNet-50")
def _resnet(size: str, seed: int):
    import transformers
    widths, depths, layer, side, batch = _pick(size, ((8, 16), (1, 1), "basic", 16, 2),
                                               ((16, 32, 64), (1, 1, 1), "basic", 32, 4),
                                               ((64, 128, 256, 512), (3, 4, 6, 3), "bottleneck", 64, 8))
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=widths[0], hidden_sizes=list(widths),
                                    depths=list(depths), layer_type=layer, num_labels=5,
                                    problem_type=SINGLE_LABEL)
    model = transformers.ResNetForImageClassification(cfg)
    return model, {"pixel_values": _images(batch, side, seed), "labels": _labels(batch, 5, seed)}


@workload("mobilenet_v2", "cv", "MobileNetV2 classification (transformers MobileNetV2ForImageClassification)",
          title="MobileNetV2", mode="infer")
def _mobilenet(size: str, seed: int):
    import transformers
    mult, side, batch = _pick(size, (0.25, 16, 2), (0.35, 32, 4), (1.0, 96, 8))
    cfg = transformers.MobileNetV2Config(num_channels=3, image_size=side, depth_multiplier=mult, num_labels=5,
                                         problem_type=SINGLE_LABEL, classifier_dropout_prob=0.0)
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


@workload("dlrm", "recsys", "DLRM click-through model: EmbeddingBag tables, bottom and top MLPs, dot interaction",
          title="DLRM")
def _dlrm(size: str, seed: int):
    from .dlrm import DLRMConfig, criteo_batch
    tables, dim, bottom, top, batch = _pick(size, ((50, 40, 30), 8, (16, 8), (16, 1), 8),
                                            ((1000,) * 8, 16, (64, 16), (64, 32, 1), 64),
                                            ((100_000,) * 26, 64, (512, 256, 64), (512, 256, 1), 512))
    cfg = DLRMConfig(table_sizes=tables, embedding_dim=dim, bottom=bottom, top=top)
    return DLRMTask(cfg), criteo_batch(cfg, batch, torch.Generator().manual_seed(seed + 1))


class Task(torch.nn.Module):
    """A model returning `(loss, logits)` (or the logits alone without targets) as a transformers-like output."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, **batch):
        out = self.model(**batch)
        return _Output(*out) if isinstance(out, tuple) else _Output(None, out)


@workload("segformer", "cv", "SegFormer semantic segmentation (transformers SegformerForSemanticSegmentation): "
          "hierarchical transformer encoder, all-MLP decoder, per-pixel cross-entropy", title="SegFormer")
def _segformer(size: str, seed: int):
    import transformers
    hidden, depths, heads, sr, decoder, side, batch = _pick(
        size, ((8, 16), (1, 1), (1, 2), (2, 1), 16, 32, 2),
        ((16, 32, 64, 128), (1, 1, 1, 1), (1, 2, 4, 8), (8, 4, 2, 1), 64, 64, 2),
        ((32, 64, 160, 256), (2, 2, 2, 2), (1, 2, 5, 8), (8, 4, 2, 1), 256, 128, 4))    # B0 at 128x128
    n = len(hidden)
    cfg = transformers.SegformerConfig(num_channels=3, num_encoder_blocks=n, depths=list(depths), sr_ratios=list(sr),
                                       hidden_sizes=list(hidden), patch_sizes=[7, 3, 3, 3][:n], strides=[4, 2, 2, 2][:n],
                                       num_attention_heads=list(heads), mlp_ratios=[4] * n, decoder_hidden_size=decoder,
                                       num_labels=8, drop_path_rate=0.0, classifier_dropout_prob=0.0,
                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = transformers.SegformerForSemanticSegmentation(cfg)
    labels = torch.randint(0, 8, (batch, side, side), generator=torch.Generator().manual_seed(seed + 2))
    return model, {"pixel_values": _images(batch, side, seed), "labels": labels}


@workload("t5", "nlp", "T5 encoder-decoder trained on a sequence-to-sequence loss (transformers "
          "T5ForConditionalGeneration)", title="T5")
def _t5(size: str, seed: int):
    import transformers
    d, kv, ff, layers, heads, src, tgt, batch = _pick(size, (16, 8, 32, 1, 2, 8, 6, 2), (64, 16, 128, 2, 4, 32, 16, 4),
                                                      (256, 64, 1024, 4, 4, 64, 32, 8))
    cfg = transformers.T5Config(vocab_size=128, d_model=d, d_kv=kv, d_ff=ff, num_layers=layers,
                                num_decoder_layers=layers, num_heads=heads, relative_attention_num_buckets=8,
                                relative_attention_max_distance=max(src, 16), dropout_rate=0.0,
                                decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = transformers.T5ForConditionalGeneration(cfg)
    return model, {"input_ids": _ids(126, batch, src, seed) + 2, "attention_mask": torch.ones(batch, src, dtype=torch.long),
                   "labels": _ids(126, batch, tgt, seed + 7) + 2}


@workload("lstm_lm", "nlp", "LSTM language model: embeddings, a stacked torch.nn.LSTM (unrolled by Dynamo), a "
          "linear decoder, next-token cross-entropy", title="LSTM LM", dynamo=(("allow_rnn", True),))
def _lstm(size: str, seed: int):
    from .lstm import LSTMConfig, LSTMLanguageModel
    vocab, width, layers, steps, batch = _pick(size, (64, 8, 1, 8, 2), (1000, 64, 2, 16, 8), (10_000, 200, 2, 20, 20))
    ids = _ids(vocab, batch, steps + 1, seed)
    model = Task(LSTMLanguageModel(LSTMConfig(vocab=vocab, embedding=width, hidden=width, layers=layers)))
    return model, {"input_ids": ids[:, :-1].contiguous(), "labels": ids[:, 1:].contiguous()}


@workload("deepfm", "recsys", "DeepFM click-through model: shared field embeddings, a factorisation machine and an "
          "MLP tower", title="DeepFM")
def _deepfm(size: str, seed: int):
    from .deepfm import DeepFM, DeepFMConfig, criteo_fields
    tables, dense, dim, hidden, batch = _pick(size, ((50, 40, 30), 4, 4, (16, 8), 8),
                                              ((1000,) * 26, 13, 10, (64, 64), 64),
                                              ((100_000,) * 26, 13, 10, (400, 400, 400), 512))
    cfg = DeepFMConfig(dense_features=dense, table_sizes=tables, embedding_dim=dim, hidden=hidden)
    return Task(DeepFM(cfg)), criteo_fields(cfg, batch, torch.Generator().manual_seed(seed + 1))


@workload("two_tower", "recsys", "two-tower retrieval model trained with in-batch negatives and the logQ "
          "correction", title="Two-tower")
def _two_tower(size: str, seed: int):
    from .two_tower import TwoTower, TwoTowerConfig, interactions
    users, items, cats, dense, dim, hist, hidden, batch = _pick(
        size, (50, 80, 5, 3, 8, 4, (16, 8), 8), (1000, 2000, 20, 8, 16, 10, (64, 32), 64),
        (100_000, 200_000, 100, 8, 64, 20, (256, 128), 512))
    cfg = TwoTowerConfig(users=users, items=items, categories=cats, dense_features=dense, embedding_dim=dim,
                         history=hist, hidden=hidden)
    return Task(TwoTower(cfg)), interactions(cfg, batch, torch.Generator().manual_seed(seed + 1))


@workload("sasrec", "recsys", "SASRec sequential recommender: causal self-attention over item histories, "
          "binary cross-entropy against sampled negatives", title="SASRec")
def _sasrec(size: str, seed: int):
    from .sasrec import SASRec, SASRecConfig, histories
    items, length, hidden, blocks, batch = _pick(size, (60, 8, 8, 1, 4), (1000, 20, 32, 2, 16), (3416, 100, 50, 2, 64))
    cfg = SASRecConfig(items=items, max_len=length, hidden=hidden, blocks=blocks, heads=1)
    return Task(SASRec(cfg)), histories(cfg, batch, torch.Generator().manual_seed(seed + 1))


@published("resnet")
def _resnet50_imagenet(seed: int):
    """ResNet-50 as published (He et al. 2016): 224x224 ImageNet images, 1000 classes, a batch of 32."""
    import transformers
    cfg = transformers.ResNetConfig(num_channels=3, embedding_size=64, hidden_sizes=[256, 512, 1024, 2048],
                                    depths=[3, 4, 6, 3], layer_type="bottleneck", num_labels=1000,
                                    problem_type=SINGLE_LABEL)
    return transformers.ResNetForImageClassification(cfg), {"pixel_values": _images(32, 224, seed),
                                                            "labels": _labels(32, 1000, seed)}


@published("bert")
def _bert_base(seed: int):
    """BERT-base (Devlin et al. 2019): 12 layers of 768, sequences of 128 tokens, a batch of 32."""
    import transformers
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                  intermediate_size=3072, max_position_embeddings=512, num_labels=2,
                                  problem_type=SINGLE_LABEL,
                                  hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return transformers.BertForSequenceClassification(cfg), {
        "input_ids": _ids(30522, 32, 128, seed), "attention_mask": torch.ones(32, 128, dtype=torch.long),
        "labels": _labels(32, 2, seed)}

"""Variable-length BERT: the request lengths, the buckets, and a short stream on xbench (one compilation per
bucket used, logits equal to unpadded eager's within rounding)."""
from __future__ import annotations

import pytest
import torch

from xbench.suite import varlen


def test_lengths_and_buckets():
    lens = varlen.lengths(500, seed=3)
    assert min(lens) >= 8 and max(lens) <= 256
    assert sum(n <= 32 for n in lens) > sum(n > 128 for n in lens)     # log-uniform: many short, fewer long
    assert [varlen.bucket(n) for n in (8, 16, 17, 64, 65, 256)] == [16, 16, 32, 64, 128, 256]
    with pytest.raises(ValueError, match="longer than the largest bucket"):
        varlen.bucket(257)
    p = varlen.padded(torch.tensor([[5, 6, 7]]), 8)
    assert p["input_ids"].tolist() == [[5, 6, 7, 0, 0, 0, 0, 0]]
    assert p["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0, 0, 0]]


def test_a_short_stream_compiles_once_per_bucket():
    r = varlen.run("tiny", requests=12, seed=1)
    assert r.buckets == sorted({varlen.bucket(n) for n in r.lengths})
    assert r.compiles == len(r.buckets) and r.dynamo_graphs == len(r.buckets)
    assert set(r.p99_ms) == {"eager unpadded", "eager padded", "xbench bucketed"}
    for k in r.p50_ms:
        assert 0 < r.p50_ms[k] <= r.p99_ms[k]
    assert r.max_logit_diff["xbench bucketed"] < 1e-5 and r.max_logit_diff["eager padded"] < 1e-5


def test_a_second_stream_in_the_same_process_still_counts_its_compilations():
    first = varlen.run("tiny", requests=3, seed=2)
    again = varlen.run("tiny", requests=3, seed=2)     # Dynamo would reuse the first run's graphs unless reset
    assert again.compiles == first.compiles == len(first.buckets) > 0

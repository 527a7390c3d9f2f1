"""Variable-length inference: BERT over a stream of requests whose lengths spread from 8 to 256 tokens.

Three ways to serve it, each request run by all three in turn (alternating, as every measurement here):

- **eager, unpadded**: torch at each request's own length;
- **eager, padded**: torch with every request padded to the longest length (one shape, as a static server does);
- **xbench, bucketed**: each request padded to the next of a few bucket lengths, the padding masked out by the
  attention mask, so the bridge compiles one specialisation per bucket (`torch.compile(..., dynamic=False)`:
  one graph per shape) instead of one per length. Every bucket the stream uses is compiled before the stream
  starts, as a server warms up; the compilations are counted.

Padding under the mask leaves BERT's logits unchanged up to rounding: the largest difference from the unpadded
logits is reported with the latencies (p50 and p99 of each way) and the compile counts.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

import torch

from .timing import timing

BUCKETS = (16, 32, 64, 128, 256)
LONGEST = 256
SHORTEST = 8


def lengths(n: int, seed: int = 0) -> list[int]:
    """`n` request lengths, log-uniform between SHORTEST and LONGEST (many short requests, a tail of long)."""
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(n, generator=g, dtype=torch.float64)
    return [int(round(math.exp(math.log(SHORTEST) + float(x) * (math.log(LONGEST) - math.log(SHORTEST))))) for x in u]


def bucket(length: int, buckets=BUCKETS) -> int:
    for b in buckets:
        if length <= b:
            return b
    raise ValueError(f"a request of {length} tokens is longer than the largest bucket ({buckets[-1]})")


def padded(ids: torch.Tensor, to: int) -> dict:
    n = ids.shape[1]
    mask = torch.zeros(1, to, dtype=torch.long)
    mask[:, :n] = 1
    out = torch.zeros(1, to, dtype=ids.dtype)
    out[:, :n] = ids
    return {"input_ids": out, "attention_mask": mask}


@dataclass
class VarlenResult:
    size: str
    requests: int
    lengths: list[int]
    buckets: list[int]
    p50_ms: dict[str, float] = field(default_factory=dict)
    p99_ms: dict[str, float] = field(default_factory=dict)
    mean_ms: dict[str, float] = field(default_factory=dict)
    compiles: int = 0                     # xbench specialisations compiled (one per bucket used)
    dynamo_graphs: int = 0
    warmup_s: float = 0.0                 # compiling the buckets
    max_logit_diff: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dict(self.__dict__)

    def __str__(self) -> str:
        rows = [f"variable-length BERT ({self.size}): {self.requests} requests of {min(self.lengths)}-"
                f"{max(self.lengths)} tokens; xbench buckets {', '.join(map(str, self.buckets))} "
                f"({self.compiles} compilations, {self.warmup_s:.1f} s)"]
        for k in self.p50_ms:
            rows.append(f"  {k:18s} p50 {self.p50_ms[k]:8.2f} ms   p99 {self.p99_ms[k]:8.2f} ms"
                        + (f"   logits within {self.max_logit_diff[k]:.1e} of unpadded" if k in self.max_logit_diff
                           else ""))
        return "\n".join(rows)


def run(size: str = "tiny", requests: int = 40, seed: int = 0, buckets=BUCKETS, target: str = "cpu",
        progress=None) -> VarlenResult:
    import torch._dynamo
    import transformers

    from ..torch import recording
    from .workloads import bert_config
    torch._dynamo.reset()     # as in engines.runs: a graph cached for another BERT would leave the counts at zero
    torch.manual_seed(seed)
    model = transformers.BertForSequenceClassification(bert_config(size, LONGEST)).eval()
    lens = lengths(requests, seed)
    g = torch.Generator().manual_seed(seed + 1)
    stream = [torch.randint(1, 128, (1, n), generator=g) for n in lens]
    used = sorted({bucket(n, buckets) for n in lens})
    result = VarlenResult(size, requests, lens, used)
    xb_model = torch.compile(copy.deepcopy(model), backend="xbench", dynamic=False, options={"target": target})
    ways = {
        "eager unpadded": lambda ids: model(input_ids=ids, attention_mask=torch.ones_like(ids)),
        "eager padded": lambda ids: model(**padded(ids, LONGEST)),
        "xbench bucketed": lambda ids: xb_model(**padded(ids, bucket(ids.shape[1], buckets))),
    }
    rec = recording({"target": target})
    with torch.no_grad():
        t0 = time.perf_counter()
        with rec as session:
            for b in used:
                xb_model(**padded(torch.ones(1, min(b, max(lens)), dtype=torch.long), b))
        result.warmup_s = time.perf_counter() - t0
        samples: dict[str, list[float]] = {k: [] for k in ways}
        diffs: dict[str, float] = {k: 0.0 for k in ways if k != "eager unpadded"}
        with rec:
            for i, ids in enumerate(stream):
                logits = {}
                for k, fn in ways.items():
                    t = time.perf_counter()
                    logits[k] = fn(ids).logits
                    samples[k].append(time.perf_counter() - t)
                for k in diffs:
                    diffs[k] = max(diffs[k], float((logits[k] - logits["eager unpadded"]).abs().max()))
                if progress and (i + 1) % 10 == 0:
                    progress(f"request {i + 1}/{requests}")
    for k, v in samples.items():
        ms = sorted(x * 1e3 for x in v)
        result.p50_ms[k] = timing(v).median_ms
        result.p99_ms[k] = _quantile(ms, 0.99)
        result.mean_ms[k] = sum(ms) / len(ms)
    result.max_logit_diff = diffs
    result.compiles = sum(p.specializations for gr in session.graphs for p in gr.partitions)
    result.dynamo_graphs = session.dynamo_graphs
    return result


def _quantile(sorted_ms: list[float], q: float) -> float:
    """The q-quantile by linear interpolation between order statistics (numpy's default)."""
    pos = q * (len(sorted_ms) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_ms) - 1)
    return sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (pos - lo)

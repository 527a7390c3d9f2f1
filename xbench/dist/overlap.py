"""Computation-communication overlap: measured on gloo processes, and predicted for clusters.

Measured, per workload (`workloads.bert_like`, `workloads.dlrm_like`), as medians over steps run alternately:

- compute: a training step whose DDP hook hands each bucket back at once (no communication);
- communication: the same buckets' AllReduces issued back to back with nothing else running;
- overlapped: a step whose hook starts an asynchronous AllReduce per bucket and returns its future;
- blocking: a step whose hook waits for each AllReduce (nothing can hide: the control).

hidden fraction = (compute + communication - overlapped) / communication, clipped to [0, 1]; and from the
overlapped step's own timeline, 1 - (communication still running after the last bucket was produced) /
communication -- which does not charge the slower compute of a shared machine to the overlap.

Predicted: `simulate()` replays a step as a timeline -- bucket i is ready when the backward pass has
produced it, buckets go on the wire one after another, each for its cost-model time -- and reports how
much communication ends after the backward pass. Fed with the measured bucket-ready times and the
measured per-bucket communication, it predicts the local fraction; fed with a model's FLOPs, an
accelerator's peak and a cluster's links, it predicts the fraction there.
"""
# no `from __future__ import annotations`: DDP checks the hook's annotations are the real classes

import statistics
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Timeline:
    comm_s: float           # total communication time
    backward_s: float
    end_s: float            # when the last bucket's communication ends (backward starts at 0)
    exposed_s: float        # communication after the backward pass
    starts: tuple[float, ...]
    ends: tuple[float, ...]

    @property
    def hidden_fraction(self) -> float:
        return 0.0 if self.comm_s <= 0 else max(0.0, min(1.0, 1.0 - self.exposed_s / self.comm_s))


def simulate(ready_s: list[float], comm_s: list[float], backward_s: float) -> Timeline:
    """Bucket i is ready at ready_s[i] (seconds after the backward pass starts) and needs comm_s[i] on the
    wire; buckets are sent in order, one at a time. The backward pass ends at backward_s."""
    end, starts, ends = 0.0, [], []
    for r, c in zip(ready_s, comm_s):
        s = max(r, end)
        end = s + c
        starts.append(s)
        ends.append(end)
    total = sum(comm_s)
    exposed = max(0.0, end - backward_s)
    return Timeline(total, backward_s, end, min(exposed, total), tuple(starts), tuple(ends))


def hidden_fraction(compute_s: float, comm_s: float, overlapped_s: float) -> float:
    """The share of communication hidden behind computation, from three measured step times."""
    if comm_s <= 0:
        return 0.0
    return max(0.0, min(1.0, (compute_s + comm_s - overlapped_s) / comm_s))


def buckets_of(param_bytes: list[int], cap_bytes: int, first_cap_bytes: int | None = None) -> list[int]:
    """DDP's bucketing, by size only: parameters in reverse order, a bucket closed when it reaches its cap
    (the first one at `first_cap_bytes`, as DDP's smaller first bucket)."""
    out, cur = [], 0
    cap = first_cap_bytes or cap_bytes
    for b in reversed(param_bytes):
        cur += b
        if cur >= cap:
            out.append(cur)
            cur, cap = 0, cap_bytes
    if cur:
        out.append(cur)
    return out


def predict(param_bytes: list[int], backward_s: float, comm_time, cap_bytes: int = 25 << 20,
            first_cap_bytes: int | None = 1 << 20) -> Timeline:
    """The overlap timeline of one step: backward compute spread over the parameters in proportion to their
    bytes, `comm_time(nbytes) -> s` per bucket (e.g. a cost-model AllReduce)."""
    buckets = buckets_of(param_bytes, cap_bytes, first_cap_bytes)
    total = sum(buckets)
    ready, acc = [], 0
    for b in buckets:
        acc += b
        ready.append(backward_s * acc / total)
    return simulate(ready, [comm_time(b) for b in buckets], backward_s)


# --- measured -------------------------------------------------------------------------------------------

def _make(workload: str):
    import torch

    from . import workloads as W

    torch.manual_seed(0)
    if workload == "bert":
        model, data = W.bert_like(), W.bert_data(512)
        batch = 16
    elif workload == "dlrm":
        model, data = W.dlrm_like(rows=2000, dim=32), W.dlrm_data(4096, rows=2000, dim=32)
        batch = 256
    else:
        raise ValueError(f"xbench: unknown workload {workload!r}; write 'bert' or 'dlrm'")
    return model, data, batch, W.loss_fn(workload)


class _Recorder:
    def __init__(self):
        self.t0 = 0.0
        self.ready: list[float] = []
        self.sizes: list[int] = []
        self.done: list[float] = []


def measure_job(rank: int, world: int, workload: str = "bert", steps: int = 6, bucket_mb: float = 0.25) -> dict:
    """Measure compute, communication, overlapped and blocking step times for `workload` (run it through
    `xbench.dist.run`); every configuration runs once per round, rounds alternate."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .futures import completed, then, work_future

    model, data, batch, loss_fn = _make(workload)
    ddp = DDP(model, bucket_cap_mb=bucket_mb)
    group = dist.new_group(list(range(world)))
    rec = _Recorder()
    mode = {"name": "compute"}

    def hook(state, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
        buf = bucket.buffer()
        if mode["name"] in ("record", "overlapped"):
            rec.ready.append(time.perf_counter() - rec.t0)
            rec.sizes.append(buf.numel() * buf.element_size())
        if mode["name"] in ("compute", "record"):
            return completed(buf)
        w = dist.all_reduce(buf, group=group, async_op=True)
        if mode["name"] == "blocking":
            w.wait()
            return completed(buf.div_(world))
        def finish(_):
            rec.done.append(time.perf_counter() - rec.t0)
            return buf.div_(world)
        return then(work_future(w), finish)

    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)

    def step(name: str) -> float:
        mode["name"] = name
        x, y = data.batch(torch.randint(0, len(data), (batch,), generator=g))
        dist.barrier(group)
        t0 = time.perf_counter()
        opt.zero_grad()
        out = ddp(*x)
        loss = loss_fn(out, y)
        rec.t0 = time.perf_counter()
        loss.backward()
        t_back = time.perf_counter() - rec.t0
        opt.step()
        return time.perf_counter() - t0, t_back

    for _ in range(2):                          # warm-up, and DDP's bucket rebuild after the first step
        step("overlapped")
    rec.ready, rec.sizes, rec.done = [], [], []
    step("record")
    sizes = list(rec.sizes)

    def comm_only() -> tuple[float, list[float]]:
        bufs = [torch.zeros(n // 4) for n in sizes]
        dist.barrier(group)
        t0 = time.perf_counter()
        per = []
        for b in bufs:
            t = time.perf_counter()
            dist.all_reduce(b, group=group)
            per.append(time.perf_counter() - t)
        return time.perf_counter() - t0, per

    times: dict[str, list[float]] = {"compute": [], "communication": [], "overlapped": [], "blocking": []}
    backward, ready, per_bucket, exposed = [], [], [], []
    for _ in range(steps):
        t, tb = step("compute")
        times["compute"].append(t)
        backward.append(tb)
        rec.ready = []
        rec.sizes = []
        step("record")
        ready.append(list(rec.ready))
        c, per = comm_only()
        times["communication"].append(c)
        per_bucket.append(per)
        rec.ready, rec.sizes, rec.done = [], [], []
        times["overlapped"].append(step("overlapped")[0])
        exposed.append(max(0.0, max(rec.done) - max(rec.ready)))     # after the last bucket was produced
        times["blocking"].append(step("blocking")[0])
    med = {k: statistics.median(v) for k, v in times.items()}
    spread = {k: (max(v) - min(v)) / statistics.median(v) if statistics.median(v) > 0 else 0.0
              for k, v in times.items()}
    ready_med = [statistics.median(r[i] for r in ready) for i in range(len(sizes))]
    comm_med = [statistics.median(p[i] for p in per_bucket) for i in range(len(sizes))]
    pred = simulate(ready_med, comm_med, statistics.median(backward))
    return {"workload": workload, "world": world, "buckets": sizes, "median_s": med, "spread": spread,
            "hidden_measured": hidden_fraction(med["compute"], med["communication"], med["overlapped"]),
            "hidden_blocking": hidden_fraction(med["compute"], med["communication"], med["blocking"]),
            # timeline view of the overlapped step: communication still running once the last bucket is ready
            "hidden_timeline": max(0.0, min(1.0, 1 - statistics.median(exposed) / med["communication"])),
            "hidden_predicted": pred.hidden_fraction, "backward_s": statistics.median(backward),
            "ready_s": ready_med, "comm_per_bucket_s": comm_med, "steps": steps,
            "params": sum(p.numel() for p in model.parameters())}

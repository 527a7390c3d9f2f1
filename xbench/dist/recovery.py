"""Recovery under torchrun: a training job killed mid-run resumes from its last snapshot and ends with the
same parameters as a run that was never interrupted.

`python -m xbench.dist.recovery --dir D ...` is the training script torchrun starts on every rank: a small
MLP regression under DDP (gloo), a `ShardedLoader`, SGD with momentum, a snapshot every `--every` steps.
With `--kill-rank R --kill-at S`, rank R kills itself with SIGKILL after step S on the first attempt -- or after
the first later step by which the snapshot due before S is committed (rank 0 commits asynchronously). torchrun (`--max-restarts`)
notices the dead worker, stops the others (SIGTERM) and starts them all again; the script loads the newest
good snapshot and carries on.

Torch 2.13's elastic agent hands restarted workers the rendezvous store of the first attempt, whose records
name the dead ranks' old ports ("Gloo connectFullMesh failed ... Connection refused"). Both known
workarounds are applied: `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` in `run_job`, and in the script a
`PrefixStore` per attempt (TORCHELASTIC_RESTART_COUNT), which is enough on its own.

Recovery time is split into detection (SIGKILL -> the agent logs the dead worker), restart (-> the new workers
ready to train; of it, spawn: until the new processes exist, from /proc, and startup: imports, rendezvous,
process group, model), load (`dcp.load`) and the steps lost since the snapshot (their count x the median step
time of the first attempt).

    report = run_job(tmp_path, steps=12, every=4, kill_rank=1, kill_at=7)
    report.final_sha256, report.recovery
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

START = time.time()
_AGENT_FAILED = re.compile(r"^[EIW](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2}\.\d+) +\d+ .*failed \(exitcode: -9\)", re.M)


def _process_started() -> float:
    """When this process was created (epoch seconds): its start time in clock ticks since boot
    (/proc/self/stat) against the uptime read now (/proc/uptime, centiseconds)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")            # field 22: starttime
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - started)
    except (OSError, ValueError, IndexError):
        return START


def _agent_detected(text: str, near: float) -> float | None:
    """The time torchrun's agent logged the SIGKILLed worker ('failed (exitcode: -9)'), in epoch seconds."""
    m = _AGENT_FAILED.search(text)
    if not m:
        return None
    month, day, hh, mm, ss = int(m[1]), int(m[2]), int(m[3]), int(m[4]), float(m[5])
    year = time.localtime(near).tm_year
    whole = time.mktime((year, month, day, hh, mm, int(ss), 0, 0, -1))
    return whole + (ss - int(ss))


def _events(path: Path, **kw) -> None:
    with open(path, "a") as f:
        f.write(json.dumps({**kw, "t": time.time()}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _data(n: int, d: int, seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g)
    y = torch.tanh(x @ w) + 0.05 * torch.randn(n, 1, generator=g)
    return x, y


def _committed(root: Path, kill_at: int, every: int) -> bool:
    """Whether a snapshot at or after the last one due before `kill_at` is committed (rank 0 commits
    asynchronously: the victim keeps training in step until it is, then dies)."""
    from .checkpoint import MANIFEST, _snapshots

    due = (kill_at // every) * every
    return due == 0 or any(step >= due and (p / MANIFEST).is_file() for p, step in _snapshots(root / "snapshots"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the training script of xbench.dist.recovery (run it under torchrun)")
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--kill-rank", type=int, default=-1)
    p.add_argument("--kill-at", type=int, default=-1)
    p.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args(argv)

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from .checkpoint import ShardedLoader, Snapshotter

    root = Path(a.dir)
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    log = root / f"events-rank{rank}.jsonl"
    _events(log, event="start", attempt=attempt, created=_process_started(), imported=START)
    signal.signal(signal.SIGTERM, lambda *_: (_events(log, event="sigterm", attempt=attempt), os._exit(143)))
    torch.set_num_threads(1)
    # the agent hosts the store unless TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, in which case rank 0 does
    agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "False") == "True"
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          is_master=(not agent_store and rank == 0), timeout=timedelta(seconds=a.timeout))
    dist.init_process_group("gloo", store=dist.PrefixStore(f"xbench-attempt-{attempt}", store), rank=rank,
                            world_size=world, timeout=timedelta(seconds=a.timeout))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    x, y = _data(512, 16, seed=1)
    loader = ShardedLoader(len(x), batch=16, rank=rank, world=world, seed=7)
    snap = Snapshotter(root / "snapshots", every=a.every, keep=3)
    start = snap.load(ddp, opt, loader)
    _events(log, event="ready", attempt=attempt, resumed_from=start, load_s=snap.load_s, torn=snap.log)
    for step in range(start, a.steps):
        t0 = time.perf_counter()
        idx = loader.next()
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x[idx]), y[idx]).backward()
        opt.step()
        snap.step(step + 1, ddp, opt, loader)
        _events(log, event="step", attempt=attempt, step=step + 1, seconds=time.perf_counter() - t0)
        if attempt == 0 and rank == a.kill_rank and step + 1 >= a.kill_at and _committed(root, a.kill_at, a.every):
            _events(log, event="kill", attempt=attempt, step=step + 1)
            os.kill(os.getpid(), signal.SIGKILL)
    snap.close()
    if rank == 0:
        params = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        torch.save(params, root / "final.pt")
        (root / "final.json").write_text(json.dumps({
            "sha256": hashlib.sha256(params.numpy().tobytes()).hexdigest(), "attempt": attempt,
            "saves": [{"step": r.step, "blocking_s": r.blocking_s, "total_s": r.total_s} for r in snap.records]}))
    dist.destroy_process_group()
    return 0


@dataclass
class RecoveryReport:
    returncode: int
    final_sha256: str
    attempts: int
    resumed_from: int | None
    killed_at: int | None
    torn: list[str]
    recovery: dict              # detection_s, restart_s, load_s, lost_steps, lost_s, total_s
    saves: list[dict]
    output: str


def run_job(root: str | Path, steps: int = 12, every: int = 4, nproc: int = 2, kill_rank: int = -1,
            kill_at: int = -1, max_restarts: int = 1, timeout: float = 120.0) -> RecoveryReport:
    """Run the training script under torchrun (a free port for its rendezvous) and read back what happened."""
    import socket

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torchrun = [sys.executable, "-m", "torch.distributed.run"]
    cmd = torchrun + ["--nnodes=1", f"--nproc-per-node={nproc}", f"--max-restarts={max_restarts}",
                      "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--monitor-interval=0.1",
                      "-m", "xbench.dist.recovery", "--dir", str(root), "--steps", str(steps), "--every", str(every),
                      "--kill-rank", str(kill_rank), "--kill-at", str(kill_at), "--timeout", str(timeout / 2)]
    env = {**os.environ, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    events = {}
    for f in root.glob("events-rank*.jsonl"):
        events[int(f.stem.split("rank")[1])] = [json.loads(line) for line in f.read_text().splitlines() if line]
    final = json.loads((root / "final.json").read_text()) if (root / "final.json").is_file() else {}
    allev = [e for ev in events.values() for e in ev]
    attempts = 1 + max((e["attempt"] for e in allev), default=0)
    kill = next((e for e in allev if e["event"] == "kill"), None)
    rec: dict = {}
    resumed = None
    torn: list[str] = []
    readies = [e for e in allev if e["event"] == "ready" and e["attempt"] == attempts - 1]
    if readies:
        resumed = readies[0]["resumed_from"]
        torn = readies[0]["torn"]
    if kill is not None and attempts > 1:
        detected = _agent_detected(proc.stderr + proc.stdout, kill["t"])
        ready = max(e["t"] for e in readies)
        created = min(e["created"] for e in allev if e["event"] == "start" and e["attempt"] == attempts - 1)
        load_s = max(e["load_s"] for e in readies)
        steps0 = [e["seconds"] for e in allev if e["event"] == "step" and e["attempt"] == 0]
        step_s = statistics.median(steps0) if steps0 else 0.0
        lost = kill["step"] - (resumed or 0)
        base = detected if detected is not None else kill["t"]
        rec = {"detection_s": None if detected is None else detected - kill["t"],
               "restart_s": ready - base - load_s, "spawn_s": created - base, "startup_s": ready - created - load_s,
               "load_s": load_s, "lost_steps": lost, "lost_s": lost * step_s, "step_s": step_s}
        rec["total_s"] = (ready - kill["t"]) + rec["lost_s"]
    return RecoveryReport(proc.returncode, final.get("sha256", ""), attempts, resumed,
                          kill["step"] if kill else None, torn, rec, final.get("saves", []),
                          proc.stdout[-4000:] + proc.stderr[-4000:])


if __name__ == "__main__":
    sys.exit(main())

"""Snapshots with `torch.distributed.checkpoint`: asynchronous saves every K steps of model, optimizer,
data-loader position and RNG state, committed only when complete, and torn snapshots detected on load.

A snapshot is a folder `step-00000012/` written by `dcp.async_save` (one or more files per rank plus DCP's
`.metadata`) on a process group of its own, so its background collectives never interleave with training's.
When rank 0's save has finished -- DCP writes `.metadata` only after every rank's files are written -- it
writes `COMMITTED.json` (atomically: a temporary file renamed) listing every file with its size and SHA-256.
Loading takes the newest snapshot whose manifest exists and whose files all match it; a snapshot without a
manifest (a crash mid-save) or with a truncated, missing or altered file is reported and skipped, and the
one before it is used. Only committed snapshots older than the `keep` newest are ever deleted.

    snap = Snapshotter("ckpt/", every=4)
    start = snap.load(model, optimizer, loader)         # 0 when there is nothing to resume
    for step in range(start, steps):
        train_one(...)
        snap.step(step + 1, model, optimizer, loader)   # saves when (step + 1) % every == 0, never blocks
    snap.close()
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from .loader import ShardedLoader

MANIFEST = "COMMITTED.json"
PREFIX = "step-"
__all__ = ["MANIFEST", "ShardedLoader", "Snapshotter", "latest_snapshot", "verify", "write_manifest"]


@dataclass
class SaveRecord:
    step: int
    path: str
    started: float
    blocking_s: float            # time the training loop was held up by async_save (staging)
    total_s: float = 0.0         # until committed
    committed: bool = False


@dataclass
class Snapshotter:
    root: str | Path
    every: int = 10
    keep: int = 3
    group: Any = None
    log: list[str] = field(default_factory=list)
    records: list[SaveRecord] = field(default_factory=list)
    load_s: float = 0.0

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError(f"xbench: every = {self.every}; write a positive number of steps between snapshots")
        self.root = Path(self.root)
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        if self.group is None and dist.is_initialized():
            self.group = dist.new_group(backend="gloo")      # DCP's background collectives run here
        if self.rank == 0:
            self.root.mkdir(parents=True, exist_ok=True)
        self._pending: tuple[SaveRecord, Any] | None = None

    # --- saving ---------------------------------------------------------------------------------------------
    def _state(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, loader: Any,
               step: int) -> dict:
        msd, osd = get_state_dict(model, optimizer if optimizer is not None else [])
        state: dict[str, Any] = {"model": msd, "step": torch.tensor(step)}
        if optimizer is not None:
            state["optim"] = osd
        # per-rank entries: each rank's own key, so DCP keeps all of them
        state[f"rank{self.rank}"] = {"loader": loader.state_dict() if loader is not None else {},
                                     "rng": torch.get_rng_state()}
        return state

    def step(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
             loader: Any = None) -> bool:
        """Call after every optimizer step with the number of steps done; saves every `every` steps.
        Commits a finished earlier save on the way (never waits for one still running)."""
        self.poll()
        if step % self.every:
            return False
        self.save(step, model, optimizer, loader)
        return True

    def save(self, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
             loader: Any = None) -> None:
        if self._pending is not None:
            self._finish()              # one save in flight at a time
        path = self.root / f"{PREFIX}{step:08d}"
        t0 = time.perf_counter()
        fut = dcp.async_save(self._state(model, optimizer, loader, step), checkpoint_id=str(path),
                             process_group=self.group)
        rec = SaveRecord(step, str(path), t0, time.perf_counter() - t0)
        self.records.append(rec)
        self._pending = (rec, fut)

    def poll(self) -> None:
        """Commit the save in flight if it has finished."""
        if self._pending is not None and _done(self._pending[1]):
            self._finish()

    def _finish(self) -> None:
        rec, fut = self._pending
        self._pending = None
        _result(fut)
        if self.rank == 0:
            write_manifest(Path(rec.path), rec.step)
            self._prune()
        rec.total_s, rec.committed = time.perf_counter() - rec.started, True

    def close(self) -> None:
        """Wait for and commit the save in flight."""
        if self._pending is not None:
            self._finish()

    def _prune(self) -> None:
        committed = [p for p, _ in _snapshots(self.root) if (p / MANIFEST).is_file()]
        for old in committed[:-self.keep]:
            shutil.rmtree(old, ignore_errors=True)

    # --- loading --------------------------------------------------------------------------------------------
    def latest(self) -> tuple[int, Path] | None:
        """The newest snapshot that verifies, after logging every newer one that does not."""
        for path, step in reversed(_snapshots(self.root)):
            ok, why = verify(path)
            if ok:
                return step, path
            msg = f"torn snapshot {path.name}: {why}; using the one before"
            if msg not in self.log:
                self.log.append(msg)
        return None

    def load(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
             loader: Any = None) -> int:
        """Restore the newest good snapshot into model, optimizer, loader and RNG; the step it was taken at,
        or 0 when there is none. Every rank must pick the same snapshot: rank 0 decides."""
        found = self.latest() if self.rank == 0 else None
        if dist.is_initialized():
            box = [found]
            dist.broadcast_object_list(box, src=0, group=self.group)
            found = box[0]
        if found is None:
            return 0
        step, path = found
        t0 = time.perf_counter()
        state = self._state(model, optimizer, loader, 0)
        dcp.load(state, checkpoint_id=str(path), process_group=self.group)
        set_state_dict(model, optimizer if optimizer is not None else [], model_state_dict=state["model"],
                       optim_state_dict=state.get("optim", {}))
        mine = state[f"rank{self.rank}"]
        if loader is not None:
            loader.load_state_dict(mine["loader"])
        torch.set_rng_state(mine["rng"])
        self.load_s = time.perf_counter() - t0
        return int(state["step"])


def _done(fut: Any) -> bool:
    f = getattr(fut, "upload_completion", fut)
    return f.done()


def _result(fut: Any) -> None:
    f = getattr(fut, "upload_completion", fut)
    f.result()


def _snapshots(root: Path) -> list[tuple[Path, int]]:
    out = []
    for p in Path(root).glob(f"{PREFIX}*"):
        try:
            out.append((p, int(p.name[len(PREFIX):])))
        except ValueError:
            continue
    return sorted(out, key=lambda t: t[1])


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(path: Path, step: int) -> None:
    files = sorted(p for p in path.iterdir() if p.is_file() and p.name != MANIFEST and not p.name.endswith(".tmp"))
    if not any(p.name == ".metadata" for p in files):
        raise RuntimeError(f"xbench: {path} has no .metadata after its save finished; not committing it")
    manifest = {"step": step, "files": {p.name: {"bytes": p.stat().st_size, "sha256": _sha256(p)} for p in files}}
    tmp = path / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, path / MANIFEST)


def verify(path: Path) -> tuple[bool, str]:
    """Whether snapshot `path` is complete and unaltered, and if not, why."""
    m = path / MANIFEST
    if not m.is_file():
        return False, "no COMMITTED.json (the save did not finish)"
    try:
        manifest = json.loads(m.read_text())
    except (OSError, json.JSONDecodeError) as e:
        return False, f"unreadable manifest ({e})"
    for name, meta in manifest["files"].items():
        f = path / name
        if not f.is_file():
            return False, f"{name} is missing"
        if f.stat().st_size != meta["bytes"]:
            return False, f"{name} has {f.stat().st_size} bytes, the manifest says {meta['bytes']}"
        if _sha256(f) != meta["sha256"]:
            return False, f"{name} does not match its checksum"
    return True, "ok"


def latest_snapshot(root: str | Path) -> tuple[int, Path] | None:
    """The newest verified snapshot under `root` (no process group needed)."""
    for path, step in reversed(_snapshots(Path(root))):
        if verify(path)[0]:
            return step, path
    return None

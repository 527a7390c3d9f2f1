"""Run a function on N gloo processes on this machine, bounded in time.

    results = xb.dist.run(my_module.work, world_size=4, args=(1 << 20,), timeout=120)

`fn(rank, world_size, *args)` runs in each process after `torch.distributed` is initialised (gloo over
127.0.0.1); its return values come back in rank order. The rendezvous store lives in the calling process on
a port the kernel picks (no fixed ports, no race for a free one), each process gets its own `PrefixStore`,
every process has a collective timeout, and the whole run has a deadline after which the processes this
call started are killed and the error names the ranks that did not finish. `fn` must be importable (defined
in a module, not in a notebook cell): processes are started with the 'spawn' method.
"""
from __future__ import annotations

import contextlib
import os
import queue as queue_mod
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ..config import environ

_CHILD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
              "NUMBA_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


class LaunchError(RuntimeError):
    """A rank failed or the run passed its deadline; the message holds the failing ranks' tracebacks."""


def _unshadow_stdlib() -> None:
    """Drop path entries holding packages named like standard modules (a test tree's `profile/` shadows the
    one `cProfile` imports, which torch imports on first DDP use), and any such module already loaded."""
    import sys
    import sysconfig

    std = sys.stdlib_module_names
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    prefixes = tuple(os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix})
    keep = []
    for entry in sys.path:
        if not entry or os.path.realpath(entry).startswith(prefixes):
            keep.append(entry)
            continue
        try:
            names = set(os.listdir(entry)) if os.path.isdir(entry) else set()
        except OSError:
            names = set()
        if any(name in std and os.path.isfile(os.path.join(entry, name, "__init__.py")) for name in names):
            continue
        keep.append(entry)
    sys.path[:] = keep
    for name in list(sys.modules):
        mod = sys.modules[name]
        path = getattr(mod, "__file__", None)
        if name.split(".")[0] in std and path and not os.path.realpath(path).startswith(stdlib):
            del sys.modules[name]


def _worker(fn: Callable, rank: int, world: int, port: int, args: tuple, results: Any, timeout: float,
            ranks_per_node: int | None) -> None:
    try:
        _unshadow_stdlib()
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)
        os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
                           "MASTER_PORT": str(port)})
        if ranks_per_node:
            os.environ.update({"LOCAL_RANK": str(rank % ranks_per_node), "LOCAL_WORLD_SIZE": str(ranks_per_node),
                               "GROUP_RANK": str(rank // ranks_per_node)})
        store = dist.TCPStore("127.0.0.1", port, world + 1, is_master=False, timeout=timedelta(seconds=timeout))
        dist.init_process_group("gloo", store=dist.PrefixStore("xbench-run", store), rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout))
        try:
            out = fn(rank, world, *args)
        finally:
            with contextlib.suppress(Exception):
                dist.destroy_process_group()
        results.put((rank, "ok", out))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))


def run(fn: Callable, world_size: int, args: tuple = (), timeout: float = 120.0,
        ranks_per_node: int | None = None, env: dict[str, str] | None = None) -> list[Any]:
    """`fn(rank, world_size, *args)` on `world_size` gloo processes; their results in rank order.
    `ranks_per_node` sets LOCAL_RANK / GROUP_RANK as torchrun would for pretend nodes."""
    import multiprocessing as mp

    import torch.distributed as dist

    if world_size < 1:
        raise ValueError(f"world_size = {world_size}; write a positive number of processes")
    store = dist.TCPStore("127.0.0.1", 0, world_size + 1, is_master=True, wait_for_workers=False,
                          timeout=timedelta(seconds=timeout))
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = []
    with environ({**_CHILD_ENV, **(env or {})}):
        for r in range(world_size):
            p = ctx.Process(target=_worker, args=(fn, r, world_size, store.port, tuple(args), results, timeout,
                                                  ranks_per_node), daemon=True)
            p.start()
            procs.append(p)
    deadline = time.monotonic() + timeout
    got: dict[int, tuple[str, Any]] = {}
    try:
        while len(got) < world_size:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                rank, status, value = results.get(timeout=min(left, 0.5))
            except queue_mod.Empty:
                dead = [i for i, p in enumerate(procs) if not p.is_alive() and i not in got and p.exitcode]
                if dead and results.empty():
                    time.sleep(0.2)
                    if results.empty():
                        raise LaunchError(f"rank(s) {dead} exited with code(s) "
                                          f"{[procs[i].exitcode for i in dead]} before reporting") from None
                continue
            got[rank] = (status, value)
            if status == "error":
                break
        errors = {r: v for r, (s, v) in got.items() if s == "error"}
        if errors:
            text = "\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items()))
            raise LaunchError(f"{len(errors)} rank(s) failed:\n{text}")
        if len(got) < world_size:
            missing = sorted(set(range(world_size)) - set(got))
            raise LaunchError(f"rank(s) {missing} did not finish within {timeout:.0f} s (killed)")
        return [got[r][1] for r in range(world_size)]
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        results.close()
        del store

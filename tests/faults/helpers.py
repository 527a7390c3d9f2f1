"""What the fault tests share: a child session to run (and kill), damage to do to cache entries, an audit of a
cache folder, fake toolchains, and folders that refuse writes (read-only, full) without touching the machine."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from xbench.cache import TRAILER, unseal

HERE = Path(__file__).resolve().parent
CHILD = HERE / "child.py"
SEED = int(os.environ.get("XBENCH_FAULT_SEED", "1802"))     # kill points and damage offsets: reproducible


def child_env(cache: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "XBENCH_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)    # a user's session writes bytecode: .pyc files must not matter
    return env


def child_cmd(backends: str = "cpu,ascend", seeds: str = "0", tune: bool = False) -> list[str]:
    return [sys.executable, str(CHILD), "--backends", backends, "--seeds", seeds] + (["--tune"] if tune else [])


def run_child(cache: Path, backends: str = "cpu,ascend", seeds: str = "0", tune: bool = False, *,
              prefix: list[str] | None = None, preexec_fn=None, timeout: float = 150,
              **env: str) -> tuple[int, list[dict], str]:
    """(exit status, the JSON lines it printed, stderr) of one child session on `cache`."""
    proc = subprocess.run([*(prefix or []), *child_cmd(backends, seeds, tune)], capture_output=True, text=True,
                          env=child_env(cache, **env), timeout=timeout, preexec_fn=preexec_fn)
    return proc.returncode, lines(proc.stdout), proc.stderr


def lines(stdout: str) -> list[dict]:
    out = []
    for ln in stdout.splitlines():
        if ln.startswith("{"):
            out.append(json.loads(ln))
    return out


def results(out: list[dict]) -> dict[tuple[str, str], bool]:
    return {(d["op"], d["backend"]): d["ok"] for d in out if "ok" in d}


def explain(rc: int, out: list[dict], err: str) -> str:
    bad = [d for d in out if d.get("ok") is False]
    return f"exit {rc}; failed steps: {json.dumps(bad, indent=1)[:3000]}\nstderr tail:\n{err[-3000:]}"


# ---- damage -----------------------------------------------------------------------------------------------

KINDS = {                         # cache entries by kind: (folder glob, file glob)
    "ascend library": ("ascend", "*.so"),
    "precompiled header": ("ascend/pch-*", "*.gch"),
    "numba index": ("cpu/__pycache__", "*.nbi"),
    "numba data": ("cpu/__pycache__", "*.nbc"),
    "python bytecode": ("cpu/__pycache__", "*.pyc"),
    "cpu module": ("cpu", "*.py"),
    "ptx": ("cuda/ptx", "*.ptx"),
    "ptxas resources": ("cuda/ptxas", "*.json"),
    "tuning database": ("tune", "tuning.sqlite"),
}


def entries(cache: Path, kind: str) -> list[Path]:
    folder, pattern = KINDS[kind]
    return sorted(p for d in cache.glob(folder) for p in d.glob(pattern) if p.is_file())


def damage(path: Path, how: str, rng) -> None:
    """Truncate, flip bytes in, or overwrite with garbage the file at `path` (in place, as a failing disk or
    a killed writer without atomic renames would)."""
    raw = path.read_bytes()
    if how == "truncate":
        path.write_bytes(raw[: max(1, int(len(raw) * rng.uniform(0.05, 0.6)))])
    elif how == "flip":
        buf = bytearray(raw)
        for _ in range(8):
            i = rng.randrange(len(buf))
            buf[i] ^= 0xFF
        path.write_bytes(bytes(buf))
    elif how == "garbage":
        path.write_bytes(bytes(rng.randrange(256) for _ in range(min(len(raw), 4096))))
    else:
        raise ValueError(how)


# ---- audit ------------------------------------------------------------------------------------------------

def audit(cache: Path, unused: dict[Path, bytes] | None = None) -> list[str]:
    """Every cache entry that is not sound: an unsealed or damaged sealed entry, numba files that do not
    check out, a generated module that does not compile, a tuning database that fails its integrity check.
    Stray temporary files of killed writers are allowed (they are never loaded), and so are damaged entries
    listed in `unused` that are still byte for byte as damaged (no session has asked for them since)."""
    problems = []
    for p in cache.rglob("*"):
        if unused and p in unused and p.is_file() and p.read_bytes() == unused[p]:
            continue
        if not p.is_file() or p.name.startswith(".") or p.suffix in (".lock", ".cpp", ".tmp") or \
                ".tmp." in p.name or p.name.endswith((".damaged", ".damaged-wal", ".damaged-shm")):
            continue
        rel = p.relative_to(cache)
        if p.suffix in (".so", ".gch", ".ptx", ".nbi", ".nbc") or (p.suffix == ".json" and "ptxas" in p.parts):
            raw = p.read_bytes()
            if len(raw) < TRAILER or unseal(raw) is None:
                problems.append(f"{rel}: not a sound sealed entry")
        elif p.suffix == ".py":
            try:
                compile(p.read_text(), str(p), "exec")
            except (SyntaxError, UnicodeDecodeError, ValueError) as exc:
                problems.append(f"{rel}: {exc}")
        elif p.name == "tuning.sqlite":
            try:
                with sqlite3.connect(p) as c:
                    verdict = c.execute("PRAGMA quick_check").fetchone()[0]
            except sqlite3.DatabaseError as exc:
                verdict = str(exc)
            if verdict != "ok":
                problems.append(f"{rel}: {verdict}")
    return problems


def copy_cache(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


# ---- fake toolchains --------------------------------------------------------------------------------------

def fake_tool(folder: Path, name: str, *, version: str | None, work: str) -> Path:
    """An executable `name` in `folder`: `--version` prints `version` (None: hangs), anything else runs the
    shell text `work`. A hanging tool records its pid in `<name>.pid` and execs sleep (one process to find)."""
    folder.mkdir(parents=True, exist_ok=True)
    hang = f'echo $$ > "{folder}/{name}.pid"; exec sleep 600'
    ver = hang if version is None else f"echo '{version}'"
    script = folder / name
    script.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then {ver}; exit 0; fi\n'
                      f'{work.replace("HANG", hang)}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return script


def alive(pid_file: Path) -> bool:
    try:
        pid = int(pid_file.read_text())
    except (OSError, ValueError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


# ---- folders that refuse writes ---------------------------------------------------------------------------

def _namespace() -> list[str] | None:
    """A command prefix that runs a shell in a private mount namespace (root, or an unprivileged user
    namespace where the kernel allows one), or None."""
    if shutil.which("unshare") is None:
        return None
    base = ["unshare", "-m", "--propagation", "private"] if os.geteuid() == 0 else ["unshare", "-rm"]
    probe = subprocess.run([*base, "true"], capture_output=True)
    return base if probe.returncode == 0 else None


def read_only_prefix(folder: Path) -> list[str] | None:
    """A prefix running a command with `folder` read-only (a read-only bind mount in a namespace of its own);
    None where only permission bits can do it (not root: the caller chmods)."""
    ns = _namespace()
    if ns is None:
        return None
    return [*ns, "sh", "-c", f'mount --bind "{folder}" "{folder}" && mount -o remount,ro,bind "{folder}" && '
                            'exec "$@"', "sh"]


def full_disk_prefix(folder: Path, free_kib: int = 4) -> list[str] | None:
    """A prefix running a command with a tiny tmpfs mounted on `folder`, filled to `free_kib` KiB free."""
    ns = _namespace()
    if ns is None:
        return None
    size = 512
    return [*ns, "sh", "-c", f'mount -t tmpfs -o size={size}k tmpfs "{folder}" && '
                            f'(head -c {(size - free_kib) * 1024} /dev/zero > "{folder}/filler" || true) && '
                            'exec "$@"', "sh"]


def small_files(limit: int = 2048):
    """A preexec_fn: the child may write no file over `limit` bytes (EFBIG, as a full disk refuses data), where
    no tmpfs can be mounted."""
    def limit_files():
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limit_files

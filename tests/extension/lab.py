"""A JupyterLab server for browser tests: 127.0.0.1, a free port, a random token, its own config,
runtime and workspace folders, stopped with everything it started."""
from __future__ import annotations

import ast
import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from jupyter_client import BlockingKernelClient

STARTUP_TIMEOUT = 60.0

CHROMIUM = "/usr/bin/chromium"
# Flags that keep Chromium from reaching for the network (and hanging on a closed one).
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name (field 2) is in parentheses and may contain spaces
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class LabServer:
    def __init__(self, root: Path, work: Path) -> None:
        self.root = root
        self.work = work
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = work / "jupyterlab.log"
        self._log: Any = None
        self.runtime_dir = work / "runtime"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        config = self.work / "jupyter_test_config.py"
        config.write_text(
            "c.ServerApp.ip = '127.0.0.1'\n"
            f"c.ServerApp.port = {self.port}\n"
            "c.ServerApp.port_retries = 0\n"
            "c.ServerApp.open_browser = False\n"
            f"c.ServerApp.root_dir = {str(self.root)!r}\n"
            f"c.IdentityProvider.token = {self.token!r}\n"
            f"c.ServerApp.allow_root = {os.geteuid() == 0}\n"
            f"c.LabApp.workspaces_dir = {str(self.work / 'workspaces')!r}\n"
            "c.LabApp.news_url = None\n"
            "c.LabApp.check_for_updates_class = 'jupyterlab.NeverCheckForUpdate'\n"
            "c.LabApp.extension_manager = 'readonly'\n"
        )
        labconfig = self.work / "config" / "labconfig"
        labconfig.mkdir(parents=True)
        # No "get notified about Jupyter news?" prompt over the page.
        (labconfig / "page_config.json").write_text(json.dumps(
            {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
        env = dict(os.environ)
        env.update(JUPYTER_CONFIG_DIR=str(self.work / "config"), JUPYTER_RUNTIME_DIR=str(self.runtime_dir),
                   JUPYTER_PLATFORM_DIRS="1")
        env.pop("JUPYTER_TOKEN", None)
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", f"--config={config}"],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
        )
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {self.proc.returncode}:\n{self.log()}")
            try:
                self.api("GET", "/api/status")
                return
            except OSError:
                time.sleep(0.25)
        raise RuntimeError(f"JupyterLab did not answer on {self.url} within {STARTUP_TIMEOUT:.0f} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def api(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=10) as response:
            text = response.read()
        return json.loads(text) if text else None

    def kernel_client(self, notebook_path: str) -> BlockingKernelClient:
        """A second client on the kernel of the session for `notebook_path` (relative to the root)."""
        sessions = [s for s in self.api("GET", "/api/sessions") if s["path"] == notebook_path]
        if not sessions:
            raise RuntimeError(f"no kernel session for {notebook_path}")
        kernel_id = sessions[0]["kernel"]["id"]
        client = BlockingKernelClient(connection_file=str(self.runtime_dir / f"kernel-{kernel_id}.json"))
        client.load_connection_file()
        client.start_channels()
        client.wait_for_ready(timeout=30)
        return client

    def stop(self) -> None:
        """Shut the server down (it shuts down its kernels); kill what is left over."""
        if self.proc is None:
            return
        kernels = _children(self.proc.pid)
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.api("POST", "/api/shutdown")
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        for pid in kernels:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        if self._log is not None:
            self._log.close()
        self.proc = None


def evaluate(client: BlockingKernelClient, expression: str) -> Any:
    """The JSON value of `expression` evaluated in the kernel (through user_expressions, so nothing is
    printed in the notebook)."""
    msg_id = client.execute("", silent=True, user_expressions={"v": f"__import__('json').dumps({expression})"})
    while True:
        reply = client.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    result = reply["content"]["user_expressions"]["v"]
    if result["status"] != "ok":
        raise RuntimeError(f"{expression}: {result['ename']}: {result['evalue']}")
    return json.loads(ast.literal_eval(result["data"]["text/plain"]))

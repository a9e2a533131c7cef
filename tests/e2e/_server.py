"""Start and stop a throwaway JupyterLab server (serving Notebook 7 too) with its own config, data and runtime dirs."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, TextIO

# Settings that keep popups and network calls out of the page.
SERVER_CONFIG = {
    "ServerApp": {
        "ip": "127.0.0.1",
        "open_browser": False,
        "allow_root": True,
        "port_retries": 0,
        "terminals_enabled": False,
    },
    "LabApp": {
        "expose_app_in_browser": True,
        "news_url": None,
        "check_for_updates_class": "jupyterlab.handlers.announcements.NeverCheckForUpdate",
    },
    # The same server serves Notebook 7 at /tree and /notebooks/<path> (its server extension loads beside Lab's).
    "JupyterNotebookApp": {"expose_app_in_browser": True},
}
PAGE_CONFIG = {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}
USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
        "doNotDisturbMode": True,
    },
    # Attach every cell to the DOM so tests can find outputs without scrolling first.
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


class JupyterServer:
    """A JupyterLab process serving `root_dir`; every Jupyter dir lives under `base`."""

    def __init__(self, base: Path, log_path: Path) -> None:
        self.base = base
        self.root_dir = base / "root"
        self.config_dir = base / "config"
        self.data_dir = base / "data"
        self.runtime_dir = base / "runtime"
        self.log_path = log_path
        self.token = secrets.token_hex(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None
        self._log: TextIO | None = None

    def _prepare_dirs(self) -> None:
        for path in (self.root_dir, self.config_dir, self.data_dir, self.runtime_dir):
            path.mkdir(parents=True, exist_ok=True)
        _write_json(self.config_dir / "jupyter_server_config.json", SERVER_CONFIG)
        _write_json(self.config_dir / "labconfig" / "page_config.json", PAGE_CONFIG)
        for name, settings in USER_SETTINGS.items():
            _write_json(self.config_dir / "lab" / "user-settings" / name, settings)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            JUPYTER_CONFIG_DIR=str(self.config_dir),
            JUPYTER_DATA_DIR=str(self.data_dir),
            JUPYTER_RUNTIME_DIR=str(self.runtime_dir),
            JUPYTERLAB_SETTINGS_DIR=str(self.config_dir / "lab" / "user-settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(self.config_dir / "lab" / "workspaces"),
            IPYTHONDIR=str(self.base / "ipython"),
            JUPYTER_PLATFORM_DIRS="1",
            PYTHONUNBUFFERED="1",
        )
        # The user's own config must not leak in (extra kernels, extensions, passwords).
        env.pop("JUPYTER_PATH", None)
        env.pop("JUPYTER_CONFIG_PATH", None)
        return env

    def start(self, timeout: float = 60.0) -> None:
        """Launch the server and return once `/api/status` answers; raise with the log otherwise."""
        self._prepare_dirs()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("w")
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            f"--ServerApp.port={self.port}",
            f"--ServerApp.root_dir={self.root_dir}",
            f"--IdentityProvider.token={self.token}",
            "--allow-root",
            "--no-browser",
        ]
        self._process = subprocess.Popen(
            cmd,
            cwd=self.root_dir,
            env=self._env(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so kernels can be reaped with it
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"jupyterlab exited with code {self._process.returncode} before answering; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                self.api("GET", "/api/status", timeout=2)
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(
            f"jupyterlab did not answer /api/status within {timeout:.0f}s; log {self.log_path}:\n{self.log_tail()}"
        )

    def api(self, method: str, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """Call the REST API with the token and return the decoded JSON (None when empty)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def lab_url(self, path: str = "lab") -> str:
        """Return the browser URL of `path` with the token as query parameter."""
        sep = "&" if "?" in path else "?"
        return f"{self.url}/{path}{sep}token={self.token}"

    def kernel_id(self, notebook_path: str) -> str:
        """Return the id of the kernel of the session open on `notebook_path`."""
        sessions = self.api("GET", "/api/sessions")
        for session in sessions:
            if session["path"] == notebook_path and session.get("kernel"):
                return session["kernel"]["id"]
        open_paths = [s["path"] for s in sessions]
        raise LookupError(f"no kernel session for {notebook_path!r}; open sessions: {open_paths}")

    def connection_file(self, notebook_path: str) -> Path:
        """Return the connection file of the kernel behind `notebook_path`."""
        return self.runtime_dir / f"kernel-{self.kernel_id(notebook_path)}.json"

    def log_tail(self, lines: int = 80) -> str:
        """Return the last `lines` lines of the server log."""
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Ask the server to shut down, then terminate and kill its process group if needed."""
        process = self._process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
                self.api("POST", "/api/shutdown", timeout=5)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=5)
        # Kernels orphaned by a hard kill share the group we created for this server.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

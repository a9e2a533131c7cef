"""`make demo`'s last step: serve the repository root with JupyterLab on 127.0.0.1, find the port the server really
got (from its runtime file, not the one asked for: a taken port makes it try the next), print the URL of
notebooks/quickstart.ipynb with its token, and open it in a browser.

    python -m tools.demo [--host 127.0.0.1] [--port 8888] [--no-browser] [--timeout 120]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.parse
import webbrowser
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "notebooks/quickstart.ipynb"


def say(text: str) -> None:
    """One line of what the demo is doing, told apart from the server's own log."""
    print(f"demo: {text}", flush=True)


def runtime_dir() -> Path:
    """Where Jupyter servers write their ``jpserver-<pid>.json`` (``JUPYTER_RUNTIME_DIR`` when set)."""
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir())


def server_info(pid: int, folder: Path) -> dict[str, Any] | None:
    """The runtime file of the server of process ``pid``: its ``port``, ``url``, ``token``, ``root_dir``; None
    until it wrote one."""
    path = folder / f"jpserver-{pid}.json"
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError):  # not written yet, or half written
        return None


def start_url(info: dict[str, Any], notebook: str = NOTEBOOK) -> str:
    """The URL that opens ``notebook`` (a path under the served root) in JupyterLab, with the server's token."""
    base = str(info["url"]).rstrip("/")
    path = urllib.parse.quote(f"lab/tree/{notebook}")
    token = info.get("token") or ""
    return f"{base}/{path}" + (f"?token={token}" if token else "")


def command(host: str, port: int) -> list[str]:
    """JupyterLab serving the repository root (README.md and docs/ browsable beside the notebooks)."""
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",  # opened here, at the notebook, once the real port is known
        f"--ServerApp.ip={host}",
        f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={ROOT}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # a container's root user; Jupyter refuses it without this
    return cmd


def wait_for_server(process: subprocess.Popen[bytes], folder: Path, timeout: float) -> dict[str, Any]:
    """The server's runtime file once written; a RuntimeError naming what went wrong when it exits or takes longer
    than ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = server_info(process.pid, folder)
        if info is not None and info.get("port"):
            return info
        if process.poll() is not None:
            raise RuntimeError(f"JupyterLab exited with code {process.returncode} before serving: see its log above")
        time.sleep(0.2)
    raise RuntimeError(
        f"JupyterLab wrote no runtime file (jpserver-{process.pid}.json in {folder}) within {timeout:.0f} s: "
        "see its log above"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8888, help="the port asked for; the next free one when taken")
    parser.add_argument("--no-browser", action="store_true", help="print the URL only")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the server to start")
    args = parser.parse_args(argv)

    folder = runtime_dir()
    say(f"server: starting JupyterLab on {args.host}, port {args.port} asked, serving {ROOT}")
    process = subprocess.Popen(command(args.host, args.port), cwd=ROOT)
    try:
        try:
            info = wait_for_server(process, folder, args.timeout)
        except RuntimeError as exc:
            say(str(exc))
            return 1
        url = start_url(info)
        got = int(info["port"])
        taken = "" if got == args.port else f" ({args.port} was taken)"
        say(f"server: listening on {args.host}, port {got}{taken}")
        say(f"open {NOTEBOOK}: {url}")
        if args.no_browser:
            say("(no browser opened: --no-browser)")
        elif not webbrowser.open(url):
            say("no browser found here: open the URL above")
        say("Ctrl-C stops the server")
        return process.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


if __name__ == "__main__":
    sys.exit(main())

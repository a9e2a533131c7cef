"""`make demo` says what it does at each step and serves the repository root with JupyterLab on 127.0.0.1, opened at
notebooks/quickstart.ipynb, with the URL of the port the server really got (here: the one asked for is taken)."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_make_demo_says_each_step_before_it_runs(tmp_path):
    # -B: every step as on a first run, whatever this clone has built already
    dry = subprocess.run(
        ["make", "--no-print-directory", "-n", "-B", "demo", f"VENV={tmp_path / 'venv'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dry.returncode == 0, dry.stderr
    said = [line.split('"demo: ', 1)[1].split(":", 1)[0] for line in dry.stdout.splitlines() if '"demo: ' in line]
    assert said == ["venv", "torch", "package", "npm", "build"]
    assert dry.stdout.rstrip().splitlines()[-1].endswith("-m tools.demo --host 127.0.0.1 --port 8888")


def _lines(stream, out: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        out.put(line)


def test_the_demo_serves_the_repository_root_at_the_quickstart_on_the_port_it_got(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    asked = taken.getsockname()[1]
    env = {
        **os.environ,
        **{f"JUPYTER_{d.upper()}_DIR": str(tmp_path / d) for d in ("config", "data", "runtime")},
        "PYTHONUNBUFFERED": "1",
    }
    demo = subprocess.Popen(
        [sys.executable, "-m", "tools.demo", "--port", str(asked), "--no-browser", "--timeout", "90"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the server's own log
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_lines, args=(demo.stdout, lines), daemon=True).start()
    said: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while not any(line.startswith("demo: open ") for line in said):
            assert time.monotonic() < deadline, f"no URL within 120 s; it said {said}"
            assert demo.poll() is None, f"the demo exited with {demo.returncode}; it said {said}"
            try:
                said.append(lines.get(timeout=1))
            except queue.Empty:
                continue
        url = urllib.parse.urlsplit(said[-1].split()[-1])
        got = url.port
        assert got != asked and url.hostname == "127.0.0.1"
        assert f"demo: server: listening on 127.0.0.1, port {got} ({asked} was taken)\n" in said
        assert url.path == "/lab/tree/notebooks/quickstart.ipynb"
        token = urllib.parse.parse_qs(url.query)["token"][0]
        for path in ("notebooks/quickstart.ipynb", "README.md", "docs/api.md"):  # the repository root is served
            api = f"http://127.0.0.1:{got}/api/contents/{path}?content=0&token={token}"
            with urllib.request.urlopen(api, timeout=30) as answer:
                assert json.load(answer)["path"] == path
        with urllib.request.urlopen(urllib.parse.urlunsplit(url), timeout=30) as answer:
            assert answer.status == 200  # the start URL itself: JupyterLab's page
    finally:
        demo.send_signal(signal.SIGINT)  # Ctrl-C: the demo stops its server
        try:
            demo.wait(timeout=30)
        finally:
            if demo.poll() is None:
                demo.kill()
            taken.close()
    assert not list((tmp_path / "runtime").glob("jpserver-*.json"))  # the server is gone, its runtime file too

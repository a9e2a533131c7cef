"""Two launches of torch.distributed.run on 127.0.0.1 as two nodes (c10d rendezvous) write one run log."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import hookwidgets
from tests.unit.distributed._run_log_workers import NAN_RANK, NAN_STEP, STEPS

pytestmark = pytest.mark.timeout(150)

ROOT = Path(__file__).resolve().parents[3]
DEADLINE = 120.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _launch(node: int, port: int, log_dir: Path, out: Path) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "torch.distributed.run",
        "--nnodes=2", "--nproc-per-node=1", f"--node-rank={node}",
        "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--max-restarts=0", "--monitor-interval=0.2",
        "-m", "tests.unit.distributed._two_nodes", str(log_dir),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    with out.open("wb") as log:
        # a session of its own: its agent and worker are ended together, by this process's id, if it hangs
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def _finish(procs: list[subprocess.Popen], outs: list[Path]) -> list[int]:
    codes = []
    try:
        for proc in procs:
            codes.append(proc.wait(timeout=DEADLINE))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the session begun with this pid: agent and worker
                proc.wait()
    if codes != [0, 0]:
        logs = "\n".join(f"--- node {n}:\n{out.read_text(errors='replace')[-3000:]}" for n, out in enumerate(outs))
        raise AssertionError(f"the two nodes exited with {codes} (killed after {DEADLINE:.0f} s if missing)\n{logs}")
    return codes


def test_two_nodes_write_one_log_that_open_run_reads_with_both_nodes(tmp_path):
    port = _free_port()
    log_dir = tmp_path / "run"
    outs = [tmp_path / f"node{n}.txt" for n in (0, 1)]
    procs = [_launch(n, port, log_dir, outs[n]) for n in (0, 1)]
    _finish(procs, outs)
    run = hookwidgets.open_run(log_dir)
    assert run.ranks == [0, 1] and run.world == 2 and run.steps == list(range(1, STEPS + 1))
    assert sorted(node["node_rank"] for node in run.nodes.values()) == [0, 1]
    assert all(node["local_rank"] == 0 for node in run.nodes.values())
    found = run.first_nonfinite()
    assert (found["step"], found["rank"], found["path"]) == (NAN_STEP, NAN_RANK, "module.0")
    assert found["node_rank"] == run.nodes[NAN_RANK]["node_rank"]

"""A fresh virtual environment holding what ``pip install hookwidgets`` gives a user: torch, the wheel, ipykernel."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

# The torch of this environment, from the CPU wheel on disk: a bare torch requirement resolved on an empty
# environment would pull a multi-GB CUDA build, so torch goes in first and the wheel finds it satisfied.
TORCH = f"torch=={torch.__version__.split('+')[0]}"


@dataclass(frozen=True)
class FreshEnv:
    """A virtual environment at ``root`` with the wheel installed, and no repository on its path."""

    root: Path
    python: Path

    def run_json(self, script: Path, cwd: Path, timeout: float = 300) -> dict:
        """Run ``script`` isolated (``python -I``: no script folder, user site or PYTHON* variables on the path) in
        ``cwd`` and return the JSON object its last line prints."""
        done = subprocess.run(
            [str(self.python), "-I", str(script)], cwd=cwd, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise AssertionError(f"{script.name} failed in the fresh environment {self.root}:\n{done.stderr}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def _pip(python: Path, *args: str) -> None:
    """This environment's pip, installing into ``python``'s environment (which then needs no pip of its own).

    ``--no-compile``: byte-compiling torch's thousands of files at install takes longer than everything else here;
    Python compiles what is imported, on first import.
    """
    cmd = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-compile", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"`pip install {' '.join(args)}` into {python} failed:\n{done.stderr[-4000:]}")


def create_fresh_env(root: Path, wheel: Path) -> FreshEnv:
    """Create the environment at ``root``: torch first, then the wheel (no extras) and ipykernel for a notebook."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    _pip(python, TORCH)
    _pip(python, str(wheel), "ipykernel")
    return FreshEnv(root=root, python=python)

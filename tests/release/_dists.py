"""Build the wheel and sdist of the checkout as a release would, and list what each holds."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "hookwidgets" / "static" / "widget.js"


@dataclass(frozen=True)
class Dists:
    """The built wheel and sdist."""

    wheel: Path
    sdist: Path

    def wheel_names(self) -> set[str]:
        """Every file path inside the wheel."""
        with zipfile.ZipFile(self.wheel) as archive:
            return set(archive.namelist())

    def wheel_file(self, name: str) -> bytes:
        """The bytes of ``name`` inside the wheel."""
        with zipfile.ZipFile(self.wheel) as archive:
            return archive.read(name)

    def sdist_names(self) -> set[str]:
        """Every file path inside the sdist, without its ``hookwidgets-<version>/`` prefix."""
        with tarfile.open(self.sdist) as archive:
            return {member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile()}


def build_dists(out_dir: Path) -> Dists:
    """Build both with ``python -m build`` (isolated, as a release does) from the checkout into ``out_dir``."""
    if not BUNDLE.exists():  # the sdist build has no node_modules: it must find the bundle built (skip-if-exists)
        raise FileNotFoundError(f"{BUNDLE} is missing: build the frontend first with `make frontend`")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out_dir), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        raise RuntimeError(f"`python -m build` of {ROOT} failed with exit code {done.returncode}:\n{output}")
    (wheel,) = out_dir.glob("*.whl")
    (sdist,) = out_dir.glob("*.tar.gz")
    return Dists(wheel=wheel, sdist=sdist)

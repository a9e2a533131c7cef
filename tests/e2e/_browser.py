"""Locate the system chromium and the flags that make it run in a container."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM_CANDIDATES = (Path("/usr/lib/chromium/chromium"), Path("/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
INSTALL_HINT = "apt-get install -y chromium fonts-liberation"


def find_chromium() -> Path | None:
    """Return the first chromium binary that exists, or None."""
    return next((path for path in CHROMIUM_CANDIDATES if path.is_file()), None)


def require_chromium() -> Path:
    """Return the chromium binary; when it is missing, fail on CI and skip elsewhere."""
    path = find_chromium()
    if path is not None:
        return path
    searched = ", ".join(str(p) for p in CHROMIUM_CANDIDATES)
    reason = (
        f"chromium not found (looked at {searched}); install it with `{INSTALL_HINT}` "
        "(`playwright install` cannot download browsers here)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)

"""Where hookwidgets keeps what it makes once and reuses (compiled kernels, example weights): one folder per user."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$HOOKWIDGETS_CACHE``, else ``$XDG_CACHE_HOME/hookwidgets``, else ``~/.cache/hookwidgets``; not created."""
    configured = os.environ.get("HOOKWIDGETS_CACHE")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hookwidgets"

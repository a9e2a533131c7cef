"""Locate the system chromium and the flags that make it run in a container; a blank page for the bundle."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page

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
STATIC = Path(__file__).resolve().parents[2] / "hookwidgets" / "static"


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


@contextlib.contextmanager
def widget_page(browser: Browser, *, clock: bool = False) -> Iterator[Page]:
    """A blank page with the widget's CSS (and a controllable clock with ``clock``); page errors and dialogs are
    collected on ``page.hw_errors``."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda dialog: (errors.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    if clock:
        page.clock.install()
    page.set_content("<!doctype html><html><body></body></html>")
    page.add_style_tag(content=(STATIC / "widget.css").read_text())
    page.hw_errors = errors  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        context.close()

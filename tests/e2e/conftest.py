"""Fixtures for browser tests: a Jupyter server, a chromium page, and a `Lab` (or `Notebook7`) driving both."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from ._browser import CHROMIUM_ARGS, require_chromium
from ._lab import Lab, Notebook7
from ._server import JupyterServer

REPO_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = REPO_ROOT / "artifacts" / "e2e"
VIEWPORT = {"width": 1400, "height": 1000}

_CONSOLE_ERRORS = pytest.StashKey[list[str]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: real-browser test against a JupyterLab server (needs chromium; ~20 s)")


@pytest.fixture(scope="session")
def artifacts_dir() -> Path:
    """Folder for screenshots and the server log (git-ignored, under the repo root)."""
    ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
    for stale in ARTIFACTS_DIR.glob("FAILED-*.png"):
        stale.unlink()
    return ARTIFACTS_DIR


@pytest.fixture(scope="session")
def jupyter_server(tmp_path_factory: pytest.TempPathFactory, artifacts_dir: Path) -> Iterator[JupyterServer]:
    """A JupyterLab server on 127.0.0.1 whose root, config, data and runtime dirs are temporary."""
    server = JupyterServer(tmp_path_factory.mktemp("jupyter"), artifacts_dir / "jupyter-server.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def chromium_browser() -> Iterator[Browser]:
    """Headless system chromium; skips (fails on CI) when it is not installed."""
    executable = require_chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def console_errors(request: pytest.FixtureRequest) -> list[str]:
    """Console errors and uncaught exceptions of `browser_page`, shown when the test fails."""
    errors: list[str] = []
    request.node.stash[_CONSOLE_ERRORS] = errors
    return errors


@pytest.fixture
def browser_page(chromium_browser: Browser, console_errors: list[str]) -> Iterator[Page]:
    """A page in a fresh browser context (no cookies or storage shared between tests)."""
    context = chromium_browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    page.set_default_timeout(30_000)
    page.on(
        "console",
        lambda msg: console_errors.append(f"console.error: {msg.text}") if msg.type == "error" else None,
    )
    page.on("pageerror", lambda exc: console_errors.append(f"uncaught: {exc}"))
    yield page
    context.close()


@pytest.fixture
def lab(browser_page: Page, jupyter_server: JupyterServer, artifacts_dir: Path) -> Iterator[Lab]:
    """Helpers to open and run notebooks in `browser_page`; shuts this test's kernels down after."""
    yield Lab(browser_page, jupyter_server, artifacts_dir)
    for session in jupyter_server.api("GET", "/api/sessions"):
        jupyter_server.api("DELETE", f"/api/sessions/{session['id']}")


@pytest.fixture
def notebook7(browser_page: Page, jupyter_server: JupyterServer, artifacts_dir: Path) -> Iterator[Notebook7]:
    """The same helpers in Jupyter Notebook 7, served by the same server; shuts this test's kernels down after."""
    yield Notebook7(browser_page, jupyter_server, artifacts_dir)
    for session in jupyter_server.api("GET", "/api/sessions"):
        jupyter_server.api("DELETE", f"/api/sessions/{session['id']}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """On a failed e2e test, attach console errors, the server log tail and a screenshot."""
    report: pytest.TestReport = yield
    if report.when == "teardown" or not report.failed:
        return report
    funcargs = getattr(item, "funcargs", {})
    errors = item.stash.get(_CONSOLE_ERRORS, None)
    if errors:
        report.sections.append(("browser console errors", "\n".join(errors)))
    server = funcargs.get("jupyter_server")
    if isinstance(server, JupyterServer):
        report.sections.append((f"jupyter server log ({server.log_path})", server.log_tail()))
    page = funcargs.get("browser_page")
    if isinstance(page, Page) and not page.is_closed():
        shot = ARTIFACTS_DIR / f"FAILED-{item.name}.png"
        try:
            page.screenshot(path=str(shot))
            report.sections.append(("failure screenshot", str(shot)))
        except Exception as exc:  # a crashed page must not hide the real failure
            report.sections.append(("failure screenshot", f"could not take it: {exc}"))
    return report

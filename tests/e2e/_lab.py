"""Drive JupyterLab 4 or Notebook 7 in a Playwright page through `window.jupyterapp` commands."""

from __future__ import annotations

import contextlib
import re
import shutil
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
from playwright.sync_api import Locator, Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from ._kernel import NotebookKernel
from ._server import JupyterServer


def show_tab(explorer: Locator, key: str) -> None:
    """Open the explorer's tab ``key`` as a user does: ``modules`` or ``graph`` on the left; ``inspector``,
    ``attribution``, ``summary``, ``training``, ``lens`` or ``patching`` on the right."""
    tab = explorer.locator(f'button.hw-tab[data-tab="{key}"]')
    tab.click()
    explorer.locator(f'button.hw-tab[data-tab="{key}"][aria-selected="true"]').wait_for(timeout=10_000)


# Installed before any page script runs; looks a notebook panel up by its path when called.
_FIND_PANEL_SCRIPT = """
window.__hwFindPanel = (path) => {
  for (const w of window.jupyterapp.shell.widgets('main')) {
    if (w.context && w.context.path === path && w.sessionContext) return w;
  }
  return null;
};
"""

_KERNEL_IDLE = """
(path) => {
  const panel = window.__hwFindPanel(path);
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle';
}
"""

_OPEN = """
async (path) => {
  const panel = await window.jupyterapp.commands.execute(
    'docmanager:open', {path, factory: 'Notebook'});
  await panel.context.ready;
  await panel.sessionContext.ready;
}
"""

_RUN_ALL = """
async ({path, timeoutMs}) => {
  const panel = window.__hwFindPanel(path);
  if (!panel) throw new Error('notebook not open: ' + path);
  const run = window.jupyterapp.commands.execute(
    'notebook:run-all-cells', {widgetId: panel.id});
  const late = new Promise((_, reject) => setTimeout(
    () => reject(new Error(`run-all on ${path} took more than ${timeoutMs} ms`)), timeoutMs));
  return await Promise.race([run, late]);
}
"""

_ALL_DONE = """
(path) => {
  const panel = window.__hwFindPanel(path);
  const kernel = panel && panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  const prompts = [...panel.node.querySelectorAll('.jp-InputPrompt')];
  return !prompts.some((p) => p.textContent.includes('[*]'));
}
"""

# For each code cell: index, execution count, and the errors among its outputs.
_CELL_STATES = """
(path) => window.__hwFindPanel(path).content.widgets
  .map((cell, index) => ({cell, index}))
  .filter(({cell}) => cell.model.type === 'code')
  .map(({cell, index}) => ({
    index,
    count: cell.model.executionCount,
    errors: cell.model.outputs.toJSON()
      .filter((o) => o.output_type === 'error')
      .map((o) => `${o.ename}: ${o.evalue}`),
  }))
"""

_DIALOG_TEXT = "() => [...document.querySelectorAll('.jp-Dialog')].map((d) => d.innerText)"


class NotebookRunError(AssertionError):
    """A notebook run through the browser raised or left cells unexecuted."""


class Lab:
    """One JupyterLab tab in `page`, served by `server`; screenshots go to `artifacts_dir`."""

    app_name = "JupyterLab"

    def __init__(self, page: Page, server: JupyterServer, artifacts_dir: Path) -> None:
        self.page = page
        self.server = server
        self.artifacts_dir = artifacts_dir
        self._loaded = False
        page.add_init_script(_FIND_PANEL_SCRIPT)

    def write_notebook(self, name: str, nb: nbformat.NotebookNode) -> str:
        """Write `nb` into the server root (with a python3 kernelspec) and return its path."""
        nb.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3", "language": "python"})
        target = self.server.root_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, target)
        return name

    def copy_notebook(self, source: Path, name: str | None = None) -> str:
        """Copy a notebook into the server root so the run never touches `source`."""
        name = name or source.name
        nb = nbformat.read(source, as_version=4)
        if "kernelspec" not in nb.metadata:
            return self.write_notebook(name, nb)
        target = self.server.root_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        return name

    def load(self, timeout: float = 60.0) -> None:
        """Load JupyterLab with a fresh workspace and wait until its layout is restored."""
        self.page.goto(self.server.lab_url("lab?reset"))
        self.page.wait_for_function("() => !!window.jupyterapp", timeout=timeout * 1000)
        self.page.evaluate("() => window.jupyterapp.restored.then(() => true)")
        assert self.page.evaluate("() => window.jupyterapp.name") == self.app_name
        self._loaded = True

    def open_notebook(self, path: str, timeout: float = 60.0) -> None:
        """Open `path` (relative to the server root) and wait until its kernel is idle."""
        if not self._loaded:
            self.load(timeout)
        self.page.evaluate(_OPEN, path)
        self.wait_kernel_idle(path, timeout)

    def wait_kernel_idle(self, path: str, timeout: float = 60.0) -> None:
        """Wait until the kernel of the open notebook `path` reports idle."""
        self._wait(_KERNEL_IDLE, path, timeout, f"kernel of {path} never became idle")

    def run_all(self, path: str, timeout: float = 120.0) -> None:
        """Run every cell of the open notebook `path`; raise if a cell failed or did not run."""
        self.page.evaluate(_RUN_ALL, {"path": path, "timeoutMs": int(timeout * 1000)})
        self._wait(_ALL_DONE, path, timeout, f"cells of {path} still running")
        cells: list[dict[str, Any]] = self.page.evaluate(_CELL_STATES, path)
        problems = [
            f"cell {c['index']}: " + ("; ".join(c["errors"]) or "not executed")
            for c in cells
            if c["errors"] or c["count"] is None
        ]
        if problems:
            raise NotebookRunError(f"running {path} failed:\n" + "\n".join(problems))

    def run_cells(self, name: str, cells: list[str], timeout: float = 180.0) -> str:
        """Write a notebook of code `cells` as `name`, open it and run every cell; returns its path."""
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell) for cell in cells])
        path = self.write_notebook(name, nb)
        self.open_notebook(path)
        self.run_all(path, timeout=timeout)
        return path

    def kernel(self, path: str, timeout: float = 30.0) -> NotebookKernel:
        """Connect a second client to the kernel of notebook `path` (use it as a context manager)."""
        return NotebookKernel(self.server.connection_file(path), timeout=timeout)

    @contextlib.contextmanager
    def running(self, path: str, code: str, timeout: float = 60.0) -> Iterator[None]:
        """Run `code` in notebook `path`'s kernel from a second client, on a thread, while the block uses the page (the
        user's loop); the block's end waits for it, and what it raised fails the test."""
        errors: list[BaseException] = []

        def run() -> None:
            try:
                with self.kernel(path, timeout=timeout) as other:
                    other.evaluate(code)
            except BaseException as exc:  # reported by the test, not lost in the thread
                errors.append(exc)

        runner = threading.Thread(target=run)
        runner.start()
        try:
            yield
        finally:
            runner.join(timeout=90)
        assert not errors, errors

    def screenshot(self, name: str) -> Path:
        """Save a PNG of the page as `<artifacts>/<name>.png` and return its path."""
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
        target = self.artifacts_dir / f"{safe}.png"
        self.page.screenshot(path=str(target))
        return target

    def _wait(self, predicate: str, path: str, timeout: float, what: str) -> None:
        try:
            self.page.wait_for_function(predicate, arg=path, timeout=timeout * 1000)
        except PlaywrightTimeout as exc:
            dialogs = self.page.evaluate(_DIALOG_TEXT)
            extra = f"; open dialogs: {dialogs}" if dialogs else ""
            raise TimeoutError(f"{what} after {timeout:.0f}s{extra}") from exc


class Notebook7(Lab):
    """The same helpers in Jupyter Notebook 7: each notebook is a page of its own, /notebooks/<path>."""

    app_name = "Jupyter Notebook"

    def load(self, timeout: float = 60.0) -> None:
        """Load Notebook 7's file browser (/tree) and wait until the app is restored."""
        self._goto("tree", timeout)

    def open_notebook(self, path: str, timeout: float = 60.0) -> None:
        """Open `path` in Notebook 7's notebook page and wait until its kernel is idle."""
        self._goto(f"notebooks/{urllib.parse.quote(path)}", timeout)
        self.page.wait_for_function("(path) => !!window.__hwFindPanel(path)", arg=path, timeout=timeout * 1000)
        self.wait_kernel_idle(path, timeout)

    def _goto(self, route: str, timeout: float) -> None:
        self.page.goto(self.server.lab_url(route))
        self.page.wait_for_function("() => !!window.jupyterapp", timeout=timeout * 1000)
        self.page.evaluate("() => window.jupyterapp.restored.then(() => true)")
        name = self.page.evaluate("() => window.jupyterapp.name")
        if name != self.app_name:  # the route fell back to another frontend: the test would prove nothing
            raise AssertionError(f"{route} opened {name!r}, not {self.app_name!r}")
        self._loaded = True

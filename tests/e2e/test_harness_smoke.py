"""The harness itself: a notebook runs in the browser and its kernel is reachable from Python."""

from __future__ import annotations

import nbformat
import pytest

from ._lab import Lab

pytestmark = pytest.mark.e2e


def test_notebook_runs_in_browser_and_kernel_is_shared(lab: Lab) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 21 * 2; print(x)")])
    path = lab.write_notebook("smoke.ipynb", nb)

    lab.open_notebook(path)
    lab.run_all(path)

    output = lab.page.locator(".jp-OutputArea-output").first
    assert output.inner_text().strip() == "42"
    lab.screenshot("harness_smoke")
    with lab.kernel(path) as kernel:
        assert kernel.evaluate_json("x") == 42
        assert kernel.evaluate("print(x + 1)").strip() == "43"


@pytest.mark.parametrize("frontend", ["lab", "notebook7"])
def test_widget_lab_extensions_are_loaded(frontend: str, request: pytest.FixtureRequest) -> None:
    """The temp JUPYTER_DATA_DIR must not hide the widget extensions installed in the venv, in either frontend."""
    lab: Lab = request.getfixturevalue(frontend)
    lab.load()
    plugins = lab.page.evaluate("() => window.jupyterapp.listPlugins()")
    scopes = {plugin_id.split(":")[0] for plugin_id in plugins}
    assert {"anywidget", "@jupyter-widgets/jupyterlab-manager"} <= scopes

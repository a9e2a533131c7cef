"""Diagnostics go through the "hookwidgets" logger, as a library's do: silent until the application configures
logging (a NullHandler), each module's logger under it, and a record where the package notes, falls back or trains."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest
import torch
from torch import nn

import hookwidgets
from hookwidgets.core import Explorer
from hookwidgets.examples.cache import cached_model

PACKAGE = Path(hookwidgets.__file__).parent


def logger_names() -> list[tuple[str, str]]:
    """(file, what its ``logging.getLogger(...)`` call is given) for every such call in the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "logging.getLogger":
                found.append((str(path.relative_to(PACKAGE.parent)), ast.unparse(node.args[0]) if node.args else ""))
    return found


def test_the_package_logger_is_silent_until_configured():
    logger = logging.getLogger("hookwidgets")
    assert any(isinstance(handler, logging.NullHandler) for handler in logger.handlers)
    assert logger.propagate and logger.level == logging.NOTSET  # the application decides what is shown


def test_every_module_logs_under_the_package_logger_by_its_own_name():
    names = logger_names()
    assert len(names) >= 5, names  # the package, the stats kernel, the explorer, hook dispatch, attribution, examples
    assert ("hookwidgets/__init__.py", "__name__") in names  # the package's own: "hookwidgets", with the NullHandler
    assert [entry for entry in names if entry[1] != "__name__"] == []  # the others: "hookwidgets.<module>", under it


def test_a_note_the_explorer_puts_on_a_hook_at_attach_is_logged(caplog):
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    model.forward = lambda x: model[0](x)  # the second layer never runs
    caplog.set_level(logging.INFO, logger="hookwidgets")
    with Explorer(model, torch.randn(1, 2)) as ex:
        info = ex.attach("1", "forward")
    assert info.note
    (record,) = [r for r in caplog.records if r.name == "hookwidgets.core.explorer"]
    assert record.levelno == logging.INFO and record.getMessage() == f"the forward hook on '1': {info.note}"


def test_a_failing_hook_is_logged_with_its_traceback_at_debug(caplog):
    model = nn.Linear(2, 2)

    def broken(module, args, output):
        raise ZeroDivisionError("hook bug")

    caplog.set_level(logging.DEBUG, logger="hookwidgets.core.hooks")
    with Explorer(model) as ex:
        ex.attach("", "forward", action=broken)
        with pytest.warns(UserWarning, match="failed"):
            model(torch.randn(1, 2))
    (record,) = [r for r in caplog.records if r.name == "hookwidgets.core.hooks.dispatch"]
    assert record.levelno == logging.DEBUG and record.getMessage().startswith(
        "the forward hook on '' failed in step 1:\n"
    )
    assert "ZeroDivisionError: hook bug" in record.getMessage()


class LateSide(nn.Module):
    """A conv the score ignores, run after the one it uses: the default CAM layer, blank, so another is drawn."""

    def __init__(self) -> None:
        super().__init__()
        self.used, self.side = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.used(x))
        self.side(x)
        return self.fc(y.mean(dim=(2, 3)))


def test_an_attribution_that_steps_back_from_a_blank_default_layer_says_so(caplog):
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    caplog.set_level(logging.INFO, logger="hookwidgets")
    with Explorer(LateSide(), x) as ex:
        assert ex.gradcam(None, x, target=0).layer == "used"
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "hookwidgets.core.attribution.methods",
            "INFO",
            "gradcam: the default layer 'side' gets no gradient from the score, so its map would be blank; "
            "drawn at 'used' instead",
        )
    ]


def test_an_example_model_says_when_it_trains_and_when_it_loads(caplog):
    caplog.set_level(logging.DEBUG, logger="hookwidgets.examples")
    cached_model("tiny", lambda: nn.Linear(1, 1), lambda: nn.Linear(1, 1), cache=True)  # the cache is a tmp dir
    cached_model("tiny", lambda: nn.Linear(1, 1), lambda: nn.Linear(1, 1), cache=True)
    trained, loaded = caplog.records
    assert trained.levelname == "INFO" and trained.getMessage().startswith("training tiny (first use; takes seconds)")
    assert loaded.levelname == "DEBUG" and loaded.getMessage().startswith("loading tiny from ")

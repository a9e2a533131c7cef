"""Every warning hookwidgets emits is a HookwidgetsWarning of its own class, and still of the standard category it
had before (UserWarning, RuntimeWarning), so filters on either keep working."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import hookwidgets
import hookwidgets.core
from hookwidgets import HookwidgetsWarning
from hookwidgets.core import Explorer

PACKAGE = Path(hookwidgets.__file__).parent
TEMPLATES = PACKAGE / "core" / "codegen" / "templates"
"""The generated code's source: it runs where hookwidgets is not installed, so it warns with UserWarning."""

CATEGORIES = {
    "MaterializedWarning": UserWarning,
    "ProbeFailedWarning": UserWarning,
    "CompiledModelWarning": UserWarning,
    "FixedModeWarning": UserWarning,
    "AliasWarning": UserWarning,
    "InplaceCollisionWarning": UserWarning,
    "HookFailedWarning": UserWarning,
    "SubscriberWarning": RuntimeWarning,
    "ViewUpdateWarning": UserWarning,
    "PartialGraphWarning": RuntimeWarning,
    "PatchSkippedWarning": UserWarning,
    "BlankMapWarning": UserWarning,
    "UnwatchedModulesWarning": UserWarning,
    "RunLogWarning": RuntimeWarning,
}
"""Each warning class and the category its warnings had before they had a class of their own."""


def warn_calls() -> list[tuple[str, int, str | None]]:
    """(file, line, category as written) of every ``warnings.warn`` call in the package, templates aside."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if TEMPLATES in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "warnings.warn":
                given = node.args[1] if len(node.args) > 1 else None
                given = next((k.value for k in node.keywords if k.arg == "category"), given)
                where = str(path.relative_to(PACKAGE.parent))
                found.append((where, node.lineno, ast.unparse(given) if given is not None else None))
    return found


def test_every_warning_class_is_a_hookwidgets_warning_and_of_its_documented_category():
    public = {name for name in hookwidgets.core.__all__ if name.endswith("Warning")}
    assert public == {*CATEGORIES, "HookwidgetsWarning"}
    assert hookwidgets.HookwidgetsWarning is hookwidgets.core.HookwidgetsWarning
    for name, category in CATEGORIES.items():
        cls = getattr(hookwidgets.core, name)
        assert issubclass(cls, HookwidgetsWarning) and issubclass(cls, category), name


def test_every_warn_call_of_the_package_passes_a_hookwidgets_warning_class():
    calls = warn_calls()
    assert {call[2] for call in calls} >= set(CATEGORIES), calls  # every class is emitted somewhere: none is dead
    classes = {name: getattr(hookwidgets.core, name) for name in CATEGORIES}
    wrong = [call for call in calls if call[2] not in classes]
    assert wrong == []


def test_a_filter_on_the_base_class_or_on_the_former_category_catches_them():
    model = nn.Linear(2, 2)

    def broken(module, args, output):
        raise ValueError("bug")

    with Explorer(model) as ex:
        ex.attach("", "forward", action=broken)
        with pytest.warns(HookwidgetsWarning, match="failed: ValueError"):
            model(torch.ones(1, 2))
        with pytest.warns(UserWarning, match="failed: ValueError"):  # the category it had before
            model(torch.ones(1, 2))
        with warnings.catch_warnings():
            warnings.simplefilter("error", HookwidgetsWarning)
            with pytest.raises(HookwidgetsWarning):
                model(torch.ones(1, 2))


def test_a_partial_graph_is_still_a_runtime_warning():
    class Fails(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x * 2  # a node of the graph, made before the failure
            raise RuntimeError("late failure")

    with Explorer(Fails()) as ex, pytest.warns(RuntimeWarning, match="late failure") as caught:
        ex.graph(torch.ones(2, requires_grad=True))
    assert [w.category.__name__ for w in caught] == ["PartialGraphWarning"]

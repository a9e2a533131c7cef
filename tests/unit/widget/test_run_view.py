"""The run view: ``open_run(log_dir)`` displayed. Its payloads are the log's values, the page's choices redraw it,
it follows the log as it grows until closed, says its errors, and displaying it is what imports the widget."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from IPython.core.formatters import DisplayFormatter
from torch import nn

from hookwidgets import open_run
from hookwidgets.core import Explorer
from hookwidgets.widget import protocol, run_payloads
from hookwidgets.widget.run_payloads import (
    FLAG_MISSING,
    FLAG_NONFINITE,
    FLAG_VALUE,
    grid_of_ranks,
    grid_of_steps,
    run_state,
)
from hookwidgets.widget.run_widget import RunWidget, run_widget

from ._messages import browser_sets
from ._shapes import problems

NAN_STEP = 2
"""The training step (counted from 0) whose input holds a NaN."""


class Branchy(nn.Module):
    """fc → tanh → out, and ``extra`` on odd steps only: a layer with no record in some steps."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 8)
        self.act = nn.Tanh()
        self.extra = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor, extra: bool = False) -> torch.Tensor:
        h = self.act(self.fc(x))
        return self.out(self.extra(h) if extra else h)


def _training(log_dir: Path) -> tuple[Explorer, Callable[[int], None]]:
    """An explorer writing its run log to ``log_dir``, and one training step of its model (a NaN at ``NAN_STEP``)."""
    torch.manual_seed(0)
    model = Branchy()
    ex = Explorer(model)
    ex.attach("", ["global_forward", "global_grad"], action="stats")
    ex.record_to(log_dir)

    def step(k: int) -> None:
        x = torch.randn(3, 4)
        if k == NAN_STEP:
            x[0, 0] = float("nan")
        model.zero_grad()
        model(x, extra=k % 2 == 1).sum().backward()
        assert ex.run_log is not None
        ex.run_log.flush()

    return ex, step


@pytest.fixture
def logged(tmp_path: Path) -> Any:
    ex, step = _training(tmp_path)
    for k in range(4):
        step(k)
    yield tmp_path, step
    ex.close()


def _rows(run: Any, kind: str) -> list[int]:
    return [k for k, layer in enumerate(run.layers) if layer["kind"] == kind]


def _cells(grid: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    shape = (len(grid["rows"]), len(grid["columns"]))
    values = np.frombuffer(grid["values"], "<f4").reshape(shape)
    return values, np.frombuffer(grid["flags"], np.uint8).reshape(shape)


def test_the_heatmap_is_the_logs_values_with_no_record_and_nan_flagged(logged):
    log_dir, _ = logged
    run = open_run(log_dir)
    first = run.first_nonfinite()
    state = run_state(run)
    assert state["first_nonfinite"] == {key: first[key] for key in ("step", "rank", "path", "kind", "phase")}
    assert (state["kind"], state["step"], state["field"]) == (first["kind"], first["step"], "norm")
    assert state["steps"] == run.steps and state["ranks"] == [0] and state["live"]
    assert state["kinds"] == ["global_forward", "global_grad"]

    assert state["rank"] == "all"  # 1 rank × 4 steps: every rank's records taken as one
    grid = grid_of_steps(run, "global_forward", "norm", "all", state["first_nonfinite"])
    rows = _rows(run, "global_forward")
    paths = [run.layers[k]["path"] for k in rows]
    assert grid["rows"] == paths and "extra" in paths
    assert grid["columns"] == [str(step) for step in run.steps]
    values, flags = _cells(grid)
    np.testing.assert_array_equal(values, run.layer_steps("norm")[rows].astype(np.float32))
    nan_column = run.steps.index(first["step"])
    assert flags[paths.index("fc"), nan_column] == FLAG_NONFINITE  # the NaN reached fc's output
    extra = paths.index("extra")
    assert [int(f) for f in flags[extra]] == [FLAG_MISSING, FLAG_VALUE, FLAG_MISSING, FLAG_VALUE]  # odd steps only
    assert grid["mark"] == [paths.index(first["path"]), nan_column]

    ranks = grid_of_ranks(run, "global_grad", "mean", run.steps[-1], state["first_nonfinite"])
    grad_rows = _rows(run, "global_grad")
    assert ranks["rows"] == ["0"] and ranks["columns"] == [run.layers[k]["path"] for k in grad_rows]
    values, _ = _cells(ranks)
    np.testing.assert_array_equal(values, run.rank_layers(run.steps[-1], "mean")[:, grad_rows].astype(np.float32))
    assert ranks["mark"] is None  # the first NaN/Inf is a forward output, of another step


def test_the_ranks_view_marks_the_rank_and_layer_that_went_non_finite_first(tmp_path, monkeypatch):
    for rank in (0, 1):  # two ranks of one job, written one after the other: each names itself by RANK
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        torch.manual_seed(0)
        model = Branchy()
        ex = Explorer(model)
        ex.attach("", "global_forward", action="stats")
        ex.record_to(tmp_path)
        for k in range(3):
            x = torch.randn(3, 4)
            if k == NAN_STEP and rank == 1:
                x[1, 2] = float("inf")
            model(x)
        ex.close()
    run = open_run(tmp_path)
    first = run_state(run)["first_nonfinite"]
    assert first is not None and (first["rank"], first["path"]) == (1, "fc")
    grid = grid_of_ranks(run, "global_forward", "norm", first["step"], first)
    assert grid["rows"] == ["0", "1"] and grid["mark"] == [1, grid["columns"].index("fc")]
    values, flags = _cells(grid)
    rows = _rows(run, "global_forward")
    np.testing.assert_array_equal(values, run.rank_layers(first["step"], "norm")[:, rows].astype(np.float32))
    assert [int(f) for f in flags[:, grid["columns"].index("fc")]] == [FLAG_VALUE, FLAG_NONFINITE]
    heat = grid_of_steps(run, "global_forward", "norm", "all", first)
    _, flags = _cells(heat)
    assert flags[heat["rows"].index("fc"), heat["columns"].index(str(first["step"]))] == FLAG_NONFINITE  # over ranks
    assert heat["title"] == "norm of global_forward per layer and step, over all ranks"
    rank0 = grid_of_steps(run, "global_forward", "norm", "0", first)
    values, flags = _cells(rank0)
    np.testing.assert_array_equal(values, run.layer_steps("norm", rank=0)[rows].astype(np.float32))
    assert not (flags == FLAG_NONFINITE).any() and rank0["mark"] is None  # rank 0 stayed finite
    assert rank0["title"] == "norm of global_forward per layer and step, on rank 0"


def test_on_many_ranks_the_heatmap_shows_one_rank_unless_asked_for_all(logged, monkeypatch):
    log_dir, _ = logged
    run = open_run(log_dir)
    monkeypatch.setattr(run_payloads, "ALL_RANKS_FRAMES", 3)  # 1 rank × 4 steps is past it: as 512 ranks × 200
    assert run_state(run)["rank"] == str(run.first_nonfinite()["rank"])
    assert run_state(run, rank="all")["rank"] == "all"  # chosen in the page: every rank's frames are read
    assert run_state(run, rank="7")["rank"] == "0"  # a rank the log lacks: the default


def test_displaying_a_run_shows_its_widget_and_the_pages_choices_redraw_it(logged):
    log_dir, _ = logged
    run = open_run(log_dir)
    data, _ = DisplayFormatter().format(run)  # what IPython shows for ``run`` at a cell's end
    widget = run_widget(run)
    assert data["application/vnd.jupyter.widget-view+json"]["model_id"] == widget.model_id  # one widget a run
    assert data["text/plain"] == repr(run)
    try:
        assert widget.tree["children"][0]["path"] == "fc"  # the structure file's tree
        assert widget.run["first_nonfinite"]["path"] == run.first_nonfinite()["path"]
        browser_sets(widget, kind="global_grad", field="std", step=run.steps[0])
        assert (widget.run["kind"], widget.run["field"], widget.run["step"]) == ("global_grad", "std", run.steps[0])
        assert widget.heatmap["title"].startswith("std of global_grad per layer and step")
        assert widget.ranks_view["title"] == f"std of global_grad per rank and layer at step {run.steps[0]}"
        browser_sets(widget, kind="nope", field="nope", step=10_000)  # a stale choice falls back to the defaults
        assert (widget.run["kind"], widget.run["field"]) == ("global_forward", "norm")
        assert widget.run["step"] == run.first_nonfinite()["step"]
        assert widget.error == ""
        for name, shape in protocol.RUN_TRAITLETS.items():  # every traitlet has its declared shape
            assert problems(getattr(widget, name), shape, name) == []
    finally:
        widget.close()


def _wait(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout:.0f} s")
        time.sleep(0.05)


def _pollers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "hookwidgets-run-view"]


def test_the_view_follows_the_log_as_it_grows_until_closed(logged):
    log_dir, step = logged
    before = len(_pollers())
    widget = run_widget(open_run(log_dir))
    assert len(_pollers()) == before + 1
    steps = list(widget.run["steps"])
    step(4)  # written after the view opened
    _wait(lambda: widget.run["steps"] == [*steps, steps[-1] + 1], "the new step reached the view")
    assert widget.heatmap["columns"][-1] == str(steps[-1] + 1) and widget.run["live"]
    widget.close()
    _wait(lambda: len(_pollers()) == before, "the poll thread ended with the widget")
    assert (widget.run["live"], widget.run["stopped"]) == (False, "the view was closed")


def test_the_view_stops_following_once_every_rank_closed_its_log(tmp_path):
    ex, step = _training(tmp_path)
    step(0)
    before = len(_pollers())
    widget = run_widget(open_run(tmp_path))
    try:
        assert widget.run["live"] and widget.run["stopped"] == ""
        ex.close()  # writes the open step and closes the log
        _wait(lambda: not widget.run["live"], "the view stopped following")
        assert widget.run["stopped"] == "every rank closed its log"
        assert widget.run["steps"] == [1]
        _wait(lambda: len(_pollers()) == before, "the poll thread ended")
    finally:
        widget.close()


def test_an_error_reading_the_log_is_shown_in_the_widget(logged, monkeypatch):
    log_dir, _ = logged
    run = open_run(log_dir)
    widget = run_widget(run)
    try:

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise OSError("the shared filesystem went away")

        monkeypatch.setattr(run, "layer_steps", broken)
        browser_sets(widget, field="mean")
        assert widget.error == "could not show the run log: OSError: the shared filesystem went away"
        monkeypatch.undo()
        browser_sets(widget, field="std")
        assert widget.error == "" and widget.run["field"] == "std"
    finally:
        widget.close()


def test_a_closed_widget_is_replaced_on_the_next_display(logged):
    log_dir, _ = logged
    run = open_run(log_dir)
    widget = run_widget(run)
    assert run_widget(run) is widget
    widget.close()
    again = run_widget(run)
    try:
        assert isinstance(again, RunWidget) and again is not widget and again.run["live"]
    finally:
        again.close()


def test_reading_a_run_log_imports_no_widget(tmp_path):
    code = (
        "import sys, hookwidgets, hookwidgets.distributed; hookwidgets.open_run; "
        "print(sorted(m for m in sys.modules if m.startswith(('hookwidgets.widget', 'anywidget', 'ipywidgets'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"

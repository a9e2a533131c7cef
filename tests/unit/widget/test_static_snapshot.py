"""Where widgets do not run (GitHub, nbviewer, nbconvert, a saved page) the explorer shows a static snapshot."""

from __future__ import annotations

import base64
import html
import re

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer
from tests.unit.widget._display import WIDGET_MIME, shown

HOSTILE = "<script>alert(1)</script>"


def _hostile_model() -> nn.Sequential:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    model.add_module(HOSTILE, nn.Linear(8, 2))
    return model


def _row(page: str, title: str) -> str:
    """The tree row of the module whose path is ``title`` (as escaped in the page)."""
    found = re.search(rf'<div class="hw-s-row[^"]*" title="{re.escape(title)}">.*?</div>', page)
    assert found, f"no tree row for {title!r}"
    return found.group(0)


def test_the_repr_and_the_plain_text_say_what_the_explorer_holds(shell):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
    with HookExplorer(model, example_inputs=torch.randn(2, 4)) as ex:
        assert repr(ex) == "<HookExplorer of Sequential: 3 modules, 0 hooks, step 0>"
        data = shown(ex)
        assert data["text/plain"] == repr(ex)
        assert data[WIDGET_MIME]["model_id"] == ex.view.model_id  # the live widget is still what Lab shows
        assert "text/html" in data
        ex.attach("0", "forward")
        ex.run()
        assert shown(ex)["text/plain"] == "<HookExplorer of Sequential: 3 modules, 1 hook, step 1>"
    closed = shown(ex)  # a closed explorer shown again: its text, no widget
    assert closed["text/plain"] == "<HookExplorer of Sequential: 3 modules, closed>"
    with HookExplorer(nn.Linear(2, 2)) as single:
        assert repr(single) == "<HookExplorer of Linear: 1 module, 0 hooks, step 0>"
    assert WIDGET_MIME not in closed
    assert "closed: hooks removed, model as found" in closed["text/html"]


def test_the_snapshot_shows_the_tree_badges_and_figures_with_no_script_and_names_escaped(shell):
    with HookExplorer(_hostile_model(), example_inputs=torch.randn(3, 4)) as ex:
        ex.attach(HOSTILE, ["forward", "grad"])
        ex.run(target=0)
        ex.view.selected = HOSTILE  # the figures of the selection, as the page would show them
        page = shown(ex)["text/html"]

    assert "<script" not in page.lower()  # no script at all: the module's name is text
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert f"<span>{escaped}</span>" in page
    row = _row(page, escaped)
    assert "(3, 2) float32" in row  # its output's shape from the probe
    assert re.findall(r'data-kind="(\w+)"[^>]*>(\w+ \d+)</span>', row) == [("forward", "fwd 1"), ("grad", "grad 1")]
    assert "hw-s-badge" not in _row(page, "1")  # ReLU has no hook
    # Where the page drops the <style> (GitHub, an untrusted notebook in Lab), the row's text still reads.
    text = html.unescape(re.sub(r"<[^>]+>", "", row))
    assert text == "\u00a0\u00a0<script>alert(1)</script> Linear (3, 2) float32 fwd 1 grad 1"
    assert f"Figures of {escaped}" in page
    images = re.findall(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 2  # the forward capture and the gradient, as the widget drew them
    assert all(base64.b64decode(image)[:8] == b"\x89PNG\r\n\x1a\n" for image in images)
    assert "forward · " in page and "3×2 · step 1" in page  # their captions: kind, shape, step
    assert "<HookExplorer" not in page and "&lt;HookExplorer of Sequential: 4 modules, 2 hooks, step 1&gt;" in page


def test_the_snapshot_is_bounded_and_says_what_it_left_out(shell):
    model = nn.Sequential(*(nn.Linear(2, 2) for _ in range(300)))
    with HookExplorer(model, example_inputs=torch.randn(1, 2)) as ex:
        ex.attach("", "global_forward", action="stats")
        ex.run()
        page = shown(ex)["text/html"]

    assert "<h3>Modules (301)</h3>" in page
    assert page.count('<div class="hw-s-row') == 200
    assert "… 101 more modules not shown (the snapshot shows the first 200)" in page
    table = page[page.index("<h3>Summary") :]
    assert table.count("<tr><td>") == 100 and "… 201 more layers not shown" in table  # the model and 300 layers
    assert len(re.findall(r'<td class="hw-s-num">-?\d[\d.e+-]*</td>', table)) > 100  # values, formatted
    assert len(page) < 400_000


def test_the_summary_table_and_heatmap_are_in_the_snapshot(shell):
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with HookExplorer(model, example_inputs=torch.randn(3, 4)) as ex:
        ex.attach("", "global_forward", action="stats")
        ex.run()
        ex.run()
        page = shown(ex)["text/html"]
    badges = re.findall(r'data-kind="(\w+)"[^>]*>(\w+ \d+)</span>', _row(page, "Sequential"))
    assert badges == [("global_forward", "global_forward 2")]  # counted in steps, as the widget does: not 4 × 2
    summary = page[page.index("<h3>Summary, step 2</h3>") :]
    assert 'alt="summary heatmap"' in summary
    header = re.search(r"<table><tr>(.*?)</tr>", summary)
    assert header and "<th>path</th>" in header.group(1) and "<th>act_norm</th>" in header.group(1)
    assert [m for m in re.findall(r"<tr><td>([^<]*)</td>", summary)] == ["(model)", "0", "1", "2"]


def test_save_html_writes_a_standalone_page_and_names_a_wrong_path(tmp_path):
    with HookExplorer(_hostile_model(), example_inputs=torch.randn(3, 4)) as ex:
        ex.attach("0", "forward")
        ex.run()
        ex.view.selected = "0"
        path = ex.save_html(tmp_path / "explorer.html")
        assert path == tmp_path / "explorer.html"
        page = path.read_text(encoding="utf-8")
        assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
        assert "<title>&lt;HookExplorer of Sequential: 4 modules, 1 hook, step 1&gt;</title>" in page
        assert "<script" not in page.lower() and page.count("data:image/png;base64,") == 1
        assert "prefers-color-scheme:dark" in page  # readable on a dark system too
        with pytest.raises(IsADirectoryError, match="is a folder: give a file path"):
            ex.save_html(tmp_path)
        with pytest.raises(FileNotFoundError, match=r"the folder .*missing.* does not exist: create it first"):
            ex.save_html(tmp_path / "missing" / "explorer.html")


def test_the_snapshot_keeps_eight_figures_and_counts_the_others(shell):
    kinds = ["forward_pre", "forward", "backward_pre", "backward", "grad"]
    with HookExplorer(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), example_inputs=torch.randn(3, 4)) as ex:
        ex.attach("", kinds + [f"global_{kind}" for kind in kinds])  # ten figures for the model, the selection
        ex.run(target=0)
        assert len(ex.view.plots["items"]) == 10
        page = shown(ex)["text/html"]
    figures = page[page.index("<h3>Figures of (model)</h3>") :]
    assert figures.count('<img src="data:image/png;base64,') == 8
    assert "2 more figures left out (the snapshot keeps 8 figures, 2 MB of images)" in figures

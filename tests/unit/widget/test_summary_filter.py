"""The summary's filter (text in the path, blocks only, module class), driven through the browser's messages."""

from __future__ import annotations

import numpy as np
import pytest

from hookwidgets import HookExplorer
from tests import transformer_models as tm

from ._messages import browser_sends, summary_rows

LAYERS = 6


@pytest.fixture(scope="module")
def gpt2_stats():
    """A 6-block GPT-2 with stats on every layer's output and gradient, after two Runs."""
    with HookExplorer(tm.gpt2(layers=LAYERS), example_inputs=tm.token_ids()) as ex:
        for kind in ("global_forward", "global_grad"):
            browser_sends(ex.view, type="attach", path="", kind=kind, action="stats", edit=None)
        browser_sends(ex.view, type="run")
        browser_sends(ex.view, type="run")
        yield ex


def _paths(summary):
    return [row["path"] for row in summary_rows(summary)]


def _heatmap_height(summary) -> int:
    png = bytes(summary["heatmap"])
    return int.from_bytes(png[20:24], "big")  # the PNG header's height


def test_the_summary_names_the_blocks_and_classes_and_keeps_every_layer_unfiltered(gpt2_stats):
    view = gpt2_stats.view
    browser_sends(view, type="summary", filter="", blocks_only=False, module_class="")
    summary = view.summary
    assert summary["blocks"] == [f"transformer.h.{i}" for i in range(LAYERS)]  # found by structure
    assert summary["filter"] == {"text": "", "blocks_only": False, "module_class": ""}
    assert summary["total"] == len(summary["rows"]) > 12 * LAYERS  # every layer that ran
    assert {"GPT2Block", "Conv1D", "LayerNorm"} <= set(summary["classes"])


def test_the_filter_cuts_the_table_and_the_heatmap_to_the_layers_it_keeps(gpt2_stats):
    view = gpt2_stats.view
    browser_sends(view, type="summary", filter="", blocks_only=False, module_class="")
    every_height = _heatmap_height(view.summary)

    browser_sends(view, type="summary", filter="MLP.C_FC")  # any case
    summary = view.summary
    assert _paths(summary) == [f"transformer.h.{i}.mlp.c_fc" for i in range(LAYERS)]
    assert summary["filter"]["text"] == "MLP.C_FC" and summary["total"] > len(summary["rows"])
    assert _heatmap_height(summary) < every_height  # drawn for the kept layers only

    browser_sends(view, type="summary", filter="", blocks_only=True)
    assert _paths(view.summary) == [f"transformer.h.{i}" for i in range(LAYERS)]

    browser_sends(view, type="summary", blocks_only=False, module_class="LayerNorm", filter="h.1")
    assert _paths(view.summary) == ["transformer.h.1.ln_1", "transformer.h.1.ln_2"]
    assert view.summary["filter"] == {"text": "h.1", "blocks_only": False, "module_class": "LayerNorm"}

    browser_sends(view, type="summary", filter="no such layer", module_class="")
    summary = view.summary
    assert summary["rows"] == [] and summary["heatmap"] is None and summary["heatmap_hover"] is None
    assert summary["total"] > 12 * LAYERS
    browser_sends(view, type="summary", filter="")


def test_the_root_is_found_by_its_shown_name(gpt2_stats):
    view = gpt2_stats.view
    browser_sends(view, type="summary", filter="(MODEL)")
    assert _paths(view.summary) == [""]
    browser_sends(view, type="summary", filter="")


def test_the_heatmap_comes_with_its_hover_description(gpt2_stats):
    view = gpt2_stats.view
    browser_sends(view, type="summary", filter="", blocks_only=True, module_class="")
    hover = view.summary["heatmap_hover"]
    png = bytes(view.summary["heatmap"])
    width = int.from_bytes(png[16:20], "big")
    assert hover is not None and hover["width"] == pytest.approx(width / hover["ratio"], abs=1)
    for region in hover["regions"]:  # the figure's described cells: one row per kept layer
        if region["type"] == "cells":
            assert region["rows"] == LAYERS
            assert np.frombuffer(region["values"], dtype="<f4").size == region["rows"] * region["cols"]
    browser_sends(view, type="summary", blocks_only=False)


def test_a_global_hook_says_the_steps_it_fired_in_beside_its_firings_over_modules(gpt2_stats):
    view = gpt2_stats.view
    hooks = {hook["kind"]: hook for hook in view.hooks}
    forward = hooks["global_forward"]
    assert forward["steps"] == 2  # two Runs
    assert forward["fired"] == 2 * len(view.summary["rows"])  # every layer that ran, each step
    browser_sends(view, type="attach", path="transformer.h.0", kind="forward", action="capture", edit=None)
    browser_sends(view, type="run")
    hooks = {hook["kind"]: hook for hook in view.hooks}
    assert hooks["global_forward"]["steps"] == 3 and hooks["forward"]["steps"] == hooks["forward"]["fired"] == 1

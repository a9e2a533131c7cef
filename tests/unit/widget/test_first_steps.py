"""What a first look at the explorer reads: a failed shape probe named as such, the common hook kinds marked for the
inspector's first group, attribution methods named in words, and a graph panel that may record on its first visit."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.core import METHOD_WORDS, METHODS, ProbeFailedWarning, method_name

from ._messages import browser_sends, browser_sets


def test_a_failed_shape_probe_is_named_in_the_status():
    model = nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2))
    with pytest.warns(ProbeFailedWarning):
        ex = HookExplorer(model, example_inputs=torch.randn(1, 5))
    with ex:
        output = ex.view.status["output"]
        assert output["kind"] == "none"
        assert output["probe_failed"] == (
            "the shape probe failed: RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x5 and 4x3)"
        )
        browser_sends(ex.view, type="run")  # the example inputs fail again: the error says why, the run bar still
        assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied" in ex.view.error
        assert ex.view.status["output"]["probe_failed"].startswith("the shape probe failed: RuntimeError")


def test_a_probe_that_worked_names_no_failure(explorer):
    assert explorer.view.status["output"]["probe_failed"] == ""


def test_the_attribution_menu_names_each_method_in_words_and_takes_its_id(explorer):
    view = explorer.view
    browser_sets(view, selected="features.conv")
    selection = view.selection
    assert selection["attribution_methods"][:2] == ["gradcam", "gradcam++"]  # the ids, unchanged
    words = selection["attribution_words"]
    assert list(words) == selection["attribution_methods"]
    assert words["gradcam"]["name"] == "Grad-CAM" and words["input_x_grad"]["name"] == "input × gradient"
    assert words["guided_gradcam"]["tip"] == "guided backprop times this layer's Grad-CAM"
    browser_sends(view, type="attribute", layer="features.conv", method="input_x_grad", target=3)
    assert view.attribution["method"] == "input_x_grad"
    assert view.attribution["caption"] == "input × gradient of class 3 over the input"
    assert view.status["message"] == "input × gradient of class 3 over the input"


def test_every_method_has_its_name_in_words():
    assert set(METHOD_WORDS) == set(METHODS)
    assert method_name("grad_attention_rollout") == "gradient-weighted attention rollout"
    assert method_name("integrated_gradients") == "integrated gradients"
    assert method_name("not a method") == "not a method"


def test_the_kind_table_marks_the_common_kinds_the_inspector_offers_first(explorer):
    common = [(row["kind"], row["family"]) for row in explorer.view.hook_kinds if row["common"]]
    assert common == [("forward", "module"), ("grad", "module"), ("grad", "param")]
    assert all(row["common"] is False for row in explorer.view.hook_kinds if row["family"] in ("global", "node"))


def test_the_graph_panel_knows_it_can_record_on_its_first_visit(explorer, cnn):
    view = explorer.view
    assert view.graph == {"autograd": None, "dataflow": None, "error": "", "recordable": True}
    browser_sends(view, type="graph")  # what the panel sends on its first visit
    assert view.graph["recordable"] and "ConvolutionBackward0" in view.graph["autograd"]["ops"]
    with HookExplorer(cnn) as bare:  # no example inputs: nothing to record, the panel waits for ex.graph(x)
        assert bare.view.graph["recordable"] is False and bare.view.graph["autograd"] is None

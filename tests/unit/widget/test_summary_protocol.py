"""The summary view, the plot views and "attribution here", driven through the browser's messages."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer
from tests.conftest import SideBranch

from ._messages import browser_sends, browser_sets, summary_rows
from ._setups import backward_hook_an_in_place_op_breaks

PNG = b"\x89PNG\r\n\x1a\n"


class NaNAfterFc1(nn.Module):
    """fc1 → log of a negative number (NaN) → fc2: the first non-finite output is 'log'."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.act = nn.ReLU()
        self.log = Log()
        self.fc2 = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.log(self.act(self.fc1(x)) - 1.0))


class Log(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x)


def test_stats_on_every_layer_fill_the_summary_table_and_heatmap(cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        assert view.summary["rows"] == [] and "No statistics yet" in view.summary["message"]
        for hook in ("global_forward", "global_backward"):  # what "Stats on every layer" sends
            browser_sends(view, type="attach", path="", kind=hook, action="stats", edit=None)
        browser_sends(view, type="run")
        browser_sends(view, type="run")
        summary = view.summary
        assert summary["steps"] == [1, 2] and summary["step"] == 2
        rows = summary_rows(summary)
        layers = [row["path"] for row in rows]
        assert layers == [p for p, _ in cnn.named_modules()]  # every layer, in execution order
        fc = next(row for row in rows if row["path"] == "head.fc")
        (expected,) = [r for r in ex.summary() if r["step"] == 2 and r["path"] == "head.fc"]
        assert fc["act_norm"] > 0 and fc["grad_norm"] > 0
        assert fc["act_norm"] == pytest.approx(expected["act_norm"], rel=1e-6)  # 7 significant digits on the wire
        assert summary["columns"][0] == "path" and "act_calls" not in summary["columns"]
        assert summary["heatmap"][:8] == PNG and summary["field"] == "grad_norm"
        assert summary["nonfinite"] == [] and summary["first_nonfinite"] is None

        browser_sends(view, type="summary", field="act_norm", step=1)
        assert view.summary["field"] == "act_norm" and view.summary["step"] == 1
        assert view.summary["heatmap"] != summary["heatmap"]


def test_the_heatmap_names_the_root_row(cnn, image):
    from hookwidgets.plots import summary_heatmap_figure

    with HookExplorer(cnn, example_inputs=image) as ex:
        ex.attach("", "global_forward", action="stats")
        ex.run()
        rows = ex.summary()
        layers = [p for p, _ in cnn.named_modules()]
        figure = summary_heatmap_figure(rows, "act_norm", layers=layers)
        labels = [tick.get_text() for tick in figure.axes[0].get_yticklabels()]
        assert labels == ["(model)", *layers[1:]]  # the root's path is "", its label is not blank


def test_the_first_non_finite_layer_is_highlighted_and_found_on_demand():
    torch.manual_seed(0)
    model = NaNAfterFc1()
    with HookExplorer(model, example_inputs=torch.randn(2, 4)) as ex:
        view = ex.view
        ex.attach("", ["global_forward"], action="stats")
        ex.run()
        assert view.summary["nonfinite"][:2] == ["", "log"]  # the model's own output holds NaN too
        assert "fc1" not in view.summary["nonfinite"]
        assert view.summary["first_nonfinite"] == "log"  # the earliest forward to output NaN, not the model
        browser_sends(view, type="find_nonfinite")
        assert view.summary["first_nonfinite"] == "log"
        assert "first NaN/Inf output: log" in view.status["message"]


def test_plot_views_switch_between_maps_and_histogram(cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        browser_sets(view, selected="features.conv")
        ex.attach("features.conv", "forward")
        ex.run()
        (maps,) = view.plots["items"]
        assert maps["view"] == "maps" and maps["views"] == ["maps", "histogram"]
        browser_sends(view, type="plot_view", kind="forward", view="histogram")
        (histogram,) = view.plots["items"]
        assert histogram["view"] == "histogram" and histogram["png"][:8] == PNG
        assert histogram["png"] != maps["png"]


def test_a_stats_hook_is_drawn_as_statistics_over_steps(cnn, image):
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        browser_sets(view, selected="head.fc")
        ex.attach("head.fc", "forward", action="stats")
        for _ in range(3):
            ex.run()
        (item,) = view.plots["items"]
        assert item["view"] == "stats" and item["step"] == 3 and item["png"][:8] == PNG


def test_attribution_here_draws_the_cam_of_the_selected_layer():
    from hookwidgets.examples import digit_image, pretrained_digits_cnn

    model = pretrained_digits_cnn()
    x, label = digit_image(0)
    with HookExplorer(model, example_inputs=x) as ex:
        view = ex.view
        browser_sets(view, selected="features.conv2")
        browser_sends(view, type="attribute", layer="features.conv2", method="gradcam", target="top")
        result = view.attribution
        assert result["error"] == "" and result["png"][:8] == PNG
        assert result["input_png"][:8] == PNG  # the input, drawn beside its map
        assert result["caption"] == f"Grad-CAM of class {label} at features.conv2"
        browser_sends(view, type="attribute", layer="features.conv2", method="saliency", target=3)
        assert view.attribution["caption"].startswith("saliency of class 3")

        browser_sends(view, type="attribute", layer="classifier.fc", method="gradcam", target="top")
        failed = view.attribution
        assert "features." in failed["error"] and failed["png"] is None and failed["input_png"] is None  # names layers
        browser_sends(view, type="attribute", layer="features.conv2", method="gradcam", target=42)
        assert "10" in view.attribution["error"]  # the number of classes
        assert all(p.grad is None for p in model.parameters())


def test_a_blank_map_says_why_in_the_panel_not_only_in_a_log(image):
    torch.manual_seed(0)
    with HookExplorer(SideBranch(), example_inputs=image) as ex:
        browser_sets(ex.view, selected="side")
        browser_sends(ex.view, type="attribute", layer="side", method="gradcam", target="top")
        result = ex.view.attribution
        assert result["error"] == "" and result["png"][:8] == PNG
        assert "layer 'side' gets a zero gradient at every position" in result["note"]
        assert "such as 'used'" in result["note"]
        browser_sends(ex.view, type="attribute", layer="used", method="gradcam", target="top")
        assert ex.view.attribution["note"] == ""


def test_a_hook_an_attribution_detaches_leaves_the_hook_list_and_the_panel_says_why(image):
    with backward_hook_an_in_place_op_breaks(image) as ex:
        browser_sends(ex.view, type="attribute", layer="conv", method="gradcam", target="top")
        result = ex.view.attribution
        assert result["error"] == "" and result["png"][:8] == PNG
        assert "full backward hook 'backward' on 'conv'" in result["note"]
        assert ex.view.hooks == [] and ex.view.diagnostics == ex.diagnostics != []


@pytest.mark.parametrize("target", [1.5, "3x", True])
def test_an_attribution_class_that_is_no_class_index_is_an_error_in_the_panel(cnn, image, target):
    with HookExplorer(cnn, example_inputs=image) as ex:
        browser_sends(ex.view, type="attribute", layer="features.conv", method="gradcam", target=target)
        assert f"the widget sent the attribution target {target!r}; expected" in ex.view.attribution["error"]
        browser_sends(ex.view, type="attribute", layer="features.conv", method="gradcam", target=2.0)
        assert ex.view.attribution["error"] == "" and "of class 2 at features.conv" in ex.view.attribution["caption"]


@pytest.mark.parametrize("method", ["nonsense"])
def test_an_unknown_attribution_method_is_an_error_in_the_panel(cnn, image, method):
    with HookExplorer(cnn, example_inputs=image) as ex:
        browser_sends(ex.view, type="attribute", layer="features.conv", method=method, target="top")
        assert "unknown attribution method 'nonsense'" in ex.view.attribution["error"]


class LogOfFc(nn.Module):
    """The model's own forward takes the log: the first non-finite output is the model's, not a submodule's."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(self.fc(x))


def test_find_nonfinite_names_the_model_itself_as_model():
    torch.manual_seed(0)
    with HookExplorer(LogOfFc(), example_inputs=torch.randn(2, 4)) as ex:
        view = ex.view
        browser_sends(view, type="find_nonfinite")
        assert view.summary["first_nonfinite"] == ""
        assert view.status["message"] == "first NaN/Inf output: (model)"

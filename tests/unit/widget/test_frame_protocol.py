"""The figure pane the page reports (the ``frame`` traitlet): every figure is rendered at its pixel ratio, carries
what it tells under the mouse (``hover``), and is drawn again when the pane or the ratio changes."""

from __future__ import annotations

import io

import matplotlib.image
import torch

from hookwidgets import HookExplorer
from tests import transformer_models as tm

from ._messages import browser_sends, browser_sets


def _size(png: bytes) -> tuple[int, int]:
    """A PNG's natural (width, height) in pixels."""
    height, width = matplotlib.image.imread(io.BytesIO(png)).shape[:2]
    return width, height


def _figures(view) -> dict[str, tuple[bytes, dict]]:
    """Every figure the view shows with its hover, by where it is."""
    shown = {f"plot {item['kind']}": (item["png"], item["hover"]) for item in view.plots["items"]}
    ratios = view.training.get("ratios") or {}
    shown["ratios"] = (ratios.get("png"), ratios.get("hover"))
    shown["attribution"] = (view.attribution.get("png"), view.attribution.get("hover"))
    shown["input"] = (view.attribution.get("input_png"), view.attribution.get("input_hover"))
    return shown


def _setup(ex: HookExplorer, model: torch.nn.Module, image: torch.Tensor) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ex.watch_optimizer(optimizer)
    view = ex.view
    browser_sends(view, type="attach", path="features.conv", kind="forward", action="capture")
    browser_sets(view, selected="features.conv")
    for _ in range(2):  # the user's steps: captures and update ratios
        model(image).sum().backward()
        optimizer.step()
    browser_sends(view, type="run", target="top")
    browser_sends(view, type="attribute", layer="features.act", method="gradcam", target="top")


def test_every_figure_carries_its_hover_at_the_frames_pixel_ratio(cnn, image):
    cnn.eval()
    with HookExplorer(cnn, example_inputs=image) as ex:
        _setup(ex, cnn, image)
        browser_sets(ex.view, frame={"width": 480, "ratio": 2})
        figures = _figures(ex.view)
        assert set(figures) == {"plot forward", "ratios", "attribution", "input"} and not ex.view.error
        for where, (png, hover) in figures.items():
            assert png and hover is not None, where
            assert hover["ratio"] == 2.0, where
            width, height = _size(png)
            assert abs(width - 2 * hover["width"]) <= 2 and abs(height - 2 * hover["height"]) <= 2, where


def test_a_frame_change_redraws_every_figure_at_the_new_ratio_and_back(cnn, image):
    cnn.eval()
    with HookExplorer(cnn, example_inputs=image) as ex:
        _setup(ex, cnn, image)
        view = ex.view
        ones = {where: _size(png) for where, (png, _) in _figures(view).items()}
        assert {hover["ratio"] for _, hover in _figures(view).values()} == {1.0}  # the default until reported
        browser_sets(view, frame={"width": 720, "ratio": 2})
        twos = {where: _size(png) for where, (png, _) in _figures(view).items()}
        for where, (w, h) in ones.items():  # the same figure at twice the device pixels
            assert abs(twos[where][0] - 2 * w) <= 2 and abs(twos[where][1] - 2 * h) <= 2, where
        browser_sets(view, frame={"width": 720, "ratio": 1})  # back: the cache gives no image of the other ratio
        assert {where: _size(png) for where, (png, _) in _figures(view).items()} == ones
        assert not view.error


def test_the_patching_figure_follows_the_frame():
    ids = tm.token_ids(batch=2, length=6)
    with HookExplorer(tm.gpt2(), example_inputs=ids[:1]) as ex:
        assert ex.view.frame == {"width": 0, "ratio": 1.0}  # until the page reports
        ex.patch_sweep(ids[:1], ids[1:])
        one = _size(ex.view.patching["png"])
        assert ex.view.patching["hover"]["ratio"] == 1.0
        browser_sets(ex.view, frame={"width": 720, "ratio": 2})
        assert ex.view.patching["hover"]["ratio"] == 2.0
        assert abs(_size(ex.view.patching["png"])[0] - 2 * one[0]) <= 2


def _gpt2_explorer() -> HookExplorer:
    tokenizer = tm.tokenizer()
    batch = tokenizer("the cat sat on a mat", return_tensors="pt")
    return HookExplorer(tm.gpt2(vocab=len(tokenizer)), example_inputs=batch, tokenizer=tokenizer)


def _heads(view) -> dict:
    return next(item for item in view.plots["items"] if item["kind"] == "attention")


def test_the_heads_view_offers_its_scales_and_a_plot_view_message_refuses_another():
    with _gpt2_explorer() as ex:
        view = ex.view
        browser_sets(view, selected="transformer.h.1.attn")
        item = _heads(view)
        assert item["scales"] == ["linear", "per-row", "log"] and item["scale"] == "linear"
        reply = browser_sends(view, type="plot_view", kind="attention", scale="sqrt")
        assert "linear, per-row, log" in reply["error"] and "'sqrt'" in reply["error"]
        assert _heads(view)["scale"] == "linear"


def test_a_chosen_scale_is_drawn_and_said_by_the_item():
    with _gpt2_explorer() as ex:
        view = ex.view
        browser_sets(view, selected="transformer.h.1.attn")
        linear = _heads(view)
        assert browser_sends(view, type="plot_view", kind="attention", scale="log")["error"] == ""
        logged = _heads(view)
        assert logged["scale"] == "log" and logged["png"] != linear["png"] and not view.error
        browser_sends(view, type="plot_view", kind="attention", head=1)  # the scale stays chosen
        assert _heads(view)["scale"] == "log" and _heads(view)["head"] == 1

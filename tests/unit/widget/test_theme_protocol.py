"""The page's theme (the ``theme`` traitlet the browser writes): every image the view shows is drawn in it, and
drawn again when it changes."""

from __future__ import annotations

import io

import matplotlib.image
import numpy as np
import torch

from hookwidgets import HookExplorer
from tests import transformer_models as tm

from ._messages import browser_sends, browser_sets

DARK = {"name": "dark", "background": "#1e1e1e", "foreground": "#d4d4d4"}
LIGHT = {"name": "light", "background": "#ffffff", "foreground": "#212121"}


def _corner(png: bytes) -> tuple[int, int, int]:
    """The top-left pixel of a PNG as 0–255 RGB: the figure's background."""
    pixels = matplotlib.image.imread(io.BytesIO(png))
    return tuple(round(255 * float(c)) for c in pixels[0, 0, :3])


def _images(view) -> dict[str, bytes]:
    """Every PNG the view shows, by where it is."""
    images = {f"plot {i}": item["png"] for i, item in enumerate(view.plots["items"]) if item.get("png")}
    images["summary"] = view.summary.get("heatmap")
    images["ratios"] = (view.training.get("ratios") or {}).get("png")
    images["attribution"] = view.attribution.get("png")
    images["input"] = view.attribution.get("input_png")
    return images


def test_a_theme_change_redraws_every_image_on_the_pages_background(cnn, image):
    cnn.eval()
    optimizer = torch.optim.SGD(cnn.parameters(), lr=0.1)
    with HookExplorer(cnn, example_inputs=image) as ex:
        view = ex.view
        assert view.theme == {"name": "light", "background": "", "foreground": ""}  # until the page reports
        ex.watch_optimizer(optimizer)
        browser_sends(view, type="attach", path="", kind="global_grad", action="stats")
        browser_sends(view, type="attach", path="features.conv", kind="forward", action="capture")
        browser_sets(view, selected="features.conv")
        for _ in range(2):  # the user's steps: statistics, captures and update ratios
            cnn(image).sum().backward()
            optimizer.step()
        browser_sends(view, type="run", target="top")
        browser_sends(view, type="attribute", layer="features.act", method="gradcam", target="top")
        images = _images(view)
        assert all(images.values()), [k for k, v in images.items() if not v]
        assert {_corner(png) for png in images.values()} == {(255, 255, 255)}

        browser_sets(view, theme=DARK)
        dark = _images(view)
        assert dark.keys() == images.keys()
        assert {where: _corner(png) for where, png in dark.items()} == dict.fromkeys(dark, (30, 30, 30))

        browser_sets(view, theme=LIGHT)  # and back: nothing kept from the dark drawing
        assert {_corner(png) for png in _images(view).values()} == {(255, 255, 255)}


def test_a_redraw_in_the_new_theme_does_not_run_the_attribution_again(cnn, image):
    cnn.eval()
    with HookExplorer(cnn, example_inputs=image) as ex:
        browser_sends(ex.view, type="attribute", layer="features.act", method="gradcam", target="top")
        shown = dict(ex.view.attribution)
        steps = ex.step
        browser_sets(ex.view, theme=DARK)
        assert ex.step == steps  # no forward: the kept map was drawn again
        assert {k: v for k, v in ex.view.attribution.items() if "png" not in k} == {
            k: v for k, v in shown.items() if "png" not in k
        }
        assert _corner(ex.view.attribution["png"]) == (30, 30, 30)
        browser_sets(ex.view, selected="features.conv")  # a new selection keeps the map: it is redrawn too
        browser_sets(ex.view, theme=LIGHT)
        assert ex.step == steps and _corner(ex.view.attribution["png"]) == (255, 255, 255)


def test_the_patching_figure_follows_the_theme():
    ids = tm.token_ids(batch=2, length=6)
    with HookExplorer(tm.gpt2(), example_inputs=ids[:1]) as ex:
        browser_sets(ex.view, theme=DARK)
        ex.patch_sweep(ids[:1], ids[1:])
        assert _corner(ex.view.patching["png"]) == (30, 30, 30)  # drawn in the page's theme
        browser_sets(ex.view, theme=LIGHT)
        assert _corner(ex.view.patching["png"]) == (255, 255, 255)


def test_an_odd_theme_from_the_page_draws_in_the_named_themes_colours(cnn, image):
    cnn.eval()
    with HookExplorer(cnn, example_inputs=image) as ex:
        browser_sends(ex.view, type="attach", path="features.conv", kind="forward", action="capture")
        browser_sets(ex.view, selected="features.conv")
        browser_sends(ex.view, type="run", target="top")
        browser_sets(ex.view, theme={"name": "dark", "background": "url(javascript:1)", "foreground": ""})
        png = ex.view.plots["items"][0]["png"]
        assert _corner(png) == (17, 17, 17) and not ex.view.error  # the dark theme's own background
        assert np.asarray(matplotlib.image.imread(io.BytesIO(png))).shape[-1] in (3, 4)

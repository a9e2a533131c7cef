"""The widget in JupyterLab's light and dark themes: the page tells the kernel its theme, every figure is drawn on
the page's background (no white box in dark mode), and every text of the widget reads at 4.5:1 or more."""

from __future__ import annotations

import contextlib

import pytest
from playwright.sync_api import Locator
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from ._lab import Lab, Notebook7, show_tab
from .test_transformers import _theme

pytestmark = pytest.mark.e2e

EXPLORER = """
import torch
from hookwidgets import HookExplorer
from hookwidgets.examples import DigitsCNN

torch.manual_seed(0)
model = DigitsCNN()
x = torch.randn(4, 1, 16, 16)
ex = HookExplorer(model, example_inputs=x)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
ex.watch_optimizer(opt)
ex.attach("", ["global_forward", "global_grad"], action="stats")
ex.attach("features.conv1", "forward", action="capture")
for step in range(3):  # the user's loop: statistics per layer, update ratios, captures
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
ex
"""

# Every image of the widget outside the graph: its top-left pixel (the figure's background, from a canvas)
# against the widget's computed background. Resolves with the images that differ, once all are decoded.
IMAGES_ON_BACKGROUND = """
(root) => {
  const images = [...root.querySelectorAll("img")].filter((img) => !img.hidden && img.getAttribute("src"));
  if (images.length === 0 || images.some((img) => !img.complete || img.naturalWidth === 0)) return null;
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 1;
  const context = canvas.getContext("2d", { willReadFrequently: true });
  const want = getComputedStyle(root).backgroundColor.match(/[\\d.]+/g).slice(0, 3).map(Number);
  return images.map((img) => {
    context.clearRect(0, 0, 1, 1);
    context.drawImage(img, 0, 0, 1, 1, 0, 0, 1, 1);
    const got = [...context.getImageData(0, 0, 1, 1).data.slice(0, 3)];
    const off = Math.max(...got.map((c, i) => Math.abs(c - want[i])));
    return { cls: img.className, got, want, off };
  });
}
"""

# The contrast (WCAG) of every visible text node of the widget against the colour behind it, translucent layers
# composited; the graph's SVG (another panel's contract) and disabled controls aside.
LOW_CONTRAST = """
(root) => {
  const parse = (text) => {  // rgb(…) / rgba(…) in 0–255, or color(srgb …) in 0–1 (what color-mix computes to)
    const p = (text.match(/[\\d.]+(e-?\\d+)?/g) || []).map(Number);
    if (p.length < 3) return null;
    const scale = text.startsWith("color(") ? 255 : 1;
    return [p[0] * scale, p[1] * scale, p[2] * scale, p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => [0, 1, 2].map((i) => top[i] * top[3] + under[i] * (1 - top[3]));
  const lum = (rgb) => {
    const [r, g, b] = rgb.map((c) => {
      const s = c / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  const behind = (el) => {
    const layers = [];
    for (let node = el; node; node = node.parentElement) {
      const color = parse(getComputedStyle(node).backgroundColor);
      if (color && color[3] > 0) { layers.push(color); if (color[3] >= 1) break; }
    }
    let rgb = [255, 255, 255];
    for (const layer of layers.reverse()) rgb = over(layer, rgb);
    return rgb;
  };
  const failures = [];
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.textContent.trim() || !el || el.closest("svg, option, [disabled], :disabled")) continue;
    if (!el.getClientRects().length || !el.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true })) continue;
    const style = getComputedStyle(el);
    const back = behind(el);
    const fore = over(parse(style.color), back);
    const [hi, lo] = [lum(fore), lum(back)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const what = `${el.className || el.tagName}: ${node.textContent.trim().slice(0, 40)}`;
    if (ratio < 4.5) failures.push(`${ratio.toFixed(2)} ${what}`);
  }
  return failures;
}
"""


# Images on screen drawn smaller than their CSS size (natural size / the pixel ratio they were drawn at): their text
# would fall under the 9 px the figures are drawn at.
SHRUNK = """
(root) => [...root.querySelectorAll('img')]
  .filter((img) => img.getClientRects().length > 0 && img.complete && img.naturalWidth > 0)
  .filter((img) => {
    const ratio = Number(img.dataset.ratio || 1);
    return img.clientWidth < img.naturalWidth / ratio - 1 || img.clientHeight < img.naturalHeight / ratio - 1;
  })
  .map((img) => `${img.className}: ${img.clientWidth}×${img.clientHeight} of ${img.naturalWidth}×${img.naturalHeight}`)
"""


def shrunk_after_redraw(explorer: Locator) -> list[str]:
    """SHRUNK once the kernel has redrawn for the pane: a pane that just narrowed shows the old figures fitted to it
    until the page's debounced report reaches the kernel and the figures drawn for the new width arrive."""
    with contextlib.suppress(PlaywrightTimeoutError):  # the assertion that follows names the figures
        explorer.page.wait_for_function(
            f"(root) => ({SHRUNK})(root).length === 0", arg=explorer.element_handle(), timeout=15_000
        )
    return explorer.evaluate(SHRUNK)


TABS = [("graph", ""), ("modules", ""), ("inspector", "hw-inspector"), ("attribution", "")]
TABS += [("summary", "hw-summary-panel"), ("training", "hw-training-panel")]


def test_figures_follow_the_theme_and_every_text_reads_in_light_and_dark(lab: Lab) -> None:
    path = lab.run_cells("theme.ipynb", [EXPLORER], timeout=180)
    page = lab.page
    page.set_viewport_size({"width": 1400, "height": 1600})
    explorer = page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="features"]').wait_for(timeout=30_000)
    explorer.locator("button.hw-expand-all").click()
    explorer.locator('.hw-row[data-path="features.conv1"]').click()
    explorer.locator('img.hw-plot[data-kind="forward"]').wait_for(timeout=30_000)
    show_tab(explorer, "attribution")
    explorer.locator("button.hw-attr-run").click()  # a Grad-CAM beside its input
    explorer.locator("img.hw-attr-image").wait_for(timeout=60_000)
    show_tab(explorer, "summary")
    explorer.locator("img.hw-summary-heatmap").wait_for(timeout=30_000)
    show_tab(explorer, "training")
    explorer.locator("img.hw-ratio-chart").wait_for(timeout=30_000)

    for theme, name in (("JupyterLab Dark", "dark"), ("JupyterLab Light", "light")):
        _theme(lab, theme)
        with lab.kernel(path) as kernel:  # the page told the kernel
            for _ in range(60):
                reported = kernel.evaluate_json("ex.view.theme")
                if reported["name"] == name:
                    break
                page.wait_for_timeout(250)
        assert reported["name"] == name and reported["background"].startswith("#"), reported
        # the kernel redraws every image on the page's background: wait until all of them are
        page.wait_for_function(
            f"(root) => {{ const r = ({IMAGES_ON_BACKGROUND})(root); return r && r.every((i) => i.off <= 2); }}",
            arg=explorer.element_handle(),
            timeout=60_000,
        )
        images = explorer.evaluate(IMAGES_ON_BACKGROUND)
        assert len(images) >= 5, images  # the capture, the attribution and its input, the heatmap, the ratio chart
        if name == "dark":
            assert all(max(i["got"]) < 80 for i in images), images  # no white box
        for tab, part in TABS:  # every panel, each on its tab: only text on screen is measured
            show_tab(explorer, tab)
            low = explorer.evaluate(LOW_CONTRAST)
            assert low == [], f"text under 4.5:1 in {theme}, tab {tab}:\n" + "\n".join(low)
            assert shrunk_after_redraw(explorer) == [], f"figures shrunk in {theme}, tab {tab}"
            if part:  # the whole widget with that tab open: a panel scrolls inside its tab
                explorer.screenshot(path=str(lab.artifacts_dir / f"theme-{name}-{part[3:]}.png"))
    # the summary heatmap is shown at its own size (its names 9 px and up), scrolled rather than shrunk
    show_tab(explorer, "summary")
    heatmap = explorer.locator("img.hw-summary-heatmap")
    assert heatmap.evaluate("(img) => [img.clientWidth, img.clientHeight]") == heatmap.evaluate(
        "(img) => [img.naturalWidth, img.naturalHeight]"
    )


def test_notebook7_dark_draws_every_figure_on_its_background(notebook7: Notebook7) -> None:
    notebook7.run_cells("theme-nb7.ipynb", [EXPLORER], timeout=180)
    page = notebook7.page
    page.set_viewport_size({"width": 900, "height": 1400})
    explorer = page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="features"]').wait_for(timeout=30_000)
    show_tab(explorer, "summary")
    explorer.locator("img.hw-summary-heatmap").wait_for(timeout=30_000)
    page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=30_000)
    page.wait_for_function(
        f"(root) => {{ const r = ({IMAGES_ON_BACKGROUND})(root); return r && r.every((i) => i.off <= 2); }}",
        arg=explorer.element_handle(),
        timeout=60_000,
    )
    images = explorer.evaluate(IMAGES_ON_BACKGROUND)
    assert len(images) >= 2 and all(max(i["got"]) < 80 for i in images), images
    low = explorer.evaluate(LOW_CONTRAST)
    assert low == [], "text under 4.5:1 in Notebook 7's dark theme:\n" + "\n".join(low)
    explorer.screenshot(path=str(notebook7.artifacts_dir / "theme-nb7-dark-summary.png"))

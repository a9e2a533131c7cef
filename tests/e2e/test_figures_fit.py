"""Figures drawn for their pane and screen, in a real JupyterLab: every figure of every tab inside its pane (no
sideways scroll) at 1400, 900 and 600 px, light and dark, crisp at a device pixel ratio of 2 (natural pixels = ratio
× CSS pixels), each with its readout; under the mouse and the arrow keys a token map says the capture's value and the
token; a narrower pane redraws the figure narrower. One notebook and one kernel (a 64-map CNN and a 12-head GPT-2)."""

from __future__ import annotations

import itertools
import math
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from playwright.sync_api import Browser, Locator, Page

from ._lab import Lab, show_tab
from ._server import JupyterServer
from ._snippets import gpt2
from .test_layout import _left_area
from .test_transformers import _theme

pytestmark = pytest.mark.e2e

# A 64-map conv with its gradients, global statistics (the summary), a watched optimizer and a gloo rank of DDP (the
# training panel), trained 3 steps as a user's loop does.
CNN = """
import tempfile
from collections import OrderedDict
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from hookwidgets import HookExplorer

if not dist.is_initialized():
    dist.init_process_group("gloo", init_method=f"file://{tempfile.mkdtemp()}/rendezvous", rank=0, world_size=1)
torch.manual_seed(0)
cnn = nn.Sequential(OrderedDict(
    conv=nn.Conv2d(3, 64, 3, padding=1), relu=nn.ReLU(), pool=nn.AdaptiveAvgPool2d(4), flat=nn.Flatten(),
    fc=nn.Linear(64 * 16, 10),
))
ddp = DDP(cnn)
images = torch.randn(2, 3, 28, 28)
cnn_ex = HookExplorer(ddp, example_inputs=images)
cnn_ex.attach("", ["global_forward", "global_grad"], action="stats")
cnn_ex.attach("module.conv", ["forward", "grad"])
opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
cnn_ex.watch_optimizer(opt)
cnn_ex.watch_ddp()
for step in range(3):
    opt.zero_grad()
    nn.functional.cross_entropy(ddp(images), torch.tensor([3, 7])).backward()
    opt.step()
"""
# A GPT-2 of 12 heads with a tokenizer: a block's outputs and gradients (token maps).
GPT2 = (
    gpt2("gpt", n_embd=96, n_head=12)
    + """
prompt = tokenizer("the cat sat on a mat", return_tensors="pt")
gpt_ex = HookExplorer(gpt, example_inputs=prompt, tokenizer=tokenizer)
gpt_ex.attach("transformer.h.0", ["forward", "grad"])
gpt_ex.run(target=3)
"""
)
# Shown, then a patch sweep (the patching panel draws the sweeps it sees); run again in the HiDPI page.
SHOW = """
display(cnn_ex, gpt_ex)
clean = tokenizer("the cat sat on a mat", return_tensors="pt")["input_ids"]
corrupt = tokenizer("the dog sat on a mat", return_tensors="pt")["input_ids"]
sweep = gpt_ex.patch_sweep(clean, corrupt)
"""
WORDS = ["the", "cat", "sat", "on", "a", "mat"]

# Each visible image of the open tab of the figure pane: its data-figure, pixels, box against the pane's, how many
# readouts its focusable container holds, and its ancestors (up to the pane) that overflow sideways.
FIGURES = """
(root) => {
  const pane = root.querySelector('.hw-details');
  const box = pane.getBoundingClientRect();
  const style = getComputedStyle(pane);
  const content = pane.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const page = pane.querySelector('.hw-tab-page:not([hidden])');
  const images = [...page.querySelectorAll('img')].filter(
    (img) => !img.hidden && img.getAttribute('src') && img.getClientRects().length > 0);
  return {
    ratio: window.devicePixelRatio,
    pane: {left: box.left, right: box.right, content, sideways: pane.scrollWidth > pane.clientWidth + 1},
    figures: images.map((img) => {
      const r = img.getBoundingClientRect();
      const holder = img.closest('[tabindex="0"]');
      const sideways = [];
      for (let a = img.parentElement; a && a !== pane.parentElement; a = a.parentElement) {
        if (a.scrollWidth > a.clientWidth + 1) sideways.push(`${a.className}: ${a.scrollWidth} > ${a.clientWidth}`);
      }
      return {
        figure: img.dataset.figure ?? null, cls: img.className, decoded: img.complete && img.naturalWidth > 0,
        natural: img.naturalWidth, width: r.width, left: r.left, right: r.right, sideways,
        readouts: holder ? holder.querySelectorAll('.hw-readout').length : 0,
      };
    }),
  };
}
"""
READOUT = """(el) => ({text: el.textContent, region: el.dataset.region ?? null, row: el.dataset.row ?? null,
  col: el.dataset.col ?? null, value: el.dataset.value ?? null})"""
# The GPT-2 block's token map as the kernel sent it: where its token × feature grid is in the image, what its axes are.
TOKEN_MAP = """
[{"hover": None if item.get("hover") is None else {
    "ratio": item["hover"]["ratio"], "width": item["hover"]["width"],
    "regions": [{k: r[k] for k in ("type", "box", "rows", "cols", "row", "col") if k in r}
                for r in item["hover"]["regions"]]}}
 for item in gpt_ex.view.plots["items"] if item["kind"] == "forward"][0]
"""
CAPTURE = "gpt_ex.captures['transformer.h.0']['forward'][-1].tensors['output'][0].tolist()"
CNN_TABS: list[tuple[str, str, set[str]]] = [
    ("inspector", "feature-maps", {"forward", "grad", "global_forward", "global_grad"}),  # maps, statistics
    ("attribution", "attribution", {"attribution", "attribution-input"}),
    ("summary", "summary", {"summary-heatmap"}),
    ("training", "training", {"ratios", "buckets", "ranks"}),
]
# (width, theme) per device pixel ratio: a 1400 or 900 px window with the file browser open, 600 px with it closed.
ROUNDS = {
    1: [(1400, "JupyterLab Light"), (900, "JupyterLab Light"), (600, "JupyterLab Light"), (600, "JupyterLab Dark")],
    2: [(600, "JupyterLab Dark"), (900, "JupyterLab Dark"), (1400, "JupyterLab Dark"), (1400, "JupyterLab Light")],
}
SETTLE_S = 30.0  # a width or theme change redraws every figure in the kernel


def _problems(found: dict[str, Any], expected: set[str]) -> list[str]:
    """What is wrong with the figures `FIGURES` found: outside the pane, scrolled, squeezed, blurred, no readout."""
    ratio, pane = found["ratio"], found["pane"]
    out = [] if not pane["sideways"] else ["the pane scrolls sideways"]
    shown = {f["figure"] for f in found["figures"]}
    if shown != expected:
        out.append(f"data-figure of the images: {sorted(map(str, shown))}, expected {sorted(expected)}")
    for f in found["figures"]:
        name = f"{f['figure'] or f['cls']}"
        if not f["decoded"]:
            out.append(f"{name}: not decoded")
            continue
        if f["right"] > pane["right"] + 1 or f["left"] < pane["left"] - 1:
            out.append(
                f"{name}: {f['left']:.0f}–{f['right']:.0f} outside the pane {pane['left']:.0f}–{pane['right']:.0f}"
            )
        if f["sideways"]:
            out.append(f"{name}: scrolls sideways in {f['sideways']}")
        if abs(f["width"] - f["natural"] / ratio) > 1:  # shown at natural size / ratio: crisp, never squeezed
            out.append(f"{name}: {f['width']:.1f} CSS px for {f['natural']} px at ratio {ratio}")
        if ratio >= 2 and f["natural"] < 1.9 * f["width"]:
            out.append(f"{name}: {f['natural']} px for {f['width']:.1f} CSS px at ratio {ratio}: blurred")
        if f["readouts"] != 1:
            out.append(f"{name}: {f['readouts']} .hw-readout in its focusable container, expected 1")
    return out


def _settled(explorer: Locator, expected: set[str], where: str) -> dict[str, Any]:
    """Wait (redraws are the kernel's) until the open tab's figures meet the contract; fail with what does not."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        found: dict[str, Any] = explorer.evaluate(FIGURES)
        problems = _problems(found, expected)
        if not problems:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{where}:\n" + "\n".join(problems))
        explorer.page.wait_for_timeout(250)


def _select(explorer: Locator, path: str) -> None:
    """Find `path` with the tree's search (the tree draws only the rows in view) and click it."""
    search = explorer.locator(".hw-search")
    search.fill(path)
    explorer.locator(f'.hw-row.hw-match[data-path="{path}"]').click()
    explorer.locator(f'.hw-row.hw-selected[data-path="{path}"]').wait_for(timeout=15_000)
    search.fill("")


def _shot(explorer: Locator, figure: str, target: Path) -> None:
    """A screenshot of one figure's focusable box (the image and its readout line); of the pane from the figure's top
    when the figure is taller than the pane (it scrolls there, and a screenshot shows only what is in view)."""
    box = explorer.locator(f'img[data-figure="{figure}"]').locator("xpath=ancestor::*[@tabindex='0'][1]")
    pane = explorer.locator(".hw-details")
    if box.evaluate("(el) => el.offsetHeight") <= pane.evaluate("(el) => el.clientHeight"):
        box.screenshot(path=str(target))
        return
    box.evaluate("(el) => el.scrollIntoView({block: 'start'})")
    pane.screenshot(path=str(target))


def _round(lab: Lab, cnn: Locator, gpt: Locator, width: int, theme: str, kernel_frame: Any) -> dict[str, Any]:
    """Every figure of every tab at ``width`` in ``theme``: checked, the main ones photographed; returns the token
    map's natural width and the pane's content width."""
    page = lab.page
    page.set_viewport_size({"width": width, "height": 1200})
    _left_area(lab, shown=width > 600)
    _theme(lab, theme)
    shade = "light" if theme.endswith("Light") else "dark"
    ratio = page.evaluate("window.devicePixelRatio")
    suffix = f"{shade}-{width}-x{ratio:g}"
    where = f"{theme}, {width} px, ratio {ratio:g}"
    for tab, name, expected in CNN_TABS:
        show_tab(cnn, tab)
        _settled(cnn, expected, f"CNN, tab {tab}, {where}")
        if tab == "inspector":
            _shot(cnn, "forward", lab.artifacts_dir / f"figures-{name}-{suffix}.png")
        elif width == 600:
            cnn.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / f"figures-{name}-{suffix}.png"))
    show_tab(gpt, "patching")
    _settled(gpt, {"patching"}, f"GPT-2, tab patching, {where}")
    show_tab(gpt, "inspector")
    _select(gpt, "transformer.h.1.attn")
    gpt.locator('figure[data-kind="attention"]').wait_for(timeout=30_000)
    _settled(gpt, {"attention"}, f"GPT-2 attention heads, {where}")
    _shot(gpt, "attention", lab.artifacts_dir / f"figures-attention-{suffix}.png")
    _select(gpt, "transformer.h.0")
    gpt.locator('figure[data-kind="forward"]').wait_for(timeout=30_000)
    found = _settled(gpt, {"forward", "grad"}, f"GPT-2 token maps, {where}")
    _shot(gpt, "forward", lab.artifacts_dir / f"figures-token-map-{suffix}.png")
    frame = kernel_frame()
    content = found["pane"]["content"]
    assert frame["ratio"] == ratio and content - 40 <= frame["width"] <= content + 1, (where, frame, content)
    token_map = next(f for f in found["figures"] if f["figure"] == "forward")
    return {"natural": token_map["natural"], "pane": content}


def _token_map_readout(gpt: Locator, kernel: Any, artifacts: Path) -> None:
    """The token map's value under the mouse at three cells, then under the arrow keys: the capture's, at that token
    and feature, with the token's text."""
    drawn = kernel.evaluate_json(TOKEN_MAP)
    hover = drawn["hover"]
    assert hover is not None, "the token map's PlotItem.hover is None: the page has nothing to read under the mouse"
    output = kernel.evaluate_json(CAPTURE)  # (tokens, features) of the first sequence
    cells = [
        (k, r)
        for k, r in enumerate(hover["regions"])
        if r["type"] == "cells" and "token" in (r["row"]["name"], r["col"]["name"])
    ]
    assert cells, f"no token grid among the regions {hover['regions']}"
    index, region = cells[0]
    tokens_down = region["row"]["name"] == "token"
    for part in (region["row"], region["col"]):
        assert part["stride"] == 1, f"{len(output[0])} features aggregated at this width: {part}"
    image = gpt.locator('img[data-figure="forward"]')
    readout = image.locator("xpath=ancestor::*[@tabindex='0'][1]").locator(".hw-readout")

    def expected(row: int, col: int) -> tuple[float, str]:
        token, feature = (row, col) if tokens_down else (col, row)
        return output[token][feature], WORDS[token]

    # the keyboard first (a figure drawn anew has no cell read yet): focus reads cell (0, 0) of region 0, each arrow
    # moves one cell
    readout.locator("xpath=ancestor::*[@tabindex='0'][1]").focus()
    moves = [("ArrowRight", 0, 1), ("ArrowRight", 0, 2), ("ArrowDown", 1, 2), ("ArrowLeft", 1, 1), ("ArrowUp", 0, 1)]
    for key, row, col in [("", 0, 0), *moves]:
        if key:
            gpt.page.keyboard.press(key)
        got = readout.evaluate(READOUT)
        if index == 0:  # the token grid is region 0: its value and token, as under the mouse
            _check_readout(got, 0, row, col, *expected(row, col))
        else:
            assert (got["region"], got["row"], got["col"]) == ("0", str(row), str(col)), (key, got)

    # the mouse, at cells placed from the grid's own box in the image
    x0, y0, x1, y1 = region["box"]
    for row, col in ((0, 0), (2, region["cols"] - 1), (region["rows"] - 1, region["cols"] // 2)):
        image.scroll_into_view_if_needed()
        shown = image.bounding_box()
        assert shown is not None
        scale = shown["width"] / hover["width"]
        gpt.page.mouse.move(
            shown["x"] + (x0 + (col + 0.5) * (x1 - x0) / region["cols"]) * scale,
            shown["y"] + (y0 + (row + 0.5) * (y1 - y0) / region["rows"]) * scale,
        )
        got = readout.evaluate(READOUT)
        _check_readout(got, index, row, col, *expected(row, col))
    # the last cell's readout and highlight, as the README's gallery shows them
    readout.locator("xpath=ancestor::*[@tabindex='0'][1]").screenshot(
        path=str(artifacts / "figures-token-map-hover.png")
    )
    gpt.page.mouse.move(0, 0)


def _check_readout(got: dict[str, Any], region: int, row: int, col: int, value: float, token: str) -> None:
    where = f"cell ({row}, {col}) of region {region}: {got}"
    assert (got["region"], got["row"], got["col"]) == (str(region), str(row), str(col)), where
    assert got["value"] is not None and float(got["value"]) == pytest.approx(value, rel=1e-6, abs=1e-12), where
    assert f'"{token}"' in got["text"] or token in got["text"].split(), where  # the token's text
    numbers = re.findall(r"[-−]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", got["text"].replace("×10", "e"))
    assert numbers, where
    last = float(numbers[-1].replace("−", "-"))  # the value as the readout writes it, to its precision
    digits = len(numbers[-1].split("e")[0].replace("−", "").replace("-", "").replace(".", "").lstrip("0")) or 1
    assert math.isclose(last, value, rel_tol=10 ** (1 - digits), abs_tol=1e-12), where


def _prepare(lab: Lab, path: str) -> tuple[Locator, Locator]:
    """The two explorers of `SHOW`, each showing what its figures need: a selection, a Grad-CAM."""
    page = lab.page
    page.set_viewport_size({"width": 1400, "height": 1200})
    cnn, gpt = page.locator(".hw-explorer").nth(0), page.locator(".hw-explorer").nth(1)
    for explorer, top, selected in ((cnn, "module", "module.conv"), (gpt, "transformer", "transformer.h.0")):
        explorer.locator(f'.hw-row[data-path="{top}"]').wait_for(timeout=30_000)
        explorer.locator("button.hw-expand-all").click()
        _select(explorer, selected)
    cnn.locator('img.hw-plot[data-kind="forward"]').wait_for(timeout=30_000)
    show_tab(cnn, "attribution")
    cnn.locator("button.hw-attr-run").click()  # a Grad-CAM beside its input
    cnn.locator("img.hw-attr-image").wait_for(timeout=60_000)
    return cnn, gpt


def _rounds(lab: Lab, path: str, ratio: int) -> list[dict[str, Any]]:
    cnn, gpt = _prepare(lab, path)
    seen = []
    with lab.kernel(path) as kernel:
        for width, theme in ROUNDS[ratio]:
            seen.append(_round(lab, cnn, gpt, width, theme, lambda: kernel.evaluate_json("gpt_ex.view.frame")))
            if ratio == 1 and width == 900:  # the mouse and the keys over the token map
                _token_map_readout(gpt, kernel, lab.artifacts_dir)
    # a narrower or wider pane redrew the token map for its width
    for before, after in itertools.pairwise(seen):
        if abs(before["pane"] - after["pane"]) > 20:
            assert before["natural"] != after["natural"], (ratio, seen)
    return seen


def test_every_figure_fits_its_pane_is_crisp_and_reads_under_the_mouse(
    lab: Lab, chromium_browser: Browser, jupyter_server: JupyterServer
) -> None:
    cells = [nbformat.v4.new_code_cell(code) for code in (CNN, GPT2, SHOW)]
    path = lab.write_notebook("figures-fit.ipynb", nbformat.v4.new_notebook(cells=cells))
    lab.open_notebook(path)
    lab.run_all(path, timeout=180)
    try:
        _rounds(lab, path, 1)
        lab.page.context.close()  # its views leave: the HiDPI page alone reports the pane to the kernel
        # a HiDPI screen: the same kernel's explorers shown again in a page at two device pixels per CSS pixel
        context = chromium_browser.new_context(viewport={"width": 1400, "height": 1200}, device_scale_factor=2)
        try:
            hidpi = Lab(context.new_page(), jupyter_server, lab.artifacts_dir)
            hidpi.page.set_default_timeout(30_000)
            hidpi.open_notebook(path)
            _run_cell(hidpi.page, path, 2)
            _rounds(hidpi, path, 2)
            _theme(hidpi, "JupyterLab Light")
            _left_area(hidpi, shown=True)
        finally:
            context.close()
    finally:
        if not lab.page.is_closed():
            _theme(lab, "JupyterLab Light")
            _left_area(lab, shown=True)


_RUN_CELL = """
async ({path, index}) => {
  const panel = window.__hwFindPanel(path);
  panel.content.activeCellIndex = index;
  await window.jupyterapp.commands.execute('notebook:run-cell');
}
"""


def _run_cell(page: Page, path: str, index: int) -> None:
    """Run one cell of the open notebook `path` as Shift+Enter does, and wait until its kernel is idle again."""
    page.evaluate(_RUN_CELL, {"path": path, "index": index})
    page.locator(".hw-explorer").nth(1).wait_for(timeout=60_000)

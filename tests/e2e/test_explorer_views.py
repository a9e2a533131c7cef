"""The explorer's views in a real JupyterLab: a huge tree, hostile names, invisible and huge names, the summary, node
hooks, two displays."""

from __future__ import annotations

import nbformat
import pytest

from ._lab import Lab, show_tab

pytestmark = pytest.mark.e2e

WIDE_MODEL = """
from torch import nn
from hookwidgets import HookExplorer

class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(1, 1) for _ in range(9998))  # + the list + the root = 10,000

ex = HookExplorer(Wide())
ex
"""

HOSTILE_MODEL = """
import torch
from torch import nn
from hookwidgets import HookExplorer

NAME = "<img src=x onerror=alert(1)>"
Evil = type("<b>Evil</b>", (nn.Module,), {"forward": lambda self, x: self._modules[NAME](x)})
model = Evil()
model.add_module(NAME, nn.Linear(4, 2))

def explode(module, args, output):
    raise ValueError("<script>alert(2)</script>")

ex = HookExplorer(model, example_inputs=torch.randn(1, 4))
ex.attach(NAME, "forward", action=explode)
ex.run()
ex
"""

INVISIBLE_MODEL = """
import torch
from torch import nn
from hookwidgets import HookExplorer

BIDI = "txt\\u202eexe"  # a right-to-left override: shown raw, the text after it reads backwards
LONG = "L" * 100_000

class Named(nn.Module):
    def __init__(self):
        super().__init__()
        self.add_module(BIDI, type("Lin\\u202ear", (nn.Linear,), {})(4, 4))
        self.add_module(LONG, nn.Linear(4, 2))

    def forward(self, x):
        return self._modules[LONG](torch.relu(self._modules[BIDI](x)))

def explode(module, args):
    raise ValueError(f"bad {BIDI}")

model = Named()
ex = HookExplorer(model, example_inputs=torch.randn(1, 4))
ex.attach("", ["global_forward", "global_grad"], action="stats")
ex.attach(BIDI, "forward_pre", action=explode)
ex.run(target=0)
ex
"""

SUMMARY_MODEL = """
import torch
from hookwidgets import HookExplorer
from hookwidgets.examples import DigitsCNN

torch.manual_seed(0)
model = DigitsCNN().eval()
ex = HookExplorer(model, example_inputs=torch.randn(2, 1, 32, 32))
ex
"""

SHORT_BUDGET_MODEL = """
import torch
from hookwidgets import HookExplorer
from hookwidgets.examples import DigitsCNN

torch.manual_seed(0)
model = DigitsCNN().eval()
ex = HookExplorer(model, example_inputs=torch.randn(2, 1, 32, 32), memory_budget=64 * 1024)
ex.attach("features.conv1", "forward")
ex.attach("features.conv2", "forward")
ex
"""


# Every text of the explorer a person reads: [whether one holds a bidi control or zero-width character, the longest].
SHOWN_TEXTS = """() => {
    const root = document.querySelector('.hw-explorer');
    const texts = [root.innerText];
    for (const el of root.querySelectorAll('[title], [aria-label], [alt], title')) {
        for (const name of ['title', 'aria-label', 'alt']) texts.push(el.getAttribute(name) ?? '');
        if (el.tagName === 'title') texts.push(el.textContent);
    }
    const hidden = /[\\u202a-\\u202e\\u2066-\\u2069\\u200b-\\u200f\\u061c]/;
    return [texts.some((text) => hidden.test(text)), Math.max(...texts.map((text) => text.length))];
}"""


def _open(lab: Lab, name: str, source: str, timeout: float = 180) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    path = lab.write_notebook(name, nb)
    lab.open_notebook(path)
    lab.run_all(path, timeout=timeout)
    return path


def test_a_10000_module_model_opens_with_its_count_and_scrolls(lab: Lab) -> None:
    _open(lab, "wide.ipynb", WIDE_MODEL)
    explorer = lab.page.locator(".hw-explorer")
    explorer.locator('.hw-row[data-path="layers.0"]').wait_for(timeout=30_000)
    assert explorer.locator(".hw-count").inner_text() == "10,000 modules"
    drawn = explorer.locator(".hw-row").count()
    assert 10 < drawn < 120  # virtualized: only the rows in view (and a margin) exist

    tree = explorer.locator(".hw-tree")
    tree.evaluate("(el) => { el.scrollTop = el.scrollHeight; }")
    explorer.locator('.hw-row[data-path="layers.9997"]').wait_for(timeout=10_000)
    assert explorer.locator(".hw-row").count() < 120

    explorer.locator(".hw-search").fill("5000")
    explorer.locator('.hw-row.hw-match[data-path="layers.5000"]').wait_for(timeout=10_000)
    assert explorer.locator(".hw-match-count").inner_text() == "1 match"
    assert explorer.locator('.hw-row[data-path="layers.5000"] mark.hw-mark').inner_text() == "5000"
    lab.screenshot("tree-10000-modules")


@pytest.mark.parametrize("frontend", ["lab", "notebook7"])
def test_model_strings_reach_the_page_as_text(frontend: str, request: pytest.FixtureRequest) -> None:
    lab: Lab = request.getfixturevalue(frontend)
    dialogs: list[str] = []
    lab.page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _open(lab, "hostile.ipynb", HOSTILE_MODEL)
    explorer = lab.page.locator(".hw-explorer")
    name = "<img src=x onerror=alert(1)>"
    row = explorer.locator(".hw-row").nth(1)
    row.wait_for(timeout=30_000)
    assert row.locator(".hw-name").inner_text() == name
    assert explorer.locator(".hw-title").inner_text() == "<b>Evil</b>"
    assert explorer.locator(".hw-error-marker").count() == 1  # the failing hook is marked on its row
    row.click()
    explorer.locator(".hw-hook-error > summary").wait_for(timeout=10_000)
    assert "<script>alert(2)</script>" in explorer.locator(".hw-hook-error > summary").inner_text()
    # nothing was injected: no element that a name or an error text spelled out
    injected = lab.page.evaluate(
        "() => document.querySelectorAll('.hw-explorer img[src=\"x\"], .hw-explorer b, .hw-explorer script').length"
    )
    assert injected == 0 and dialogs == []
    lab.screenshot("hostile-names" if frontend == "lab" else f"{frontend}-hostile-names")


def test_invisible_characters_are_shown_escaped_and_a_huge_name_cut(lab: Lab) -> None:
    _open(lab, "invisible.ipynb", INVISIBLE_MODEL)
    page, bidi, long = lab.page, "txt\u202eexe", "L" * 100_000
    explorer = page.locator(".hw-explorer")
    show_tab(explorer, "summary")
    explorer.locator(".hw-summary-row").first.wait_for(timeout=30_000)
    show_tab(explorer, "graph")
    panel = explorer.locator(".hw-graph-panel")
    panel.locator("button.hw-graph-record").click()
    panel.locator('.hw-graph-status[data-state="ready"]').wait_for(timeout=30_000)
    show_tab(explorer, "modules")
    rows = explorer.locator(".hw-row")
    # rows keep the real path (what a click sends back) and show it escaped: the tree, then the summary
    shown = rows.evaluate_all("els => els.map((e) => [e.dataset.path, e.querySelector('.hw-name').innerText])")
    assert shown[1:] == [[bidi, "txt\\u202eexe"], [long, "L" * 200 + "…"]]
    assert rows.nth(1).locator(".hw-cls").inner_text() == "Lin\\u202ear"
    summary = explorer.locator(".hw-summary-row").evaluate_all(
        "els => els.map((e) => [e.dataset.path, e.querySelector('td').innerText])"
    )
    assert [bidi, "txt\\u202eexe"] in summary and [long, "L" * 200 + "…"] in summary
    rows.nth(1).click()
    show_tab(explorer, "inspector")
    explorer.locator(".hw-hook-error > summary").wait_for(timeout=10_000)
    assert "bad txt\\u202eexe" in explorer.locator(".hw-hook-error > summary").inner_text()
    assert explorer.locator(".hw-info dd").first.inner_text() == "txt\\u202eexe"
    show_tab(explorer, "graph")
    labels = panel.locator(".hw-gbox-label, .hw-glabel").all_text_contents()  # SVG text: no innerText
    assert any("txt\\u202eexe" in label for label in labels) and max(map(len, labels)) < 210
    # nowhere on the explorer, text or tooltip, does the override itself appear; the longest text is cut
    leaked = page.evaluate(SHOWN_TEXTS)
    assert leaked[0] is False and leaked[1] < 20_000, leaked
    lab.screenshot("invisible-names")


@pytest.mark.parametrize("frontend", ["lab", "notebook7"])
def test_summary_lists_every_layer_and_a_node_hook_from_the_graph_shows_its_capture(
    frontend: str, request: pytest.FixtureRequest
) -> None:
    lab: Lab = request.getfixturevalue(frontend)
    shots = "" if frontend == "lab" else f"{frontend}-"  # the JupyterLab screenshots are the docs' ones
    path = _open(lab, "summary.ipynb", SUMMARY_MODEL)
    page = lab.page
    explorer = page.locator(".hw-explorer")
    explorer.locator(".hw-row").first.wait_for(timeout=30_000)

    show_tab(explorer, "summary")
    explorer.locator("button.hw-stats-all").click()
    explorer.locator('.hw-row[data-path=""] .hw-badge[data-kind="global_grad"]').wait_for(timeout=15_000)
    explorer.locator("button.hw-run").click()
    rows = explorer.locator(".hw-summary-row")
    rows.first.wait_for(timeout=60_000)
    with lab.kernel(path) as kernel:
        modules = kernel.evaluate_json("[p for p, _ in model.named_modules()]")
    assert rows.evaluate_all("els => els.map((e) => e.dataset.path)") == modules
    explorer.locator("img.hw-summary-heatmap").wait_for(timeout=10_000)
    explorer.locator('th[data-field="grad_norm"]').click()
    assert explorer.locator('th[data-field="grad_norm"]').get_attribute("aria-sort") == "descending"
    explorer.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / f"{shots}summary-view.png"))

    # a node from the recorded graph: select it, attach node_pre, Run, see its capture
    show_tab(explorer, "graph")
    show_tab(explorer, "inspector")
    panel = explorer.locator(".hw-graph-panel")
    panel.locator("button.hw-graph-record").click()
    panel.locator('.hw-graph-status[data-state="ready"]').wait_for(timeout=30_000)
    node_id = "classifier.fc/AddmmBackward0#0"
    # Fit keeps the text readable, so the graph's end may be out of view: its search centres on the node
    search = panel.locator("input.hw-graph-search")
    search.fill(node_id)
    search.press("Enter")
    panel.locator(f'.hw-gnode.hw-gmatch-current[data-id="{node_id}"]').click()
    explorer.locator(".hw-info dd", has_text=node_id).wait_for(timeout=15_000)  # the inspector shows the node
    toggle = explorer.locator('input.hw-toggle[data-kind="node_pre"]')
    toggle.check()
    panel.locator('.hw-gnode[data-op="AddmmBackward0"] .hw-gbadge[data-kind="node_pre"]').wait_for(timeout=15_000)
    explorer.locator("button.hw-run").click()
    image = explorer.locator('img.hw-plot[data-kind="node_pre"]')
    image.wait_for(timeout=60_000)
    with lab.kernel(path) as kernel:
        shape = kernel.evaluate_json(f"list(ex.captures[{node_id!r}]['node_pre'][-1].tensor.shape)")
    assert shape == [2, 10]
    explorer.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / f"{shots}inspector-node-hook.png"))
    # the inspector's code places the hook on the node of every forward, in plain torch
    code = explorer.locator(".hw-code-text")
    assert (
        'node_hooks.append(("classifier.fc", "AddmmBackward0", 0, "register_prehook", hook_1))' in code.text_content()
    )

    # two more runs: the step slider goes back through the history, and Python redraws the chosen step
    for _ in range(2):
        caption = image.get_attribute("alt")
        explorer.locator("button.hw-run").click()
        page.wait_for_function(
            "([alt]) => document.querySelector('img.hw-plot[data-kind=\"node_pre\"]')?.alt !== alt", arg=[caption]
        )
    with lab.kernel(path) as kernel:
        (item,) = kernel.evaluate_json(
            "[{'steps': [s for s, _ in i['positions']], 'step': i['step']}"
            " for i in ex.view.plots['items'] if i['kind'] == 'node_pre']"
        )
    steps = item["steps"]
    assert len(steps) == 3 and item["step"] == steps[-1]
    slider = explorer.locator('input.hw-step[data-kind="node_pre"]')
    assert slider.get_attribute("max") == "2"
    slider.evaluate("(el) => { el.value = '0'; el.dispatchEvent(new Event('input', { bubbles: true })); }")
    caption = explorer.locator('figure[data-kind="node_pre"] .hw-plot-caption')
    caption.filter(has_text=f"step {steps[0]}").wait_for(timeout=15_000)
    assert (
        explorer.locator('figure[data-kind="node_pre"] .hw-step-label').text_content()
        == f"step {steps[0]} (1 of 3 kept)"
    )
    with lab.kernel(path) as kernel:
        shown = kernel.evaluate_json("[i['step'] for i in ex.view.plots['items'] if i['kind'] == 'node_pre']")
    assert shown == [steps[0]]

    # the run bar's train mode box: the Run message carries it, and Python runs in training mode
    explorer.locator("input.hw-run-train").check()
    explorer.locator("button.hw-run").click()
    explorer.locator('.hw-status[data-state="idle"]', has_text="in training mode").wait_for(timeout=60_000)


def test_one_explorer_shown_in_two_cells_stays_consistent_and_close_closes_it(lab: Lab) -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SUMMARY_MODEL), nbformat.v4.new_code_cell("ex")])
    path = lab.write_notebook("twice.ipynb", nb)
    lab.open_notebook(path)
    lab.run_all(path, timeout=180)
    views = lab.page.locator(".hw-explorer")
    views.nth(1).wait_for(timeout=30_000)
    first, second = views.nth(0), views.nth(1)
    first.locator('.hw-row[data-path="features.conv1"]').click()
    second.locator('.hw-row.hw-selected[data-path="features.conv1"]').wait_for(timeout=10_000)
    first.locator('input.hw-toggle[data-kind="forward"]').check()
    second.locator('.hw-row[data-path="features.conv1"] .hw-badge[data-kind="forward"]').wait_for(timeout=15_000)
    with lab.kernel(path) as kernel:
        kernel.evaluate("ex.close()")
    # Both views say so in place of their panels (a widget that vanished would leave no word why).
    lab.page.wait_for_function(
        "() => document.querySelectorAll('.hw-explorer.hw-closed').length === 2"
        " && document.querySelectorAll('.hw-explorer:not(.hw-closed)').length === 0",
        timeout=15_000,
    )


def test_the_memory_meter_says_when_the_budget_holds_less_than_one_step(lab: Lab) -> None:
    path = _open(lab, "short-budget.ipynb", SHORT_BUDGET_MODEL)
    explorer = lab.page.locator(".hw-explorer")
    explorer.locator(".hw-row").first.wait_for(timeout=30_000)
    warning = explorer.locator(".hw-meter-short")
    assert warning.is_hidden()
    explorer.locator("button.hw-run").click()
    warning.wait_for(state="visible", timeout=60_000)
    assert warning.inner_text() == "⚠ less than one step"
    with lab.kernel(path) as kernel:
        note = kernel.evaluate_json("ex.captures.short_steps()[('features.conv1', 'forward')]")
    title = explorer.locator(".hw-meter").get_attribute("title").split("\n")
    assert title[:2] == [
        "The budget holds less than one step: raise memory_budget.",
        f"forward on features.conv1: {note}",
    ]
    assert "hw-meter-over" in explorer.locator(".hw-meter").get_attribute("class")
    explorer.locator(".hw-header-line").screenshot(path=str(lab.artifacts_dir / "memory-meter-short-step.png"))


GPT2_MODEL = """
import torch
import transformers
from hookwidgets import HookExplorer

torch.manual_seed(0)
config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=96, n_positions=64)
model = transformers.GPT2LMHeadModel(config).eval()
model.config._attn_implementation = "eager"  # the attention module returns its probabilities
WORDS = ["The", "cat", "sat", "on", "the", "mat"]
ex = HookExplorer(model, example_inputs=torch.arange(10, 16)[None], tokens=WORDS)
ex.attach("transformer.h.0", "forward")
ex.attach("transformer.h.0.attn", "forward")
ex.run()
ex
"""


def test_a_gpt2_blocks_capture_is_a_token_map_and_its_attention_heads_can_be_picked(lab: Lab) -> None:
    path = _open(lab, "gpt2.ipynb", GPT2_MODEL)
    page = lab.page
    explorer = page.locator(".hw-explorer")
    explorer.locator(".hw-row").first.wait_for(timeout=30_000)
    with lab.kernel(path) as kernel:
        kernel.evaluate("ex.view.selected = 'transformer.h.0'")
    figure = explorer.locator('figure[data-kind="forward"]')
    active = figure.locator("button.hw-view-active")
    active.filter(has_text="tokens").wait_for(timeout=30_000)
    assert figure.locator("button.hw-view").all_inner_texts() == ["tokens", "histogram"]
    with lab.kernel(path) as kernel:
        (item,) = kernel.evaluate_json("[{k: i[k] for k in ('view', 'tokens')} for i in ex.view.plots['items']]")
    assert item == {"view": "tokens", "tokens": ["The", "cat", "sat", "on", "the", "mat"]}
    lab.screenshot("gpt2-token-map")
    figure.locator('button.hw-view[data-view="histogram"]').click()
    active.filter(has_text="histogram").wait_for(timeout=15_000)
    figure.locator('button.hw-view[data-view="tokens"]').click()
    active.filter(has_text="tokens").wait_for(timeout=15_000)

    # the attention module: its probabilities (output.1) picked in the element picker are heads, one head picked
    with lab.kernel(path) as kernel:
        kernel.evaluate("ex.view.selected = 'transformer.h.0.attn'")
    elements = figure.locator("select.hw-element")
    elements.wait_for(timeout=30_000)
    assert elements.locator("option").all_inner_texts() == ["output.0", "output.1"]
    elements.select_option("output.1")
    active.filter(has_text="heads").wait_for(timeout=15_000)
    heads = figure.locator("select.hw-head")
    assert heads.locator("option").all_inner_texts() == ["all 4 heads", "head 0", "head 1", "head 2", "head 3"]
    heads.select_option("1")
    figure.locator(".hw-plot-caption", has_text="head 1").wait_for(timeout=15_000)
    explorer.locator(".hw-details").screenshot(path=str(lab.artifacts_dir / "inspector-attention-heads.png"))

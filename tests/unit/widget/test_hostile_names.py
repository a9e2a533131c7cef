"""Model names with invisible characters or of 100,000 characters: shown escaped and cut, kept whole in data."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from hookwidgets import HookExplorer
from hookwidgets.plots import feature_map_figure

from ._messages import browser_sends, browser_sets

# Bidi overrides, isolates and marks, zero-width characters, the Arabic letter mark, a line break.
INVISIBLE = "\u202e\u202a\u2066\u2069\u200b\u200c\u200d\u200e\u200f\u061c\n"
BIDI = "txt\u202eexe"  # reads "txtexe" backwards from the override on: shown as "txt\u202eexe"


class Chain(nn.Module):
    """Linear layers under the given names, called in order, and one never called, under ``unused``."""

    def __init__(self, names: list[str], unused: str = "unused") -> None:
        super().__init__()
        torch.manual_seed(0)
        self.names = names
        for name in [*names, unused]:
            self.add_module(name, nn.Linear(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for name in self.names:
            x = torch.relu(self._modules[name](x))
        return x


def test_notes_warnings_and_reprs_escape_a_bidi_name_and_the_data_keeps_it():
    x = torch.randn(2, 4)
    model = Chain([BIDI], unused=f"never{BIDI}")
    model.add_module(f"never{BIDI}", type(f"Lin{BIDI}", (nn.Linear,), {})(4, 4))  # a class name can hold one too
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ex = HookExplorer(model, x)
        never = ex.attach(f"never{BIDI}", "forward")
        failing = ex.attach(BIDI, "forward", action=lambda module, args, output: 1 / 0)
        ex.attach(BIDI, "forward_pre")
        ex.run(x)
    assert "\\u202e" in never.note and "\u202e" not in never.note  # did not run in the example forward
    assert "\u202e" not in repr(failing) and "\\u202e" in repr(failing)
    hook_warnings = [str(w.message) for w in caught if "failed" in str(w.message)]
    assert hook_warnings and all("\u202e" not in text and "\\u202e" in text for text in hook_warnings)
    assert [child["path"] for child in ex.tree["children"]] == [BIDI, f"never{BIDI}"]  # the real names
    assert BIDI in ex.captures  # capture keys are the real names too
    with pytest.raises(KeyError) as error:
        ex.attach(BIDI + "x", "forward")
    assert "\u202e" not in str(error.value) and "\\u202e" in str(error.value)
    ex.close()


def test_widget_payloads_show_a_bidi_name_escaped_and_keep_its_path():
    x = torch.randn(2, 4)
    with HookExplorer(Chain([BIDI]), x) as ex:
        view = ex.view
        ex.attach(BIDI, "forward")
        ex.run(x)
        browser_sets(view, selected=BIDI)
        (item,) = view.plots["items"]
        assert item["title"] == "txt\\u202eexe · output"
        assert view.selection["path"] == BIDI  # what the page sends back names the module itself
        assert view.tree["children"][0]["path"] == BIDI  # the page escapes it where it shows it


def test_a_figure_draws_a_name_with_its_invisible_characters_escaped():
    figure = feature_map_figure(torch.ones(1, 2, 4, 4), title=f"a{BIDI}\nb")
    assert figure.axes[0].get_title() == "atxt\\u202eexe\\nb"


def longest_drawn_text(names: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """The longest text matplotlib laid out in a widget session on ``Chain(names)``: stats on every layer, a
    capture, the view, a run. Laying out a 100,000-character name is what cost 25 s before names were cut."""
    from matplotlib.text import Text

    longest = 0
    set_text = Text.set_text

    def measured(self: Text, s: object) -> None:
        nonlocal longest
        longest = max(longest, len(str(s)))
        set_text(self, s)

    monkeypatch.setattr(Text, "set_text", measured)
    x = torch.randn(2, 4)
    with HookExplorer(Chain(names), x) as ex:
        ex.attach("", ["global_forward", "global_grad"], action="stats")
        ex.attach(names[0], ["forward", "backward"])
        view = ex.view
        ex.run(x, target=0)
        browser_sets(view, selected=names[0])
        browser_sends(view, type="summary")  # the page asks for the summary again
        assert len(view.plots["items"]) == 4 and view.summary["heatmap"]  # forward, backward and the stats
    monkeypatch.undo()
    return longest


def test_a_100000_character_name_is_laid_out_cut_and_shown_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    long = ["a" * 100_000, "b" * 100_000]
    assert 0 < longest_drawn_text(long, monkeypatch) <= 400  # every figure drew the names cut, never whole

    x = torch.randn(2, 4)
    with HookExplorer(Chain(long), x) as ex:
        ex.attach(long[0], "forward")
        never = ex.attach("unused", "forward")
        ex.run(x)
        assert never.note.startswith(repr("unused"))
        view = ex.view
        browser_sets(view, selected=long[0])
        assert view.plots["items"][0]["title"] == "a" * 200 + "… · output"
        hook = ex.hooks[0]
        assert len(repr(hook)) < 400 and hook.target == long[0]  # shown cut, kept whole
        assert ex.tree["children"][0]["path"] == long[0] and long[0] in ex.captures
        with pytest.raises(KeyError) as error:
            ex.attach(long[0] + "x", "forward")
        assert len(str(error.value)) < 1000

"""The block stack found in one walk: lists inside blocks, blocks met twice, a model that is itself a list."""

from __future__ import annotations

import torch
from torch import nn

from hookwidgets.core.diagnostics import lens
from hookwidgets.core.model import blocks
from hookwidgets.core.model.blocks import block_stack, decoder_blocks
from tests import transformer_models as tm


class Block(nn.Module):
    """A block holding a list of its own, as a mixture of experts does."""

    def __init__(self) -> None:
        super().__init__()
        self.experts = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])


class Stacked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.h = nn.ModuleList([Block(), Block()])
        self.last = self.h[1]  # the same block again, under a second name
        self.norm = nn.LayerNorm(4)


def test_the_stack_is_the_outermost_list_even_when_one_of_its_blocks_is_met_again_under_another_name():
    model = Stacked()
    found = block_stack(model)
    assert found is not None and (found.path, found.blocks, found.owner) == ("h", model.h, model)
    assert [path for path, _ in decoder_blocks(model)] == ["h.0", "h.1"]


def test_a_model_that_is_a_list_of_blocks_is_its_own_stack_and_a_model_without_one_has_none():
    model = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])
    found = block_stack(model)
    assert found is not None and found.path == "" and found.blocks is model
    assert [path for path, _ in decoder_blocks(model)] == ["0", "1"]
    assert block_stack(nn.Sequential(nn.ModuleList([nn.Linear(2, 2), nn.ReLU()]))) is None  # items of two types


def test_the_lens_finds_the_stack_once(monkeypatch):
    model = tm.gpt2(layers=2)
    found = []

    def counted(module: nn.Module):
        found.append(module)
        return block_stack(module)

    monkeypatch.setattr(lens, "block_stack", counted)
    monkeypatch.setattr(blocks, "block_stack", counted)
    with torch.no_grad():
        result = lens.logit_lens(model, tm.token_ids(batch=1, length=5), top_k=2)
    assert found == [model] and result["layers"] == ["transformer.h.0", "transformer.h.1", "output"]

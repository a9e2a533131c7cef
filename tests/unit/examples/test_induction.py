"""The induction example: a 2-layer attention-only model trained in seconds, cached, whose structure the tools find."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from hookwidgets import HookExplorer
from hookwidgets.examples import induction_lm, repeated_tokens

N = 20
CHANCE = 1 / 64


@pytest.fixture(scope="module")
def trained():
    return induction_lm()


def _copying(model, ids: torch.Tensor) -> float:
    """Top-1 accuracy of the next token over the repeated half (its second token on: the first is not predictable)."""
    with torch.no_grad():
        predicted = model(ids)[:, N:-1].argmax(-1)
    return float((predicted == ids[:, N + 1 :]).float().mean())


def _induction_scores(ex: HookExplorer, path: str) -> torch.Tensor:
    """Each head's mean attention from a repeated token to the token after its previous occurrence."""
    pattern = ex.attention()[path][0]
    queries = torch.arange(N, 2 * N)
    return pattern[:, queries, queries - N + 1].mean(-1)


def test_repeated_tokens_repeat_the_first_half_and_leave_the_global_rng_alone():
    state = torch.random.get_rng_state()
    ids = repeated_tokens(5, batch=3, seed=4)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert ids.shape == (3, 10) and ids.dtype == torch.long
    assert torch.equal(ids[:, :5], ids[:, 5:]) and torch.equal(ids, repeated_tokens(5, batch=3, seed=4))
    with pytest.raises(ValueError, match="between 1 and 32"):
        repeated_tokens(40)


def test_the_trained_model_copies_unseen_repeats_is_cached_and_names_its_tokens(trained, monkeypatch):
    model, tokenizer = trained
    assert not model.training and all(p.grad is None for p in model.parameters())
    assert _copying(model, repeated_tokens(N, batch=64, seed=7)) > 0.8  # chance is 1/64
    assert (Path(os.environ["HOOKWIDGETS_CACHE"]) / "induction_lm_v1.pt").exists()
    from hookwidgets.examples import induction

    def no_training(*args, **kwargs):
        raise AssertionError("trained again although the weights were cached")

    monkeypatch.setattr(induction, "train_induction_lm", no_training)
    again, _ = induction_lm()
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), model.state_dict().values(), strict=True))
    assert tokenizer.convert_ids_to_tokens([0, 1, 63]) == ["ba", "be", "zo"]
    assert tokenizer.encode(tokenizer.decode([5, 9])) == [5, 9]
    ex = HookExplorer(model, repeated_tokens(3), tokenizer=tokenizer)
    assert ex.sequences.labels(6) == tokenizer.convert_ids_to_tokens(repeated_tokens(3)[0].tolist())


def test_attention_finds_induction_heads_in_the_second_layer_only(trained):
    model, tokenizer = trained
    ex = HookExplorer(model, repeated_tokens(N, seed=1), tokenizer=tokenizer)
    assert list(ex.attention()) == ["blocks.0.attn", "blocks.1.attn"]
    assert float(_induction_scores(ex, "blocks.1.attn").max()) > 0.8
    assert float(_induction_scores(ex, "blocks.0.attn").max()) < 0.1


def test_ablating_the_induction_heads_drops_copying_to_chance_and_another_head_does_not(trained):
    model, tokenizer = trained
    ex = HookExplorer(model, repeated_tokens(N, seed=1), tokenizer=tokenizer)
    batch = repeated_tokens(N, batch=64, seed=7)
    scores = _induction_scores(ex, "blocks.1.attn")
    induction = [h for h in range(4) if scores[h] > 0.5]
    group = ex.attach("blocks.1.attn", "forward", edit=("ablate_heads", induction))
    assert _copying(model, batch) < 3 * CHANCE
    group.remove()
    pattern = ex.attention()["blocks.0.attn"][0]
    previous = pattern[:, torch.arange(1, 2 * N), torch.arange(0, 2 * N - 1)].mean(-1)
    other = int(previous.argmin())  # the first layer's head that least attends to the previous token
    group = ex.attach("blocks.0.attn", "forward", edit=("ablate_heads", [other]))
    assert _copying(model, batch) > 0.7
    group.remove()


def test_patching_from_a_corrupted_copy_localises_the_effect(trained):
    model, tokenizer = trained
    ex = HookExplorer(model, repeated_tokens(N, seed=1), tokenizer=tokenizer)
    clean = repeated_tokens(N, seed=1)[:, :-1]  # the last position's answer is the first half's token N-1
    corrupted = clean.clone()
    corrupted[:, :N] = repeated_tokens(N, seed=99)[:, :N]  # no previous occurrence to copy from
    answer = int(clean[0, N - 1])
    effect = ex.patch_sweep(clean, corrupted, metric=lambda out: out[:, -1, answer])
    assert effect.layers == ["blocks.0", "blocks.1"]
    # the second layer restores only at the last position, the first only at the token after the previous occurrence
    assert int(effect[1].argmax()) == 2 * N - 2 and int(effect[0].argmax()) == N - 1
    for row, where in ((0, N - 1), (1, 2 * N - 2)):
        rest = torch.cat([effect[row, :where], effect[row, where + 1 :]])
        assert float(effect[row, where]) > 3.0 and float(rest.abs().max()) < 0.3 * float(effect[row, where])


def test_the_logit_lens_shows_the_copied_token_only_after_the_induction_layer(trained):
    model, tokenizer = trained
    ids = repeated_tokens(N, seed=1)
    ex = HookExplorer(model, ids, tokenizer=tokenizer)
    lens = ex.logit_lens()
    assert lens["layers"] == ["blocks.0", "blocks.1", "output"]
    top = lens["ids"][:, 0, N:-1, 0]
    hits = (top == ids[0, N + 1 :]).float().mean(-1)
    assert float(hits[0]) < 0.1 and float(hits[1]) > 0.8
    assert lens["labels"][1][0][-2][0] == tokenizer.convert_ids_to_tokens(int(ids[0, -1]))

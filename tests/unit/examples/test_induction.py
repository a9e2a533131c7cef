"""The induction example: a 2-layer attention-only model trained in seconds and cached, whose structure the tools
find: one head that copies, found by its attention pattern, whose ablation stops the copying; patching and the
logit lens put the answer at that head's layer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hookwidgets import HookExplorer
from hookwidgets.examples import InductionLM, induction_lm, repeated_tokens
from hookwidgets.examples import induction as recipe_module
from hookwidgets.examples.induction import RECIPE, copy_batch

N = 20
CHANCE = 1 / 64
"""Top-1 accuracy of a guess among the 64 tokens: what copying falls to without the induction head."""


@pytest.fixture(scope="session")
def trained():
    """The model trained once per test session (about 20 s); later ``induction_lm()`` calls load the cached file."""
    return induction_lm()


def _copying(output: torch.Tensor, ids: torch.Tensor) -> float:
    """Top-1 accuracy of the next token over the repeated half of ``ids`` (from its second token: the first is not
    predictable), read from the model's ``output`` logits."""
    n = ids.shape[1] // 2
    return float((output[:, n:-1].argmax(-1) == ids[:, n + 1 :]).float().mean())


def _scores(pattern: torch.Tensor, lag: int) -> torch.Tensor:
    """Each head's mean attention over the repeated half from a query to the key ``lag`` positions back."""
    queries = torch.arange(N, 2 * N)
    return pattern[0][:, queries, queries - lag].mean(-1)


def _induction_scores(ex: HookExplorer) -> dict[tuple[str, int], float]:
    """Each head's mean attention from a repeated token to the token after its previous occurrence (N - 1 positions
    back), over every attention module ``attention()`` finds."""
    return {(path, h): float(s) for path, p in ex.attention().items() for h, s in enumerate(_scores(p, N - 1))}


def _induction_head(ex: HookExplorer) -> tuple[str, int, float]:
    """(module, head, score) of the head that most attends to the token after the previous occurrence."""
    (path, head), score = max(_induction_scores(ex).items(), key=lambda item: item[1])
    return path, head, score


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
    for n in (5, 20, 32):
        ids = repeated_tokens(n, batch=64, seed=7)
        with torch.no_grad():
            assert _copying(model(ids), ids) > 0.95, n  # chance is 1/64
    ids, mask = copy_batch(256, torch.Generator().manual_seed(12345))  # sequences training never saw: another generator
    with torch.no_grad():
        predicted = model(ids)[:, :-1].argmax(-1)
    assert float((predicted == ids[:, 1:])[mask[:, :-1]].float().mean()) > 0.95
    cached = list(Path(os.environ["HOOKWIDGETS_CACHE"]).glob("induction_lm-*.pt"))
    assert len(cached) == 1

    def no_training(*args, **kwargs):
        raise AssertionError("trained again although the weights were cached")

    monkeypatch.setattr(recipe_module, "train_induction_lm", no_training)
    again, _ = induction_lm()
    assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), model.state_dict().values(), strict=True))
    assert tokenizer.convert_ids_to_tokens([0, 1, 63]) == ["ba", "be", "zo"]
    assert tokenizer.encode(tokenizer.decode([5, 9])) == [5, 9]
    ex = HookExplorer(model, repeated_tokens(3), tokenizer=tokenizer)
    assert ex.sequences.labels(6) == tokenizer.convert_ids_to_tokens(repeated_tokens(3)[0].tolist())


def test_training_leaves_the_rng_and_threads_as_found_and_repeats_itself():
    threads = torch.get_num_threads()
    torch.manual_seed(5)
    state = torch.random.get_rng_state()
    first = recipe_module.train_induction_lm({**RECIPE, "steps": 3})
    assert torch.equal(torch.random.get_rng_state(), state) and torch.get_num_threads() == threads
    assert not first.training and all(p.grad is None for p in first.parameters())
    second = recipe_module.train_induction_lm({**RECIPE, "steps": 3})  # the recipe's seed: the same weights
    assert all(
        torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True)
    )
    third = recipe_module.train_induction_lm({**RECIPE, "steps": 3, "seed": 1})
    assert not torch.equal(first.embed.weight, third.embed.weight)


def test_a_changed_recipe_or_a_corrupt_file_trains_again(monkeypatch, tmp_path):
    monkeypatch.setenv("HOOKWIDGETS_CACHE", str(tmp_path))
    trainings = []

    def quick(recipe):
        trainings.append(recipe["steps"])
        return InductionLM().eval()  # untrained: the cache is under test, not the training

    monkeypatch.setattr(recipe_module, "train_induction_lm", quick)
    induction_lm()
    induction_lm()
    assert trainings == [RECIPE["steps"]]
    [first] = tmp_path.glob("induction_lm-*.pt")
    monkeypatch.setitem(RECIPE, "steps", RECIPE["steps"] + 1)
    induction_lm()
    assert trainings == [RECIPE["steps"] - 1, RECIPE["steps"]] and len(list(tmp_path.glob("*.pt"))) == 2
    monkeypatch.setitem(RECIPE, "steps", RECIPE["steps"] - 1)
    first.write_bytes(first.read_bytes()[:100])  # a file cut short, as by a killed process before atomic writes
    model, _ = induction_lm()
    assert len(trainings) == 3 and isinstance(model, InductionLM)
    reloaded = torch.load(first, weights_only=True)  # replaced by a whole file
    assert all(torch.equal(reloaded[k], v) for k, v in model.state_dict().items())
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_attention_finds_one_induction_head_in_the_second_layer(trained):
    model, tokenizer = trained
    ex = HookExplorer(model, repeated_tokens(N, seed=1), tokenizer=tokenizer)
    path, _, score = _induction_head(ex)
    assert path == "blocks.1.attn" and score > 0.8
    assert sum(s > 0.3 for s in _induction_scores(ex).values()) == 1  # one head copies: the others do not
    assert float(_scores(ex.attention()["blocks.0.attn"], N - 1).max()) < 0.1  # the first layer copies nothing
    assert float(_scores(ex.attention()["blocks.0.attn"], 1).max()) > 0.8  # but one of its heads reads the token before


def test_ablating_the_induction_head_drops_copying_to_chance_and_another_head_does_not(trained):
    model, tokenizer = trained
    ex = HookExplorer(model, repeated_tokens(N, seed=1), tokenizer=tokenizer)
    batch = repeated_tokens(N, batch=64, seed=7)
    path, head, _ = _induction_head(ex)
    assert _copying(ex.run(batch), batch) > 0.95
    group = ex.attach(path, "forward", edit=("ablate_heads", [head]))
    assert _copying(ex.run(batch), batch) < 3 * CHANCE
    group.remove()
    # another head: the first layer's that least attends to the previous token
    other = int(_scores(ex.attention()["blocks.0.attn"], 1).argmin())
    group = ex.attach("blocks.0.attn", "forward", edit=("ablate_heads", [other]))
    assert _copying(ex.run(batch), batch) > 0.7
    group.remove()
    assert _copying(ex.run(batch), batch) > 0.95


def test_patching_from_a_corrupted_copy_localises_the_effect(trained):
    model, tokenizer = trained
    ex = HookExplorer(model, repeated_tokens(N, seed=1), tokenizer=tokenizer)
    clean = repeated_tokens(N, seed=1)[:, :-1]  # the last position's answer is the first half's token N-1
    corrupted = clean.clone()
    corrupted[:, :N] = repeated_tokens(N, seed=99)[:, :N]  # no previous occurrence to copy from
    answer = int(clean[0, N - 1])
    effect = ex.patch_sweep(clean, corrupted, metric=lambda out: out[:, -1, answer])
    assert effect.layers == ["blocks.0", "blocks.1"]
    # the induction head's layer restores at the repeated token that asks; the first layer at the token after the
    # previous occurrence, which the induction head reads
    assert int(effect[1].argmax()) == 2 * N - 2 and int(effect[0].argmax()) == N - 1
    for row, where in ((0, N - 1), (1, 2 * N - 2)):
        rest = torch.cat([effect[row, :where], effect[row, where + 1 :]])
        assert float(effect[row, where]) > 3.0 and float(rest.abs().max()) < 0.3 * float(effect[row, where])


def test_the_logit_lens_shows_the_copied_token_only_after_the_induction_layer(trained):
    model, tokenizer = trained
    ids = repeated_tokens(N, seed=1)
    ex = HookExplorer(model, ids, tokenizer=tokenizer)
    path, _, _ = _induction_head(ex)
    lens = ex.logit_lens()
    assert lens["layers"] == ["blocks.0", "blocks.1", "output"] and path.startswith("blocks.1.")
    top = lens["ids"][:, 0, N:-1, 0]
    hits = (top == ids[0, N + 1 :]).float().mean(-1)
    assert float(hits[0]) < 0.1 and float(hits[1]) > 0.9
    assert lens["labels"][1][0][-2][0] == tokenizer.convert_ids_to_tokens(int(ids[0, -1]))


def test_the_model_loads_and_is_explored_without_transformers(trained):
    script = (
        "import sys; sys.modules['transformers'] = None\n"  # any import of transformers now raises ImportError
        "from hookwidgets import HookExplorer\n"
        "from hookwidgets.examples import induction_lm, repeated_tokens\n"
        "model, tokenizer = induction_lm()\n"
        "ex = HookExplorer(model, repeated_tokens(4), tokenizer=tokenizer)\n"
        "print(sorted(ex.attention()), ex.logit_lens()['layers'])\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['blocks.0.attn', 'blocks.1.attn'] ['blocks.0', 'blocks.1', 'output']"

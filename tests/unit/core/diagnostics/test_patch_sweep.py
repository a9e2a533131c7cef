"""ex.patch_sweep() against patched forwards written by hand on GPT-2: the default metric, a user metric, bad inputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import hook_state

CLEAN = tm.token_ids(length=6, seed=3)
CORRUPTED = tm.token_ids(length=6, seed=4)


def patched_logits(model: nn.Module, block: nn.Module, position: int) -> torch.Tensor:
    """The corrupted run's logits with the clean output of ``block`` at ``position``, patched by hand."""
    saved = {}
    keep = block.register_forward_hook(lambda m, a, o: saved.setdefault("clean", o[0] if isinstance(o, tuple) else o))
    with torch.no_grad():
        model(CLEAN)
    keep.remove()

    def patch(module, args, output):
        hidden = (output[0] if isinstance(output, tuple) else output).clone()
        hidden[:, position] = saved["clean"][:, position]
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = block.register_forward_hook(patch)
    with torch.no_grad():
        logits = model(CORRUPTED).logits
    handle.remove()
    return logits


def test_each_cell_is_the_patched_logit_of_the_clean_top_token_minus_the_corrupted_one():
    model = tm.gpt2(layers=3)
    ex = Explorer(model, CLEAN)
    hooks = hook_state(model)
    sweep = ex.patch_sweep(CLEAN, CORRUPTED)
    assert sweep.shape == (3, 6)
    assert sweep.layers == ["transformer.h.0", "transformer.h.1", "transformer.h.2"]
    with torch.no_grad():
        top = model(CLEAN).logits[0, -1].argmax()
        base = model(CORRUPTED).logits[0, -1, top]
    for layer, position in [(0, 0), (1, 3), (2, 5), (2, 2)]:
        expected = patched_logits(model, model.transformer.h[layer], position)[0, -1, top] - base
        torch.testing.assert_close(sweep[layer, position], expected, atol=1e-5, rtol=1e-5)
    # The last block only reaches the last position's logits through that position; patched there: the clean logit.
    with torch.no_grad():
        clean_logit = model(CLEAN).logits[0, -1, top]
    torch.testing.assert_close(sweep[2, 5], clean_logit - base, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sweep[2, :5], torch.zeros(5), atol=1e-5, rtol=0)
    assert hook_state(model) == hooks


def test_a_user_metric_chosen_layers_small_batches_and_progress():
    model = tm.gpt2(layers=2)
    ex = Explorer(model, CLEAN)
    calls = []
    sweep = ex.patch_sweep(
        CLEAN,
        CORRUPTED,
        layers=["transformer.h.1"],
        metric=lambda out: out.logits[:, -1, 7],
        batch_size=4,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert sweep.shape == (1, 6) and sweep.layers == ["transformer.h.1"]
    assert calls == [(4, 6), (6, 6)]  # positions 0-3, then 4-5
    for position in (1, 5):
        expected = patched_logits(model, model.transformer.h[1], position)[0, -1, 7]
        torch.testing.assert_close(sweep[0, position], expected, atol=1e-5, rtol=1e-5)


def test_tokens_label_the_positions_when_known():
    tokenizer = tm.tokenizer()
    model = tm.gpt2(vocab=len(tokenizer))
    clean = torch.tensor([tokenizer.convert_tokens_to_ids(["the", "cat", "sat"])])
    corrupted = torch.tensor([tokenizer.convert_tokens_to_ids(["the", "dog", "sat"])])
    assert Explorer(model, clean, tokenizer=tokenizer).patch_sweep(clean, corrupted).tokens == ["the", "cat", "sat"]
    other = torch.tensor([tokenizer.convert_tokens_to_ids(["a", "red", "hat"])])
    assert Explorer(model, other, tokenizer=tokenizer).patch_sweep(clean, corrupted).tokens == ["the", "cat", "sat"]
    assert Explorer(model, clean, tokens=["x", "y", "z"]).patch_sweep(clean, corrupted).tokens == ["x", "y", "z"]
    assert Explorer(model, clean).patch_sweep(clean, corrupted).tokens is None


def test_the_model_is_left_as_found_and_the_explorers_hooks_record_nothing():
    model = tm.gpt2().train()
    ex = Explorer(model, CLEAN)
    ex.attach("transformer.h.0")
    ex.patch_sweep(CLEAN, CORRUPTED)
    assert ex.step == 0 and not ex.captures.get("transformer.h.0", {}).get("forward")
    assert all(m.training for m in model.modules())
    assert all(p.grad is None for p in model.parameters())


def test_bad_inputs_are_refused_with_the_fix():
    model = tm.gpt2()
    ex = Explorer(model, CLEAN)
    with pytest.raises(ValueError, match=r"Tensor\(1, 6\).*Tensor\(1, 8\) differ in length"):
        ex.patch_sweep(CLEAN, tm.token_ids(length=8))
    with pytest.raises(ValueError, match="batch 1"):
        ex.patch_sweep(tm.token_ids(batch=2, length=6), tm.token_ids(batch=2, length=6, seed=5))
    with pytest.raises(ValueError, match="'transformer.nope', which is no module of GPT2LMHeadModel"):
        ex.patch_sweep(CLEAN, CORRUPTED, layers=["transformer.nope"])
    with pytest.raises(ValueError, match=r"metric must return one value per item.*\(1,\), got \(\) \(the clean run\)"):
        ex.patch_sweep(CLEAN, CORRUPTED, metric=lambda out: out.logits.sum())
    shared = nn.Linear(4, 4)
    twice = Explorer(nn.Sequential(shared, shared), torch.randn(1, 6, 4))
    with pytest.raises(ValueError, match="0 ran 2 times in the clean run"):
        twice.patch_sweep(torch.randn(1, 6, 4), torch.randn(1, 6, 4), layers=["0"], metric=lambda out: out[:, 0, 0])


def test_mapping_inputs_with_an_attention_mask_give_the_same_sweep():
    model = tm.gpt2()
    ex = Explorer(model, CLEAN)
    as_dict = [{"input_ids": ids, "attention_mask": torch.ones_like(ids)} for ids in (CLEAN, CORRUPTED)]
    expected = ex.patch_sweep(CLEAN, CORRUPTED, layers=["transformer.h.1"])
    torch.testing.assert_close(ex.patch_sweep(*as_dict, layers=["transformer.h.1"]), expected, atol=1e-5, rtol=1e-5)


def _answers(model: nn.Module) -> tuple[int, int, float, float]:
    """The clean and the corrupted run's top tokens at the last position, and each run's logit difference."""
    with torch.no_grad():
        clean, corrupted = model(CLEAN).logits[0, -1], model(CORRUPTED).logits[0, -1]
    a, b = int(clean.argmax()), int(corrupted.argmax())
    return a, b, float(clean[a] - clean[b]), float(corrupted[a] - corrupted[b])


def test_the_fraction_recovered_is_0_unpatched_1_clean_and_the_logit_difference_scaled():
    model = tm.gpt2(layers=2)
    ex = Explorer(model, CLEAN)
    a, b, clean_ld, corrupt_ld = _answers(model)
    assert a != b  # the two inputs predict different tokens: a logit difference to recover
    raw = ex.patch_sweep(CLEAN, CORRUPTED, metric="logit_diff")
    recovered = ex.patch_sweep(CLEAN, CORRUPTED, metric="recovered")
    assert (raw.metric, recovered.metric) == ("logit_diff", "recovered")
    assert raw.clean == pytest.approx(clean_ld - corrupt_ld, rel=1e-5) and raw.corrupted == pytest.approx(0, abs=1e-6)
    assert recovered.clean == pytest.approx(1.0) and recovered.corrupted == pytest.approx(0.0, abs=1e-6)
    logits = patched_logits(model, model.transformer.h[0], 2)[0, -1]
    expected_ld = float(logits[a] - logits[b])
    assert float(raw[0, 2]) == pytest.approx(expected_ld - corrupt_ld, rel=1e-4, abs=1e-5)
    assert float(recovered[0, 2]) == pytest.approx((expected_ld - corrupt_ld) / (clean_ld - corrupt_ld), rel=1e-4)
    assert float(recovered[1, -1]) == pytest.approx(1.0, abs=1e-5)  # the last block at the last position: all of it
    torch.testing.assert_close(recovered, raw / (clean_ld - corrupt_ld), atol=1e-5, rtol=1e-4)
    assert recovered.differs == (CLEAN[0] != CORRUPTED[0]).nonzero().flatten().tolist()


def test_the_default_metric_says_its_clean_value_whatever_its_sign():
    model = tm.gpt2(layers=2)
    sweep = Explorer(model, CLEAN).patch_sweep(CLEAN, CORRUPTED)
    with torch.no_grad():
        top = model(CLEAN).logits[0, -1].argmax()
        expected = model(CLEAN).logits[0, -1, top] - model(CORRUPTED).logits[0, -1, top]
    assert sweep.metric == "top_logit" and sweep.clean == pytest.approx(float(expected), rel=1e-5)
    assert sweep.corrupted == 0.0
    with torch.no_grad():
        negated = float(-model(CLEAN).logits[0, -1, top])
    custom = Explorer(model, CLEAN).patch_sweep(CLEAN, CORRUPTED, metric=lambda out: -out.logits[:, -1, top])
    assert custom.metric == "custom" and custom.clean == pytest.approx(negated)


def test_a_logit_difference_needs_two_answers_and_unknown_metrics_are_named():
    model = tm.gpt2(layers=2)
    ex = Explorer(model, CLEAN)
    same = CLEAN.clone()
    same[0, 0] = (same[0, 0] + 1) % 64  # another first token: the same answer at the last position here
    a = _answers(model)[0]
    with torch.no_grad():
        assert int(model(same).logits[0, -1].argmax()) == a
    for name in ("logit_diff", "recovered"):
        with pytest.raises(ValueError, match=f"both runs predict token {a} at the last position"):
            ex.patch_sweep(CLEAN, same, metric=name)
    with pytest.raises(ValueError, match="metric='recover' is not a metric: pass one of 'top_logit', 'logit_diff'"):
        ex.patch_sweep(CLEAN, CORRUPTED, metric="recover")


def test_the_fraction_recovered_is_refused_where_nothing_differs_to_recover(monkeypatch):
    from hookwidgets.core.diagnostics import patch_metrics

    model = tm.gpt2(layers=2)
    _, _, clean_ld, corrupt_ld = _answers(model)
    monkeypatch.setattr(patch_metrics, "UNDEFINED", 10.0 * abs(clean_ld - corrupt_ld))  # the gap counts as none
    with pytest.raises(ValueError, match="the fraction recovered is undefined here: the logit difference is .* use "):
        Explorer(model, CLEAN).patch_sweep(CLEAN, CORRUPTED, metric="recovered")

"""Targets for every output shape, on transformers models and a CNN: each form's gradient equals a hand-written one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from hookwidgets.core import Explorer
from hookwidgets.core.model.inputs import call_model
from tests import transformer_models as tm
from tests.conftest import hook_state

LENGTH, DECODER_LENGTH = 6, 4


def _text() -> dict[str, torch.Tensor]:
    return {"input_ids": tm.token_ids(2, LENGTH)}


def _seq2seq() -> dict[str, torch.Tensor]:
    return {"input_ids": tm.token_ids(2, LENGTH), "decoder_input_ids": tm.token_ids(2, DECODER_LENGTH, seed=3)}


def _speech() -> dict[str, torch.Tensor]:
    features = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(4))
    return {"input_features": features, "decoder_input_ids": tm.token_ids(2, DECODER_LENGTH, seed=3)}


def _clip() -> dict[str, torch.Tensor]:
    return {"pixel_values": tm.images(2), "input_ids": tm.token_ids(3, 5)}


# name: (builder, inputs, a parameter the score reaches, the scores' field, its kind, the description's words)
MODELS: dict[str, tuple[Callable, Callable, str, str]] = {
    "gpt2": (tm.gpt2, _text, "transformer.ln_f.weight", "logits"),
    "llama": (tm.llama, _text, "model.norm.weight", "logits"),
    "bert_tokens": (tm.bert_tokens, _text, "classifier.weight", "logits"),
    "t5": (tm.t5, _seq2seq, "decoder.final_layer_norm.weight", "logits"),
    "whisper": (tm.whisper, _speech, "model.decoder.layer_norm.weight", "logits"),
    "bert": (tm.bert, _text, "classifier.weight", "logits"),
    "vit": (tm.vit, lambda: tm.images(2), "classifier.weight", "logits"),
    "clip": (tm.clip, _clip, "visual_projection.weight", "logits_per_image"),
}
SEQUENCES = ("gpt2", "llama", "bert_tokens", "t5", "whisper")


def _scores(output: Any, field: str) -> torch.Tensor:
    return output if isinstance(output, torch.Tensor) else getattr(output, field)


def _gathered(scores: torch.Tensor, index: list[int]) -> torch.Tensor:
    """The hand-written score: item i's score ``index[i]``, summed over the batch."""
    return sum(scores[i, c] for i, c in enumerate(index))


def _check(model, inputs, param: str, target: Any, position: Any, hand: Callable[[Any], torch.Tensor]) -> Any:
    """Run ``target`` through the explorer; its gradient on ``param`` equals autograd's of ``hand(output)``."""
    before = hook_state(model)
    config = _config(model)
    with Explorer(model) as ex:
        ex.attach(param, "grad")
        ex.run(inputs, target=target, position=position)
        got = ex.captures[param]["grad"][-1].tensors["grad"]
        score = ex.last_score
    weight = model.get_parameter(param)
    expected = torch.autograd.grad(hand(call_model(model, inputs)), weight)[0]
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert got.abs().sum() > 0  # the score reaches the parameter: the comparison means something
    assert weight.grad is None and hook_state(model) == before  # the model as found
    assert _config(model) == config
    return score


def _config(model: torch.nn.Module) -> dict[str, Any] | None:
    """The model's config as data; ``problem_type`` aside, which a classifier's own forward sets from its labels."""
    config = getattr(model, "config", None)
    return None if config is None else {k: v for k, v in config.to_dict().items() if k != "problem_type"}


@pytest.mark.parametrize("name", SEQUENCES)
def test_sequence_targets_read_the_position_asked_for_default_the_last(name):
    build, inputs, param, field = MODELS[name]
    model, x = build(), inputs()
    with torch.no_grad():
        logits = _scores(call_model(model, x), field)
    length = logits.shape[1]
    words = "label" if name == "bert_tokens" else "token id"
    where = " (decoder position {p} of 4)" if name in ("t5", "whisper") else ""

    top = logits[:, -1].argmax(-1).tolist()
    score = _check(model, x, param, "top", None, lambda out: _gathered(_scores(out, field)[:, -1], top))
    best = "top label" if name == "bert_tokens" else "top next token"
    assert score.description == f"output.{field}[:, -1]{where.format(p=-1)} · {best}"
    assert (score.tensor, score.position, score.classes) == (f"output.{field}", -1, top)
    assert score.value == pytest.approx(float(_gathered(logits[:, -1], top)), rel=1e-5)

    score = _check(model, x, param, 3, None, lambda out: _scores(out, field)[:, -1, 3].sum())
    assert score.description == f"output.{field}[:, -1]{where.format(p=-1)} · {words} 3"
    score = _check(model, x, param, [4, 1], -2, lambda out: _gathered(_scores(out, field)[:, -2], [4, 1]))
    assert score.description.endswith(f" · {words}s [4, 1]") and score.position == -2
    score = _check(model, x, param, torch.tensor(2), 1, lambda out: _scores(out, field)[:, 1, 2].sum())
    assert score.description.startswith(f"output.{field}[:, 1]") and score.classes == [2, 2]
    first = -length  # the first position, counted from the end
    top_first = logits[:, 0].argmax(-1).tolist()
    _check(model, x, param, "top", first, lambda out: _gathered(_scores(out, field)[:, 0], top_first))

    def mine(out: Any) -> torch.Tensor:
        return _scores(out, field)[:, 0, 1].sum()

    score = _check(model, x, param, mine, None, mine)
    assert (score.description, score.tensor, score.position, score.classes) == ("mine(output)", None, None, None)


@pytest.mark.parametrize("name", ["bert", "vit", "clip"])
def test_class_targets_of_transformers_read_their_logits(name):
    build, inputs, param, field = MODELS[name]
    model, x = build(), inputs()
    with torch.no_grad():
        logits = _scores(call_model(model, x), field)
    top = logits.argmax(-1).tolist()
    score = _check(model, x, param, "top", None, lambda out: _gathered(_scores(out, field), top))
    assert score.description == f"output.{field} · top class" and score.position is None and score.classes == top
    score = _check(model, x, param, 1, None, lambda out: _scores(out, field)[:, 1].sum())
    assert score.description == f"output.{field} · class 1"
    score = _check(model, x, param, [2, 0], None, lambda out: _gathered(_scores(out, field), [2, 0]))
    assert score.description == f"output.{field} · classes [2, 0]"
    _check(model, x, param, lambda out: _scores(out, field)[0, 0], None, lambda out: _scores(out, field)[0, 0])


def test_class_targets_of_a_cnn_read_its_output(cnn, image):
    cnn.eval()
    top = cnn(image).argmax(1).tolist()
    score = _check(cnn, image, "head.fc.weight", "top", None, lambda out: _gathered(out, top))
    assert score.description == "output · top class" and score.tensor == "output"
    score = _check(cnn, image, "head.fc.weight", 4, None, lambda out: out[:, 4].sum())
    assert score.description == "output · class 4"


@pytest.mark.parametrize("name", ["gpt2", "llama", "t5", "whisper", "bert", "bert_tokens"])
def test_the_loss_target_backpropagates_the_models_loss(name):
    build, inputs, param, _ = MODELS[name]
    model, x = build(), inputs()
    if name in ("t5", "whisper"):
        x["labels"] = x["decoder_input_ids"]
    elif name == "bert":
        x["labels"] = torch.tensor([0, 2])
    elif name == "bert_tokens":
        x["labels"] = torch.randint(0, 5, (2, LENGTH), generator=torch.Generator().manual_seed(5))
    else:
        x["labels"] = x["input_ids"]
    score = _check(model, x, param, "loss", None, lambda out: out.loss)
    assert (score.description, score.tensor, score.position, score.classes) == (
        "output.loss",
        "output.loss",
        None,
        None,
    )


def test_a_scalar_output_is_its_own_loss():
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0), torch.nn.Identity())
    x = torch.randn(1, 3)
    score = _check_plain(model, x, "loss", lambda out: out.sum())
    assert score.description == "output" and score.tensor == "output"


def _check_plain(model: torch.nn.Module, x: torch.Tensor, target: Any, hand: Callable) -> Any:
    with Explorer(model) as ex:
        ex.attach("0.weight", "grad")
        ex.run(x, target=target)
        got = ex.captures["0.weight"]["grad"][-1].tensors["grad"]
        score = ex.last_score
    torch.testing.assert_close(got, torch.autograd.grad(hand(model(x)), model[0].weight)[0])
    return score


def test_last_score_is_none_after_a_run_without_a_target_and_the_position_needs_one(cnn, image):
    with Explorer(cnn, example_inputs=image) as ex:
        assert ex.last_score is None
        ex.run(target=0)
        assert ex.last_score is not None and ex.last_score.classes == [0, 0]
        ex.run()
        assert ex.last_score is None  # never the description of an older run
        with pytest.raises(ValueError, match="position=2 picks where a target reads the output: pass target= as well"):
            ex.run(position=2)


@pytest.mark.parametrize(
    ("name", "target", "position", "error", "message"),
    [
        (
            "gpt2",
            "loss",
            None,
            ValueError,
            r"target='loss' needs a loss in the output, got CausalLMOutputWithCrossAttentions \{logits: "
            r"Tensor\(2, 6, 96\).*\}; pass labels with the inputs \(e.g. labels=input_ids for a language model\) so "
            r"the model returns a loss, or target=callable\(output\) returning a scalar",
        ),
        (
            "gpt2",
            "top",
            6,
            IndexError,
            r"position 6 is out of range for output.logits of shape \(2, 6, 96\): its sequence length is 6, so "
            r"positions go from -6 to 5",
        ),
        ("gpt2", 0, -7, IndexError, "its sequence length is 6"),
        ("t5", "top", 4, IndexError, r"output.logits of shape \(2, 4, 96\): its sequence length is 4"),
        ("gpt2", 96, None, ValueError, r"target token id 96 is out of range: the output has 96 token ids \(0 to 95\)"),
        ("bert_tokens", 5, None, ValueError, r"target label 5 is out of range: the output has 5 labels \(0 to 4\)"),
        ("gpt2", [1, 2, 3], None, ValueError, "target has 3 class indices but the batch has 2 items"),
        ("gpt2", "next", None, ValueError, r"target 'next' is not a score target; pass \"top\", .*\"loss\""),
        ("gpt2", "top", 1.0, TypeError, r"position must be an integer such as -1 \(the last position\), got 1.0"),
        (
            "bert",
            "top",
            -1,
            ValueError,
            r"position=-1 applies to sequence scores \(batch, positions, vocabulary\), but output.logits has shape "
            r"\(2, 3\), one score per class: leave position out",
        ),
        ("gpt2", lambda out: out.logits.sum(), 0, ValueError, "position=0 does not apply to a callable target"),
    ],
)
def test_bad_targets_and_positions_say_what_is_wrong_and_what_to_pass(name, target, position, error, message):
    build, inputs, _, _ = MODELS[name]
    model = build()
    before = hook_state(model)
    with Explorer(model) as ex, pytest.raises(error, match=message):
        ex.run(inputs(), target=target, position=position)
    assert hook_state(model) == before and all(p.grad is None for p in model.parameters())


def test_the_loss_with_a_position_is_refused():
    model, x = tm.gpt2(), _text()
    x["labels"] = x["input_ids"]
    with Explorer(model) as ex, pytest.raises(ValueError, match="position=-1 does not apply to target='loss'"):
        ex.run(x, target="loss", position=-1)


class FeaturesOnly(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> dict[str, Any]:
        return {"features": self.conv(x), "pooled": self.conv(x).mean((1, 2, 3))}


def test_an_output_with_no_scores_is_described_with_the_callable_fix(image):
    with Explorer(FeaturesOnly(), example_inputs=image) as ex:
        assert ex.probe_output["kind"] == "none" and ex.probe_output["tensor"] is None
        with pytest.raises(
            ValueError,
            match=r"a class target needs scores of shape \(batch, classes\), or \(batch, positions, vocabulary\) for "
            r"a sequence, got dict \{features: Tensor\(2, 4, 6, 6\), pooled: Tensor\(2\)\}; pass "
            r"target=callable\(output\) returning a scalar instead",
        ):
            ex.run(target="top")
        with pytest.raises(ValueError, match=r"target='loss' needs a loss in the output, got dict \{features"):
            ex.run(target="loss")
        ex.run(target=lambda out: out["pooled"].sum())  # the fix works
        assert ex.last_score.description == "<lambda>(output)"


def test_the_scores_tensor_is_logits_else_the_first_float_tensor_of_2_or_3_dims():
    from hookwidgets.core.model.scores import find_scores

    ids = torch.zeros(2, 5, dtype=torch.long)
    seq, cls = torch.randn(2, 5, 7), torch.randn(2, 3)
    assert find_scores((torch.tensor(1.0), seq, cls)) == ("output[1]", seq)  # a tuple (loss, logits, …)
    assert find_scores({"ids": ids, "hidden": torch.randn(2, 5, 4, 4), "scores": cls})[0] == "output.scores"
    assert find_scores({"hidden": seq, "logits": cls})[0] == "output.logits"
    assert find_scores([torch.randn(5)]) is None


@pytest.mark.parametrize("name", ["gpt2", "t5", "bert_tokens", "bert", "clip"])
def test_the_probe_says_what_the_output_offers(name):
    build, inputs, _, field = MODELS[name]
    model, x = build(), inputs()
    with torch.no_grad():
        scores = _scores(call_model(model, x), field)
    with Explorer(model, example_inputs=x) as ex:
        probe = ex.probe_output
    sequence = scores.dim() == 3
    assert probe["kind"] == ("sequence" if sequence else "classes")
    assert probe["tensor"] == f"output.{field}" and probe["shape"] == list(scores.shape)
    assert probe["positions"] == (scores.shape[1] if sequence else None)
    assert probe["decoder"] is (name == "t5") and probe["loss"] is False
    assert probe["words"] == {"gpt2": "tokens", "t5": "tokens", "bert_tokens": "labels"}.get(name, "classes")
    last = (scores[:, -1] if sequence else scores)[0].softmax(-1).topk(min(5, scores.shape[-1]))
    assert [i for i, _ in probe["top"]] == last.indices.tolist()
    assert [p for _, p in probe["top"]] == pytest.approx(last.values.tolist(), abs=1e-4)
    assert ex.probe_classes == ([] if sequence else [tuple(t) for t in probe["top"]])  # classes only, as before


def test_the_probe_of_a_scalar_output_and_of_a_loss():
    with Explorer(
        torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0)), example_inputs=torch.randn(1, 3)
    ) as ex:
        assert (ex.probe_output["kind"], ex.probe_output["loss"]) == ("scalar", True)
    x = _text()
    x["labels"] = x["input_ids"]
    with Explorer(tm.gpt2(), example_inputs=x) as ex:
        assert (ex.probe_output["kind"], ex.probe_output["loss"]) == ("sequence", True)


class PerPosition(torch.nn.Module):
    """Six scores per position, ``(N, T, 6)``, with the config it is given (where a transformers model keeps it)."""

    def __init__(self, config: Any = None) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 6)
        if config is not None:
            self.config = config

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


@pytest.mark.parametrize(
    ("config", "words"),
    [
        (None, "top next token"),  # no config: taken for a language model
        (lambda: tm.transformers.PretrainedConfig(), "top label"),  # declares no vocabulary: a detector's classes
        (lambda: tm.transformers.LlavaConfig(text_config={"model_type": "llama", "vocab_size": 6}), "top next token"),
        (lambda: tm.transformers.LlavaConfig(text_config={"model_type": "llama", "vocab_size": 7}), "top label"),
    ],
    ids=["no config", "no vocabulary", "the text config's vocabulary", "another vocabulary"],
)
def test_scores_per_position_are_tokens_only_where_a_config_declares_that_vocabulary(config, words):
    model = PerPosition(None if config is None else config())
    with Explorer(model, torch.randn(2, 3, 4)) as ex:
        ex.run(target="top")
        assert ex.last_score.description == f"output[:, -1] · {words}"


def test_a_failed_probe_says_so_in_what_the_output_offers():
    from hookwidgets.core import ProbeFailedWarning

    with pytest.warns(ProbeFailedWarning):
        ex = Explorer(torch.nn.Linear(4, 3), example_inputs=torch.randn(2, 5))
    with ex:
        assert ex.probe_output["kind"] == "none" and ex.probe_output["top"] == []
        assert ex.probe_output["probe_failed"] == (
            "the shape probe failed: RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x5 and 4x3)"
        )
    with Explorer(torch.nn.Linear(4, 3), example_inputs=torch.randn(2, 4)) as ex:
        assert ex.probe_output["probe_failed"] == "" and ex.probe_output["kind"] == "classes"

"""The run bar on language models: the default Run backpropagates from the top next token, and says so."""

from __future__ import annotations

import pytest
import torch

from hookwidgets import HookExplorer
from tests import transformer_models as tm
from tests.conftest import hook_state

from ._messages import browser_sends

PARAM = "transformer.ln_f.weight"


def _grad(ex: HookExplorer) -> torch.Tensor:
    return ex.captures[PARAM]["grad"][-1].tensors["grad"]


def _expected(model: torch.nn.Module, ids: torch.Tensor, position: int, index: list[int] | None) -> torch.Tensor:
    logits = model(input_ids=ids).logits[:, position]
    chosen = logits.detach().argmax(-1) if index is None else torch.tensor(index)
    return torch.autograd.grad(logits.gather(1, chosen[:, None]).sum(), model.get_parameter(PARAM))[0]


def test_the_default_run_on_a_language_model_backpropagates_the_top_next_token():
    model, ids = tm.gpt2(), tm.token_ids(2, 8)
    before = hook_state(model)
    top_grad, token_grad = _expected(model, ids, -1, None), _expected(model, ids, 2, [7, 7])  # before any hook
    with HookExplorer(model, example_inputs={"input_ids": ids}) as ex:
        view = ex.view
        output = view.status["output"]
        assert (output["kind"], output["words"], output["positions"], output["loss"]) == (
            "sequence",
            "tokens",
            8,
            False,
        )
        with torch.no_grad():
            last = model(input_ids=ids).logits[0, -1].softmax(-1).topk(5)
        assert [i for i, _ in view.status["top"]] == last.indices.tolist()  # the top next tokens, for the picker
        ex.attach(PARAM, "grad")
        reply = browser_sends(view, type="run")  # the run bar's default: "top"
        assert reply["ok"] is True and view.error == "" and view.status["state"] == "idle"
        assert view.status["message"] == "step 1: forward, then backward from output.logits[:, -1] · top next token"
        torch.testing.assert_close(_grad(ex), top_grad)

        browser_sends(view, type="run", target=7, position=2)
        assert view.status["message"] == "step 2: forward, then backward from output.logits[:, 2] · token id 7"
        torch.testing.assert_close(_grad(ex), token_grad)
        browser_sends(view, type="run", target="top", position=-3.0)  # the page's number input sends a float
        assert view.status["message"].endswith("output.logits[:, -3] · top next token")

        reply = browser_sends(view, type="run", target="top", position=8)
        assert reply["ok"] is False and "its sequence length is 8" in reply["error"]
        assert view.status["state"] == "error" and "IndexError: position 8 is out of range" in view.error
        reply = browser_sends(view, type="run", target="top", position="last")
        assert reply["ok"] is False and "the widget sent the run position 'last'" in reply["error"]
        assert ex.step == 4  # the forward of the run whose position was out of range, and no other
    assert hook_state(model) == before


def test_the_run_bar_offers_the_loss_when_the_inputs_carry_labels():
    model, ids = tm.gpt2(), tm.token_ids(1, 6)
    with HookExplorer(model, example_inputs={"input_ids": ids, "labels": ids}) as ex:
        view = ex.view
        assert view.status["output"]["loss"] is True
        ex.attach(PARAM, "grad")
        browser_sends(view, type="run", target="loss")
        assert view.error == "" and view.status["message"] == "step 1: forward, then backward from output.loss"
        expected = torch.autograd.grad(model(input_ids=ids, labels=ids).loss, model.get_parameter(PARAM))[0]
        torch.testing.assert_close(_grad(ex), expected)


@pytest.mark.parametrize("name", ["t5", "whisper"])
def test_an_encoder_decoders_run_reads_decoder_positions(name):
    decoder = tm.token_ids(1, 4, seed=3)
    if name == "t5":
        model, inputs = tm.t5(), {"input_ids": tm.token_ids(1, 6), "decoder_input_ids": decoder}
    else:
        model, inputs = tm.whisper(), {"input_features": torch.randn(1, 16, 32), "decoder_input_ids": decoder}
    with HookExplorer(model, example_inputs=inputs) as ex:
        view = ex.view
        assert view.status["output"]["decoder"] is True and view.status["output"]["positions"] == 4
        browser_sends(view, type="run")
        assert view.error == ""
        assert view.status["message"].endswith(
            "backward from output.logits[:, -1] (decoder position -1 of 4) · top next token"
        )


def test_a_scalar_output_runs_backward_from_itself_by_default():
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0))
    with HookExplorer(model, example_inputs=torch.randn(1, 3)) as ex:
        view = ex.view
        assert view.status["output"]["kind"] == "scalar"
        ex.attach("0.weight", "grad")
        browser_sends(view, type="run")
        assert view.error == "" and view.status["message"] == "step 1: forward, then backward from output"
        assert len(ex.captures["0.weight"]["grad"]) == 1


def test_the_run_bar_names_the_top_ids_in_the_models_words():
    tokenizer = tm.tokenizer()
    model = tm.gpt2(vocab=len(tokenizer))
    batch = tokenizer("the cat sat on a mat", return_tensors="pt")
    with HookExplorer(model, example_inputs=batch, tokenizer=tokenizer) as ex:
        output = ex.view.status["output"]
        ids = [i for i, _ in ex.view.status["top"]]
        assert output["labels"] == {str(i): t for i, t in zip(ids, tokenizer.convert_ids_to_tokens(ids), strict=True)}
    with HookExplorer(model, example_inputs=batch) as ex:  # no tokenizer: the ids alone
        assert ex.view.status["output"]["labels"] == {}
    classifier = tm.bert(labels=3)
    classifier.config.id2label = {0: "negative", 1: "neutral", 2: "positive"}
    with HookExplorer(classifier, example_inputs={"input_ids": tm.token_ids(1, 6)}) as ex:
        assert sorted(ex.view.status["output"]["labels"].values()) == ["negative", "neutral", "positive"]

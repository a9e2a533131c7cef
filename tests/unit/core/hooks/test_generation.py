"""The forwards of one generate() call: one generation, each step with its decode index (0: the prompt step).

generate() calls the model once for the prompt and once per new token; the explorer tells them apart by the caller
(a method of the model that calls it several times), with or without a cache, and labels each decode step with the
token it fed. A replace edit made for the prompt step applies there and is left out of the decode steps, said once.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer, Generation, PatchSkippedWarning
from tests import transformer_models as tm
from tests.conftest import hook_state

NEW = 3


def config_state(model: nn.Module) -> tuple:
    config = model.config
    return config._attn_implementation, config.output_attentions, config.use_cache


@pytest.mark.parametrize("build", [tm.gpt2, tm.llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("use_cache", [True, False], ids=["cache", "no-cache"])
def test_each_generate_call_is_one_generation_whose_steps_carry_their_decode_index(build, use_cache, tmp_path):
    model, tokenizer = build(vocab=20), tm.tokenizer()
    prompt = tokenizer("the cat sat on a", return_tensors="pt")["input_ids"]
    state, config = hook_state(model), config_state(model)
    with Explorer(model, example_inputs=prompt, tokenizer=tokenizer) as ex:
        ex.attach("", "forward")
        ex.attach("lm_head", "forward", action="stats")
        outputs = [
            model.generate(prompt, max_new_tokens=NEW, do_sample=False, use_cache=use_cache, pad_token_id=0)
            for _ in range(2)  # a second call may reuse the first's frame address: still a generation of its own
        ]
        model(prompt)  # the user's own call: no generation
        expected = [Generation(call, index) for call in (1, 2) for index in range(NEW)] + [None]
        for target, kind in (("", "forward"), ("lm_head", "forward")):
            assert [r.generation for r in ex.captures[target][kind]] == expected
        assert [r.step for r in ex.captures[""]["forward"]] == list(range(1, 2 * NEW + 2))
        timeline = {e.step: e.generation for e in ex.timeline}
        assert [timeline[step] for step in range(1, 2 * NEW + 2)] == expected
        assert ex.tokens == [tokenizer.convert_ids_to_tokens(prompt[0].tolist())]  # the prompt's, as given
        generations = ex.generations
        assert [g["call"] for g in generations] == [1, 2]
        assert generations[1]["steps"] == [4, 5, 6]
        for generation, output in zip(generations, outputs, strict=True):
            fed = [prompt[0].tolist()] + [[i] for i in output[0, prompt.shape[1] : -1].tolist()]
            assert generation["ids"] == [[row] for row in fed]  # one list per item
            assert generation["tokens"] == [[tokenizer.convert_ids_to_tokens(row)] for row in fed]
        ex.export(tmp_path / "caps.safetensors")
    sidecar = json.loads((tmp_path / "caps.safetensors.json").read_text())
    roots = [r["generation"] for r in sidecar["records"] if r["path"] == ""]
    assert roots == [g._asdict() if g is not None else None for g in expected]
    assert sidecar["generations"][0]["tokens"] == generations[0]["tokens"]
    assert hook_state(model) == state and config_state(model) == config


def test_a_replace_edit_of_the_prompt_step_applies_there_and_is_left_out_of_the_decode_steps_said_once():
    model, prompt = tm.gpt2(), tm.token_ids(1, 5)
    with Explorer(model, example_inputs=prompt) as ex:
        ex.attach("transformer.h.0", "forward")
        model(prompt)
        clean = ex.captures["transformer.h.0"]["forward"][-1]
        info = ex.attach("transformer.h.1", "forward", edit=("replace", clean))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for use_cache in (True, False):
                model.generate(prompt, max_new_tokens=NEW, do_sample=False, use_cache=use_cache, pad_token_id=0)
        ours = [w for w in caught if issubclass(w.category, Warning) and "hookwidgets" in w.category.__module__]
        assert [w.category for w in ours] == [PatchSkippedWarning]
        assert info.last_error is None and info.fired == 2 * NEW
        assert info.note.startswith("patch left out of decode steps") and "(1, 5, 32)" in info.note
        prompt_steps = [r for r in ex.captures["transformer.h.1"]["forward"] if r.generation.index == 0]
        assert len(prompt_steps) == 2
        for record in prompt_steps:  # the prompt step got the patch
            torch.testing.assert_close(record.tensor, clean.tensor)


class SelfCalling(nn.Module):
    """A model with its own training step, which calls the model once (as a LightningModule does)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)

    def training_step(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).sum()


def test_steps_a_method_of_the_model_makes_one_at_a_time_are_no_generation():
    model, x = SelfCalling(), torch.randn(4, 3)
    with Explorer(model) as ex:
        ex.attach("fc", "forward")
        for _ in range(3):
            model.training_step(x).backward()
        for _ in range(2):
            model(x)
        assert [r.generation for r in ex.captures["fc"]["forward"]] == [None] * 5
        assert ex.generations == []
        assert all(e.generation is None for e in ex.timeline)

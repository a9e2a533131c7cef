"""Explorers on peft LoRA models: hooks on the base and adapter modules fire with the values the layer sums, frozen
weights are refused with the reason, analyses see the adapted model, and close() leaves the PeftModel as found, so
merge_and_unload() gives the same model after."""

from __future__ import annotations

import pytest
import torch
import torch.nn.modules.module as module_globals

from hookwidgets.core import Explorer
from tests import transformer_models as tm
from tests.conftest import GLOBAL_DICTS, hook_state

peft = pytest.importorskip("peft", reason="peft is a test dependency (make test installs it)")

# peft asks transformers whether gradient checkpointing is on by a name that transformers 5 deprecates
pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing` is deprecated:FutureWarning")

CASES = [
    (tm.gpt2, ["c_attn"], "base_model.model.transformer.h", "attn.c_attn"),
    (tm.llama, ["q_proj", "v_proj"], "base_model.model.model.layers", "self_attn.q_proj"),
]


def lora(build, targets: list[str]):
    """The model with rank-2 LoRA adapters on ``targets``, initialised to non-zero so that they change the output."""
    model = build()
    conv1d = model.config.model_type == "gpt2"  # GPT-2's Conv1D stores its weight transposed
    config = peft.LoraConfig(
        r=2, lora_alpha=4, target_modules=targets, lora_dropout=0.0, init_lora_weights=False, fan_in_fan_out=conv1d
    )
    return peft.get_peft_model(model, config).eval()


def global_hooks() -> list:
    return [list(getattr(module_globals, name, {}).items()) for name in GLOBAL_DICTS]


@pytest.mark.parametrize(("build", "targets", "blocks", "layer"), CASES, ids=["gpt2", "llama"])
def test_hooks_on_base_and_adapter_modules_fire_and_close_leaves_the_peft_model_as_found(build, targets, blocks, layer):
    model, ids = lora(build, targets), tm.token_ids(2, 6)
    with torch.no_grad():
        clean = model(input_ids=ids).logits
    hooks, globals_before = hook_state(model), global_hooks()
    adapted = f"{blocks}.1.{layer}"  # in the second block, whose input requires grad through the first's adapters
    with Explorer(model, ids) as ex:
        whole = ex.attach(adapted, "forward")
        base = ex.attach(f"{adapted}.base_layer", ["forward", "grad"])
        adapter = ex.attach(f"{adapted}.lora_B.default", ["forward", "grad"])
        weight = ex.attach(f"{adapted}.lora_A.default.weight", "grad")
        first = ex.attach(f"{blocks}.0.{layer}.base_layer", "grad")
        ex.run(target="top")
        assert [info.fired for info in (whole, *base, *adapter, weight)] == [1] * 6
        assert all(info.note is None and info.last_error is None for info in (whole, *base, *adapter, weight))
        out, base_out, adapter_out = (
            ex.captures.latest(h.target, "forward").tensor for h in (whole, base[0], adapter[0])
        )
        scaling = model.get_submodule(adapted).scaling["default"]
        torch.testing.assert_close(out, base_out + scaling * adapter_out)  # the layer sums the two it ran
        assert weight.fired == 1 and ex.captures.latest(weight.target, "grad").tensor.abs().sum() > 0
        # the first block's frozen base layer sees a frozen input: no gradient can come, and the hook says why
        assert first.fired == 0 and first.note.startswith("not armed: no output tensor required grad")
        frozen = f"{adapted}.base_layer.weight"
        with pytest.raises(ValueError, match=rf"parameter '{frozen}' does not require grad \(frozen\).*requires_grad_"):
            ex.attach(frozen, "grad")
    assert hook_state(model) == hooks and global_hooks() == globals_before
    assert all(p.grad is None for p in model.parameters())
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, clean)


@pytest.mark.parametrize(("build", "targets", "blocks", "layer"), CASES, ids=["gpt2", "llama"])
def test_analyses_see_the_adapted_model_and_merge_and_unload_works_after_close(build, targets, blocks, layer):
    model, ids = lora(build, targets), tm.token_ids(2, 6)
    with Explorer(model, ids) as ex:
        ex.attach(f"{blocks}.0.{layer}.lora_A.default", "forward")  # attached while the adapters are there
        lens = ex.logit_lens(top_k=3)
        scores = ex.attribute(method="integrated_gradients", n_steps=8)
        attention = ex.attention()
    merged = model.merge_and_unload()  # the adapters folded into the base weights: the same function
    assert not any("lora" in path for path, _ in merged.named_modules())
    assert hook_state(merged) == hook_state(build())  # a hook-free model, every dict empty: nothing left behind
    with Explorer(merged, ids) as ex:
        assert torch.equal(ex.logit_lens(top_k=3)["ids"], lens["ids"])
        torch.testing.assert_close(ex.attribute(method="integrated_gradients", n_steps=8), scores, rtol=1e-4, atol=1e-5)
        for got, expected in zip(ex.attention().values(), attention.values(), strict=True):
            torch.testing.assert_close(got, expected)
    assert scores.layer == f"{blocks.rsplit('.', 1)[0]}.{'wte' if build is tm.gpt2 else 'embed_tokens'}"

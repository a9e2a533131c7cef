"""Explorers on models built empty (``accelerate.init_empty_weights()``): every output shape from a probe run on meta,
no value read from a meta tensor, and runs that need values refused with the reason."""

from __future__ import annotations

import warnings

import pytest
import torch

from hookwidgets.core import Explorer, HookwidgetsWarning
from hookwidgets.widget.captures import plot_items
from tests import transformer_models as tm
from tests.conftest import SmallCNN, hook_state

accelerate = pytest.importorskip("accelerate", reason="accelerate is a test dependency (make test installs it)")

IMAGES = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
IDS = tm.token_ids(1, 6)


def empty(build):
    """``build()`` under ``accelerate.init_empty_weights()`` (parameters on meta, buffers on the CPU), in eval mode."""
    with accelerate.init_empty_weights():
        return build().eval()


def shapes(tree: dict) -> dict[str, list | None]:
    found = {tree["path"]: tree["shape"]}
    for child in tree["children"]:
        found.update(shapes(child))
    return found


def tensors_held(model: torch.nn.Module) -> list:
    """Every parameter and buffer object each module holds, and its hook dicts: what a run must leave as found."""
    held = [(p, id(t)) for m in model.modules() for p, t in (*m._parameters.items(), *m._buffers.items())]
    return [held, hook_state(model)]


MODELS = {"gpt2": (lambda: tm.gpt2(layers=1), IDS), "cnn": (SmallCNN, IMAGES)}


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("on", ["cpu", "meta"])
def test_an_empty_model_shows_the_output_shape_of_every_module_from_cpu_or_meta_example_inputs(name, on):
    build, inputs = MODELS[name]
    with Explorer(build(), example_inputs=inputs) as ex:
        expected = shapes(ex.tree)  # the same model with weights
    model = empty(build)
    found = tensors_held(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", HookwidgetsWarning)  # the probe no longer fails
        ex = Explorer(model, example_inputs=inputs.to(on))
    assert shapes(ex.tree) == expected
    assert ex.probe_output["shape"] == expected[""] and ex.probe_output["top"] == [] and ex.probe_classes == []
    ex.close()
    assert tensors_held(model) == found


def test_hooks_on_an_empty_model_capture_meta_tensors_and_read_no_value(capsys):
    model = empty(SmallCNN)
    with Explorer(model, example_inputs=IMAGES) as ex, warnings.catch_warnings():
        warnings.simplefilter("error", HookwidgetsWarning)  # no hook fails on a meta tensor
        captured = ex.attach("features.conv", "forward")
        stats = ex.attach("head.fc", "forward", action="stats")
        printed = ex.attach("head.pool", "forward", action="print")
        everywhere = ex.attach("", "global_forward", action="stats")
        output = ex.run()
        assert output.is_meta and output.shape == (2, 5)
        (record,) = ex.captures["features.conv"]["forward"]
        assert record.tensor.is_meta and record.tensor.shape == (2, 4, 8, 8) and not record.stale
        assert ex.captures["head.fc"]["forward"][0].stats is None
        for info in (stats, everywhere):
            assert info.fired >= 1 and info.last_error is None
            assert "on the meta device, which holds shapes and no values" in info.note
        assert captured.note is None and printed.last_error is None
        assert "output (2, 4, 2, 2) float32 on the meta device (no values)" in capsys.readouterr().out
        assert ex.summary() == []
        (item,) = plot_items(ex.captures, "features.conv")  # the view draws its shape, and no values
        assert item["shape"] == [2, 4, 8, 8] and item["png"].startswith(b"\x89PNG")


def test_runs_that_need_values_refuse_an_empty_model_with_the_reason():
    lm = empty(lambda: tm.gpt2(layers=1))
    why = "needs values, but .* is on the meta device, which holds shapes and no values: .*init_empty_weights"
    with Explorer(lm, example_inputs=IDS) as ex:
        ex.attach("transformer.h.0.mlp", "forward")
        ex.run()
        with pytest.raises(ValueError, match=why):
            ex.run(target="top")
        with pytest.raises(ValueError, match=why):
            ex.attribute(IDS, method="integrated_gradients", target=5)
        with pytest.raises(ValueError, match=why):
            ex.attribute(IDS, method="attention_rollout")
        with pytest.raises(ValueError, match=why):
            ex.logit_lens()
        with pytest.raises(ValueError, match=why):
            ex.first_nonfinite()
        with pytest.raises(ValueError, match=why):
            ex.patch_sweep(IDS, IDS.flip(1))
        with pytest.raises(ValueError, match="capture 'output' of 'transformer.h.0.mlp' .* is on the meta device"):
            ex.export("unused.safetensors")
    cnn = empty(SmallCNN)
    with Explorer(cnn, example_inputs=IMAGES) as ex:
        with pytest.raises(ValueError, match=why):
            ex.gradcam("features.conv", IMAGES, target=1)
        with pytest.raises(ValueError, match=why):
            ex.attribute(IMAGES, target=1, method="saliency")


def test_a_tokenizer_on_meta_input_ids_says_to_pass_them_on_the_cpu():
    lm = empty(lambda: tm.gpt2(layers=1))
    with pytest.raises(ValueError, match="input_ids .* are on the meta device .* pass them on the CPU"):
        Explorer(lm, example_inputs=IDS.to("meta"), tokenizer=tm.tokenizer())
    with Explorer(lm, example_inputs=IDS, tokenizer=tm.tokenizer()) as ex:
        assert len(ex.tokens[0]) == IDS.shape[1]

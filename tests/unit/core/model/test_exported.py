"""Explorers on torch.export programs: ``ExportedProgram.module()`` runs as exported and says which hooks cannot
fire; ``torch.export.unflatten`` says which analyses it cannot give."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import fx

from hookwidgets.core import Explorer, FixedModeWarning, ProbeFailedWarning
from tests.conftest import GLOBAL_DICTS, SmallCNN, hook_state

# torch.export warns about its own pytree internals on every export and unflatten
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


def exported_cnn(train: bool = False) -> tuple[torch.nn.Module, torch.Tensor]:
    """``torch.export.export(SmallCNN).module()`` (exported in eval mode unless ``train``) and its inputs."""
    torch.manual_seed(0)
    model = SmallCNN().train(train)
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    return torch.export.export(model, (x,)).module(), x


def as_found(model: torch.nn.Module) -> tuple:
    """What a run must leave as it found: hook dicts, torch's global ones, modes, parameters' grads and buffers."""
    globals_ = [list(getattr(torch.nn.modules.module, name, {}).items()) for name in GLOBAL_DICTS]
    modes = [m.training for m in model.modules()]
    grads = [p.grad for p in model.parameters()]
    buffers = [b.clone() for b in model.buffers()]
    return hook_state(model), globals_, modes, grads, buffers


def same(a: tuple, b: tuple) -> bool:
    hooks, globals_, modes, grads, buffers = a
    return (
        (hooks, globals_, modes) == b[:3]
        and all(g is h for g, h in zip(grads, b[3], strict=True))
        and all(torch.equal(x, y) for x, y in zip(buffers, b[4], strict=True))
    )


def test_an_exported_module_is_probed_and_run_in_the_mode_it_was_exported_in_and_left_as_found():
    program, x = exported_cnn()
    expected = program(x)
    found = as_found(program)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ProbeFailedWarning)  # train() refused no longer fails the probe
        ex = Explorer(program, example_inputs=x)
    assert ex.tree["shape"] == [2, 5]
    assert ex.probe_classes and ex.probe_classes[0][0] == int(expected[0].argmax())
    ex.attach("features.conv.weight", "grad")
    assert torch.equal(ex.run(x), expected)
    ex.run(x, target=3)
    assert ex.last_score.classes == [3, 3]
    (record,) = ex.captures["features.conv.weight"]["grad"]
    assert record.tensor.shape == (4, 3, 3, 3) and record.tensor.abs().sum() > 0
    assert len(ex.graph()["nodes"]) > 5
    ex.close()
    assert same(as_found(program), found)


def test_a_training_run_of_a_module_that_refuses_train_says_it_ran_as_it_is():
    program, x = exported_cnn(train=True)
    found = as_found(program)
    with Explorer(program, example_inputs=x) as ex, pytest.warns(FixedModeWarning, match=r"refuses train\(\)"):
        ex.run(x, target=0, train=True)
    assert same(as_found(program), found)  # the BatchNorm statistics the exported graph updated are back


def test_hooks_on_modules_an_exported_graph_never_calls_say_so_at_attach_and_parameter_hooks_fire():
    program, x = exported_cnn()
    with Explorer(program) as ex:  # found in the graph, without example inputs
        conv = ex.attach("features.conv", ["forward", "backward"])
        everywhere = ex.attach("", "global_forward", action="stats")
        weight = ex.attach("features.conv.weight", "grad")
        ex.run(x, target=0)
        for info in conv:
            assert info.fired == 0
            assert "'features.conv' (Module) is never called" in info.note
            assert "torch.fx GraphModule" in info.note and "get_attr" in info.note and "kind 'grad'" in info.note
        assert "never fires on 5 module(s)" in everywhere.note and "'features.conv'" in everywhere.note
        assert weight.fired == 1 and weight.note is None


def test_a_graph_module_that_calls_its_submodules_says_so_only_of_those_it_inlined():
    torch.manual_seed(0)
    traced = fx.symbolic_trace(SmallCNN().eval())  # leaves stay call_module nodes; the Sequentials are inlined
    x = torch.randn(2, 3, 8, 8)
    with Explorer(traced, example_inputs=x) as ex:
        conv = ex.attach("features.conv", "forward")
        features = ex.attach("features", "forward")
        everywhere = ex.attach("", "global_forward", action="stats")
        ex.run(x)
        assert conv.fired == 1 and conv.note is None
        assert features.fired == 0 and "'features' (Module) is never called" in features.note
        assert "never fires on 2 module(s) ('head', 'features')" in everywhere.note
        assert everywhere.fired == 8  # the root and its 7 leaves


def test_an_unflattened_program_says_which_transformer_analyses_it_cannot_give():
    from tests import transformer_models as tm

    model = tm.gpt2(layers=1)
    model.config.use_cache = False  # torch.export cannot return a DynamicCache
    ids = tm.token_ids(1, 6)
    unflat = torch.export.unflatten(torch.export.export(model, (ids,)))
    found = as_found(unflat)
    with Explorer(unflat, example_inputs=ids) as ex:
        block = ex.attach("transformer.h.0.mlp", "forward")
        ex.run(ids, target="top")  # unflatten keeps modules that are called: their hooks fire
        assert block.fired == 1 and block.note is None
        with pytest.raises(ValueError, match="attention\\(\\) found no attention in UnflattenedModule"):
            ex.attention()
        with pytest.raises(ValueError, match="declares no output embedding .* pass unembed=callable"):
            ex.logit_lens()
        with pytest.raises(ValueError, match="found no nn.Embedding called on the input_ids"):
            ex.attribute(ids, method="integrated_gradients", target=5)
        with pytest.raises(ValueError, match="InterpreterModule\\): no output projection found"):
            ex.attach("transformer.h.0.attn", "forward", edit=("ablate_heads", [1]))
        with pytest.raises(ValueError, match="holds no nn.ModuleList of blocks .* pass layers="):
            ex.patch_sweep(ids, ids.flip(1))
    assert same(as_found(unflat), found)

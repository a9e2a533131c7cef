import warnings
from dataclasses import dataclass

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer, build_tree, probe
from hookwidgets.core.model.tree import SCRIPTED_ROOT, describe_shape, unwatched_note
from tests.conftest import RefusesHooks, hook_state


def _node(tree, path):
    if tree["path"] == path:
        return tree
    for child in tree["children"]:
        found = _node(child, path)
        if found:
            return found
    return None


def test_tree_lists_every_module_with_class_params_and_probed_shapes(cnn, image):
    tree = Explorer(cnn, example_inputs=image).tree
    assert tree["path"] == "" and tree["name"] == "SmallCNN" and tree["cls"] == "SmallCNN"
    assert [c["path"] for c in tree["children"]] == ["features", "head"]
    conv = _node(tree, "features.conv")
    assert conv["name"] == "conv" and conv["cls"] == "Conv2d"
    assert conv["trainable"] == 3 * 4 * 9 + 4 and conv["frozen"] == 0
    assert conv["shape"] == [2, 4, 8, 8] and conv["dtype"] == "float32"
    assert _node(tree, "head.fc")["shape"] == [2, 5]
    assert tree["shape"] == [2, 5]
    assert tree["trainable"] == sum(p.numel() for p in cnn.parameters())
    assert conv["children"] == []


def test_frozen_parameters_are_counted_apart(cnn):
    cnn.features.conv.weight.requires_grad_(False)
    conv = _node(build_tree(cnn), "features.conv")
    assert conv["frozen"] == 3 * 4 * 9 and conv["trainable"] == 4
    assert conv["shape"] is None  # no example inputs, no probe


def test_shared_parameters_are_counted_once():
    lin = nn.Linear(3, 3)
    model = nn.Sequential(lin, nn.ReLU(), lin)
    assert build_tree(model)["trainable"] == 12


def test_model_without_children_is_a_tree_of_one_node():
    tree = Explorer(nn.Linear(3, 2), example_inputs=torch.randn(4, 3)).tree
    assert tree == {
        "path": "",
        "name": "Linear",
        "cls": "Linear",
        "trainable": 8,
        "frozen": 0,
        "packed": 0,
        "shape": [4, 2],
        "dtype": "float32",
        "children": [],
    }


def test_probe_leaves_hooks_grads_buffers_rng_and_mode_as_found(cnn, image):
    cnn.train()
    cnn.features.conv.weight.grad = torch.ones_like(cnn.features.conv.weight)
    grad_before = cnn.features.conv.weight.grad
    mean_before = cnn.features.bn.running_mean.clone()
    batches_before = cnn.features.bn.num_batches_tracked.clone()
    hooks_before = hook_state(cnn)
    torch.manual_seed(123)
    rng_before = torch.get_rng_state()

    probe(cnn, image)

    assert torch.equal(torch.get_rng_state(), rng_before)
    assert hook_state(cnn) == hooks_before
    assert cnn.features.conv.weight.grad is grad_before
    assert torch.equal(cnn.features.bn.running_mean, mean_before)
    assert torch.equal(cnn.features.bn.num_batches_tracked, batches_before)
    assert all(m.training for m in cnn.modules())
    assert cnn.head.fc.weight.grad is None


def test_probe_with_wrong_input_shape_records_the_error_and_leaves_the_model(cnn):
    hooks_before = hook_state(cnn)
    with pytest.warns(UserWarning, match="probe run with example_inputs failed"):
        ex = Explorer(cnn, example_inputs=torch.randn(2, 5, 8, 8))
    assert "RuntimeError" in ex.probe_error
    assert "inputs were Tensor(2, 5, 8, 8)" in ex.probe_error
    assert _node(ex.tree, "features.conv")["shape"] is None
    assert hook_state(cnn) == hooks_before


def test_probe_accepts_positional_tuple_and_keyword_inputs():
    class TwoInputs(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b = nn.Linear(2, 3), nn.Linear(4, 3)

        def forward(self, x, y):
            return self.a(x) + self.b(y)

    model = TwoInputs()
    x, y = torch.randn(5, 2), torch.randn(5, 4)
    assert Explorer(model, example_inputs=(x, y)).tree["shape"] == [5, 3]
    assert _node(Explorer(model, example_inputs={"x": x, "y": y}).tree, "b")["shape"] == [5, 3]


def script_model() -> nn.Sequential:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated, yet models still ship it
        scripted = torch.jit.script(nn.Sequential(nn.Linear(4, 4), nn.Tanh()))
    return nn.Sequential(scripted, nn.ReLU(), nn.Sequential(nn.Linear(4, 3)))


def padded_encoder() -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """An eval-mode TransformerEncoder whose padding mask makes torch pass nested tensors between layers."""
    torch.manual_seed(0)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2).eval()
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[0, 3:] = True
    return enc, {"src": torch.randn(2, 5, 16), "src_key_padding_mask": mask}


def test_probe_skips_script_modules_names_them_and_shapes_the_rest():
    model = script_model()
    before = hook_state(model)
    result = probe(model, torch.randn(2, 4))
    assert result.unwatched == ["0"]  # the outermost ScriptModule only, not its submodules
    assert result.shapes == {"": [2, 3], "1": [2, 4], "2": [2, 3], "2.0": [2, 3]}
    assert hook_state(model) == before
    ex = Explorer(model, example_inputs=torch.randn(2, 4))
    assert ex.probe_error is None
    assert _node(ex.tree, "1")["shape"] == [2, 4] and _node(ex.tree, "0")["shape"] is None


def test_explorer_names_its_script_modules_and_refuses_module_hooks_on_them():
    model = script_model()
    before = hook_state(model)
    x = torch.randn(2, 4)
    ex = Explorer(model, example_inputs=x)
    assert ex.unwatched == ["0"] and Explorer(model).unwatched == ["0"]  # also known without example inputs
    assert unwatched_note(ex.unwatched) == (
        "torch.jit.script modules take no hooks: '0' (and its submodules) show no shape and fire no hooks"
    )
    with pytest.raises(ValueError, match=r"module '0' is a torch.jit.script module \(RecursiveScriptModule\): Scr"):
        ex.attach("0", "forward")
    with pytest.raises(ValueError, match="module '0.0' is a torch.jit.script module"):
        ex.attach("0.0", ["forward", "backward"])
    assert ex.hooks == [] and hook_state(model) == before
    grad = ex.attach("0.0.weight", "grad")  # its parameters still take tensor hooks
    ex.run(x, target=lambda out: out.sum())
    (rec,) = ex.captures["0.0.weight"][grad.kind]
    model(x).sum().backward()
    torch.testing.assert_close(rec.tensor, model.get_parameter("0.0.weight").grad)
    ex.close()
    assert hook_state(model) == before


def test_a_scripted_model_is_unwatched_as_a_whole_and_attach_says_why():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        model = torch.jit.script(nn.Sequential(nn.Linear(4, 3)))
    ex = Explorer(model, example_inputs=torch.randn(2, 4))
    assert ex.probe_error is None and ex.unwatched == [""] and ex.tree["shape"] is None
    assert unwatched_note(ex.unwatched) == SCRIPTED_ROOT
    with pytest.raises(ValueError, match="the model is a torch.jit.script module: ScriptModules take no hooks"):
        ex.attach("0", "forward")
    assert ex.hooks == []


def test_probe_removes_the_hooks_registered_before_a_failing_registration():
    model = nn.Sequential(nn.Linear(4, 4), RefusesHooks(), nn.Linear(4, 2))
    before = hook_state(model)
    with pytest.raises(RuntimeError, match="no hooks here"):
        probe(model, torch.randn(2, 4))
    assert hook_state(model) == before


def test_probe_shows_nested_outputs_with_their_ragged_dim_as_a_range():
    enc, inputs = padded_encoder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "nested tensors are a prototype" warning
        ex = Explorer(enc, example_inputs=inputs)
    assert ex.probe_error is None
    assert ex.tree["shape"] == [2, 5, 16]  # padded back for the caller
    assert _node(ex.tree, "layers.0")["shape"] == [2, "3..5", 16]
    assert _node(ex.tree, "layers.1.linear1")["shape"] == [2, "3..5", 32]
    assert _node(ex.tree, "layers.1.linear1")["dtype"] == "float32"


def test_describe_shape_of_plain_strided_nested_and_jagged_tensors():
    parts = [torch.randn(3, 4), torch.randn(5, 4)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        strided = torch.nested.nested_tensor(parts)
        even = torch.nested.nested_tensor([torch.randn(3, 4), torch.randn(3, 4)])
    jagged = torch.nested.nested_tensor(parts, layout=torch.jagged)
    assert describe_shape(torch.zeros(2, 3)) == [2, 3]
    assert describe_shape(strided) == [2, "3..5", 4]
    assert describe_shape(jagged) == [2, "3..5", 4]
    assert describe_shape(even) == [2, 3, 4]


def test_a_module_whose_shape_cannot_be_read_leaves_the_rest_of_the_tree_shaped():
    class NoShape(torch.Tensor):
        @property
        def shape(self):
            raise RuntimeError("shape unavailable")

    class Wrap(nn.Module):
        def forward(self, x):
            return x.as_subclass(NoShape)

    model = nn.Sequential(nn.Linear(4, 3), Wrap())
    result = probe(model, torch.randn(2, 4))
    assert result.shapes == {"0": [2, 3]}  # "1" and the root output the subclass: no shape, no failure


def test_probe_finds_tensors_in_dataclass_outputs():
    @dataclass
    class Out:
        note: str
        logits: torch.Tensor

    class Head(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return Out("scores", self.fc(x).double())

    tree = Explorer(Head(), example_inputs=torch.randn(2, 4)).tree
    assert tree["shape"] == [2, 3] and tree["dtype"] == "float64"

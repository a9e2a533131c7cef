import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer, build_tree, probe

from ..conftest import hook_state


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

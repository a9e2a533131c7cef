"""Attribution runs as users call them: targets, layer choice, errors, and the model left as found."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.modules import module as torch_module

from hookwidgets.core import CAM_METHODS, PIXEL_METHODS, Explorer, attribute, check_method
from tests.conftest import GLOBAL_DICTS, SideBranch, SmallCNN, hook_state

IMAGE_METHODS = (*CAM_METHODS, *PIXEL_METHODS)  # token methods: test_tokens.py; the rollouts: test_rollout.py


def _global_state() -> dict:
    state = {name: list(getattr(torch_module, name, {}).items()) for name in GLOBAL_DICTS}
    state["_global_is_full_backward_hook"] = torch_module._global_is_full_backward_hook
    return state


@pytest.fixture
def model() -> SmallCNN:
    torch.manual_seed(0)
    return SmallCNN()


@pytest.mark.parametrize("method", IMAGE_METHODS)
def test_every_method_returns_the_shape_design_md_names(model, image, method):
    result = attribute(model, image, 1, method=method)
    expected = (2, 8, 8) if method in ("gradcam", "gradcam++", "hirescam", "xgradcam", "layercam") else (2, 3, 8, 8)
    assert result.map.shape == expected and not result.map.requires_grad
    assert result.method == method and result.classes == [1, 1]
    assert result.map.isfinite().all()


def test_no_layer_picks_the_last_spatial_one_and_names_it(model, image):
    # features.drop is the last module with a (N, 4, 8, 8) output; head.pool's 2×2 is a pooling layer.
    result = attribute(model, image, 0)
    assert result.layer == "features"
    torch.testing.assert_close(result.map, attribute(model, image, 0, layer="features").map)


@pytest.mark.parametrize(
    ("alias", "method"),
    [
        ("GradCAM", "gradcam"),
        ("grad-cam++", "gradcam++"),
        ("GradCAMPlusPlus", "gradcam++"),
        ("LayerCAM", "layercam"),
        ("InputXGradient", "input_x_grad"),
        ("guided-backprop", "guided_backprop"),
        ("GuidedGradCam", "guided_gradcam"),
    ],
)
def test_captum_and_grad_cam_spellings_of_a_method_are_accepted(alias, method):
    assert check_method(alias) == method


def test_a_layer_can_be_given_as_a_module(model, image):
    result = attribute(model, image, 0, layer=model.features.conv)
    assert result.layer == "features.conv"


def test_targets_int_list_callable_and_top_class_agree(model, image):
    with torch.no_grad():
        top = model.eval()(image).argmax(dim=1).tolist()
    by_top = attribute(model, image, None)
    assert by_top.classes == top
    torch.testing.assert_close(by_top.map, attribute(model, image, top).map)
    torch.testing.assert_close(attribute(model, image, 3).map, attribute(model, image, lambda out: out[:, 3]).map)
    torch.testing.assert_close(attribute(model, image, 3).map, attribute(model, image, [3, 3]).map)
    assert attribute(model, image, lambda out: out[:, 3].sum()).classes is None


def test_each_item_of_a_batch_is_explained_on_its_own(model, image):
    batch = attribute(model, image, [1, 4], method="gradcam++").map
    for i, cls in enumerate([1, 4]):
        torch.testing.assert_close(batch[i : i + 1], attribute(model, image[i : i + 1], cls, method="gradcam++").map)


def test_a_target_out_of_range_names_the_number_of_classes(model, image):
    with pytest.raises(ValueError, match=r"target class 5 is out of range: the output has 5 classes \(0 to 4\)"):
        attribute(model, image, 5)
    with pytest.raises(ValueError, match=r"target class -1 is out of range"):
        attribute(model, image, [0, -1])
    with pytest.raises(ValueError, match=r"target has 3 class indices but the batch has 2 items"):
        attribute(model, image, [0, 1, 2])
    with pytest.raises(ValueError, match=r"a callable target must return one score per item \(N,\) or a scalar"):
        attribute(model, image, lambda out: out)
    with pytest.raises(ValueError, match=r"target 'cat' is not a score target; pass \"top\", a class index"):
        attribute(model, image, "cat")


def test_attribution_targets_take_the_forms_run_takes(model, image):
    expected = attribute(model, image, [1, 2])
    for same in ([np.int64(1), np.int64(2)], torch.tensor([1, 2])):
        found = attribute(model, image, same)
        assert found.classes == [1, 2] and torch.equal(found.map, expected.map)
    assert attribute(model, image, torch.tensor(2)).classes == [2, 2]
    top = attribute(model, image, None)
    assert attribute(model, image, "top").classes == top.classes and torch.equal(
        attribute(model, image, "top").map, top.map
    )


def test_a_layer_without_spatial_output_names_suitable_layers(model, image):
    with pytest.raises(ValueError, match=r"layer 'head.fc' has output of shape \(2, 5\), not a spatial map") as err:
        attribute(model, image, 0, layer="head.fc")
    assert "suitable layers: 'features.conv', 'features.bn', 'features.act', 'features.drop', 'features'" in str(
        err.value
    )


def test_a_misspelt_layer_suggests_the_right_one(model, image):
    with pytest.raises(KeyError, match=r"did you mean 'features.conv'"):
        attribute(model, image, 0, layer="features.cnv")
    with pytest.raises(ValueError, match=r"the Linear given as layer is not a submodule of SmallCNN"):
        attribute(model, image, 0, layer=nn.Linear(2, 2))


def test_bad_methods_and_arguments_say_what_to_do(model, image):
    with pytest.raises(ValueError, match=r"unknown attribution method 'gradcan\+\+' — did you mean 'gradcam\+\+'"):
        attribute(model, image, 0, method="gradcan++")
    with pytest.raises(ValueError, match=r"saliency attributes input pixels and takes no layer; leave layer=None"):
        attribute(model, image, 0, method="saliency", layer="features")
    tabular = nn.Sequential(nn.Linear(4, 3))
    with pytest.raises(
        ValueError, match=r"gradcam needs an image input of shape \(N, C, H, W\) to attribute to, got Tensor\(2, 4\)"
    ):
        attribute(tabular, torch.randn(2, 4), 0)
    no_relu = nn.Sequential(nn.Conv2d(3, 2, 3), nn.Tanh(), nn.Flatten(), nn.LazyLinear(3))
    with pytest.raises(ValueError, match=r"guided backprop found no ReLU in the forward of Sequential"):
        attribute(no_relu, image, 0, method="guided_backprop")
    flat = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 3))
    with pytest.raises(ValueError, match=r"no layer of Sequential has a spatial output .* method='saliency'"):
        attribute(flat, image, 0)


def test_inputs_that_do_not_require_grad_are_handled_and_left_alone(model, image):
    assert not image.requires_grad
    attribute(model, image, 0, method="saliency")
    assert not image.requires_grad and image.grad is None
    leaf = image.clone().requires_grad_(True)
    attribute(model, leaf, 0, method="input_x_grad")
    assert leaf.grad is None


def test_a_frozen_backbone_still_gets_gradients(model, image):
    trainable = attribute(model, image, 1).map
    for param in model.parameters():
        param.requires_grad_(False)
    frozen = attribute(model, image, 1).map
    assert frozen.amax() == 1.0
    torch.testing.assert_close(frozen, trainable)
    assert not any(p.requires_grad for p in model.parameters())


def test_the_model_state_is_left_as_found(model, image):
    model.train()
    model(image).sum().backward()  # parameters hold a .grad, BatchNorm has moved its statistics
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    grad_objects = {name: p.grad for name, p in model.named_parameters()}
    buffers = {name: b.clone() for name, b in model.named_buffers()}
    rng, hooks, global_hooks = torch.get_rng_state(), hook_state(model), _global_state()
    for method in IMAGE_METHODS:
        attribute(model, image, 1, method=method)
    assert all(m.training for m in model.modules())
    for name, p in model.named_parameters():
        assert p.grad is grad_objects[name] and torch.equal(p.grad, grads[name])
    for name, b in model.named_buffers():
        assert torch.equal(b, buffers[name]), name
    assert torch.equal(torch.get_rng_state(), rng)
    assert hook_state(model) == hooks and _global_state() == global_hooks


def test_runs_in_eval_mode_so_dropout_does_not_change_the_map(model, image):
    model.train()
    first = attribute(model, image, 1, method="hirescam").map
    torch.manual_seed(123)
    torch.testing.assert_close(first, attribute(model, image, 1, method="hirescam").map)


class Interrupted(nn.Module):
    """A model whose forward (or its caller's score) raises, to check the clean-up paths."""

    def __init__(self, error: type[BaseException]) -> None:
        super().__init__()
        self.body = SmallCNN()
        self.error = error

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.body(x)  # the temporary hooks have fired by now
        raise self.error("stopped")


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("method", ["gradcam", "guided_gradcam"])
def test_an_exception_in_the_forward_removes_every_temporary_hook(image, error, method):
    model = Interrupted(error)
    hooks, global_hooks = hook_state(model), _global_state()
    with pytest.raises(error, match="stopped"):
        attribute(model, image, 0, method=method, layer="body.features")
    assert hook_state(model) == hooks and _global_state() == global_hooks
    assert torch._C._len_torch_function_stack() == 0  # the guided-ReLU mode is gone too
    assert model.training


def test_an_exception_in_the_target_leaves_the_model_clean(model, image):
    hooks = hook_state(model)

    def broken(out):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        attribute(model, image, broken, method="guided_gradcam")
    assert hook_state(model) == hooks and torch._C._len_torch_function_stack() == 0


def test_explorer_methods_return_annotated_tensors_and_its_hooks_record_nothing(model, image):
    with Explorer(model, example_inputs=image) as ex:
        ex.attach("features.conv", ["forward", "grad"])
        ex.attach("", "global_forward", action="stats")
        step, hooks = ex.step, hook_state(model)
        cam = ex.gradcam("features", target=2, method="layercam")
        assert cam.shape == (2, 8, 8) and cam.layer == "features" and cam.method == "layercam"
        assert cam.classes == [2, 2]
        default = ex.gradcam(None, image)
        assert default.layer == "features"
        pixels = ex.attribute(image, target=[0, 1], method="guided_backprop")
        assert pixels.shape == image.shape and pixels.layer is None
        assert ex.step == step and len(ex.captures) == 0 and ex.timeline == []
        assert hook_state(model) == hooks
        assert all(info.fired == 0 for info in ex.hooks)
        with pytest.raises(ValueError, match=r"for 'saliency' use ex.attribute\(x, method='saliency'\)"):
            ex.gradcam("features", method="saliency")
        with pytest.raises(ValueError, match=r"unknown attribution method 'gradkam' — did you mean 'gradcam'\?"):
            ex.gradcam("features", method="gradkam")  # a typo is named as one, not sent to attribute()
        assert ex.gradcam("features", image, method="GradCAMPlusPlus").shape == (2, 8, 8)  # spellings as attribute()


def test_explorer_without_inputs_says_how_to_give_them(model):
    with Explorer(model) as ex, pytest.raises(ValueError, match="this needs inputs"):
        ex.gradcam("features")


def test_repeated_runs_do_not_keep_memory_or_hooks(model, image):
    # pytorch-grad-cam's release check: many runs leave nothing behind.
    hooks = hook_state(model)
    for _ in range(20):
        attribute(model, image, 0, method="guided_gradcam")
    assert hook_state(model) == hooks
    assert all(p.grad is None for p in model.parameters())


def test_a_layer_the_score_does_not_depend_on_gives_a_zero_map_and_a_warning_naming_it(image):
    torch.manual_seed(0)
    blank = r"layer 'side' gets a zero gradient at every position, so its gradcam map is blank \(all zeros\)"
    with pytest.warns(UserWarning, match=rf"{blank}: .*; pass a layer whose grid gets one, such as 'used'$"):
        assert not attribute(SideBranch(), image, 0, layer="side").map.any()


def test_an_item_the_score_ignores_is_named_in_the_blank_map_warning(model, image):
    with pytest.warns(
        UserWarning, match=r"layer 'features' gets a zero gradient at every position for items \[1\] of 2"
    ):
        result = attribute(model, image, lambda out: out[0, 3])  # a scalar score of item 0 only
    assert result.layer == "features" and result.map[0].any() and not result.map[1].any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a map with a gradient says nothing
        attribute(model, image, 3)


def test_a_users_full_backward_hook_on_the_first_layer_does_not_make_torch_warn(image):
    torch.manual_seed(0)
    model = SideBranch()
    with Explorer(model) as ex, warnings.catch_warnings():
        ex.attach("used", "backward")
        warnings.simplefilter("error")
        assert ex.gradcam("used", image, 1).shape == (2, 8, 8)


def inplace_cnn() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)
    )


@pytest.mark.parametrize(("kind", "on", "method"), [("backward", "0", "gradcam"), ("global_backward", "", "saliency")])
def test_a_full_backward_hook_an_in_place_op_breaks_is_explained_and_detached_as_run_does(image, kind, on, method):
    model = inplace_cnn()
    expected = attribute(model, image, 1, method=method).map  # the same model with no backward hook
    before, global_before = hook_state(model), _global_state()
    with Explorer(model) as ex:  # no example inputs: attach cannot find the collision
        ex.attach("4", "forward")
        with_forward = hook_state(model)
        info = ex.attach(on, kind)
        collision = rf"full backward hook '{kind}' on '{on}' collides with the in-place module '1' \(ReLU\)"
        with pytest.warns(UserWarning, match=collision):
            result = ex.attribute(image, 1, method=method)
        torch.testing.assert_close(result, expected, rtol=0, atol=0)
        assert "Attach 'grad' instead" in info.last_error
        assert "set model.get_submodule('1').inplace = False" in info.last_error
        assert ex.diagnostics == [info.last_error]
        assert [(h.target, h.kind, h.fired) for h in ex.hooks] == [("4", "forward", 0)] and ex.step == 0
        assert hook_state(model) == with_forward and _global_state() == global_before
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # detached: the next attribution runs without a word
            torch.testing.assert_close(ex.gradcam("0", image, 1), attribute(model, image, 1, layer="0").map)
        assert len(ex.diagnostics) == 1
    assert hook_state(model) == before


def test_a_foreign_full_backward_hook_an_in_place_op_breaks_keeps_torchs_error(image):
    model = inplace_cnn()
    handle = model[0].register_full_backward_hook(lambda m, gi, go: None)
    try:
        with Explorer(model) as ex, pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
            ex.gradcam("0", image, 1)  # not the explorer's hook: left alone, as run() leaves it
        assert len(model[0]._backward_hooks) == 1
    finally:
        handle.remove()


class NormalizesInPlace(nn.Module):
    """Subtracts the mean from its input in place before a conv, as some preprocessing layers do."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.sub_(0.5)
        return self.head(torch.relu(self.conv(x)).mean((2, 3)))


@pytest.mark.parametrize("method", ["gradcam", "saliency"])
def test_a_model_that_changes_its_input_in_place_is_attributed_and_the_input_left_alone(method):
    torch.manual_seed(0)
    model, x = NormalizesInPlace().eval(), torch.rand(2, 3, 8, 8)
    before = x.clone()
    result = attribute(model, x, 1, method=method, layer="conv" if method == "gradcam" else None)
    assert torch.equal(x, before)
    assert result.map.shape[0] == 2 and result.map.abs().sum() > 0
    if method == "saliency":  # the gradient of the same score taken by hand
        leaf = x.clone().requires_grad_(True)
        model(leaf.clone())[:, 1].sum().backward()
        assert torch.allclose(result.map, leaf.grad.abs(), atol=1e-6) or torch.allclose(
            result.map, leaf.grad, atol=1e-6
        )

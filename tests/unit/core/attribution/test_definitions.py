"""Each attribution method against its published definition, computed here without hooks, and against Captum."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hookwidgets.core import attribute
from hookwidgets.examples import load_digits, pretrained_digits_cnn


@pytest.fixture(scope="module")
def digits():
    """The trained digits CNN, 8 held-out digits and the model's top class for each."""
    model = pretrained_digits_cnn()
    images, _ = load_digits()
    x = images[1500:1508]
    with torch.no_grad():
        classes = model(x).argmax(dim=1)
    return model, x, classes


def _split(model: nn.Module, layer: str) -> tuple[nn.Module, nn.Module]:
    """The digits CNN cut after ``layer`` into two plain modules, so A and ∂y/∂A need no hooks at all.

    Its forward is ``classifier(relu(features(x)))``: the last ReLU belongs to the second half.
    """
    if layer == "features":
        return model.features, nn.Sequential(nn.ReLU(), model.classifier)
    cut = list(dict(model.features.named_children())).index(layer.split(".")[1]) + 1
    return model.features[:cut], nn.Sequential(model.features[cut:], nn.ReLU(), model.classifier)


def _acts_and_grads(model: nn.Module, layer: str, x: torch.Tensor, classes: torch.Tensor):
    """A and ∂(score of each item's class)/∂A, in float64, from the two halves of the model."""
    head, tail = _split(copy.deepcopy(model).double(), layer)
    acts = head(x.double()).detach().requires_grad_(True)
    logits = tail(acts)
    scores = logits[torch.arange(len(x)), classes]
    (grads,) = torch.autograd.grad(scores.sum(), acts)
    return acts.detach(), grads, scores.detach()


def _finish(cam: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """Bilinear upsampling to the input size, then each item scaled to [0, 1] by its min and max."""
    up = F.interpolate(cam[:, None], size=size, mode="bilinear", align_corners=False)[:, 0]
    low = up.amin(dim=(1, 2), keepdim=True)
    high = up.amax(dim=(1, 2), keepdim=True)
    span = high - low
    return torch.where(span > 0, (up - low) / torch.where(span > 0, span, 1.0), 0.0).float()  # flat map: zeros


def _gradcam(acts, grads, scores):
    weights = grads.mean(dim=(2, 3))
    return torch.relu(torch.einsum("nk,nkij->nij", weights, acts))


def _gradcam_plus_plus(acts, grads, scores):
    # Chattopadhay et al. (2018), eq. 19 with Y = exp(S): ∂ⁿY/∂Aⁿ = exp(S)·(∂S/∂A)ⁿ for a piecewise-linear S.
    ey = torch.exp(scores)[:, None, None, None]
    d1, d2, d3 = ey * grads, ey * grads**2, ey * grads**3
    denominator = 2 * d2 + acts.sum(dim=(2, 3), keepdim=True) * d3
    alpha = torch.where(denominator != 0, d2 / torch.where(denominator != 0, denominator, 1.0), 0.0)
    weights = (alpha * torch.relu(d1)).sum(dim=(2, 3))
    return torch.relu(torch.einsum("nk,nkij->nij", weights, acts))


def _layercam(acts, grads, scores):
    # Jiang et al. (2021): each position weighted by its own positive gradient.
    return torch.relu(torch.einsum("nkij,nkij->nij", torch.relu(grads), acts))


def _hirescam(acts, grads, scores):
    return torch.relu(torch.einsum("nkij,nkij->nij", grads, acts))


def _xgradcam(acts, grads, scores):
    weights = (grads * acts).sum(dim=(2, 3)) / acts.sum(dim=(2, 3))
    return torch.relu(torch.einsum("nk,nkij->nij", weights, acts))


DEFINITIONS = {
    "gradcam": _gradcam,
    "gradcam++": _gradcam_plus_plus,
    "layercam": _layercam,
    "hirescam": _hirescam,
    "xgradcam": _xgradcam,
}


@pytest.mark.parametrize("layer", ["features", "features.relu2"])
@pytest.mark.parametrize("method", list(DEFINITIONS))
def test_cam_matches_its_published_definition(digits, method, layer):
    model, x, classes = digits
    acts, grads, scores = _acts_and_grads(model, layer, x, classes)
    expected = _finish(DEFINITIONS[method](acts, grads, scores), (32, 32))
    result = attribute(model, x, classes.tolist(), method=method, layer=layer)
    assert result.map.shape == (8, 32, 32)
    assert result.layer == layer and result.classes == classes.tolist()
    torch.testing.assert_close(result.map, expected, atol=2e-4, rtol=0)
    peaks = result.map.amax(dim=(1, 2))
    blank = expected.amax(dim=(1, 2)) == 0  # Grad-CAM's channel weights can cancel every position out
    assert torch.equal(peaks[~blank], torch.ones(int((~blank).sum()))) and not peaks[blank].any()


def test_the_five_cams_are_not_all_the_same(digits):
    model, x, classes = digits
    maps = [attribute(model, x, classes.tolist(), method=m, layer="features.relu2").map for m in DEFINITIONS]
    for i in range(len(maps)):
        for j in range(i + 1, len(maps)):
            assert (maps[i] - maps[j]).abs().max() > 1e-3, (list(DEFINITIONS)[i], list(DEFINITIONS)[j])


def test_gradcam_agrees_with_captum_layergradcam(digits):
    from captum.attr import LayerAttribution, LayerGradCam

    model, x, classes = digits
    captum = LayerGradCam(model, model.features).attribute(x, target=classes, relu_attributions=True)
    captum = LayerAttribution.interpolate(captum, (32, 32), interpolate_mode="bilinear")[:, 0]
    ours = attribute(model, x, classes.tolist(), method="gradcam", layer="features").map
    torch.testing.assert_close(ours, _finish(captum, (32, 32)), atol=1e-5, rtol=0)


def _captum(cls, model, x, classes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Captum says it set requires_grad and ReLU hooks; expected here
        return cls(model).attribute(x, target=classes)


def _relus_as_modules(model: nn.Module) -> nn.Module:
    """The digits CNN with its last ReLU (called in ``forward``) as a module: Captum's rule reaches modules only."""
    return nn.Sequential(model.features, nn.ReLU(), model.classifier)


def test_guided_backprop_agrees_with_captum(digits):
    from captum.attr import GuidedBackprop

    model, x, classes = digits
    ours = attribute(model, x, classes.tolist(), method="guided_backprop")
    assert ours.map.shape == x.shape and ours.layer is None
    captum = _captum(GuidedBackprop, _relus_as_modules(model), x, classes)
    torch.testing.assert_close(ours.map, captum, atol=1e-6, rtol=1e-5)
    # On the model as written, Captum leaves the ReLU called in forward unguided; hookwidgets does not.
    assert (ours.map - _captum(GuidedBackprop, model, x, classes)).abs().max() > 1e-2


@pytest.mark.parametrize(("method", "captum_name"), [("saliency", "Saliency"), ("input_x_grad", "InputXGradient")])
def test_pixel_gradients_agree_with_captum(digits, method, captum_name):
    import captum.attr

    model, x, classes = digits
    ours = attribute(model, x, classes.tolist(), method=method).map
    torch.testing.assert_close(ours, _captum(getattr(captum.attr, captum_name), model, x, classes))


def test_saliency_is_the_absolute_input_gradient(digits):
    model, x, classes = digits
    xg = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(model(xg)[torch.arange(8), classes].sum(), xg)
    torch.testing.assert_close(attribute(model, x, classes.tolist(), method="saliency").map, grad.abs())


class _GuidedReLU(torch.autograd.Function):
    """The reference rule, written as its own autograd function: backward (x > 0) · max(g, 0)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp_min(0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad.clamp_min(0) * (x > 0)


class ResidualNet(nn.Module):
    """An in-place ReLU module, a functional ReLU after a residual add, and a ``relu`` that can be swapped."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.conv = nn.Conv2d(8, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU(inplace=True)
        self.head = nn.Linear(8, 4)
        self.relu = F.relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.stem(x))
        out = self.bn(self.conv(h))
        out = self.relu(out + h)
        return self.head(out.mean(dim=(2, 3)))


def test_guided_backprop_clamps_every_relu_module_functional_and_in_place():
    torch.manual_seed(0)
    model = ResidualNet().eval()
    x = torch.randn(3, 3, 6, 6)
    reference = copy.deepcopy(model)
    reference.act = _GuidedReLUModule()
    reference.relu = _GuidedReLU.apply
    xg = x.clone().requires_grad_(True)
    (expected,) = torch.autograd.grad(reference(xg)[:, 2].sum(), xg)
    ours = attribute(model, x, 2, method="guided_backprop").map
    torch.testing.assert_close(ours, expected)
    (plain,) = torch.autograd.grad(model(xg)[:, 2].sum(), xg)
    assert (ours - plain).abs().max() > 1e-4  # the rule changed something


class _GuidedReLUModule(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _GuidedReLU.apply(x)


def test_guided_gradcam_is_guided_backprop_times_gradcam(digits):
    from captum.attr import GuidedBackprop

    model, x, classes = digits
    acts, grads, scores = _acts_and_grads(model, "features", x, classes)
    cam = _finish(_gradcam(acts, grads, scores), (32, 32))
    expected = _captum(GuidedBackprop, _relus_as_modules(model), x, classes) * cam[:, None]
    result = attribute(model, x, classes.tolist(), method="guided_gradcam", layer="features")
    assert result.layer == "features"
    torch.testing.assert_close(result.map, expected, atol=1e-6, rtol=1e-4)


def test_cam_at_a_layer_followed_by_an_in_place_relu_sees_the_layer_output():
    torch.manual_seed(0)
    model = ResidualNet().eval()
    x = torch.randn(2, 3, 6, 6)
    # Reference: the same weights with no in-place op, cut after ``bn``.
    acts = model.bn(model.conv(torch.relu(model.stem(x)))).detach().requires_grad_(True)
    h = torch.relu(model.stem(x))
    logits = model.head(torch.relu(acts + h).mean(dim=(2, 3)))
    (grads,) = torch.autograd.grad(logits[:, 1].sum(), acts)
    expected = _finish(_gradcam(acts.detach(), grads, None), (6, 6))
    ours = attribute(model, x, 1, method="gradcam", layer="bn").map
    torch.testing.assert_close(ours, expected, atol=1e-5, rtol=0)

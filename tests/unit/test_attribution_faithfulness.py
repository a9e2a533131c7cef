"""Do the CAMs mean something on the trained digits CNN? Masking and randomisation checks over 100 digits."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from hookwidgets.core.attribution import CAM_METHODS, attribute
from hookwidgets.examples import DigitsCNN, load_digits, pretrained_digits_cnn

MASKED = 0.2


@pytest.fixture(scope="module")
def digits():
    """The trained digits CNN, 100 held-out digits and the model's top class for each."""
    model = pretrained_digits_cnn()
    images, _ = load_digits()
    x = images[1500:1600]
    with torch.no_grad():
        classes = model(x).argmax(dim=1)
    return model, x, classes


def _top_mask(ranking: torch.Tensor, count: int) -> torch.Tensor:
    """A boolean ``(N, 1, H, W)`` mask of the ``count`` highest-ranked pixels of each item."""
    flat = ranking.reshape(len(ranking), -1)
    mask = torch.zeros_like(flat, dtype=torch.bool)
    mask.scatter_(1, flat.argsort(dim=1, descending=True)[:, :count], True)
    return mask.view(len(ranking), 1, *ranking.shape[-2:])


def _logit_drop(model, x, classes, mask) -> float:
    """How much the target logit falls, on average, when the masked pixels are replaced by a blurred copy.

    A constant fill would turn a random scattered mask into salt-and-pepper noise that the CNN never
    saw, so the random mask would "win" by being out of distribution; a blurred copy removes detail
    without adding edges, for both masks alike.
    """
    blurred = F.avg_pool2d(x, 9, stride=1, padding=4, count_include_pad=False)
    with torch.no_grad():
        before = model(x).gather(1, classes[:, None])
        after = model(torch.where(mask, blurred, x)).gather(1, classes[:, None])
    return float((before - after).mean())


@pytest.mark.parametrize("layer", [None, "features.conv3"])
def test_masking_what_each_cam_ranks_highest_hurts_more_than_masking_at_random(digits, layer):
    model, x, classes = digits
    count = int(MASKED * x.shape[-2] * x.shape[-1])
    noise = torch.rand(x.shape, generator=torch.Generator().manual_seed(0))
    random_drop = _logit_drop(model, x, classes, _top_mask(noise, count))
    drops = {}
    for method in CAM_METHODS:
        cam = attribute(model, x, classes.tolist(), method=method, layer=layer).map
        drops[method] = _logit_drop(model, x, classes, _top_mask(cam, count))
    assert all(drop > random_drop for drop in drops.values()), (random_drop, drops)


def test_gradcam_of_a_reinitialised_model_is_unrelated_to_the_trained_one(digits):
    model, x, classes = digits
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1)
        untrained = DigitsCNN().eval()
    trained_maps = attribute(model, x, classes.tolist(), layer="features.conv3").map.reshape(len(x), -1)
    random_maps = attribute(untrained, x, classes.tolist(), layer="features.conv3").map.reshape(len(x), -1)
    rho = [spearmanr(a, b).statistic for a, b in zip(trained_maps.numpy(), random_maps.numpy(), strict=True)]
    assert not np.isnan(rho).any()
    assert np.mean(rho) < 0.5
    # The same check against itself is perfectly correlated: the statistic can fail.
    again = attribute(model, x, classes.tolist(), layer="features.conv3").map.reshape(len(x), -1)
    assert np.mean([spearmanr(a, b).statistic for a, b in zip(trained_maps.numpy(), again.numpy(), strict=True)]) > 0.99

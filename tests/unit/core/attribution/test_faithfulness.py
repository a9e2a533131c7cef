"""Do the CAMs mean something on the trained digits CNN? Masking and randomisation checks over 100 digits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import spearmanr

from hookwidgets.core import CAM_METHODS, attribute
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


@pytest.mark.parametrize("layer", [None, "features.relu2"])
def test_masking_what_each_cam_ranks_highest_hurts_more_than_masking_at_random(digits, layer):
    model, x, classes = digits
    count = int(MASKED * x.shape[-2] * x.shape[-1])
    # "A random 20%": the mean over five random masks, so that one lucky draw does not set the bar.
    random_drop = np.mean(
        [
            _logit_drop(
                model, x, classes, _top_mask(torch.rand(x.shape, generator=torch.Generator().manual_seed(s)), count)
            )
            for s in range(5)
        ]
    )
    top, bottom = {}, {}
    for method in CAM_METHODS:
        cam = attribute(model, x, classes.tolist(), method=method, layer=layer).map
        # A blank map ranks nothing: its "top 20%" would be the first pixels in memory order.
        assert cam.amax(dim=(1, 2)).eq(1).all(), f"{method}: blank maps"
        top[method] = _logit_drop(model, x, classes, _top_mask(cam, count))
        bottom[method] = _logit_drop(model, x, classes, _top_mask(-cam, count))
    assert all(drop > random_drop for drop in top.values()), (random_drop, top)
    # The measure can tell a ranking from its reverse: the pixels ranked lowest matter least.
    assert all(bottom[m] < top[m] for m in CAM_METHODS), (bottom, top)


def _spearman(trained: torch.Tensor, other: torch.Tensor) -> np.ndarray:
    """Rank correlation per item; NaN where a map is constant (all zeros: nothing ranked)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scipy warns on a constant map; its NaN is counted below
        return np.array([spearmanr(a, b).statistic for a, b in zip(trained.numpy(), other.numpy(), strict=True)])


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("layer", [None, "features.relu2"])
def test_gradcam_of_a_reinitialised_model_is_unrelated_to_the_trained_one(digits, layer, seed):
    model, x, classes = digits
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        untrained = DigitsCNN().eval()
    trained_maps = attribute(model, x, classes.tolist(), layer=layer).map.reshape(len(x), -1)
    random_maps = attribute(untrained, x, classes.tolist(), layer=layer).map.reshape(len(x), -1)
    assert trained_maps.amax(dim=1).eq(1).all()  # every trained map ranks something
    rho = _spearman(trained_maps, random_maps)
    # Some re-initialised maps are blank (every weighted sum negative): clearly different from a
    # trained map, but without a rank correlation. The mean is over the others.
    ranked = rho[~np.isnan(rho)]
    assert len(ranked) >= 50
    assert ranked.mean() < 0.5
    # The same check against itself is perfectly correlated: the statistic can fail.
    again = attribute(model, x, classes.tolist(), layer=layer).map.reshape(len(x), -1)
    assert _spearman(trained_maps, again).mean() > 0.99

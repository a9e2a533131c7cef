"""A small CNN on scikit-learn's bundled 8×8 digits, upsampled so feature maps have room. No download."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

import torch
import torch.nn.functional as F
from torch import nn

from .cache import cached_model

M = TypeVar("M", bound=nn.Module)

IMAGE_SIZE = 32
_MEAN, _STD = 0.30, 0.40  # digits pixels scaled to [0, 1] have about this mean and spread


def load_digits(size: int = IMAGE_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """All 1,797 digits as normalised ``(N, 1, size, size)`` float images and their labels."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as exc:
        raise ImportError("the digits examples need scikit-learn: pip install 'hookwidgets[examples]'") from exc
    data = sklearn_digits()
    images = torch.tensor(data.images, dtype=torch.float32)[:, None] / 16.0
    images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
    return (images - _MEAN) / _STD, torch.tensor(data.target, dtype=torch.long)


def digit_image(index: int = 0, size: int = IMAGE_SIZE) -> tuple[torch.Tensor, int]:
    """One digit as a ``(1, 1, size, size)`` batch and its label."""
    images, labels = load_digits(size)
    return images[index : index + 1], int(labels[index])


class DigitsCNN(nn.Module):
    """Three conv blocks and a linear classifier on a 4×4 grid; named layers so paths read well.

    The last ReLU is applied in ``forward``, so ``features`` (the default CAM layer) ends with
    ``conv3``'s signed maps. The head weighs each of the 4×4 positions on its own, so the channel
    weights Grad-CAM averages over positions can cancel: on the ReLU'd maps Grad-CAM was blank (every
    weighted sum negative) for 59 of 100 held-out digits; on ``conv3``'s output it is blank for none.
    """

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(
                conv1=nn.Conv2d(1, 16, 3, padding=1),
                bn1=nn.BatchNorm2d(16),
                relu1=nn.ReLU(),
                pool1=nn.MaxPool2d(2),
                conv2=nn.Conv2d(16, 32, 3, padding=1),
                bn2=nn.BatchNorm2d(32),
                relu2=nn.ReLU(),
                pool2=nn.MaxPool2d(2),
                conv3=nn.Conv2d(32, 32, 3, padding=1),
            )
        )
        """Three conv blocks, ``conv1`` … ``conv3``, each with BatchNorm (an ``nn.Sequential``)."""
        self.classifier = nn.Sequential(
            OrderedDict(pool=nn.AdaptiveAvgPool2d(4), flatten=nn.Flatten(), fc=nn.Linear(32 * 16, classes))
        )
        """``pool``, ``flatten`` and ``fc`` (an ``nn.Sequential``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.relu(self.features(x)))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch on one intra-op thread for the body, then the thread count as it was.

    The training batches are small: a second thread saves little, and on a shared, loaded machine
    the two wait on each other (training took 75 s instead of 21 s at load 7 on 2 cores). One thread
    also makes the trained weights the same whatever the machine's default thread count.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


CNN_RECIPE: dict[str, Any] = {
    "revision": 1,
    "optimizer": "Adam",
    "lr": 3e-3,
    "epochs": 5,
    "seed": 0,
    "digits": 1500,
    "batch": 64,
}
"""Everything the DigitsCNN's trained weights depend on but its code: the cache file is keyed by it, so a changed
recipe trains anew (raise ``revision`` when the model or its training changes otherwise)."""


def recipe_with(recipe: Mapping[str, Any], **changes: Any) -> dict[str, Any]:
    """``recipe`` with the ``changes`` that are not None."""
    return {**recipe, **{key: value for key, value in changes.items() if value is not None}}


def train_on_digits(build: Callable[[], M], recipe: Mapping[str, Any]) -> M:
    """``build()`` trained as ``recipe`` says (``optimizer``, a ``torch.optim`` class name, ``lr``, ``epochs``,
    ``seed``, on the first ``digits`` digits in batches of ``batch``), in eval mode, gradients cleared.

    Built and trained under ``seed`` in a forked RNG, on one thread: the global RNG and thread count are
    left as found.
    """
    images, labels = load_digits()
    with torch.random.fork_rng(devices=[]), one_thread():
        torch.manual_seed(recipe["seed"])
        model = build()
        optimizer = getattr(torch.optim, recipe["optimizer"])(model.parameters(), lr=recipe["lr"])
        train_x, train_y = images[: recipe["digits"]], labels[: recipe["digits"]]
        model.train()
        for _ in range(recipe["epochs"]):
            for batch in torch.randperm(len(train_x)).split(recipe["batch"]):
                optimizer.zero_grad()
                F.cross_entropy(model(train_x[batch]), train_y[batch]).backward()
                optimizer.step()
    model.zero_grad(set_to_none=True)
    return model.eval()


def train_digits_cnn(epochs: int | None = None, seed: int | None = None) -> DigitsCNN:
    """Train a DigitsCNN on the first 1,500 digits in seconds on one CPU thread, leaving the global RNG and thread
    count untouched; ``epochs`` and ``seed`` default to ``CNN_RECIPE``'s."""
    return train_on_digits(DigitsCNN, recipe_with(CNN_RECIPE, epochs=epochs, seed=seed))


def pretrained_digits_cnn(cache: bool = True) -> DigitsCNN:
    """A trained DigitsCNN in eval mode, trained on first use and cached on disk after (keyed by ``CNN_RECIPE``)."""
    return cached_model("digits_cnn", DigitsCNN, lambda: train_on_digits(DigitsCNN, CNN_RECIPE), cache, CNN_RECIPE)


def accuracy(model: nn.Module) -> float:
    """Accuracy on the 297 held-out digits."""
    images, labels = load_digits()
    with torch.no_grad():
        return (model(images[1500:]).argmax(1) == labels[1500:]).float().mean().item()

"""A small CNN on scikit-learn's bundled 8×8 digits, upsampled so feature maps have room. No download."""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TypeVar

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


def train_on_digits(
    build: Callable[[], M], optimizer_class: Callable[..., torch.optim.Optimizer], lr: float, epochs: int, seed: int
) -> M:
    """``build()`` trained on the first 1,500 digits in batches of 64, in eval mode, gradients cleared.

    Built and trained under ``seed`` in a forked RNG, on one thread: the global RNG and thread count are
    left as found.
    """
    images, labels = load_digits()
    with torch.random.fork_rng(devices=[]), one_thread():
        torch.manual_seed(seed)
        model = build()
        optimizer = optimizer_class(model.parameters(), lr=lr)
        train_x, train_y = images[:1500], labels[:1500]
        model.train()
        for _ in range(epochs):
            for batch in torch.randperm(len(train_x)).split(64):
                optimizer.zero_grad()
                F.cross_entropy(model(train_x[batch]), train_y[batch]).backward()
                optimizer.step()
    model.zero_grad(set_to_none=True)
    return model.eval()


def train_digits_cnn(epochs: int = 5, seed: int = 0) -> DigitsCNN:
    """Train a DigitsCNN on the first 1,500 digits in seconds on one CPU thread, leaving the global RNG and thread
    count untouched."""
    return train_on_digits(DigitsCNN, torch.optim.Adam, 3e-3, epochs, seed)


def pretrained_digits_cnn(cache: bool = True) -> DigitsCNN:
    """A trained DigitsCNN in eval mode, trained on first use and cached on disk afterwards."""
    return cached_model("digits_cnn_v1", DigitsCNN, train_digits_cnn, cache)


def accuracy(model: nn.Module) -> float:
    """Accuracy on the 297 held-out digits."""
    images, labels = load_digits()
    with torch.no_grad():
        return (model(images[1500:]).argmax(1) == labels[1500:]).float().mean().item()

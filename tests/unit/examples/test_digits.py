"""The digits demo model: bundled data (no network), trained in seconds, cached on disk, state left alone."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import torch

from hookwidgets.examples import DigitsCNN, accuracy, digits, load_digits, pretrained_digits_cnn, train_digits_cnn
from hookwidgets.examples.cache import weights_path


def test_the_digits_come_from_scikit_learns_bundled_files_without_the_network(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("load_digits tried to open a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    images, labels = load_digits()
    assert images.shape == (1797, 1, 32, 32) and images.dtype == torch.float32
    assert labels.shape == (1797,) and sorted(labels.unique().tolist()) == list(range(10))
    assert abs(float(images.mean())) < 0.1 and 0.8 < float(images.std()) < 1.2  # normalised
    image, label = digits.digit_image(7)
    assert image.shape == (1, 1, 32, 32) and label == int(labels[7])


def test_the_pretrained_model_is_accurate_in_eval_mode_and_cached(monkeypatch):
    model = pretrained_digits_cnn()
    assert isinstance(model, DigitsCNN) and not model.training
    assert all(p.grad is None for p in model.parameters())
    assert accuracy(model) > 0.9  # 297 held-out digits
    cached = weights_path("digits_cnn", digits.CNN_RECIPE)
    assert cached.parent == Path(os.environ["HOOKWIDGETS_CACHE"]) and cached.exists()

    def no_training(*args, **kwargs):
        raise AssertionError("trained again although the weights were cached")

    with monkeypatch.context() as patched:
        patched.setattr(digits, "train_on_digits", no_training)
        again = pretrained_digits_cnn()
    assert again is not model and not again.training
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), name

    # A changed recipe is another file: trained as it says, not the old weights loaded
    trained = []
    monkeypatch.setitem(digits.CNN_RECIPE, "epochs", 1)
    monkeypatch.setattr(digits, "train_on_digits", lambda build, recipe: trained.append(dict(recipe)) or build())
    pretrained_digits_cnn()
    assert trained == [{**digits.CNN_RECIPE, "epochs": 1}]
    changed = weights_path("digits_cnn", digits.CNN_RECIPE)
    assert changed != cached and changed.exists()
    changed.unlink()  # untrained weights: not left in the cache other tests read


def test_training_leaves_the_random_generator_and_the_thread_count_as_found():
    threads = torch.get_num_threads()
    torch.manual_seed(5)
    rng = torch.get_rng_state()
    first = train_digits_cnn(epochs=1)
    assert torch.equal(torch.get_rng_state(), rng) and torch.get_num_threads() == threads
    second = train_digits_cnn(epochs=1)  # the same seed gives the same weights
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_a_missing_scikit_learn_says_how_to_install_it(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def without_sklearn(name, *args, **kwargs):
        if name.startswith("sklearn"):
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_sklearn)
    with pytest.raises(ImportError, match=r"pip install 'hookwidgets\[examples\]'"):
        load_digits()

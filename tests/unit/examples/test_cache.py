"""The example weights' cache: in the user's cache folder, keyed by the recipe, written whole, retrained when a file
does not load."""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from torch import nn

import hookwidgets
from hookwidgets.examples.cache import cached_model, weights_path


def _linear(value: float):
    def build() -> nn.Linear:
        layer = nn.Linear(1, 1)
        nn.init.constant_(layer.weight, value)
        return layer

    return build


def test_the_cache_is_the_users_folder_never_the_package(monkeypatch, tmp_path):
    monkeypatch.delenv("HOOKWIDGETS_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert weights_path("m") == tmp_path / "xdg" / "hookwidgets" / "m.pt"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert weights_path("m").parent == tmp_path / "home" / ".cache" / "hookwidgets"
    monkeypatch.setenv("HOOKWIDGETS_CACHE", str(tmp_path / "mine"))
    assert weights_path("m").parent == tmp_path / "mine"
    package = Path(hookwidgets.__file__).parent
    assert package not in weights_path("m").parents


def test_the_recipe_keys_the_file_so_a_changed_recipe_trains_anew(monkeypatch, tmp_path):
    monkeypatch.setenv("HOOKWIDGETS_CACHE", str(tmp_path))
    first = weights_path("m", {"steps": 10, "lr": 0.1})
    assert first == weights_path("m", {"lr": 0.1, "steps": 10}) != weights_path("m", {"steps": 11, "lr": 0.1})
    assert cached_model("m", _linear(0), _linear(1), True, {"steps": 10}).weight.item() == 1  # trained
    assert cached_model("m", _linear(0), _linear(2), True, {"steps": 10}).weight.item() == 1  # loaded
    assert cached_model("m", _linear(0), _linear(3), True, {"steps": 11}).weight.item() == 3  # trained anew


def test_a_file_that_does_not_load_is_trained_again_and_replaced_whole(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("HOOKWIDGETS_CACHE", str(tmp_path))
    path = weights_path("m")
    for broken in (b"", b"not a checkpoint", None):
        if broken is None:  # weights of another shape: another architecture under the same name
            torch.save(nn.Linear(2, 1).state_dict(), path)
        else:
            path.write_bytes(broken)
        with caplog.at_level(logging.WARNING, logger="hookwidgets.examples"):
            assert cached_model("m", _linear(0), _linear(4), True).weight.item() == 4
        assert "do not load" in caplog.text and str(path) in caplog.text
        caplog.clear()
        assert cached_model("m", _linear(0), _linear(5), True).weight.item() == 4  # the good file now loads
        assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]  # no temporary file left

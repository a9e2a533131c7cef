"""Shared fixtures: small models written here, helpers that snapshot a model's hook state, and the built wheel
in a fresh environment."""

from __future__ import annotations

import os
import shutil
from collections import OrderedDict
from collections.abc import Iterator

import pytest
import torch
from torch import nn

from .release._dists import Dists, build_dists
from .release._fresh_env import FreshEnv, create_fresh_env

HOOK_DICTS = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_backward_pre_hooks",
    "_backward_hooks",
    "_state_dict_hooks",
    "_state_dict_pre_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)
GLOBAL_DICTS = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_forward_hooks_with_kwargs",
    "_global_forward_hooks_always_called",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
)
"""torch's process-wide module hook dicts; a torch may lack some (2.3 has no _with_kwargs one): read with getattr."""


def hook_state(model: nn.Module) -> dict:
    """Every module's hook dicts (keys and hook objects, in order) and its full-backward flag."""
    state = {}
    for path, module in model.named_modules():
        for name in HOOK_DICTS:
            state[(path, name)] = list(getattr(module, name).items())
        state[(path, "_is_full_backward_hook")] = module._is_full_backward_hook
    return state


def optimizer_hook_state(*optimizers: torch.optim.Optimizer) -> list:
    """Every optimizer's own step hook dicts and torch's global ones, keys and hooks in order."""
    from torch.optim import optimizer as optim_module

    names = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks")
    return [
        *(list(getattr(o, n).items()) for o in optimizers for n in names),
        list(optim_module._global_optimizer_pre_hooks.items()),
        list(optim_module._global_optimizer_post_hooks.items()),
    ]


@pytest.fixture
def ipython(tmp_path, monkeypatch):
    """A fresh IPython shell (history in memory, its dir in tmp): the one a view opened in the test follows."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    shell = InteractiveShell.instance(config=config)
    yield shell
    InteractiveShell.clear_instance()


@pytest.fixture(scope="session")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    """The checkout's wheel and sdist, built once per session."""
    return build_dists(tmp_path_factory.mktemp("dists"))


@pytest.fixture(scope="session")
def fresh_env(tmp_path_factory: pytest.TempPathFactory, dists: Dists) -> Iterator[FreshEnv]:
    """A virtual environment outside the repository with torch, the wheel and ipykernel only, made once per session
    for the smoke test and the browser test on its kernel; never skipped. Removed after: it weighs about 1 GB."""
    root = tmp_path_factory.mktemp("fresh-env")
    yield create_fresh_env(root, dists.wheel)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the digits model cache of a test run out of the user's home."""
    os.environ["HOOKWIDGETS_CACHE"] = str(tmp_path_factory.mktemp("hookwidgets-cache"))


class SmallCNN(nn.Module):
    """Conv, BatchNorm, ReLU, Dropout and a Linear head: state a run could disturb."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(conv=nn.Conv2d(3, 4, 3, padding=1), bn=nn.BatchNorm2d(4), act=nn.ReLU(), drop=nn.Dropout(0.5))
        )
        self.head = nn.Sequential(OrderedDict(pool=nn.AdaptiveAvgPool2d(2), flatten=nn.Flatten(), fc=nn.Linear(16, 5)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class Aliased(nn.Module):
    """``first`` is ``layers[0]`` registered a second time: one module under two names."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.first = self.layers[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class SharedBlock(nn.Module):
    """One Linear called twice per forward (weight sharing)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(torch.tanh(self.lin(x)))


class TupleOut(nn.Module):
    """A child that returns a tuple, so outputs are named output.0 and output.1."""

    def __init__(self) -> None:
        super().__init__()
        self.split = Splitter()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.split(x)
        return (a * b).sum(dim=1, keepdim=True)


class Splitter(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x + 1


class SideBranch(nn.Module):
    """A conv whose output the score never uses, beside the one it does: its CAM is blank."""

    def __init__(self) -> None:
        super().__init__()
        self.used, self.side = nn.Conv2d(3, 4, 3, padding=1), nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.side(x)
        return self.fc(torch.relu(self.used(x)).mean(dim=(2, 3)))


class LateInPlace(nn.Module):
    """Changes the conv's output in place once ``inplace`` is set: after a backward hook was attached on it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(4, 3)
        self.inplace = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.fc((y.relu_() if self.inplace else y.relu()).mean(dim=(2, 3)))


@pytest.fixture
def cnn() -> SmallCNN:
    torch.manual_seed(0)
    return SmallCNN()


@pytest.fixture
def image() -> torch.Tensor:
    return torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))


class RefusesHooks(nn.Identity):
    """A module whose forward-hook registration fails, as a ScriptModule's does."""

    def register_forward_hook(self, *args, **kwargs):
        raise RuntimeError("no hooks here")

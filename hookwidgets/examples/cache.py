"""The example models' weights on disk: trained once per recipe, loaded after (internal; see ``hookwidgets._cache``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

from .._cache import cache_dir

log = logging.getLogger(__name__)
M = TypeVar("M", bound=nn.Module)


def weights_path(name: str, recipe: Mapping[str, Any] | None = None) -> Path:
    """The cache file of ``name``: ``name.pt``, or ``name-<digest of recipe>.pt`` so a changed recipe is a new file."""
    if recipe is None:
        return cache_dir() / f"{name}.pt"
    digest = hashlib.sha256(json.dumps(dict(recipe), sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / f"{name}-{digest}.pt"


def cached_model(
    name: str, build: Callable[[], M], train: Callable[[], M], cache: bool, recipe: Mapping[str, Any] | None = None
) -> M:
    """The weights of ``name`` (and ``recipe``) from the cache into ``build()``, or ``train()`` and cache them.

    A file that does not load into ``build()`` (cut short, corrupt, another architecture) is trained again and
    replaced; files are written whole under a temporary name and renamed, so a reader never sees half of one.
    """
    path = weights_path(name, recipe)
    if cache and path.exists():
        model = build()
        try:
            model.load_state_dict(torch.load(path, weights_only=True))
            log.debug("loading %s from %s", name, path)
            return model.eval()
        except Exception as exc:  # any unreadable file: the weights can always be trained again
            log.warning("the cached weights in %s do not load (%s); training %s again", path, exc, name)
    log.info("training %s (first use; takes seconds)%s", name, f", then cached in {path}" if cache else "")
    model = train()
    if cache:
        save(model, path)
    return model


def save(model: nn.Module, path: Path) -> None:
    """``model``'s state dict to ``path`` atomically: written under a name of this process, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    try:
        torch.save(model.state_dict(), tmp)
        tmp.replace(path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()

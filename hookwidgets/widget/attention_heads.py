"""An attention module's heads in the inspector: its probabilities from ``ex.attention()`` on the example inputs."""

from __future__ import annotations

from typing import Any

import torch

from ..core.display import quoted
from ..core.model.attention_sources import attention_sources
from .captures import heads_item
from .protocol import PlotItem
from .tensor_views import context_for, sequence_labels


class AttentionHeads:
    """The heads item of the selected attention module: one ``attention()`` run serves its head picks and live
    redraws until the step changes, a Run, or another selection."""

    def __init__(self) -> None:
        self._paths: set[str] | None = None  # the model's attention modules, found once
        self._held: tuple[int, tuple[str, ...]] | None = None  # the step and the edits whose probabilities are held
        self._probabilities: dict[str, torch.Tensor] = {}
        self._edits = ""  # what the held run says about the user's edits
        self._error = ""  # why the latest attention() run failed, until the controller shows it

    def item(self, explorer: Any, path: str, head: int | None, scale: str | None = None) -> PlotItem | None:
        """The heads item of ``path`` (``head``: one head, None: all; ``scale``: the colour scale, None: the
        default), or None when it is no attention module or there are no example inputs."""
        if self._paths is None:
            self._paths = {source.path for source in attention_sources(explorer.model)}
        if path not in self._paths or explorer.example_inputs is None:
            return None
        held = (explorer.step, tuple(explorer.edits))
        if self._held != held:  # a run since (the weights may have changed), or an edit attached or detached
            self._held = held
            try:
                found = explorer.attention()
                self._probabilities, self._edits = found, found.edits
            except Exception as exc:  # shown in the inspector's errors, never a broken selection
                self._probabilities, self._edits = {}, ""
                why = f"{type(exc).__name__}: {exc}"
                self._error = f"the attention heads of {quoted(path)} could not be computed: {why}"
        tensor = self._probabilities.get(path)
        if tensor is None:
            return None
        queries, keys = sequence_labels(tensor, "heads", context_for(explorer, path))
        return heads_item(
            tensor, path, queries, head=head, step=explorer.step, key_tokens=keys, scale=scale, edits=self._edits
        )

    def forget(self) -> None:
        """Drop the held probabilities: the model may compute others now (a model without hooks counts no step)."""
        self._held = None

    def take_error(self) -> str:
        """Why the latest ``attention()`` run failed, once ("" when it did not)."""
        error, self._error = self._error, ""
        return error

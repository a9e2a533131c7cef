"""Which layers the summary shows: a text in the path, the model's blocks only, one module class."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from torch import nn

from ..core.model.blocks import block_stack, decoder_blocks
from .protocol import SummaryFilter


@dataclass(frozen=True)
class LayerFilter:
    """The summary's filter as the page chose it; the empty filter keeps every layer."""

    text: str = ""
    """Kept: layers whose path holds this text (any case); the root is ``(model)``."""
    blocks_only: bool = False
    """Kept: only the items of the model's block stack (``core.model.blocks.block_stack``)."""
    module_class: str = ""
    """Kept: only modules of this class name ("" keeps every class)."""

    def as_payload(self) -> SummaryFilter:
        """The filter as the ``summary`` traitlet echoes it."""
        return {"text": self.text, "blocks_only": self.blocks_only, "module_class": self.module_class}

    def keep(self, paths: Iterable[str], classes: dict[str, str], blocks: list[str]) -> list[str]:
        """``paths`` this filter keeps, in their order; ``classes``: path → class name, ``blocks``: the block paths."""
        text, block_set = self.text.casefold(), set(blocks)
        return [
            path
            for path in paths
            if text in (path or "(model)").casefold()
            and (not self.blocks_only or path in block_set)
            and (not self.module_class or classes.get(path) == self.module_class)
        ]


def block_paths(model: nn.Module) -> list[str]:
    """The paths of the model's repeated blocks (its block stack's items), in order; [] when it has none."""
    stack = block_stack(model)
    return [path for path, _ in decoder_blocks(model, stack)] if stack is not None else []


def module_classes(model: nn.Module) -> dict[str, str]:
    """Path → the module's class name, for every module in ``named_modules()`` order."""
    return {path: type(module).__name__ for path, module in model.named_modules()}

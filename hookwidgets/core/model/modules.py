"""One walk of a module tree, for the explorer's own runs: the modules ``model.modules()`` gives, at half its cost."""

from __future__ import annotations

from torch import nn


def modules_of(model: nn.Module) -> list[nn.Module]:
    """``model`` and every submodule, each once, in ``model.modules()``'s order (a list, no path strings built)."""
    found: list[nn.Module] = []
    seen: set[int] = set()

    def visit(module: nn.Module) -> None:  # torch's named_modules nests one generator per level: this is one call
        seen.add(id(module))
        found.append(module)
        for child in module._modules.values():
            if child is not None and id(child) not in seen:
                visit(child)

    visit(model)
    return found

"""Notes on gradient hooks whose gradient cannot come: every path from their place to the score passes a module that
passes no gradient (``graph/stops.py``: a quantized module's kernel without autograd)."""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn
from torch.autograd.graph import Node, get_gradient_edge

from ..display import quoted
from ..graph.stops import Stops, unreached, why
from ..kind_table import KINDS
from . import notes
from .info import HookInfo
from .notes import NoteKind

NO_GRADIENT = "no gradient can come here"
"""How a note on a hook whose gradient cannot come begins."""


def stopped_notes(
    hooks: Iterable[HookInfo], model: nn.Module, stops: Stops, roots: list[Node]
) -> list[tuple[HookInfo, str | None]]:
    """For each of ``hooks`` that waits for a gradient, why it cannot come from ``roots`` (the score's or the outputs'
    nodes), naming the module it stops at, or None where it comes; ``stops`` watched the forward (``outputs=True``).
    Read before the backward, which frees what the graph saved; ``note_stopped`` puts them on the hooks."""
    behind = unreached(roots)
    return [(info, _note(info, model, stops, behind) if behind else None) for info in hooks]


def note_stopped(stopped: list[tuple[HookInfo, str | None]]) -> None:
    """Put ``stopped_notes`` on their hooks (shown over a note a firing left: the stop is why their gradient is
    None); drop this note from a hook whose gradient comes again."""
    for info, note in stopped:
        notes.add(info, note, NoteKind.STOPPED)


def _note(info: HookInfo, model: nn.Module, stops: Stops, behind: dict[Node, Node]) -> str | None:
    """Why ``info``'s gradient cannot come, or None when it can (or the hook waits for none)."""
    kind = KINDS.get(info.spec)
    if kind is not None and kind.family == "global" and kind.phase == "backward":
        blocked = [(path, behind[node]) for path, node in stops.outputs.items() if node in behind]
        if not blocked:
            return None
        shown = ", ".join(quoted(path) if path else "the model" for path, _ in blocked[:3])
        more = f" and {len(blocked) - 3} more" if len(blocked) > 3 else ""
        return f"{NO_GRADIENT} for {len(blocked)} modules ({shown}{more}): {why(blocked[0][1], stops)}"
    if kind is None or kind.phase != "backward" or kind.family not in ("module", "param"):
        return None
    if kind.family == "param":
        param = model.get_parameter(info.path)
        node = get_gradient_edge(param).node if param.requires_grad else None
    else:
        node = stops.outputs.get(info.path)
    stop = behind.get(node) if node is not None else None
    return None if stop is None else f"{NO_GRADIENT}: {why(stop, stops)}"

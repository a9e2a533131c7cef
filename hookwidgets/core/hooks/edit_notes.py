"""What the explorer's analyses say about the user's edits: which are attached, and whether a result ran with them."""

from __future__ import annotations

from collections.abc import Iterable

from ..display import quoted
from .info import HookInfo
from .tensor_edits import describe_edit


def edit_labels(hooks: Iterable[HookInfo]) -> list[str]:
    """Each live edit as one short phrase, in attach order: ``ablate_heads [1, 3] at forward on 'h.0.attn'``."""
    labels = []
    for info in hooks:
        if info.edit and not info.foreign:
            edits = ", ".join(" ".join(str(part) for part in describe_edit(edit)) for edit in info.edit)
            labels.append(f"{edits} at {info.kind} on {quoted(info.path)}")
    return labels


def edits_note(hooks: Iterable[HookInfo], applied: bool) -> str:
    """One sentence saying that a result ran with (``applied``) or without the user's edits; "" when none is
    attached, so that a result of the unedited model says nothing."""
    labels = edit_labels(hooks)
    if not labels:
        return ""
    listed = "; ".join(labels)
    if applied:
        return f"with your edits: {listed}"
    return f"without your edits ({listed}): this is the unedited model"

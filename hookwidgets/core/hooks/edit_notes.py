"""What the explorer's analyses say about the user's edits: which are attached, and whether a result ran with them."""

from __future__ import annotations

from collections.abc import Iterable

from ..display import quoted
from .info import HookInfo
from .tensor_edits import describe_edit


def edit_labels(hooks: Iterable[HookInfo]) -> list[str]:
    """Each live edit as one short phrase, in attach order: ``ablate_heads 1,3 at forward on 'h.0.attn'``."""
    labels = []
    for info in hooks:
        if info.edit and not info.foreign:
            edits = ", ".join(" ".join(_word(part) for part in describe_edit(edit)) for edit in info.edit)
            labels.append(f"{edits} at {info.kind} on {quoted(info.path)}")
    return labels


def _word(part: object) -> str:
    """An edit's argument as the page writes it: indices as ``0,2`` (not a tuple's ``(0, 2)``)."""
    if isinstance(part, (list, tuple)):
        return ",".join(str(item) for item in part)
    return str(part)


def edits_note(hooks: Iterable[HookInfo], applied: bool, failed: Iterable[HookInfo] = ()) -> str:
    """One sentence saying that a result ran with (``applied``) or without the user's edits; "" when none is
    attached, so that a result of the unedited model says nothing. ``failed``: hooks whose edit failed in the run
    (``Runner.failed_edits``), said as left out."""
    hooks = list(hooks)
    failed_ids = {id(info) for info in failed} if applied else set()
    labels = edit_labels(info for info in hooks if id(info) not in failed_ids)
    left_out = edit_labels(info for info in hooks if id(info) in failed_ids)
    if not labels and not left_out:
        return ""
    if not applied:
        return f"without your edits ({'; '.join(labels)}): this is the unedited model"
    said = [f"with your edits: {'; '.join(labels)}"] if labels else []
    if left_out:
        said.append(f"without {'; '.join(left_out)}, which failed in this run (its error is on ex.hooks)")
    return "; ".join(said)

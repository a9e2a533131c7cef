"""What the explorer's analyses say about the user's edits: which are attached, and whether a result ran with them."""

from __future__ import annotations

from collections.abc import Iterable

from ..display import display_name, quoted
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


def function_labels(hooks: Iterable[HookInfo]) -> list[str]:
    """Each live hook whose action is the user's function, as one phrase: ``my_fn at forward on 'h.0'``."""
    return [
        f"{display_name(info.action_name)} at {info.kind} on {quoted(info.path)}"
        for info in hooks
        if callable(info.action) and not info.foreign
    ]


def _word(part: object) -> str:
    """An edit's argument as the page writes it: indices as ``0,2`` (not a tuple's ``(0, 2)``)."""
    if isinstance(part, (list, tuple)):
        return ",".join(str(item) for item in part)
    return str(part)


def edits_note(hooks: Iterable[HookInfo], applied: bool, failed: Iterable[HookInfo] = ()) -> str:
    """One sentence saying that a result ran with (``applied``) or without the user's edits, and that their function
    hooks did not run; "" when neither is attached. ``failed``: hooks whose edit failed in the run
    (``Runner.failed_edits``), said as left out."""
    hooks = list(hooks)
    failed_ids = {id(info) for info in failed} if applied else set()
    labels = edit_labels(info for info in hooks if id(info) not in failed_ids)
    left_out = edit_labels(info for info in hooks if id(info) in failed_ids)
    # The analyses' runs call no user function (it may record or print); what one returns is then not applied.
    functions = function_labels(hooks)
    said = []
    if labels and not applied:
        said.append(f"without your edits ({'; '.join(labels)}): this is the unedited model")
    elif labels:
        said.append(f"with your edits: {'; '.join(labels)}")
    if left_out:
        said.append(f"without {'; '.join(left_out)}, which failed in this run (its error is on ex.hooks)")
    if functions:
        said.append(f"your functions did not run in it ({'; '.join(functions)}): a value they return is not applied")
    return "; ".join(said)

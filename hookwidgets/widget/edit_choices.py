"""What the edit picker offers for the selected module (its output's axes, its heads, its recorded outputs), and the
edit of an attach message, with a recorded run the page names resolved to its Record."""

from __future__ import annotations

from typing import Any, TypedDict, TypeGuard, cast

from torch import nn

from ..core.capture.store import Record
from ..core.capture.views import sequence_axis
from ..core.display import quoted
from ..core.explorer import Explorer
from ..core.model.tokens import Sequences
from ..core.model.tree import tree_node
from .protocol import RecordChoice

PATCH_EDITS = ("replace", "mean_ablate")
"""Edits whose argument the page names as a recorded run, ``{"step": s, "call": c}``."""
LISTED = 50
"""Recorded outputs the selection lists at most (the newest); a reference to an older one kept still resolves."""
HOW = "capture this module's forward, Run, then pick the run"


class EditOffers(TypedDict):
    """The fields of a ``Selection`` that the edit picker reads."""

    axes: list[str] | None
    heads: int | None
    records: list[RecordChoice]


def edit_offers(explorer: Explorer, path: str, module: nn.Module) -> EditOffers:
    """The selection's fields for the edit picker: ``axes``, ``heads`` and ``records`` of the module at ``path``."""
    return {
        "axes": output_axes(_shape_at(explorer, path), explorer.sequences),
        "heads": explorer.head_count(path),
        "records": recorded_outputs(explorer, path),
    }


NO_OFFERS: EditOffers = {"axes": None, "heads": None, "records": []}
"""The edit picker's fields where the selection is no module."""
SPATIAL = {3: ["length"], 4: ["height", "width"], 5: ["depth", "height", "width"]}
"""The dims after the channels of a convolution's output, by its rank."""


def output_axes(shape: list[int | str] | None, sequences: Sequences) -> list[str] | None:
    """A name per dim of an output of ``shape`` ("batch", "tokens", "features", "channels", "height", …; "" where
    the shape says nothing), for the picker to say what ``dim`` means; None when the shape is unknown."""
    if shape is None:
        return None
    rank = len(shape)
    names = [""] * rank
    if rank < 2:
        return names
    names[0] = "batch"
    axis = sequence_axis(cast("tuple[int, ...]", tuple(shape)), sequences)  # a symbolic (str) dim is no length
    if axis is not None:
        names[axis] = "tokens"
        names[-1] = "features"
        if rank == 4 and axis == 2 and shape[3] in sequences.lengths:  # attention probabilities (N, heads, T, T)
            names[1:] = ["heads", "queries", "keys"]
    elif rank == 2:
        names[1] = "features"
    elif not sequences.lengths and rank in SPATIAL:  # no token inputs: (N, C, …) is a convolution's
        names[1:] = ["channels", *SPATIAL[rank]]
    return names


def recorded_outputs(explorer: Explorer, path: str) -> list[RecordChoice]:
    """The forward records of ``path`` that replace and mean_ablate can patch in (a floating-point tensor kept),
    newest first, at most ``LISTED``."""
    choices: list[RecordChoice] = []
    for record in reversed(_forward_records(explorer, path)):
        tensor = record.tensor
        if tensor is not None and tensor.is_floating_point():
            choices.append({"step": record.step, "call": record.call, "shape": list(tensor.shape)})
            if len(choices) == LISTED:
                break
    return choices


def with_recorded_run(explorer: Explorer, path: str, edit: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
    """``edit`` (as ``parse_edit`` reads the page's list) with the recorded run a replace or mean_ablate names,
    ``{"step": 3, "call": 0}``, resolved to the Record of ``path``'s forward it names."""
    if edit and edit[0] in PATCH_EDITS and len(edit) == 2 and not isinstance(edit[1], (list, str)):
        return (edit[0], recorded_output(explorer, path, edit[0], edit[1]))
    return edit


def recorded_output(explorer: Explorer, path: str, name: str, ref: Any) -> Record:
    """The forward record of ``path`` that ``ref`` (``{"step": s, "call": c}``) names, for the edit ``name``; a
    ValueError naming the path, the step and how to get one when it is not kept."""
    step, call = (ref.get("step"), ref.get("call", 0)) if isinstance(ref, dict) else (None, None)
    if not _is_index(step) or not _is_index(call):
        raise ValueError(
            f"the widget sent {ref!r} as the recorded run of {name!r}; expected its step and call, such as "
            '{"step": 3, "call": 0}'
        )
    records = _forward_records(explorer, path)
    found = next((r for r in records if r.step == step and r.call == call), None)
    if found is not None:
        return found
    store = explorer.captures
    evicted = store.evicted and (not records or step < records[0].step)
    why = (
        f"the capture store evicted it (it keeps the newest records within memory_budget={store.memory_budget:,} "
        "bytes: raise memory_budget, or capture fewer modules)"
        if evicted
        else "it was never captured, or was cleared"
    )
    raise ValueError(
        f"{name} on {quoted(path)}: no forward capture of step {step} (call {call}) of this module is kept: {why}; "
        f"{HOW}"
    )


def _forward_records(explorer: Explorer, path: str) -> list[Record]:
    """The ``forward`` records the store keeps for ``path``, oldest first."""
    try:
        return explorer.captures[path].get("forward", [])
    except KeyError:
        return []


def _shape_at(explorer: Explorer, path: str) -> list[int | str] | None:
    """The output shape the shape probe gave the module at ``path``, or None."""
    node = tree_node(explorer.tree, path)
    return node["shape"] if node is not None else None


def _is_index(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0

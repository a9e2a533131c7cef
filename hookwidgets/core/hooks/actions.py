"""What a hook does when it fires: edits first, then capture, stats, print or the user's callable."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch

from ..capture.dtensor import is_dtensor, local_tensor
from ..capture.sharded import ShardedStats, layout, local_scope
from ..capture.stats import StatsMemo, tensor_stats
from ..capture.store import CaptureStore, Generation, Record, make_record
from ..model.nested import named_tensors as named_tensors  # re-exported: hooks and registration import it here
from ..model.scope import hidden_ops
from . import notes
from .notes import NoteKind
from .tensor_edits import PatchShapeError, apply_edits, without_patches

BUILTIN_ACTIONS = ("capture", "stats", "print")
"""The built-in actions by name: ``capture`` (the default), ``stats`` and ``print``; any callable is an action too."""

META_STATS = (
    "its tensors are on the meta device, which holds shapes and no values (the model's weights are meta: built "
    "under accelerate.init_empty_weights() or on device='meta'), so its records have no statistics; the capture "
    "action keeps the meta tensors, with their shapes"
)

LOCAL_SHARD_STATS = (
    "its tensors are DTensors sharded across ranks: its statistics are this rank's local shard's (each record's "
    "scope says so), since their reduction to the full tensor's is a collective every rank must take part in; make "
    "the explorer with collective=True on every rank to reduce them once per step"
)


@dataclass
class Firing:
    """One call of a hook: where it fired, and for which forward call.

    ``recompute``: a forward firing that repeats one in a backward (``torch.utils.checkpoint``). ``slots``: for a
    module backward hook, the positions of the values it is given that torch passes on (the tensors); ``()``
    when none takes a gradient, None when unknown.
    """

    path: str
    kind: str
    step: int
    call: int
    recompute: bool = False
    slots: tuple[int, ...] | None = None


def check_action(action: str | Callable[..., Any]) -> None:
    """A ValueError naming the valid actions for anything that is neither one of them nor callable."""
    if not callable(action) and action not in BUILTIN_ACTIONS:
        raise ValueError(f"unknown action {action!r}; choose one of {', '.join(BUILTIN_ACTIONS)} or pass a callable")


def perform(
    store: CaptureStore,
    action: str | Callable[..., Any],
    edits: tuple[Any, ...],
    copy: bool,
    firing: Firing,
    editable: Any,
    tensors_of: Callable[[Any], dict[str, torch.Tensor]],
    call_user: Callable[[Any], Any] | None = None,
    memo: StatsMemo | None = None,
    noted: Any = None,
    generation: Generation | None = None,
    skipped: Callable[[PatchShapeError], None] | None = None,
    sharded: ShardedStats | None = None,
) -> Any:
    """Run one firing; returns what the hook should return to torch (None leaves values unchanged).

    ``editable`` is the value edits apply to (args, output or gradients); ``tensors_of`` names the
    tensors to record from the edited value; ``call_user`` calls a user callable with it; ``memo``
    shares the statistics of a tensor that several hooks see; ``noted`` (the hook's ``HookInfo``) gets a note
    when the stats action meets a meta tensor, which has no values. ``generation``: the step's place in a generation;
    on a decode step a replace or mean_ablate tensor that does not fit is left out (``skipped`` is told why).
    ``sharded`` queues a DTensor's local statistics for their reduction across ranks, when every rank takes part.
    """
    if callable(action):
        return call_user(editable) if call_user is not None else None  # torch's own return semantics
    if edits:
        with hidden_ops():  # the edit's own autograd nodes must not shift the ids of the module's nodes
            try:
                edited = apply_edits(editable, edits)
            except PatchShapeError as exc:
                if generation is None or not generation.index:
                    raise
                # a patch of the prompt step's shape cannot fit a decode step's (one new token): left out there
                edited = apply_edits(editable, without_patches(edits))
                if skipped is not None:
                    skipped(exc)
    else:
        edited = editable
    tensors = tensors_of(edited)
    if action == "capture":
        store.add(
            make_record(
                firing.path,
                firing.kind,
                firing.step,
                firing.call,
                # make_record only reads the names and tensors (its parameter is a dict: invariant in the value)
                cast("dict[str, torch.Tensor | None]", tensors),
                copy,
                store.offload,
                firing.recompute,
                generation,
            )
        )
    elif action == "stats":
        name, primary = next(((n, t) for n, t in tensors.items() if t is not None), ("", None))
        if primary is not None and primary.is_meta:  # shapes and no values: nothing to summarize
            primary = None
            if noted is not None:
                notes.add(noted, META_STATS, NoteKind.META_STATS)
        lay, queued = None, False
        if primary is not None and is_dtensor(primary):  # its local shard's, never a collective from a hook
            lay, queued = sharded.plan(primary) if sharded is not None else (layout(primary), False)
            primary = local_tensor(primary)
            if noted is not None and lay.shards > 1 and not queued:
                notes.add(noted, LOCAL_SHARD_STATS, NoteKind.LOCAL_SHARD)
            elif noted is not None and queued:  # collective set since: reduced from now on
                notes.drop(noted, NoteKind.LOCAL_SHARD)
        reduce = memo.stats if memo is not None else tensor_stats
        stats = reduce(primary) if primary is not None else None
        if stats is not None and primary is not None and primary.is_complex():
            stats = {**stats, "magnitude": True}  # the statistics are of |x|: said wherever they are shown
        record = Record(
            firing.path,
            firing.kind,
            firing.step,
            firing.call,
            {},
            stats=stats,
            recompute=firing.recompute,
            generation=generation,
            scope=local_scope(lay, queued) if lay is not None else None,
        )
        store.add(record)
        if queued and sharded is not None and lay is not None and stats is not None:
            sharded.queue(record, lay, name)
    elif action == "print":
        print(describe_firing(firing, tensors))
    return edited if edits else None


def describe_firing(firing: Firing, tensors: Mapping[str, torch.Tensor | None]) -> str:
    """One line for the print action: where it fired and each tensor's shape, dtype and range (or None)."""
    parts = []
    for name, t in tensors.items():
        if t is None:
            parts.append(f"{name} is None")
            continue
        described = f"{name} {tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
        if t.numel() == 0:
            parts.append(f"{described} empty (0 elements)")
            continue
        if t.is_meta:
            parts.append(f"{described} on the meta device (no values)")
            continue
        stats = tensor_stats(t)  # a DTensor's local shard's, said after the values
        scope = local_scope(layout(t), False) if is_dtensor(t) else None
        parts.append(
            f"{described}{' magnitude' if t.is_complex() else ''} "
            f"mean={stats['mean']:.4g} std={stats['std']:.4g} min={stats['min']:.4g} max={stats['max']:.4g}"
            + (f" nan={int(stats['nan'])}" if stats["nan"] else "")
            + (f" inf={int(stats['inf'])}" if stats["inf"] else "")
            + (f" ({scope})" if scope else "")
        )
    again = " (recompute)" if firing.recompute else ""
    where = f"[step {firing.step}] {firing.path or '(model)'} {firing.kind} call {firing.call}{again}"
    return f"{where}: " + ("; ".join(parts) if parts else "no tensors")

"""What the registry keeps about each hook and each firing: plain data for display and export, and the handles
``attach()`` returns (``remove()`` and ``with``, as torch's ``RemovableHandle``)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from torch.utils.hooks import RemovableHandle

from ..capture.store import Generation
from ..display import display_name, quoted
from .notes import Notes
from .tensor_edits import describe_edit


class TimelineEvent(NamedTuple):
    """One hook firing, in the order it happened (``recompute``: repeated in a backward by a checkpoint)."""

    step: int
    """The step of the firing, as ``Record.step``."""
    phase: str
    """``"forward"`` or ``"backward"``."""
    path: str
    """The hook's path: where it fired."""
    kind: str
    """The hook's kind."""
    call: int
    """The module's forward call the firing belongs to, as ``Record.call``."""
    recompute: bool = False
    """A forward firing repeated in a backward by a checkpoint."""
    generation: Generation | None = None
    """For a step of a generation (``generate()``), which generation and decode index, as ``Record.generation``."""

    @property
    def target(self) -> str:
        """``path``, by the name ``attach()``'s first argument has (as ``HookInfo.target``)."""
        return self.path


class HeadPlan(NamedTuple):
    """Where a head ablation's hook goes: ``place`` ``input`` (a pre-hook on the projection at ``path``), ``output``
    (a forward hook on the module at ``path``, whose output is the context) or ``mha`` (the module re-run)."""

    place: str
    path: str
    heads: tuple[int, ...]
    dim: int


@dataclass
class HookInfo:
    """A live hook the explorer attached: what it does and how it fared."""

    path: str
    """The hook's place: a module path, a parameter name or an autograd node id (as the tree names it)."""
    kind: str
    """The hook kind, as attached."""
    action: str | Callable[..., Any] = "capture"
    """A built-in action's name, or your callable."""
    edit: tuple[Any, ...] = ()
    """The normalised edits, applied in order."""
    copy: bool = False
    """Whether captures are clones rather than detached references."""
    fired: int = 0
    """Times it fired; a forward a checkpoint recomputes in the backward is not counted again (``ex.timeline`` lists
    it with ``recompute=True``)."""
    steps: int = 0
    """Steps it fired in: a global hook fires on every module of a step, so ``fired`` sums over modules; this
    counts each step once."""
    last_error: str | None = None
    """The traceback text of its last failure."""
    spec: str = ""
    """The engine's kind: as ``kind``, except ``param_grad`` for ``grad`` on a parameter."""
    with_kwargs: bool = False
    """Whether a ``forward_pre``/``forward`` callable takes torch's ``kwargs`` form."""
    foreign: bool = False
    """A hook others attached: shown, and left alone."""
    active: bool = True
    """False once the hook was removed."""
    _notes: Notes = field(default_factory=Notes, repr=False, compare=False)  # by kind: notes.py
    _last_step: int | None = field(default=None, repr=False, compare=False)  # the step it last fired in

    _handles: list[RemovableHandle] = field(default_factory=list, repr=False)
    _heads: HeadPlan | None = field(default=None, repr=False, compare=False)  # an ablate_heads edit's (heads.py)
    # The registry that attached it, held weakly as torch's RemovableHandle holds its hook dict: None when made by
    # hand (hook_code takes those) or listed as someone else's.
    _owner: weakref.ref[_Owner] | None = field(default=None, repr=False, compare=False)

    def count(self, step: int) -> None:
        """Count one firing in ``step``: ``fired`` always, ``steps`` when the step is new to it."""
        self.fired += 1
        if step != self._last_step:
            self._last_step = step
            self.steps += 1

    @property
    def target(self) -> str:
        """``path``, by the name ``attach()``'s first argument has."""
        return self.path

    @property
    def note(self) -> str | None:
        """Why it stays silent (e.g. "not armed: the forward ran without grad"), or that the capture budget holds
        less than one step and which of its records went; None when nothing needs saying."""
        return self._notes.text

    @note.setter
    def note(self, text: str | None) -> None:
        self._notes.set_text(text)

    def remove(self) -> None:
        """Remove this hook as ``ex.detach(path, kind)`` would; does nothing once it is gone, or when a later
        ``attach()`` of the same path and kind replaced it (the replacement stays)."""
        if self.foreign:
            raise ValueError(
                f"the {self.kind} hook on {quoted(self.path)} is not the explorer's (foreign=True): hookwidgets "
                "never removes others' hooks; call remove() on the handle its register_*_hook call returned"
            )
        owner = self._owner() if self._owner is not None else None
        if owner is not None:
            owner.remove([self])

    def __enter__(self) -> HookInfo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    @property
    def head_plan(self) -> HeadPlan | None:
        """For an ``ablate_heads`` edit, where its own hook zeroes the heads: ``(place, path, heads, dim)``, ``place``
        ``"input"`` (a pre-hook on the projection at ``path``), ``"output"`` (a forward hook on the module at
        ``path``) or ``"mha"`` (``nn.MultiheadAttention`` re-run); None for any other hook."""
        return self._heads

    @property
    def action_name(self) -> str:
        """The action as text: a built-in name or the callable's name."""
        return self.action if isinstance(self.action, str) else getattr(self.action, "__name__", "callable")

    def __repr__(self) -> str:
        if self.foreign:
            action = display_name(self.action_name)
            return f"<foreign hook {self.kind} on {quoted(self.path)}: {action} (not the explorer's; left alone)>"
        edit = f" + edit {[tuple(describe_edit(e)) for e in self.edit]}" if self.edit else ""
        error = ", last error: " + self.last_error.splitlines()[-1] if self.last_error else ""
        note = f", note: {self.note}" if self.note else ""
        action = display_name(self.action_name)
        return f"<hook {self.kind} on {quoted(self.path)}: {action}{edit}, fired {self.fired}{error}{note}>"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for display and export: ``path``, ``kind``, ``action``, ``edit``,
        ``fired``, ``error``, ``note``, ``foreign``."""
        return {
            "path": self.path,
            "kind": self.kind,
            "action": self.action_name,
            "edit": [describe_edit(e) for e in self.edit],
            "fired": self.fired,
            "error": self.last_error,
            "note": self.note,
            "foreign": self.foreign,
        }


class _Owner(Protocol):
    def remove(self, infos: Iterable[HookInfo]) -> list[HookInfo]: ...


class HookGroup(list[HookInfo]):
    """What ``attach()`` returns for a list of kinds: their ``HookInfo``s in the order given, and a handle on them
    all (``remove()``, ``with``)."""

    def remove(self) -> None:  # type: ignore[override]  # public API: removes the group's hooks, not a list item
        """Remove each hook of the group that is still attached (``HookInfo.remove``), telling the explorer's
        subscribers once."""
        owners: dict[int, tuple[_Owner, list[HookInfo]]] = {}
        for info in self:
            if info.foreign:
                info.remove()  # refused, with why
            owner = info._owner() if info._owner is not None else None
            if owner is not None:
                owners.setdefault(id(owner), (owner, []))[1].append(info)
        for owner, infos in owners.values():
            owner.remove(infos)

    def __enter__(self) -> HookGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __repr__(self) -> str:
        return f"HookGroup({list.__repr__(self)})"

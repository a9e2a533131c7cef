"""What the registry keeps about each hook and each firing: plain data for display and export."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from torch.utils.hooks import RemovableHandle

from ..display import display_name, quoted
from .edits import describe_edit


class TimelineEvent(NamedTuple):
    """One hook firing, in the order it happened (``recompute``: repeated in a backward by a checkpoint)."""

    step: int
    """The step of the firing, as ``Record.step``."""
    phase: str
    """``"forward"`` or ``"backward"``."""
    target: str
    """The hook's path."""
    kind: str
    """The hook's kind."""
    call: int
    """The module's forward call the firing belongs to, as ``Record.call``."""
    recompute: bool = False
    """A forward firing repeated in a backward by a checkpoint."""


@dataclass
class HookInfo:
    """A live hook the explorer attached: what it does and how it fared."""

    target: str
    """The hook's path: a module path, a parameter name or an autograd node id."""
    kind: str
    """The hook kind, as attached."""
    action: str | Callable = "capture"
    """A built-in action's name, or your callable."""
    edit: tuple = ()
    """The normalised edits, applied in order."""
    copy: bool = False
    """Whether captures are clones rather than detached references."""
    fired: int = 0
    """Times it fired."""
    last_error: str | None = None
    """The traceback text of its last failure."""
    note: str | None = None
    """Why it stays silent (e.g. "not armed: the forward ran without grad"), or that the capture budget holds
    less than one step and which of its records went."""
    spec: str = ""
    """The engine's kind: as ``kind``, except ``param_grad`` for ``grad`` on a parameter."""
    with_kwargs: bool = False
    """Whether a ``forward_pre``/``forward`` callable takes torch's ``kwargs`` form."""
    foreign: bool = False
    """A hook others attached: shown, and left alone."""
    active: bool = True
    """False once the hook was removed."""
    _handles: list[RemovableHandle] = field(default_factory=list, repr=False)
    _heads: Any = field(default=None, repr=False, compare=False)  # an ablate_heads edit's HeadPlan (heads.py)

    @property
    def action_name(self) -> str:
        """The action as text: a built-in name or the callable's name."""
        return self.action if isinstance(self.action, str) else getattr(self.action, "__name__", "callable")

    def __repr__(self) -> str:
        if self.foreign:
            action = display_name(self.action_name)
            return f"<foreign hook {self.kind} on {quoted(self.target)}: {action} (not the explorer's; left alone)>"
        edit = f" + edit {[tuple(describe_edit(e)) for e in self.edit]}" if self.edit else ""
        error = ", last error: " + self.last_error.splitlines()[-1] if self.last_error else ""
        note = f", note: {self.note}" if self.note else ""
        action = display_name(self.action_name)
        return f"<hook {self.kind} on {quoted(self.target)}: {action}{edit}, fired {self.fired}{error}{note}>"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for display and export: ``target``, ``kind``, ``action``, ``edit``, ``fired``, ``error``,
        ``note``, ``foreign``."""
        return {
            "target": self.target,
            "kind": self.kind,
            "action": self.action_name,
            "edit": [describe_edit(e) for e in self.edit],
            "fired": self.fired,
            "error": self.last_error,
            "note": self.note,
            "foreign": self.foreign,
        }

"""What the registry keeps about each hook and each firing: plain data for display and export."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from torch.utils.hooks import RemovableHandle

from ..display import display_name, quoted


class TimelineEvent(NamedTuple):
    """One hook firing, in the order it happened (``recompute``: repeated in a backward by a checkpoint)."""

    step: int
    phase: str
    target: str
    kind: str
    call: int
    recompute: bool = False


@dataclass
class HookInfo:
    """A live hook the explorer attached: what it does and how it fared."""

    target: str
    kind: str
    action: str | Callable = "capture"
    edit: tuple = ()
    copy: bool = False
    fired: int = 0
    last_error: str | None = None
    note: str | None = None
    spec: str = ""  # the engine's kind: as ``kind``, except "param_grad" for "grad" on a parameter
    with_kwargs: bool = False
    foreign: bool = False
    active: bool = True
    _handles: list[RemovableHandle] = field(default_factory=list, repr=False)

    @property
    def action_name(self) -> str:
        """The action as text: a built-in name or the callable's name."""
        return self.action if isinstance(self.action, str) else getattr(self.action, "__name__", "callable")

    def __repr__(self) -> str:
        if self.foreign:
            action = display_name(self.action_name)
            return f"<foreign hook {self.kind} on {quoted(self.target)}: {action} (not the explorer's; left alone)>"
        edit = f" + edit {list(self.edit)}" if self.edit else ""
        error = ", last error: " + self.last_error.splitlines()[-1] if self.last_error else ""
        note = f", note: {self.note}" if self.note else ""
        action = display_name(self.action_name)
        return f"<hook {self.kind} on {quoted(self.target)}: {action}{edit}, fired {self.fired}{error}{note}>"

    def as_dict(self) -> dict[str, Any]:
        """Plain data for display and export."""
        return {
            "target": self.target,
            "kind": self.kind,
            "action": self.action_name,
            "edit": [list(e) for e in self.edit],
            "fired": self.fired,
            "error": self.last_error,
            "note": self.note,
            "foreign": self.foreign,
        }

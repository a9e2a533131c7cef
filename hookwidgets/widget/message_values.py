"""What the page's messages carry, read into the engine's values: an edit, a score, a position, a class; a
ValueError naming the forms for anything else."""

from __future__ import annotations

from typing import Any


def parse_edit(edit: Any) -> Any:
    """The ``edit=`` value for an edit the browser sent as a list (``["scale", 2]``); None for none."""
    if edit is None or edit == [] or edit == "":
        return None
    if isinstance(edit, list) and edit and isinstance(edit[0], str):
        return tuple(edit)
    raise ValueError(f"the widget sent an edit {edit!r}; expected a list such as ['scale', 2.0]")


def score_choice(value: Any, what: str = "target") -> int | str:
    """A target the page picked: "top" (also for null), "loss", or an integer class or token id (see
    ``class_choice``); a ValueError naming the forms for anything else."""
    if value == "loss":
        return "loss"
    try:
        chosen = class_choice(value, what)
    except ValueError:
        raise ValueError(
            f'the widget sent the {what} {value!r}; expected "top", "loss" or a class or token id such as 3'
        ) from None
    return "top" if chosen is None else chosen


def position_choice(value: Any) -> int | None:
    """The sequence position the page picked: None for null (the last position), else an integer (negative counts
    from the end); a ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f"the widget sent the run position {value!r}; expected an integer such as -1, or null")


def class_choice(value: Any, what: str = "class") -> int | None:
    """A class the page picked: None for "top" or null (the page's ``Number()`` of an empty choice is NaN,
    which JSON sends as null), else an integer class index; a ValueError for anything else (1.5, "3x")."""
    if value is None or value == "top":
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError(f'the widget sent the {what} {value!r}; expected "top" or a class index such as 3')

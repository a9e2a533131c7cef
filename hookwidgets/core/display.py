"""How the explorer shows a model's strings to people: invisible characters escaped, long names cut.

Module names, class names and parameter names come from the model, and Python allows any string there:
a newline, a right-to-left override (U+202E) that makes the text after it read backwards, a
zero-width space, or 100,000 characters. Text the explorer writes (notes, warnings, errors, figure
labels, generated code's comments) shows them through these functions; the data (``ex.tree``,
capture keys, graph ids) keeps them whole.
"""

from __future__ import annotations

SHOWN_LENGTH = 200
"""Characters of a name that are shown; a longer one is cut there and ends in "…"."""


def visible(text: str) -> str:
    """``text`` with every character that does not print escaped as a repr escapes it (``\\n``, ``\\u202e``).

    Those are line breaks and other control characters, format characters (bidi controls, zero-width
    spaces), separators other than the space, and unassigned or private-use code points: the characters
    ``str.isprintable`` rejects.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def shortened(name: str) -> str:
    """``name``, or its first ``SHOWN_LENGTH`` characters and "…" when it is longer."""
    return name if len(name) <= SHOWN_LENGTH else name[:SHOWN_LENGTH] + "…"


def display_name(name: str) -> str:
    """A model's name as plain text for people: cut to ``SHOWN_LENGTH`` characters, invisible characters escaped."""
    return visible(shortened(_chars(name)))


def quoted(name: object) -> str:
    """A model's name quoted in a message, as ``{name!r}`` writes it but cut to ``SHOWN_LENGTH`` characters."""
    return repr(shortened(_chars(name)))


def _chars(name: object) -> str:
    """The characters of a name as a plain str (a str subclass's own methods are not asked)."""
    return str.__str__(name) if isinstance(name, str) else str(name)

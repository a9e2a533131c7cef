"""The display of model names: invisible characters escaped as a repr escapes them, long names cut."""

from hookwidgets.core.display import SHOWN_LENGTH, display_name, quoted, visible

# Bidi overrides, isolates and marks, zero-width characters, the Arabic letter mark, a line break.
INVISIBLE = "\u202e\u202a\u2066\u2069\u200b\u200c\u200d\u200e\u200f\u061c\n"
BIDI = "txt\u202eexe"


def test_display_escapes_every_invisible_character_and_cuts_long_names():
    assert (
        visible("a" + INVISIBLE + "b") == "a\\u202e\\u202a\\u2066\\u2069\\u200b\\u200c\\u200d\\u200e\\u200f\\u061c\\nb"
    )
    assert visible("layer1.0 conv·é") == "layer1.0 conv·é"  # printable text, spaces included, is left alone
    long = "x" * 100_000
    assert display_name(long) == "x" * SHOWN_LENGTH + "…" and SHOWN_LENGTH == 200
    assert quoted(long) == repr("x" * 200 + "…") and quoted(BIDI) == repr(BIDI) == "'txt\\u202eexe'"

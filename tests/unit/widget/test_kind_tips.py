"""Every hook kind the engine knows has its one-line tooltip in the page (js/src/kinds.js)."""

from __future__ import annotations

import re
from pathlib import Path

from hookwidgets.core.hooks.kinds import KINDS
from hookwidgets.widget.state import ALL_KINDS

KINDS_JS = Path(__file__).parents[3] / "js" / "src" / "kinds.js"


def test_every_kind_has_a_tooltip():
    text = KINDS_JS.read_text()
    table = text[text.index("const TIPS = {") : text.index("};", text.index("const TIPS = {"))]
    tips = set(re.findall(r"^\s+(\w+):", table, flags=re.MULTILINE))
    assert tips == set(KINDS) | set(ALL_KINDS), "a tooltip per kind, and none for a kind that does not exist"

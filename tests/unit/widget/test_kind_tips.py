"""Every hook kind has its one-line tooltip, and the page reads the kinds from the kernel: js/src keeps no list of
them."""

from __future__ import annotations

import re
from pathlib import Path

from hookwidgets.core import KINDS
from hookwidgets.widget.payloads import kinds_payload

JS_SOURCES = Path(__file__).parents[3] / "js" / "src"


def test_every_kind_has_a_one_line_tooltip_the_page_gets_from_the_kernel():
    sent = kinds_payload()
    assert [row["name"] for row in sent] == list(KINDS), "a row per kind, and none for a kind that does not exist"
    for row in sent:
        assert len(row["tip"]) > 20 and "\n" not in row["tip"], row["name"]
    tips = {(row["kind"], row["family"]): row["tip"] for row in sent}
    assert "module's output" in tips[("grad", "module")]
    assert "parameter's gradient" in tips[("grad", "param")]  # a parameter's grad is told from a module's
    assert tips[("forward", "module")] == "the module's output, each time its forward returns"


def test_the_page_names_no_hook_kind_of_its_own():
    # the kind names that are no plain word (forward, grad and node are also the page's words for other things)
    named = [name for name in KINDS if "_" in name]
    found = [
        f"{path.relative_to(JS_SOURCES)}: {name}"
        for path in sorted(JS_SOURCES.rglob("*.js"))
        for name in named
        if re.search(rf"""["'`]{name}["'`]|^\s*{name}:""", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
    ]
    assert found == [], "the page reads the kinds from the hook_kinds traitlet"

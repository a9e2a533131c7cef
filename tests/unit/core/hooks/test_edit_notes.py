"""The one sentence every analysis uses to say whether it ran with the user's edits."""

from __future__ import annotations

from torch import nn

from hookwidgets.core import Explorer, edits_note


def _explorer() -> Explorer:
    return Explorer(nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)))


def test_no_edit_says_nothing() -> None:
    ex = _explorer()
    ex.attach("0", "forward", action="capture")
    assert ex.edits == []
    assert edits_note(ex.own_hooks, applied=True) == ""
    assert edits_note(ex.own_hooks, applied=False) == ""


def test_edits_are_named_in_attach_order_with_or_without() -> None:
    ex = _explorer()
    ex.attach("0", "forward", edit=("scale", 0.5))
    ex.attach("2", "forward", action="capture", edit=[("zero",)])
    assert ex.edits == ["scale 0.5 at forward on '0'", "zero at forward on '2'"]
    assert (
        edits_note(ex.own_hooks, applied=True) == "with your edits: scale 0.5 at forward on '0'; zero at forward on '2'"
    )
    without = edits_note(ex.own_hooks, applied=False)
    assert without.startswith("without your edits (scale 0.5 at forward on '0'") and "unedited model" in without
    ex.detach()
    assert ex.edits == []


def test_indices_read_as_the_page_writes_them() -> None:
    ex = _explorer()
    ex.attach("0", "forward", edit=("ablate", (1, 3), -1))
    assert ex.edits == ["ablate 1,3 -1 at forward on '0'"]  # not "(1, 3)"


def test_a_function_hook_is_said_not_to_have_run_in_an_analysis() -> None:
    ex = _explorer()

    def double(module, args, output):
        return output * 2

    ex.attach("2", "forward", action=double)
    ex.attach("0", "forward", edit=("zero",))
    note = edits_note(ex.own_hooks, applied=True)
    assert note == (
        "with your edits: zero at forward on '0'; your functions did not run in it "
        "(double at forward on '2'): a value they return is not applied"
    )
    ex.detach("0")
    assert edits_note(ex.own_hooks, applied=False).startswith("your functions did not run in it (double at forward")

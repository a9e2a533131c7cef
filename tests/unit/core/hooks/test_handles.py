"""What attach() returns is a handle, as torch's RemovableHandle: remove() (idempotent) and ``with`` leave the model
as detach() does, and a handle removes only the hook it attached, never the one that replaced it."""

from __future__ import annotations

import pytest
import torch
import torch.nn.modules.module as module_globals
from torch import nn

from hookwidgets.core import Explorer, HookGroup, HookInfo
from tests.conftest import hook_state


@pytest.fixture
def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))


@pytest.fixture
def x() -> torch.Tensor:
    return torch.randn(3, 4, generator=torch.Generator().manual_seed(1))


@pytest.fixture(autouse=True)
def _global_flag():
    """Every test starts and ends with torch's global full-backward flag as a fresh process has it."""
    assert module_globals._global_is_full_backward_hook is None
    yield
    module_globals._global_is_full_backward_hook = None


# (path, kind): module kinds, a full backward hook (which sets torch's flag), global kinds, parameter kinds
HANDLES = [
    ("0", "forward_pre"),
    ("0", "forward"),
    ("0", "backward"),
    ("0", "backward_pre"),
    ("2", "grad"),
    ("", "global_forward"),
    ("", "global_backward"),
    ("0.weight", "grad"),
    ("0.weight", "post_accumulate"),
]


@pytest.mark.parametrize(("path", "kind"), HANDLES)
def test_remove_leaves_every_hook_dict_and_flag_as_found(mlp, x, path, kind):
    before = hook_state(mlp)
    with Explorer(mlp, x) as ex:
        info = ex.attach(path, kind, action="stats")
        assert isinstance(info, HookInfo) and hook_state(mlp) != before
        ex.run(x, target=0)
        fired = info.fired
        assert fired
        info.remove()
        assert hook_state(mlp) == before and ex.hooks == [] and not info.active
        mlp(x).sum().backward()  # nothing of it fires any more
        assert info.fired == fired
        info.remove()  # idempotent, as RemovableHandle.remove
        assert hook_state(mlp) == before and module_globals._global_is_full_backward_hook is None


def test_remove_puts_back_what_detach_puts_back(mlp, x):
    with Explorer(mlp, x) as ex:
        ex.attach("0", ["backward", "forward"])
        ex.detach("0", "backward")
        detached = hook_state(mlp)
        ex.attach("0", "backward").remove()
        assert hook_state(mlp) == detached  # the forward hook stays; the backward flag is gone as with detach


def test_with_removes_the_hook_at_the_end_of_the_block(mlp, x):
    before = hook_state(mlp)
    with Explorer(mlp, x) as ex:
        with ex.attach("0", "backward") as info:
            assert ex.hooks == [info]
            ex.run(x, target=0)
        assert info.fired == 1 and ex.hooks == [] and hook_state(mlp) == before
        with pytest.raises(ZeroDivisionError), ex.attach("2", "forward"):
            raise ZeroDivisionError  # an exception in the block removes it too
        assert ex.hooks == [] and hook_state(mlp) == before


def test_a_list_of_kinds_gives_a_group_that_reads_as_a_list_and_removes_them_all(mlp, x):
    before = hook_state(mlp)
    with Explorer(mlp, x) as ex:
        group = ex.attach("0", ["forward", "backward", "grad"])
        assert isinstance(group, HookGroup) and isinstance(group, list)
        assert group == ex.hooks and len(group) == 3 and [h.kind for h in group] == ["forward", "backward", "grad"]
        forward, backward, grad = group  # today's uses of the list keep working
        assert group[0] is forward and group[1] is backward and group[-1:] == [grad]
        ex.attach("2", "forward")
        group.remove()
        assert [(h.target, h.kind) for h in ex.hooks] == [("2", "forward")]
        group.remove()
        ex.detach()
        assert hook_state(mlp) == before
        with ex.attach("", ["global_forward", "global_grad"], action="stats") as both:
            ex.run(x, target=0)
        assert all(h.fired for h in both) and ex.hooks == [] and hook_state(mlp) == before


def test_remove_after_a_reattach_leaves_the_replacement(mlp, x):
    before = hook_state(mlp)
    with Explorer(mlp, x) as ex:
        first = ex.attach("0", "backward")
        second = ex.attach("0", "backward", action="stats")  # (target, kind) is unique: this one replaces it
        first.remove()
        assert ex.hooks == [second]
        ex.run(x, target=0)
        assert second.fired == 1 and first.fired == 0 and mlp[0]._is_full_backward_hook is True
        group = ex.attach("2", ["forward", "grad"])
        ex.attach("2", "grad", action="stats")
        group.remove()  # its forward hook goes; the grad hook that replaced its own stays
        assert [(h.target, h.kind, h.action) for h in ex.hooks] == [("0", "backward", "stats"), ("2", "grad", "stats")]
        second.remove()
        ex.hooks[-1].remove()
        assert hook_state(mlp) == before


def test_remove_after_detach_or_close_does_nothing(mlp, x):
    before = hook_state(mlp)
    ex = Explorer(mlp, x)
    info = ex.attach("0", "forward")
    ex.detach()
    info.remove()
    later = ex.attach("0", "forward")
    ex.close()
    later.remove()
    assert hook_state(mlp) == before


def test_the_subscribers_hear_a_remove_as_they_hear_a_detach(mlp, x):
    with Explorer(mlp, x) as ex:
        events = []
        ex.subscribe(events.append)
        info = ex.attach("0", "forward")
        group = ex.attach("2", ["forward", "grad"])
        info.remove()
        info.remove()
        group.remove()
        detached = [e for e in events if e["type"] == "detached"]
        assert [(e["reason"], [(h["path"], h["kind"]) for h in e["hooks"]]) for e in detached] == [
            ("detach", [("0", "forward")]),
            ("detach", [("2", "forward"), ("2", "grad")]),  # one event for the group
        ]


def test_a_foreign_hook_is_never_removed(mlp, x):
    handle = mlp[0].register_forward_hook(lambda module, args, output: None)
    with Explorer(mlp, x) as ex:
        (foreign,) = ex.hooks
        assert foreign.foreign
        with pytest.raises(ValueError, match=r"not the explorer's \(foreign=True\): hookwidgets never removes"):
            foreign.remove()
        assert len(mlp[0]._forward_hooks) == 1
    handle.remove()

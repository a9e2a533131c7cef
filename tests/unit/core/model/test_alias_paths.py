"""A module or parameter registered under two names is hooked, recorded and detached under its first name."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from tests.conftest import Aliased


@pytest.fixture
def explorer():
    with Explorer(Aliased(), example_inputs=torch.randn(2, 4)) as ex:
        yield ex


def test_a_hook_asked_for_at_an_alias_sits_at_the_first_name(explorer):
    with pytest.warns(UserWarning, match=r"'first' is another path to 'layers.0'"):
        info = explorer.attach("first", "forward")
    assert info.target == "layers.0" and "'first' is another path to 'layers.0'" in info.note
    explorer.run()
    assert list(explorer.captures["layers.0"]) == ["forward"]  # where the tree and the graph show the module
    assert "first" not in explorer.captures


def test_attaching_again_by_the_other_name_replaces_instead_of_doubling(explorer):
    explorer.attach("layers.0", "forward")
    with pytest.warns(UserWarning, match="another path"):
        explorer.attach("first", "forward")
    assert [(h.target, h.kind) for h in explorer.hooks] == [("layers.0", "forward")]
    module = explorer.model.layers[0]
    assert len(module._forward_hooks) == 1
    explorer.run()
    assert len(explorer.captures["layers.0"]["forward"]) == 1  # fired once, not once per name


def test_detach_by_the_alias_removes_the_hook(explorer):
    explorer.attach("layers.0", "forward")
    removed = explorer.detach("first")
    assert [h.target for h in removed] == ["layers.0"] and explorer.hooks == []
    assert len(explorer.model.layers[0]._forward_hooks) == 0


def test_a_shared_parameter_is_hooked_under_its_first_name():
    model = Aliased()
    model.extra = nn.Linear(4, 4)
    model.extra.weight = model.layers[0].weight  # tied weights: one parameter, two names
    with Explorer(model, example_inputs=torch.randn(2, 4)) as ex:
        with pytest.warns(UserWarning, match=r"'extra.weight' is another path to 'layers.0.weight'"):
            info = ex.attach("extra.weight", "grad")
        assert info.target == "layers.0.weight"
        ex.run(target=0)
        assert ex.captures["layers.0.weight"]["grad"][-1].tensor.shape == (4, 4)


def test_a_name_used_once_is_kept_as_given(explorer, recwarn):
    info = explorer.attach("layers.1", "forward")
    assert info.target == "layers.1" and info.note is None
    assert not [w for w in recwarn if "another path" in str(w.message)]


def test_global_kinds_record_a_shared_module_under_its_first_name(explorer):
    explorer.attach("", "global_forward")
    explorer.run()
    assert set(explorer.captures) == {"", "layers", "layers.0", "layers.1"}
    assert [e.path for e in explorer.timeline] == ["layers.0", "layers.1", "layers", ""]

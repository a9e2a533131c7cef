import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer
from hookwidgets.core.model.paths import resolve_module, resolve_path


def test_resolves_nested_paths_and_the_root(cnn):
    assert resolve_module(cnn, "features.conv") is cnn.features.conv
    assert resolve_module(cnn, "") is cnn


def test_unknown_path_names_the_closest_paths(cnn):
    with pytest.raises(KeyError) as err:
        resolve_module(cnn, "features.cnv")
    message = str(err.value)
    assert "no module 'features.cnv' in SmallCNN" in message
    assert "did you mean 'features.conv'" in message


def test_unknown_path_without_close_match_lists_modules(cnn):
    with pytest.raises(KeyError, match="its modules are 'features', 'features.conv'"):
        resolve_module(cnn, "zzzzzzzzzzzz")


def test_model_without_children_accepts_only_the_root():
    lin = nn.Linear(2, 2)
    assert resolve_module(lin, "") is lin
    with pytest.raises(KeyError, match="has no submodules"):
        resolve_module(lin, "weight_layer")


def test_non_string_path_is_a_type_error(cnn):
    with pytest.raises(TypeError, match="must be a string"):
        resolve_module(cnn, 3)


def test_a_parametrized_weight_points_to_the_tensors_it_is_computed_from():
    torch.manual_seed(0)
    model = nn.Sequential(torch.nn.utils.parametrizations.weight_norm(nn.Linear(4, 3)))
    x = torch.randn(2, 4)
    with Explorer(model) as ex:
        with pytest.raises(KeyError) as error:
            ex.attach("0.weight", "grad")
        message = str(error.value)
        assert "'0.weight' is no parameter: a parametrization (_WeightNorm) computes it from" in message
        assert "'0.parametrizations.weight.original0', '0.parametrizations.weight.original1'" in message
        # both suggestions work: the computed weight is the forward output of the parametrization module
        computed = ex.attach("0.parametrizations.weight", "forward")
        ex.attach("0.parametrizations.weight.original1", "grad")
        ex.run(x, target=0)
        assert computed.fired >= 1
        torch.testing.assert_close(ex.captures["0.parametrizations.weight"]["forward"][-1].tensor, model[0].weight)
        assert ex.captures["0.parametrizations.weight.original1"]["grad"][-1].tensor.shape == (3, 4)


def test_resolving_a_parametrized_name_does_not_compute_it():
    """get_submodule would read ``0.weight`` with getattr, running the parametrization and its hooks."""
    model = nn.Sequential(torch.nn.utils.parametrizations.weight_norm(nn.Linear(4, 3)))
    computed = []
    model[0].parametrizations.weight.register_forward_hook(lambda *args: computed.append(1))
    with pytest.raises(KeyError, match="is no parameter: a parametrization"):
        resolve_path(model, "0.weight")
    with pytest.raises(KeyError, match="no module '0.weight'"):
        resolve_module(model, "0.weight")
    assert computed == []
    assert resolve_path(model, "0.parametrizations.weight") == ("module", model[0].parametrizations.weight)

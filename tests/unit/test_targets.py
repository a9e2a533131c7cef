import pytest
from torch import nn

from hookwidgets.core.targets import resolve_module


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

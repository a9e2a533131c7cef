"""summary(as_frame=True): the summary's rows as a pandas DataFrame, same columns and values; summary() unchanged."""

from __future__ import annotations

import math
import sys

import pandas
import pytest
import torch
from torch import nn

from hookwidgets.core import Explorer


def mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))


def same(a: object, b: object) -> bool:
    """Equal, a missing value (None in a dict, NaN in a frame) and NaN counting as equal to each other."""
    missing = [v is None or (isinstance(v, float) and math.isnan(v)) for v in (a, b)]
    return all(missing) or (not any(missing) and a == b)


def test_the_frame_holds_the_summary_rows_with_their_columns_and_values():
    model = mlp()
    with Explorer(model) as ex:
        ex.attach("", "global_forward", action="stats")
        ex.attach("2", "grad", action="stats")  # one layer with gradient columns: the others have none (NaN)
        for _ in range(2):
            model(torch.randn(3, 4)).sum().backward()
        rows = ex.summary()
        frame = ex.summary(as_frame=True)
    assert isinstance(rows, list) and isinstance(frame, pandas.DataFrame)  # the default is as before
    assert len(frame) == len(rows) == 2 * 4  # one row per layer and step (the model itself is path "")
    columns = list(dict.fromkeys(name for row in rows for name in row))
    assert list(frame.columns) == columns and columns[:2] == ["step", "path"]
    assert "grad_norm" in columns and "act_zero_fraction" in columns
    for row, (_, framed) in zip(rows, frame.iterrows(), strict=True):
        assert all(same(row.get(name), framed[name]) for name in columns), row


def test_an_empty_summary_is_a_frame_with_its_key_columns():
    with Explorer(mlp()) as ex:
        frame = ex.summary(as_frame=True)
    assert frame.empty and list(frame.columns) == ["step", "path"]


def test_without_pandas_the_error_names_it_and_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with Explorer(mlp()) as ex:
        assert ex.summary() == []  # the default needs no pandas
        with pytest.raises(ImportError, match=r"summary\(as_frame=True\) needs pandas, .*: pip install pandas"):
            ex.summary(as_frame=True)

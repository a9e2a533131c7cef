"""The summary's rows as a pandas DataFrame, for those who analyse it there; pandas is imported only when asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas

KEY_COLUMNS = ("step", "path")
"""The columns that name a row: the step and the layer's path."""


def summary_frame(rows: list[dict[str, Any]]) -> pandas.DataFrame:
    """``rows`` (``summary_rows``) as a DataFrame: one row each, ``step`` and ``path`` first, then the
    statistics' columns in the order they first appear (NaN where a row has none)."""
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(
            "summary(as_frame=True) needs pandas, which is not installed: pip install pandas "
            "(or call summary() for the same rows as a list of dicts)"
        ) from exc
    columns = dict.fromkeys(KEY_COLUMNS)
    for row in rows:
        columns.update(dict.fromkeys(row))
    return pandas.DataFrame(rows, columns=list(columns))

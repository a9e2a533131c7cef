"""Deprecated, kept importable for one release: captures no longer move into a pool of mapped memory (they stay
references to the model's own tensors), and ``SHARED.clear()`` does nothing. Defined in ``capture.retired``."""

from .capture.retired import SHARED

__all__ = ["SHARED"]

"""What hooks capture: the store and its records, statistics and their kernel, export and load."""

from .export import export_captures, load_captures
from .stats import STAT_KEYS, combine_stats, tensor_stats
from .store import DEFAULT_MEMORY_BUDGET, CaptureStore, Record, make_record

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "STAT_KEYS",
    "CaptureStore",
    "Record",
    "combine_stats",
    "export_captures",
    "load_captures",
    "make_record",
    "tensor_stats",
]

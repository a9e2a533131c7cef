"""What hooks capture: the store and its records, statistics and their kernel, export and load, the views that fit.

Internal: the public names are ``hookwidgets.core``'s; what is here may change without notice.
"""

from .export import export_captures, load_captures
from .stats import STAT_KEYS, combine_stats, tensor_stats
from .store import DEFAULT_MEMORY_BUDGET, CaptureStore, Generation, Record, make_record
from .views import VIEWS, is_attention_source, tensor_views

__all__ = [
    "DEFAULT_MEMORY_BUDGET",
    "STAT_KEYS",
    "VIEWS",
    "CaptureStore",
    "Generation",
    "Record",
    "combine_stats",
    "export_captures",
    "is_attention_source",
    "load_captures",
    "make_record",
    "tensor_stats",
    "tensor_views",
]

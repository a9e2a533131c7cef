"""An import path kept for existing code: lazy modules (nn.LazyLinear…), MaterializedWarning.

Defined in ``hookwidgets.core.model.lazy``.
"""

from .model.lazy import MaterializedWarning, has_lazy, lazy_modules

__all__ = ["MaterializedWarning", "has_lazy", "lazy_modules"]

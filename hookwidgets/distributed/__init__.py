"""DDP communication-hook inspector (torch.distributed): a layer of its own, beside core.

Its public names are these; the modules inside are internal.
"""

from .inspector import DDPInspector
from .logs import load_records

__all__ = ["DDPInspector", "load_records"]

"""DDP communication-hook inspector (torch.distributed): a layer of its own, beside core."""

from .inspector import DDPInspector
from .logs import load_records

__all__ = ["DDPInspector", "load_records"]

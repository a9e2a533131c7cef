"""torch.distributed: the DDP communication-hook inspector, and the run log of every rank (``ex.record_to``, read
back by ``open_run``): a layer of its own, beside core.

Its public names are these; the modules inside are internal.
"""

from .inspector import DDPInspector
from .logs import load_records
from .run_view import RunView, open_run
from .run_writer import RunLog

__all__ = ["DDPInspector", "RunLog", "RunView", "load_records", "open_run"]

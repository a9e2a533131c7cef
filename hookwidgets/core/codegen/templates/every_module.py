"""The modules that take a global kind's hooks: every module of the model."""

import torch

from .paths import model

# --- generated code ---

# Global kinds: torch's process-wide module hooks would run for every model in the process, so each global
# kind is a hook on every module of this model instead, put first among the module's own hooks (torch runs
# its global hooks before them). A module added to the model later gets the hooks when this code runs again.
_every_module = [m for m in model.modules() if not isinstance(m, torch.jit.ScriptModule)]  # those take no hooks

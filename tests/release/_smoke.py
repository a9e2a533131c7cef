"""Run by the fresh environment's python (``python -I``): hookwidgets as a user who pip-installed the wheel gets it.

Prints one JSON line: what importing the package pulled in, where it came from, and what an explorer did.
"""

import importlib.metadata
import json
import sys
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.nn.modules import module as torch_module

import hookwidgets
import hookwidgets.core
from hookwidgets import HookExplorer
from hookwidgets.core import load_captures

pulled_by_import = sorted(name for name in ("matplotlib", "safetensors") if name in sys.modules)


def hook_state(model: nn.Module) -> list:
    """Every hook dict of every module and of torch's globals (keys and hook objects), and the full-backward flags."""
    modules = [(f"{path}.{name}", value) for path, m in model.named_modules() for name, value in vars(m).items()]
    named = [*modules, *vars(torch_module).items()]
    dicts = [(name, value) for name, value in named if "hooks" in name and isinstance(value, dict)]
    flags = [m._is_full_backward_hook for m in model.modules()] + [torch_module._global_is_full_backward_hook]
    return [(name, list(v.items())) for name, v in dicts] + flags


model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 3))
x = torch.randn(2, 1, 8, 8)
before = hook_state(model)
explorer = HookExplorer(model, example_inputs=x)  # reads the bundled widget.js and widget.css
explorer.attach("0", ["forward", "backward", "grad"])
explorer.run(x, target=0)
attached = hook_state(model) != before
with tempfile.TemporaryDirectory() as tmp:
    exported = [(r["path"], r["kind"]) for r in load_captures(explorer.export(Path(tmp) / "caps.safetensors"))]
explorer.close()

print(
    json.dumps(
        {
            "pulled_by_import": pulled_by_import,
            "file": hookwidgets.__file__,
            "version": hookwidgets.__version__,
            "installed_version": importlib.metadata.version("hookwidgets"),
            "fired": {kind: len(explorer.captures["0"][kind]) for kind in ("forward", "backward", "grad")},
            "attached": attached,
            "exported": exported,
            "as_found": hook_state(model) == before,
        }
    )
)

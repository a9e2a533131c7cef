"""The model's module paths by module id, for hooks placed on every module and for op-node addresses."""

from torch import nn

model = nn.Module()  # stands for the user's model: the generated code names its variable instead
paths: dict[int, str]

# --- generated code ---

# The model's modules by id, with their paths.
paths = {}
for _path, _module in model.named_modules(remove_duplicate=False):
    paths.setdefault(id(_module), _path)  # a module reachable by two paths goes by the first, as in hookwidgets

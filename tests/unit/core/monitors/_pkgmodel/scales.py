"""A helper module the model imports, so interning has a dependency to follow."""

SCALE = 2.0

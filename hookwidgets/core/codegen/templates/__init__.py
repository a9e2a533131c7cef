"""The generated code's helpers as Python source: each module is linted and tested as code, and what follows
its ``# --- generated code ---`` line is emitted as text by ``hook_code`` (``model`` standing for the model's
variable). What comes before that line only lets the module import and lint on its own.

Internal, as ``codegen``.
"""

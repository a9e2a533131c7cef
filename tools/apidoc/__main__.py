"""``python -m tools.apidoc`` (``make docs``): rewrite docs/api.md; a nonzero exit lists what has no docstring."""

import sys

from .page import OUTPUT, render, undocumented


def main() -> int:
    """Rewrite docs/api.md; a nonzero exit lists what has no docstring."""
    OUTPUT.write_text(render(), encoding="utf-8")
    missing = undocumented()
    if missing:
        print("docs/api.md written, but these have no docstring:", *missing, sep="\n  ", file=sys.stderr)
        return 1
    return 0


sys.exit(main())

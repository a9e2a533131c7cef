"""Prints the PNG of each figure of bench/plots_figures.py as hookwidgets drew it before issue 35: ``figure_png``
at 96 dpi, the figure's own size (not fitted to a pane). Its output at commit c304aa0 is ``TODAY`` in bench/plots.py,
the reference of the payload rows; it is kept to re-check that reference, not to run on later code:
``git worktree add /tmp/hw-c304aa0 c304aa0 && cp bench/plots_figures.py bench/plots_reference.py /tmp/hw-c304aa0/bench/
&& cd /tmp/hw-c304aa0 && PYTHONPATH=$PWD .venv/bin/python bench/plots_reference.py``.
"""

from __future__ import annotations

import hashlib
import subprocess

from plots_figures import FIGURES, png_size

from hookwidgets.plots import figure_png


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# figure_png at 96 dpi, hookwidgets at {commit}")
    for build in FIGURES:
        drawn = build()
        png = figure_png(drawn.figure())
        width, height = png_size(png)
        print(f"{drawn.name!r}: ({len(png)}, {width}, {height}),  # sha256 {hashlib.sha256(png).hexdigest()[:12]}")


if __name__ == "__main__":
    main()

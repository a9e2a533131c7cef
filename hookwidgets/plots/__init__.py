"""Matplotlib figures of captured tensors and attributions, and PNG bytes for the widget. No widget code here.

Every function returns a ``matplotlib.figure.Figure`` the caller can restyle; ``figure_png`` renders one.
float16/bfloat16 tensors are cast, and NaN/Inf are drawn magenta and counted in the title, never a crash.
Every function takes ``theme=`` ("light", "dark", a ``Theme`` or the widget's mapping): the figure's background
and text in the notebook's colours; ``using_theme`` sets it for a block, ``using_frame`` the width and pixel ratio
every figure is drawn for (the widget's: its pane's). The DDP inspector's figures live in
``hookwidgets.plots.distributed`` (it imports torch.distributed), the one public module inside: the others are
internal, their public names are here.
"""

from ._common import MISSING_COLOR, NONFINITE_COLOR, figure_png
from .distributions import histogram_figure
from .feature_maps import MAX_CHANNELS, feature_map_figure, gradient_map_figure
from .frame import Frame, using_frame
from .overlay import cam_overlay_figure
from .patches import patch_grid_figure
from .patching import patch_sweep_figure
from .sequences import attention_heads_figure, token_map_figure
from .steps import stats_figure, summary_heatmap_figure
from .tensors import attention_figure, bars_figure, matrix_figure
from .theme import DARK, LIGHT, Theme, using_theme
from .training import update_ratio_figure

__all__ = [
    "DARK",
    "LIGHT",
    "MAX_CHANNELS",
    "MISSING_COLOR",
    "NONFINITE_COLOR",
    "Frame",
    "Theme",
    "attention_figure",
    "attention_heads_figure",
    "bars_figure",
    "cam_overlay_figure",
    "feature_map_figure",
    "figure_png",
    "gradient_map_figure",
    "histogram_figure",
    "matrix_figure",
    "patch_grid_figure",
    "patch_sweep_figure",
    "stats_figure",
    "summary_heatmap_figure",
    "token_map_figure",
    "update_ratio_figure",
    "using_frame",
    "using_theme",
]

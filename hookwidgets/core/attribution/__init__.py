"""Attributions (torch only): the Grad-CAM family at a layer; guided backprop, saliency, input×gradient on pixels;
saliency, input×gradient and integrated gradients on input tokens; attention rollout and gradient rollout over a
transformer's self-attention.

Internal: the public names are ``hookwidgets.core``'s; what is here may change without notice.
"""

from .cams import CAM_FUNCTIONS
from .grid import as_grid, token_grid
from .layers import default_layer, spatial_layers
from .methods import (
    CAM_METHODS,
    METHOD_WORDS,
    METHODS,
    PIXEL_METHODS,
    Attribution,
    attribute,
    check_method,
    method_name,
)
from .rollout import ROLLOUT_METHODS
from .tokens import TOKEN_METHODS, token_attribution

__all__ = [
    "CAM_FUNCTIONS",
    "CAM_METHODS",
    "METHODS",
    "METHOD_WORDS",
    "PIXEL_METHODS",
    "ROLLOUT_METHODS",
    "TOKEN_METHODS",
    "Attribution",
    "as_grid",
    "attribute",
    "check_method",
    "default_layer",
    "method_name",
    "spatial_layers",
    "token_attribution",
    "token_grid",
]

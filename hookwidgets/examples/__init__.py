"""Small models and inputs shipped with hookwidgets, for notebooks and tests (no downloads).

Public, as are ``hookwidgets.examples.vit``, ``.ddp_demo`` and ``.fsdp_demo``; ``digits`` and
``induction`` are internal (their public names are here).
"""

from .digits import DigitsCNN, accuracy, digit_image, load_digits, pretrained_digits_cnn, train_digits_cnn
from .induction import InductionLM, InductionTokenizer, induction_lm, repeated_tokens

__all__ = [
    "DigitsCNN",
    "InductionLM",
    "InductionTokenizer",
    "accuracy",
    "digit_image",
    "induction_lm",
    "load_digits",
    "pretrained_digits_cnn",
    "repeated_tokens",
    "train_digits_cnn",
]

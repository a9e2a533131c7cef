"""Small models and inputs shipped with hookwidgets, for notebooks and tests (no downloads).

Public, as are ``hookwidgets.examples.vit``, ``.ddp_demo`` and ``.fsdp_demo``; ``digits`` is internal (its public
names are here).
"""

from .digits import DigitsCNN, accuracy, digit_image, load_digits, pretrained_digits_cnn, train_digits_cnn

__all__ = ["DigitsCNN", "accuracy", "digit_image", "load_digits", "pretrained_digits_cnn", "train_digits_cnn"]

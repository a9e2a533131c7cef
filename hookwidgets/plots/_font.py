"""A 3×5 bitmap digit font: channel numbers burned into a tile image without a matplotlib Text per label."""

from __future__ import annotations

from functools import cache

import numpy as np

# Each digit is 5 rows of 3 pixels, "#" lit. Digits only: channel labels are non-negative integers.
GLYPHS = {
    "0": ("###", "#.#", "#.#", "#.#", "###"),
    "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"),
    "3": ("###", "..#", "###", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"),
    "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"),
    "7": ("###", "..#", "..#", "..#", "..#"),
    "8": ("###", "#.#", "###", "#.#", "###"),
    "9": ("###", "#.#", "###", "..#", "###"),
}
GLYPH_W, GLYPH_H = 3, 5
PAD = 2  # pixels of box around the text, at scale 1 and above


@cache
def text_mask(text: str, scale: int) -> np.ndarray:
    """The lit pixels of ``text`` (digits) at an integer ``scale``, one glyph-pixel gap between digits."""
    columns = []
    for position, char in enumerate(text):
        if position:
            columns.append(np.zeros((GLYPH_H, 1), dtype=bool))
        columns.append(np.array([[c == "#" for c in row] for row in GLYPHS[char]], dtype=bool))
    mask = np.concatenate(columns, axis=1)
    mask = np.repeat(np.repeat(mask, scale, axis=0), scale, axis=1)
    mask.flags.writeable = False  # cached and shared between calls
    return mask


def box_size(text: str, scale: int) -> tuple[int, int]:
    """``(height, width)`` in pixels of the dark box that holds ``text`` at ``scale``."""
    height, width = GLYPH_H * scale, (len(text) * (GLYPH_W + 1) - 1) * scale
    return height + 2 * PAD, width + 2 * PAD


def label_scale(longest: str, tile: tuple[int, int]) -> int:
    """The glyph scale for labels in tiles of ``tile`` pixels: 2 where the box fits with room, 1, or 0 (none)."""
    height, width = tile
    for scale in (2, 1):
        box_h, box_w = box_size(longest, scale)
        room = 2.0 if scale == 2 else 1.0  # the larger font only when the label leaves half the tile free
        if box_h * room <= height and box_w * room <= width:
            return scale
    return 0

"""How large a record the tab accepts, checked on the sizes a file declares before anything of that size is
allocated, and how its numbers reach the page.

The lab's own records are far inside these limits (a probe sentence of a few words, a few layers and heads); a
record beyond them is refused with one line instead of being built, sent and drawn.
"""

from __future__ import annotations

import math

import numpy as np

MAX_LAYERS = 64
MAX_HEADS = 64
MAX_WORDS = 512  # words along one axis of a map: the probe, or a sentence within the model's context
MAX_CELLS = 1 << 18  # numbers in one step's maps (layers x heads x queries x keys): about 2 MB of JSON
MAX_INDICES = MAX_WORDS  # target indices of the loss-by-index heatmap: one per word of a sequence at most
# numbers in one answer of the scores or circuits route (every grid and the loss-by-index heatmap together): about
# 2 MB of JSON, as one step's maps; a run of the lab sends a few hundred (2 layers x 4 heads)
MAX_ANSWER_CELLS = 1 << 18
# a run's clamped heads as its config lists them (the ``clamp`` knob's patterns, shown as words beside the slider):
# a lab run lists a few; more, or a longer one, is not a config the lab wrote, and the slider marks nothing
MAX_CLAMP_PATTERNS = 64
MAX_CLAMP_PATTERN_CHARS = 64
MAX_STEP = (1 << 53) - 1  # a step the page holds exactly (a JavaScript number)
DECIMALS = 4  # weights sent to the page: enough for two shown decimals and line opacities


class TooLarge(ValueError):
    """A size beyond the tab's limits: ``what`` names it, ``size`` and ``limit`` are the numbers."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size}, more than the {limit} the attention tab shows")
        self.what, self.size, self.limit = what, size, limit


def check_map_shape(shape: tuple[int, ...] | list[int]) -> None:
    """A (layers, heads, queries, keys) shape within the limits, or TooLarge. Other ranks are left to the
    caller's own shape check; a negative (unknown) size counts as too large."""
    limits = (("layers", MAX_LAYERS), ("heads", MAX_HEADS), ("queries", MAX_WORDS), ("keys", MAX_WORDS))
    for size, (what, limit) in zip(shape, limits, strict=False):
        if not 0 <= size <= limit:
            raise TooLarge(what, size, limit)
    cells = int(np.prod([max(size, 0) for size in shape], dtype=object))
    if cells > MAX_CELLS:
        raise TooLarge("the number of weights", cells, MAX_CELLS)


def most_words(layers: int, heads: int) -> int:
    """The most words along each axis whose maps of ``layers`` x ``heads`` stay within the limits (0: none)."""
    if not (0 <= layers <= MAX_LAYERS and 0 <= heads <= MAX_HEADS):
        return 0
    return min(MAX_WORDS, math.isqrt(MAX_CELLS // max(layers * heads, 1)))


def weights_for_page(weights: np.ndarray) -> list:
    """Nested lists of rounded weights; NaN and infinities (JSON has neither) become null, drawn as missing."""
    rounded = np.asarray(weights, dtype=np.float64).round(DECIMALS)
    return np.where(np.isfinite(rounded), rounded, None).tolist()

"""Path patching as one heatmap: a row per sender head, a column per receiver input (a later head's q, k or v, and
the logits last), each cell the fraction of the logit difference that path restores. Blank (NaN) where there is no
path: a receiver in the sender's own layer or an earlier one. Drawn from plain labels and cells; which run's values,
and when, are the callback's (:mod:`attention_lab.callbacks.head_score_maps`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attention_lab.plotting.colour_scale import UNIT_CMAP, ColourScale
from attention_lab.plotting.heatmaps import HeatmapFigure, attention_figure, card_dpi

XLABEL, YLABEL = "receiver input (layer, head, q/k/v) or logits", "sender"


def head_label(layer: int, head: int) -> str:
    """``L1H0``: layer 1's head 0, short enough for a column of a wide grid."""
    return f"L{layer}H{head}"


def path_grid_image(cells: Sequence[Sequence[float]], senders: Sequence[str], inputs: Sequence[str],
                    title: str) -> np.ndarray:
    """The senders x receiver inputs heatmap as an (H, W, 3) uint8 image, as wide as TensorBoard's image card where
    it fits (:func:`~attention_lab.plotting.heatmaps.card_dpi`), its colours on a scale from its own values (0 and
    the smallest below it to the largest above it: a restored fraction may pass 1 or fall below 0)."""
    grid = np.asarray(cells, dtype=float)
    values = [float(v) for v in grid.ravel() if not math.isnan(v)]
    # The scale before the layout: the figure is trimmed to its colorbar's numbers, which the scale sets.
    scale = ColourScale(min(0.0, *values), max(1e-6, *values), UNIT_CMAP, "fraction restored")
    dpi = card_dpi(lambda dpi: HeatmapFigure(senders, inputs, title, scale, xlabel=XLABEL, ylabel=YLABEL, dpi=dpi),
                   title)
    figure = attention_figure(grid, senders, inputs, title, xlabel=XLABEL, ylabel=YLABEL, scale=scale, dpi=dpi)
    if figure.axes[0].collections:  # a small grid's numbers, row by row: dark on viridis's bright end, none if blank
        labels, flat = figure.axes[0].collections[0], grid.ravel()
        bright = (flat - scale.vmin) / (scale.vmax - scale.vmin) > 0.6
        labels.set_facecolors([(0, 0, 0, 0) if math.isnan(v) else "black" if light else "white"
                               for v, light in zip(flat, bright, strict=True)])
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()

"""A per-head measurement as a layers x heads heatmap: one picture (heads across, layers down, each cell's value
written in it), drawn at the dpi that makes it as wide as TensorBoard's image card
(:func:`attention_lab.plotting.heatmaps.card_dpi`). A score lies in 0..1 and keeps that scale; another measurement
(a loss increase, a drop, a restored fraction may pass 1 or 0) gets a scale from its own values. Drawn from a plain
grid of numbers and a title; which measurements and when are the callback's
(:mod:`attention_lab.callbacks.head_score_maps`)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attention_lab.plotting.heatmaps import DPI, HeatmapFigure, attention_figure, card_dpi


def grid_axes(grid: list[list[float]]) -> tuple[list[str], list[str]]:
    """The words on a layers x heads grid's axes: layers down, heads across."""
    return [f"layer {layer}" for layer in range(len(grid))], [f"head {h}" for h in range(len(grid[0]))]


def grid_frame(grid: list[list[float]], title: str = "", dpi: int = DPI) -> HeatmapFigure:
    """A layers x heads grid's frame (heads across, layers down) at ``dpi``: redrawn for each score of that shape."""
    return HeatmapFigure(*grid_axes(grid), title, xlabel="head", ylabel="layer", dpi=dpi)


def fitted_dpi(grid: list[list[float]], titles: Iterable[str]) -> int:
    """The dpi of a grid's heatmaps: the widest that fits TensorBoard's image card with the widest of ``titles``
    (every title the grids of this shape may get), so that they all share it and one frame."""
    frames: dict[int, HeatmapFigure] = {}

    def frame_at(dpi: int) -> HeatmapFigure:
        if dpi not in frames:
            frames[dpi] = grid_frame(grid, dpi=dpi)
        return frames[dpi]

    return card_dpi(frame_at, max(titles, key=frame_at(DPI).width_for))


def score_grid_image(grid: list[list[float]], title: str, dpi: int, *, own_scale: bool = False) -> np.ndarray:
    """The heatmap of a layers x heads grid as an (H, W, 3) uint8 image at ``dpi``: on the 0..1 scale, or with
    ``own_scale`` on one from its values (0 and the smallest below it to the largest above it)."""
    figure = attention_figure(np.asarray(grid), *grid_axes(grid), title, xlabel="head", ylabel="layer", dpi=dpi)
    if own_scale:
        values = [v for row in grid for v in row if not math.isnan(v)]
        figure.axes[0].images[0].set_clim(min(0.0, *values), max(1e-6, *values))
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()

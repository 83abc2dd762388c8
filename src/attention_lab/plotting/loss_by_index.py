"""Olsson et al.'s picture: the validation loss at each target index over training, as a step x index heatmap
(matplotlib Figure on an Agg canvas, no pyplot state). Drawn into TensorBoard at the end of a run
(:mod:`attention_lab.callbacks.loss_by_index_map`) and, for each job of a sweep, by ``compare.py --plot``
(:mod:`attention_lab.review.formation_plot`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attention_lab.plotting.heatmaps import DPI, run_title


def loss_grid(rows: Sequence[Sequence[float | None]]) -> np.ndarray:
    """Validations x indices, NaN where an index had no value (a validation may see fewer indices)."""
    width = max((len(row) for row in rows), default=0)
    return np.array([[math.nan if value is None else value for value in row] + [math.nan] * (width - len(row))
                     for row in rows], dtype=float).reshape(len(rows), width)


def draw_loss_by_index(ax, steps: Sequence[int], rows: Sequence[Sequence[float | None]], vmax: float | None = None):
    """The heatmap on ``ax``: target index across, training step down (the first validation on top), colour the
    loss in nats. Returns the image (for a colour bar)."""
    cells = loss_grid(rows)
    image = ax.imshow(cells, aspect="auto", interpolation="nearest", cmap="magma_r", vmin=0.0,
                      vmax=vmax if vmax is not None else max(float(np.nanmax(cells)), 1e-6) if cells.size else 1.0)
    ticks = sorted({round(i * (len(steps) - 1) / 4) for i in range(5)}) if steps else []
    ax.set_yticks(ticks, [str(steps[i]) for i in ticks])
    ax.set_xticks(range(cells.shape[1]))
    ax.set_xlabel("target index")
    ax.set_ylabel("step")
    return image


def loss_by_index_image(steps: Sequence[int], rows: Sequence[Sequence[float | None]], run_name: str = "") -> np.ndarray:
    """One run's heatmap as an (H, W, 3) uint8 image for TensorBoard."""
    figure = Figure(figsize=(4.5, 3.6), dpi=DPI, layout="constrained")
    ax = figure.add_subplot()
    figure.colorbar(draw_loss_by_index(ax, steps, rows), ax=ax, label="loss (nats)")
    ax.set_title(run_title(run_name, "validation loss by target index"), fontsize=9)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()

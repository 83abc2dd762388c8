"""Olsson et al.'s picture: the validation loss at each target index over training, as a step x index heatmap
(matplotlib Figure on an Agg canvas, no pyplot state). One run's, drawn into TensorBoard at the end of a run
(:mod:`attention_lab.callbacks.loss_by_index_map`); and a sweep's (``compare.py --plot``, loss_by_index.png,
:mod:`attention_lab.review.loss_by_index_figure`): one heatmap per job on one colour scale, a row per configuration
(wrapped after ``MAX_COLUMNS`` seeds) and a column per seed, each job's formation step a dashed line."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from attention_lab.plotting.heatmaps import DPI, run_title

MAX_COLUMNS = 10  # seeds side by side; more go on to the next row, so that the heatmaps stay readable


@dataclass(frozen=True)
class LossPanel:
    """One job's heatmap in a sweep's figure."""

    title: str
    steps: Sequence[int]  # the step of each validation, down the heatmap
    rows: Sequence[Sequence[float | None]]  # each validation's loss by target index
    formed: int | None = None  # the formation step: a dashed line at its validation


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


def save_sweep_loss_by_index(groups: Sequence[Sequence[LossPanel]], path: Path, title: str) -> Path:
    """The sweep's figure at ``path``: ``groups``, one per configuration (each wrapped after MAX_COLUMNS panels), on
    one colour scale up to the largest loss of any panel."""
    columns = min(MAX_COLUMNS, max(len(panels) for panels in groups))
    every = [loss_grid(panel.rows) for panels in groups for panel in panels]
    vmax = max((float(np.nanmax(cells)) for cells in every if cells.size and not np.isnan(cells).all()), default=1.0)
    lines = [panels[start:start + columns] for panels in groups
             for start in range(0, math.ceil(len(panels) / columns) * columns, columns)]
    fig = Figure(figsize=(2.4 * columns + 1.2, 2.2 * len(lines) + 0.8), dpi=100, layout="constrained")
    axes = fig.subplots(len(lines), columns, squeeze=False)
    image = None
    for row, panels in enumerate(lines):
        for column in range(columns):
            ax = axes[row][column]
            if column >= len(panels):
                ax.set_axis_off()
                continue
            panel = panels[column]
            image = draw_loss_by_index(ax, panel.steps, panel.rows, vmax=vmax)
            ax.set_title(panel.title, fontsize=8)
            if panel.formed is not None and panel.formed in panel.steps:
                ax.axhline(panel.steps.index(panel.formed), color="cyan", linewidth=0.8, linestyle="--")
    fig.colorbar(image, ax=axes, label="validation loss (nats)", shrink=0.8)
    fig.suptitle(title, fontsize=11)
    fig.savefig(path)
    return path

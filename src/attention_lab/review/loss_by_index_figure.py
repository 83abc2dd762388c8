"""Olsson et al.'s loss by target index over training for every job of a sweep (``compare.py --plot``,
``loss_by_index.png``): one step x index heatmap per job, a row per configuration (wrapped after ``MAX_COLUMNS``
seeds) and a column per seed, on one colour scale, from each job's recorded history (``formation.loss_by_index`` in metrics.json, kept by
:class:`~attention_lab.callbacks.induction_formation.InductionFormation`)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from attention_lab.plotting.loss_by_index import draw_loss_by_index, loss_grid
from attention_lab.review.sweep import Sweep, seed_groups, seed_of

MAX_COLUMNS = 10  # seeds side by side; more go on to the next row, so that the heatmaps stay readable


def recorded(job) -> bool:
    return bool(job.formation) and any(job.formation.get("loss_by_index") or ())


def loss_by_index_figure(sweep: Sweep, path: Path) -> Path | None:
    """Writes the figure to ``path``; None (nothing written) when no job recorded its loss by index."""
    from matplotlib.figure import Figure

    groups = [(group, [j for j in group.ok if recorded(j)]) for group in seed_groups(sweep)]
    groups = [(group, jobs) for group, jobs in groups if jobs]
    if not groups:
        return None
    columns = min(MAX_COLUMNS, max(len(jobs) for _, jobs in groups))
    every = [loss_grid(job.formation["loss_by_index"]) for _, jobs in groups for job in jobs]
    vmax = max((float(np.nanmax(cells)) for cells in every if cells.size and not np.isnan(cells).all()), default=1.0)
    lines = [(group, jobs[start:start + columns]) for group, jobs in groups
             for start in range(0, math.ceil(len(jobs) / columns) * columns, columns)]
    fig = Figure(figsize=(2.4 * columns + 1.2, 2.2 * len(lines) + 0.8), dpi=100, layout="constrained")
    axes = fig.subplots(len(lines), columns, squeeze=False)
    image = None
    for row, (group, jobs) in enumerate(lines):
        for column in range(columns):
            ax = axes[row][column]
            if column >= len(jobs):
                ax.set_axis_off()
                continue
            job = jobs[column]
            history = job.formation
            image = draw_loss_by_index(ax, history["step"], history["loss_by_index"], vmax=vmax)
            formed = job.metrics.get("formation_step")
            ax.set_title(f"{group.configuration}\nseed {seed_of(job) or '?'}"
                         + ("" if formed is None else f" · formed at {formed}"), fontsize=8)
            if formed is not None and formed in history["step"]:
                ax.axhline(history["step"].index(formed), color="cyan", linewidth=0.8, linestyle="--")
    fig.colorbar(image, ax=axes, label="validation loss (nats)", shrink=0.8)
    fig.suptitle(f"Loss by target index over training · {sweep.dir.name}", fontsize=11)
    fig.savefig(path)
    return path

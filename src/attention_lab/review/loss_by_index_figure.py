"""Olsson et al.'s loss by target index over training for every job of a sweep (``compare.py --plot``,
``loss_by_index.png``): one step x index heatmap per job, a row per configuration and a column per seed, on one
colour scale, from each job's recorded history (``formation.loss_by_index`` in metrics.json, kept by
:class:`~attention_lab.callbacks.induction_formation.InductionFormation`). This module picks the jobs and titles
their panels; :mod:`attention_lab.plotting.loss_by_index` draws them."""

from __future__ import annotations

from pathlib import Path

from attention_lab.plotting.loss_by_index import LossPanel, save_sweep_loss_by_index
from attention_lab.review.sweep import Sweep, seed_groups, seed_of


def recorded(job) -> bool:
    return bool(job.formation) and any(job.formation.get("loss_by_index") or ())


def panel(configuration: str, job) -> LossPanel:
    """A job's heatmap: its configuration, seed and formation step in the title."""
    formed = job.metrics.get("formation_step")
    title = f"{configuration}\nseed {seed_of(job) or '?'}" + ("" if formed is None else f" · formed at {formed}")
    return LossPanel(title, job.formation["step"], job.formation["loss_by_index"], formed)


def loss_by_index_figure(sweep: Sweep, path: Path) -> Path | None:
    """Writes the figure to ``path``; None (nothing written) when no job recorded its loss by index."""
    groups = [[panel(group.configuration, j) for j in group.ok if recorded(j)] for group in seed_groups(sweep)]
    groups = [panels for panels in groups if panels]
    if not groups:
        return None
    return save_sweep_loss_by_index(groups, path, f"Loss by target index over training · {sweep.dir.name}")

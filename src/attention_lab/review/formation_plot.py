"""The induction heads forming, in one picture (``compare.py --plot``): for every job of a sweep that recorded its
history (``formation`` in metrics.json, :class:`~attention_lab.callbacks.induction_formation.InductionFormation`),
the validation loss, the best previous-token score, the best K-composition score (a layer-0 head's output read by a
later head's keys) and the best prefix matching against the training step, one line per seed, coloured by
configuration; each run's formation step is marked on every panel. This module picks the runs and words the rule;
:mod:`attention_lab.plotting.formation` draws them."""

from __future__ import annotations

from pathlib import Path

from attention_lab.analysis.formation_rule import rule_words
from attention_lab.errors import ReviewError
from attention_lab.review.sweep import Sweep, seed_groups, seed_of


def formation_figure(sweep: Sweep, path: Path) -> Path:
    """formation.png at ``path``, from the ok jobs that recorded their history, grouped by configuration."""
    groups = [(group, [j for j in group.ok if j.formation]) for group in seed_groups(sweep)]
    groups = [(group, jobs) for group, jobs in groups if jobs]
    if not groups:
        raise ReviewError(f"no job of {sweep.dir} recorded the history of its head scores (metrics.json "
                          "'formation'): --plot needs a sweep such as experiment=induction_formation")
    from attention_lab.plotting.formation import FormationRun, save_formation_figure  # matplotlib: when drawing

    runs = [[FormationRun(group.configuration, seed_of(job) or "?", job.formation, job.metrics.get("formation_step"))
             for job in jobs] for group, jobs in groups]
    threshold = next(jobs[0].formation["threshold"] for _, jobs in groups)
    return save_formation_figure(runs, path, threshold=threshold, threshold_label=rule_words(threshold),
                                 title=f"Induction heads forming · {sweep.dir.name}")

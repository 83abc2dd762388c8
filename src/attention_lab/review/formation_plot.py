"""The induction heads forming, in one picture (``compare.py --plot``): for every job of a sweep that recorded its
history (``formation`` in metrics.json, :class:`~attention_lab.callbacks.induction_formation.InductionFormation`),
the validation loss, the best previous-token score, the best K-composition score (a layer-0 head's output read by a
later head's keys) and the best induction score against the training step, one line per seed, coloured by
configuration; each run's formation step is marked on every panel."""

from __future__ import annotations

from pathlib import Path

from attention_lab.analysis.formation_rule import MIN_LAYER, counts_a_head
from attention_lab.errors import ReviewError
from attention_lab.review.sweep import Sweep, seed_groups, seed_of

PANELS = (("val/loss", "validation loss"), ("previous_token", "best previous-token score"),
          ("composition_k", "best K-composition"), ("induction", "best induction score\n(any layer)"))
# The induction panel's labels (its y axis is 0..1): three rows low in the panel, each label's height, and the gap
# its guide leaves below a dot.
LABEL_ROWS, LABEL_HEIGHT, DOT_CLEARANCE = (0.03, 0.10, 0.17), 0.06, 0.04
NAMED_SEEDS = 2  # more seeds at one step are counted, not named: a long list runs into the neighbouring labels
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


def label_formations(ax, formations: dict[int, list[tuple[str, str, float]]]) -> None:
    """Which seeds formed at each formation step, written low in the induction panel (below the curves, which
    have left the bottom by then), one label a step (``seeds 3, 4``, or ``6 seeds``), on three staggered rows so
    that neighbouring steps' labels do not meet; a dotted line leads up to the step's dots."""
    for number, (step, runs) in enumerate(sorted(formations.items())):
        seeds = [seed for seed, _, _ in runs]
        colors = {color for _, color, _ in runs}
        color = colors.pop() if len(colors) == 1 else "black"
        y = LABEL_ROWS[number % len(LABEL_ROWS)]
        label = (f"{len(seeds)} seeds" if len(seeds) > NAMED_SEEDS
                 else f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}")
        ax.text(step, y, label, ha="center", va="bottom",
                fontsize=7, color=color)
        ax.plot([step, step], [y + LABEL_HEIGHT, min(v for _, _, v in runs) - DOT_CLEARANCE], linestyle=":",
                linewidth=0.8, color=color)


def formation_figure(sweep: Sweep, path: Path) -> Path:
    from matplotlib.figure import Figure

    groups = [(group, [j for j in group.ok if j.formation]) for group in seed_groups(sweep)]
    groups = [(group, jobs) for group, jobs in groups if jobs]
    if not groups:
        raise ReviewError(f"no job of {sweep.dir} recorded the history of its head scores (metrics.json "
                          "'formation'): --plot needs a sweep such as experiment=induction_formation")
    fig = Figure(figsize=(8.5, 10.0), dpi=100, layout="constrained")
    axes = fig.subplots(len(PANELS), 1, sharex=True)
    formations: dict[int, list[tuple[str, str, float]]] = {}  # formation step -> (seed, colour, induction score)
    for index, (group, jobs) in enumerate(groups):
        color = COLORS[index % len(COLORS)]
        for number, job in enumerate(jobs):
            history, formed = job.formation, job.metrics.get("formation_step")
            label = group.configuration if number == 0 else None
            for ax, (key, _) in zip(axes, PANELS, strict=True):
                points = [(s, v) for s, v in zip(history["step"], history.get(key, []), strict=False) if v is not None]
                if not points:
                    continue
                steps, values = zip(*points, strict=True)
                ax.plot(steps, values, color=color, alpha=0.75, linewidth=1.2, label=label)
                if formed is not None and formed in steps:
                    ax.plot([formed], [values[steps.index(formed)]], marker="o", color=color, markersize=6,
                            markeredgecolor="black", linestyle="none")
                    if key == PANELS[-1][0]:
                        formations.setdefault(formed, []).append((seed_of(job) or "?", color, values[steps.index(formed)]))
    label_formations(axes[-1], formations)
    threshold = next(jobs[0].formation["threshold"] for _, jobs in groups)
    # The panel's curves are the best head of any layer; the rule counts only heads above layer 0: a 1-layer run's
    # curve may cross the line (smeared keys) and record no formation step.
    uncounted = any(not counts_a_head(job.formation) for _, jobs in groups for job in jobs)
    axes[-1].axhline(threshold, color="grey", linestyle="--", linewidth=0.8,
                     label=f"formation: a head above layer {MIN_LAYER - 1} reaches {threshold:g}"
                     + ("\n(1-layer runs have no such head: no formation step,\neven where their curve crosses it)"
                        if uncounted else ""))
    for ax, (_, title) in zip(axes, PANELS, strict=True):
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    axes[1].set_ylim(0, 1)
    axes[-1].set_ylim(0, 1)
    axes[0].legend(fontsize=8, title="one line per seed", title_fontsize=8)
    axes[-1].legend(fontsize=8, loc="lower right")
    axes[-1].set_xlabel("training step (dots: each run's formation step)")
    fig.suptitle(f"Induction heads forming · {sweep.dir.name}", fontsize=11)
    fig.savefig(path)
    return path

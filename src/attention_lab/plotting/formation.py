"""The induction heads forming, in one picture (``compare.py --plot``, formation.png): four panels over the training
step, the validation loss, the best previous-token score, the best K-composition score (a layer-0 head's output read
by a later head's keys) and the best prefix matching on the rotated-repeat probe (what the formation rule
thresholds), one line per run, coloured by configuration. Each run's
formation step is a dot on every panel; the last panel draws the rule's threshold and names, low down, the
seeds that formed at each step. Drawn from plain runs (:class:`FormationRun`: the history a run recorded); which
runs, and the rule's words, are the review's (:mod:`attention_lab.review.formation_plot`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

# The panels, top to bottom: the key of each curve in a run's history, and the panel's y label
PANELS = (("val/loss", "validation loss"), ("previous_token", "best previous-token score"),
          ("composition_k", "best K-composition"),
          ("prefix_matching", "best prefix matching\n(rotated probe, any layer)"))
# The induction panel's labels (its y axis is 0..1): three rows low in the panel, each label's height, and the gap
# its guide leaves below a dot.
LABEL_ROWS, LABEL_HEIGHT, DOT_CLEARANCE = (0.03, 0.10, 0.17), 0.06, 0.04
NAMED_SEEDS = 2  # more seeds at one step are counted, not named: a long list runs into the neighbouring labels
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")


@dataclass(frozen=True)
class FormationRun:
    configuration: str  # in the legend, once per configuration
    seed: str  # named at its formation step
    history: Mapping[str, Any]  # "step" and, per panel key, one value a step (None: not measured then)
    formed: int | None  # its formation step: None, none


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


def save_formation_figure(groups: Sequence[Sequence[FormationRun]], path: Path, *, threshold: float,
                          threshold_label: str, title: str) -> Path:
    """The picture at ``path``: ``groups``, one per configuration (a colour each), each one or more runs;
    ``threshold``: the prefix matching the rule asks for, drawn as a dashed line and named by ``threshold_label``."""
    fig = Figure(figsize=(8.5, 10.0), dpi=100, layout="constrained")
    axes = fig.subplots(len(PANELS), 1, sharex=True)
    formations: dict[int, list[tuple[str, str, float]]] = {}  # formation step -> (seed, colour, prefix matching)
    for index, runs in enumerate(groups):
        color = COLORS[index % len(COLORS)]
        for number, run in enumerate(runs):
            history, formed = run.history, run.formed
            label = run.configuration if number == 0 else None
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
                        formations.setdefault(formed, []).append((run.seed, color, values[steps.index(formed)]))
    label_formations(axes[-1], formations)
    axes[-1].axhline(threshold, color="grey", linestyle="--", linewidth=0.8, label=threshold_label)
    for ax, (_, ylabel) in zip(axes, PANELS, strict=True):
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[1].set_ylim(0, 1)
    axes[-1].set_ylim(0, 1)
    axes[0].legend(fontsize=8, title="one line per seed", title_fontsize=8)
    axes[-1].legend(fontsize=8, loc="upper left")  # above the curves: the seed labels sit low
    axes[-1].set_xlabel("training step (dots: each run's formation step)")
    fig.suptitle(title, fontsize=11)
    fig.savefig(path)
    return path

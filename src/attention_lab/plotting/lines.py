"""plot_sweep.py's picture of a metric against a setting: one line per value of another setting, each point a mean
with an error bar (the shape of Zoology's Figure 2: accuracy against d_model, one line per mixer). An x axis whose
values span a factor of 8 or more is drawn in powers of 2. Drawn from plain series (:class:`Series`); which points
and what they average are the review's (:mod:`attention_lab.review.lines`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure  # a Figure without pyplot renders with Agg, no display needed


@dataclass(frozen=True)
class Series:
    label: str  # in the legend: "model=conv"
    x: list[float]
    mean: list[float]
    error: list[float]  # each point's error bar (its half-width; 0: none)


def save_line_plot(series: list[Series], path: Path, *, xlabel: str, ylabel: str, title: str,
                   tick_every_x: bool = True, fraction: bool = False) -> Path:
    """A PNG at ``path``: one line per series, in order. ``tick_every_x``: a tick labelled at each x of any series
    (False where there are too many to label: the axis's own ticks); ``fraction``: the metric is a fraction (an
    accuracy), drawn on a 0..1 axis."""
    fig = Figure(figsize=(6.4, 4.4), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    for line in series:
        ax.errorbar(line.x, line.mean, yerr=line.error, marker="o", capsize=4, label=line.label)
    xs = sorted({x for line in series for x in line.x})
    if xs and xs[0] > 0 and len(xs) > 1 and xs[-1] / xs[0] >= 8:
        ax.set_xscale("log", base=2)
    if tick_every_x:
        ax.set_xticks(xs, labels=[f"{v:g}" for v in xs])
    if fraction:
        ax.set_ylim(-0.03, 1.03)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9)
    fig.savefig(path)
    return path

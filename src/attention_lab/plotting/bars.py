"""compare.png's bars, one per configuration: one horizontal bar per configuration of a sweep, its length a mean
and its error bar a spread, the first configuration on top, each bar's numbers (or why it has none) written at its
end. One bar may be marked best (green); a configuration with no finished job keeps its slot in grey, its words in
red. Drawn from plain bars (:class:`Bar`): which metric, which statistics and which configuration is best are the
review's (:mod:`attention_lab.review.compare_chart`). Labels are drawn as text: a ``$`` in an override is no math."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from matplotlib.figure import Figure

BEST, FINISHED, NONE = "#2ca02c", "#1f77b4", "#cccccc"


@dataclass(frozen=True)
class Bar:
    name: str  # the configuration, on the y axis
    mean: float | None  # the bar's length; None: no bar
    error: float | None  # the error bar's half-width; None: none
    text: str  # written at the bar's end: its numbers, or why it has none
    finished: bool  # a job of the configuration finished (its bar blue, its words black; else grey and red)
    best: bool = False  # the one bar drawn green


@dataclass(frozen=True)
class BarChart:
    bars: list[Bar]  # the first on top
    xlabel: str
    title: str
    fraction: bool = False  # the metric is a fraction (an accuracy): a 0..1 axis when every bar lies in it


def bar_figure(chart: BarChart) -> Figure:
    """The chart (see the module's docstring)."""
    bars = chart.bars
    fig = Figure(figsize=(8.5, 1.6 + 0.42 * len(bars)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    positions = list(range(len(bars)))
    means = [bar.mean if bar.mean is not None else 0.0 for bar in bars]
    errors = [bar.error if bar.error is not None else 0.0 for bar in bars]
    colors = [BEST if bar.best else (FINISHED if bar.finished else NONE) for bar in bars]
    ax.barh(positions, means, xerr=errors, color=colors, height=0.65, error_kw={"capsize": 3, "elinewidth": 1})
    ax.set_yticks(positions, labels=[bar.name for bar in bars], parse_math=False)
    ax.invert_yaxis()  # the first configuration on top, as in the table
    ends = [m + e for m, e in zip(means, errors, strict=True)]
    low, high = min([0.0, *means]), max([0.0, *ends])
    if chart.fraction and 0 <= low and high <= 1:
        ax.set_xlim(0, 1.3)  # room for the labels
        ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    else:
        span = (high - low) or 1.0
        ax.set_xlim(low - (0.05 * span if low < 0 else 0), high + 0.4 * span)
    for pos, bar, end in zip(positions, bars, ends, strict=True):
        ax.text(max(end, 0.0) + ax.get_xlim()[1] * 0.01, pos, bar.text, va="center",
                fontsize=9, color="black" if bar.finished else "#b22222", parse_math=False)
    ax.set_xlabel(chart.xlabel, parse_math=False)
    ax.set_title(chart.title, fontsize=11, parse_math=False, wrap=True)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    return fig


def save_bar_chart(chart: BarChart, path: Path) -> Path:
    """:func:`bar_figure`, saved to ``path`` (its format from the suffix)."""
    bar_figure(chart).savefig(path)
    return path

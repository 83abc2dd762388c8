"""compare.png: one horizontal bar per configuration (the jobs that differ only in ``seed``), its length the mean
over the finished seeds and its error bar their sample std, of the metric :mod:`~attention_lab.review.chart_metric`
picks. A configuration without a value keeps its slot, labelled with its jobs' statuses; only the configuration
the verdict names best (:mod:`attention_lab.review.verdict`) is highlighted, and the title says the verdict. A NaN
or infinite value has no bar. Labels are drawn as text: a ``$`` in an override is no math."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attention_lab.records.escape import one_line
from attention_lab.review.chart_metric import chart_metric, job_value, shown
from attention_lab.review.numbers import STEPS_TO_SOLVE, is_count, mean_text
from attention_lab.review.separation import MIN_SEEDS, Spread, spread
from attention_lab.review.sweep import Group, Sweep, seed_groups
from attention_lab.review.verdict import Verdict, rank, values

if TYPE_CHECKING:
    from matplotlib.figure import Figure

BEST, FINISHED, NONE = "#2ca02c", "#1f77b4", "#cccccc"


def statuses(group: Group) -> str:
    counts: dict[str, int] = {}
    for job in group.jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    return ", ".join(status if n == 1 and group.total == 1 else f"{n} {status}" for status, n in counts.items())


def bar_label(group: Group, name: str, value: Spread | None, best: bool) -> str:
    """The text at the end of a configuration's bar: its mean ± std (n), or why it has none."""
    if not group.ok:
        return statuses(group)
    if value is None:
        raw = [v for j in group.ok if (v := job_value(j, name)) is not None]  # NaN or inf: shown, never a bar
        if raw:
            return ", ".join(shown(v) for v in raw)
        return "never" if name == STEPS_TO_SOLVE and any(j.reports_solve for j in group.ok) else "—"
    if value.n == 1:
        text = shown(value.mean)
    elif is_count(name):
        text = mean_text(name, value.mean, value.std)
    else:
        text = f"{value.mean:.3f} ± {value.std:.3f}"
    count = "" if group.total == 1 else f" (n={value.n})" if value.n == group.total else f" (n={value.n} of {group.total})"
    return text + count + (" ★ best" if best else "")


def bar_name(group: Group) -> str:
    """A configuration of one job is named with the job's id, as in the table; one of several seeds by its overrides."""
    label = one_line(f"{group.jobs[0].id}: {group.configuration}" if group.total == 1 else group.configuration)
    return label if len(label) <= 48 else label[:45] + "..."


def verdict_title(verdict: Verdict) -> str:
    if verdict.winner is not None:
        return f"best: {verdict.winner.configuration}, separated by its seeds"
    if len(verdict.groups) < 2:
        return ""
    single = all(len(g.ok) < MIN_SEEDS for g in verdict.groups)
    return "no best: " + ("one seed per configuration" if single else f"not separated by {verdict.seeds} seeds")


def bar_figure(sweep: Sweep, verdict: Verdict | None = None) -> Figure:
    """The chart (see the module's docstring)."""
    from matplotlib.figure import Figure

    groups = seed_groups(sweep)
    verdict = verdict or rank(sweep, groups)
    chart = chart_metric(sweep, verdict)
    spreads = [spread(values(g, chart.name)) for g in groups]
    best = [verdict.winner is g for g in groups]
    fig = Figure(figsize=(8.5, 1.6 + 0.42 * len(groups)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    positions = list(range(len(groups)))
    means = [s.mean if s else 0.0 for s in spreads]
    errors = [s.std if s and s.std is not None else 0.0 for s in spreads]
    colors = [BEST if won else (FINISHED if g.ok else NONE) for g, won in zip(groups, best, strict=True)]
    ax.barh(positions, means, xerr=errors, color=colors, height=0.65, error_kw={"capsize": 3, "elinewidth": 1})
    ax.set_yticks(positions, labels=[bar_name(g) for g in groups], parse_math=False)
    ax.invert_yaxis()  # the first configuration on top, as in the table
    ends = [m + e for m, e in zip(means, errors, strict=True)]
    low, high = min([0.0, *means]), max([0.0, *ends])
    bounded = chart.name.endswith("acc") or "accuracy" in chart.name
    if bounded and 0 <= low and high <= 1:
        ax.set_xlim(0, 1.3)  # room for the labels
        ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    else:
        span = (high - low) or 1.0
        ax.set_xlim(low - (0.05 * span if low < 0 else 0), high + 0.4 * span)
    for pos, group, value, end, won in zip(positions, groups, spreads, ends, best, strict=True):
        ax.text(max(end, 0.0) + ax.get_xlim()[1] * 0.01, pos, bar_label(group, chart.name, value, won), va="center",
                fontsize=9, color="black" if group.ok else "#b22222", parse_math=False)
    arrow = "higher is better" if chart.direction == "maximize" else "lower is better"
    seeds = " (mean ± std over seeds)" if any(g.total > 1 for g in groups) else ""
    ax.set_xlabel(f"{chart.name}{seeds} ({arrow})", parse_math=False)
    notes = " · ".join(n for n in (chart.why, verdict_title(verdict)) if n)
    ax.set_title(f"{chart.name} per configuration{f' ({notes})' if notes else ''} · {sweep.dir.name}", fontsize=11,
                 parse_math=False, wrap=True)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    return fig


def bar_chart(sweep: Sweep, path: Path, verdict: Verdict | None = None) -> Path:
    """compare.png: :func:`bar_figure`, saved to ``path``."""
    bar_figure(sweep, verdict).savefig(path)
    return path

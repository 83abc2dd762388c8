"""compare.png: one horizontal bar per configuration (the jobs that differ only in ``seed``), its length the mean
over the finished seeds and its error bar their sample std, of the metric :mod:`~attention_lab.review.chart_metric`
picks. A configuration without a value keeps its slot, labelled with its jobs' statuses; only the configuration
the verdict names best (:mod:`attention_lab.review.verdict`) is highlighted, and the title says the verdict. A NaN
or infinite value has no bar. This module says what the bars are; :mod:`attention_lab.plotting.bars` draws them."""

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
    from attention_lab.plotting.bars import BarChart


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


def chart_of(sweep: Sweep, verdict: Verdict | None = None) -> BarChart:
    """The bars of the chart and its words (see the module's docstring), for :mod:`attention_lab.plotting.bars`."""
    from attention_lab.plotting.bars import Bar, BarChart  # matplotlib: imported by the commands that draw

    groups = seed_groups(sweep)
    verdict = verdict or rank(sweep, groups)
    chart = chart_metric(sweep, verdict)
    bars = []
    for group in groups:
        value, best = spread(values(group, chart.name)), verdict.winner is group
        bars.append(Bar(bar_name(group), value.mean if value else None, value.std if value else None,
                        bar_label(group, chart.name, value, best), finished=bool(group.ok), best=best))
    arrow = "higher is better" if chart.direction == "maximize" else "lower is better"
    seeds = " (mean ± std over seeds)" if any(g.total > 1 for g in groups) else ""
    notes = " · ".join(n for n in (chart.why, verdict_title(verdict)) if n)
    return BarChart(bars, xlabel=f"{chart.name}{seeds} ({arrow})",
                    title=f"{chart.name} per configuration{f' ({notes})' if notes else ''} · {sweep.dir.name}",
                    fraction=chart.name.endswith("acc") or "accuracy" in chart.name)


def bar_figure(sweep: Sweep, verdict: Verdict | None = None):
    """The chart as a matplotlib Figure (:func:`attention_lab.plotting.bars.bar_figure`)."""
    from attention_lab.plotting import bars

    return bars.bar_figure(chart_of(sweep, verdict))


def bar_chart(sweep: Sweep, path: Path, verdict: Verdict | None = None) -> Path:
    """compare.png: the chart, saved to ``path``."""
    from attention_lab.plotting import bars

    return bars.save_bar_chart(chart_of(sweep, verdict), path)

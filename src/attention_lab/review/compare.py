"""Reports of a sweep (see :mod:`attention_lab.review.sweep`): one row per job with its overrides, final
validation metrics, parameter count, steps, wall time, status and error, as a rich table, CSV, Markdown
and a bar chart of the optimized metric; and, when a configuration ran with several seeds, one row per
configuration with mean ± std (n) of each metric and of steps_to_solve. No torch import: reports of big
sweeps are quick. Every cell is escaped for where it goes (:mod:`attention_lab.review.escape`), and the records
that could not be read are listed under the table.
"""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

from attention_lab.review.chart_metric import chart_metric, shown
from attention_lab.review.cli import written, written_text
from attention_lab.review.escape import console, csv_cell, markdown_cell, markdown_code, one_line
from attention_lab.review.sweep import Group, Job, Sweep, mean_std, seed_groups

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def _metric_cell(job: Job, name: str) -> str:
    value = job.metrics.get(name)
    return "—" if value is None else f"{value:.4f}"


def _solve_cell(job: Job) -> str:
    if not job.reports_solve:
        return "—"
    return "never" if job.steps_to_solve is None else str(job.steps_to_solve)


def error_text(job: Job) -> str:
    """The job's error, and which of its records could not be read."""
    if not job.unreadable:
        return job.error
    note = "unreadable: " + ", ".join(job.unreadable)
    return f"{job.error} ({note})" if job.error else note


def _solve_columns(sweep: Sweep) -> list[str]:
    return ["steps_to_solve"] if sweep.reports_solve else []


def table_rows(sweep: Sweep) -> tuple[list[str], list[list[str]]]:
    """Header and rows as displayed (rich and Markdown)."""
    header = ["job", "overrides", "status", *sweep.metric_names, *_solve_columns(sweep), "params", "steps",
              "wall time", "error"]
    rows = []
    for job in sweep.jobs:
        metrics = [_metric_cell(job, name) + (" ★" if job.best and name == sweep.metric else "")
                   for name in sweep.metric_names]
        wall = format_seconds(job.wall_time_s)
        if job.status == "running" and job.wall_time_s is not None:
            wall += " so far"
        error = error_text(job)
        error = error if len(error) <= 160 else error[:157] + "..."
        solve = [_solve_cell(job)] if sweep.reports_solve else []
        rows.append([job.id, job.configuration, job.status, *metrics, *solve,
                     "—" if job.params is None else f"{int(job.params):,}",
                     "—" if job.steps is None else str(job.steps), wall, error])
    return header, rows


def caption(sweep: Sweep) -> str:
    counts = ", ".join(f"{n} {s}" for s, n in sweep.counts().items())
    parts = [f"{len(sweep.jobs)} jobs ({counts})", f"optimized metric {sweep.metric} ({sweep.direction})"]
    if sweep.sweep_overrides:  # the command line: what varied and what all jobs share
        parts.append("sweep: " + " ".join(sweep.sweep_overrides))
    elif sweep.common_overrides:
        parts.append("common overrides: " + " ".join(sweep.common_overrides))
    return " · ".join(parts)


def markdown_table(header: list[str], rows: list[list[str]], overrides_column: int) -> list[str]:
    """A Markdown table, every cell escaped; the overrides column is set as code (except "(defaults)")."""
    lines = ["| " + " | ".join(markdown_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        cells = [markdown_code(c) if n == overrides_column and c != "(defaults)" else markdown_cell(c)
                 for n, c in enumerate(row)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def unreadable_markdown(sweep: Sweep) -> list[str]:
    if not sweep.problems:
        return []
    return ["", "## Unreadable records", "", "Left out of the table above:", "",
            *[f"- {markdown_cell(line)}" for line in sweep.problems]]


def folded_lines(sweep: Sweep) -> list[str]:
    """One line per combination of the sweep's product that was not run, and why."""
    return [fold.line(sweep.common_overrides) for fold in sweep.folds]


def folded_markdown(sweep: Sweep) -> list[str]:
    if not sweep.folds:
        return []
    return ["", "## Folded combinations", "", "Not run: each trains the same run as the job named.", "",
            *[f"- {markdown_cell(line)}" for line in folded_lines(sweep)]]


def to_markdown(sweep: Sweep) -> str:
    header, rows = table_rows(sweep)
    lines = [f"Sweep {markdown_code(sweep.dir.name)}: {markdown_cell(caption(sweep))}", "",
             *markdown_table(header, rows, overrides_column=1), *folded_markdown(sweep), *unreadable_markdown(sweep)]
    return "\n".join(lines) + "\n"


class CsvRows:
    def __init__(self, writer) -> None:
        self.writer = writer

    def write(self, row: list) -> None:
        self.writer.writerow([csv_cell(cell) for cell in row])


def to_csv(sweep: Sweep) -> str:
    """Raw values (no formatting): one row per job; text cells neutralised for spreadsheets."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # RFC 4180 line ends (\r\n): a CR inside a cell is then quoted too
    write = CsvRows(writer).write
    write(["job", "overrides", "all_overrides", "status", *sweep.metric_names, *_solve_columns(sweep),
           "params", "steps", "wall_time_s", "best", "error", "dir"])
    for job in sweep.jobs:  # steps_to_solve: empty when not reported, "never" when null
        solve = [_solve_cell(job).replace("—", "")] if sweep.reports_solve else []
        write([job.id, job.configuration, " ".join(job.overrides), job.status,
               *[job.metrics.get(name, "") for name in sweep.metric_names], *solve,
               "" if job.params is None else job.params, "" if job.steps is None else job.steps,
               "" if job.wall_time_s is None else job.wall_time_s, job.best, error_text(job), str(job.dir)])
    return buffer.getvalue()


def rich_table(sweep: Sweep):
    from rich.markup import escape
    from rich.table import Table

    header, rows = table_rows(sweep)
    table = Table(title=escape(console(f"Sweep {sweep.dir}")), caption=escape(console(caption(sweep))),
                  caption_justify="left")
    styles = {"ok": "green", "failed": "bold red", "interrupted": "magenta", "running": "yellow", "stale": "magenta"}
    for name in header:
        numeric = name in sweep.metric_names or name in ("steps_to_solve", "params", "steps", "wall time")
        table.add_column(escape(console(name)), justify="right" if numeric else "left", overflow="fold",
                         style="dim" if name == "error" else None)
    for job, row in zip(sweep.jobs, rows, strict=True):
        row = [escape(console(cell)) for cell in row]  # text from the records is never markup, nor a terminal's command
        row[2] = f"[{styles[job.status]}]{job.status}[/]"
        table.add_row(*row, style="bold" if job.best else None)
    return table


# ---------------------------------------------------------------------------------------------- seeds

def show_groups(groups: list[Group]) -> bool:
    """The grouped view is worth showing when some configuration ran more than once (several seeds)."""
    return any(g.total > 1 for g in groups)


def _count(n: int, total: int) -> str:
    return f"n={n}" if n == total else f"n={n} of {total}"


def format_stat(values: list[float], total: int, spec: str = ".4f") -> str:
    """``mean ± std (n=k)`` with the sample std; ``value (n=1)`` for one value; ``of total`` when jobs
    are missing from the statistics (failed, interrupted, ...)."""
    mean, std = mean_std(values)
    if mean is None:
        return f"— ({_count(0, total)})"
    text = f"{mean:{spec}}" if std is None else f"{mean:{spec}} ± {std:{spec}}"
    return f"{text} ({_count(len(values), total)})"


def format_solve(group: Group) -> str:
    """``3/3 solved, 250 ± 50``: how many ok jobs reached val/seq_acc >= 0.99, and when (mean ± std)."""
    solved, reporting = group.solve_steps()
    if not reporting:
        return "—"
    mean, std = mean_std([float(s) for s in solved])
    text = f"{len(solved)}/{reporting} solved"
    if mean is not None:
        text += f", {mean:.0f}" + ("" if std is None else f" ± {std:.0f}")
    return text + ("" if reporting == group.total else f" ({_count(reporting, group.total)})")


def _statuses(group: Group) -> str:
    counts: dict[str, int] = {}
    for job in group.jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def group_rows(sweep: Sweep, groups: list[Group]) -> tuple[list[str], list[list[str]]]:
    header = ["configuration", "seeds", "jobs", *sweep.metric_names, *_solve_columns(sweep)]
    rows = []
    for group in groups:
        solve = [format_solve(group)] if sweep.reports_solve else []
        rows.append([group.configuration, ", ".join(group.seeds), _statuses(group),
                     *[format_stat(group.values(name), group.total, ".0f" if name.endswith("_step") else ".4f")
                       for name in sweep.metric_names], *solve])
    return header, rows


def groups_to_markdown(sweep: Sweep, groups: list[Group]) -> str:
    header, rows = group_rows(sweep, groups)
    lines = ["## Seeds", "", "Jobs that differ only in `seed`: mean ± sample std (n) of the jobs with status ok.", "",
             *markdown_table(header, rows, overrides_column=0)]
    return "\n".join(lines) + "\n"


def groups_to_csv(sweep: Sweep, groups: list[Group]) -> str:
    """Raw values, one row per configuration: <metric>_mean, _std (empty below 2 values), _n."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # RFC 4180 line ends (\r\n): a CR inside a cell is then quoted too
    stats = [f"{name}_{part}" for name in sweep.metric_names for part in ("mean", "std", "n")]
    solve = ["solved", "solve_reported", "steps_to_solve_mean", "steps_to_solve_std"] if sweep.reports_solve else []
    write = CsvRows(writer).write
    write(["configuration", "all_overrides", "seeds", "jobs", "ok", *stats, *solve])
    for group in groups:
        row = [group.configuration, " ".join(group.overrides), " ".join(group.seeds), group.total, len(group.ok)]
        for name in sweep.metric_names:
            values = group.values(name)
            mean, std = mean_std(values)
            row += ["" if mean is None else mean, "" if std is None else std, len(values)]
        if sweep.reports_solve:
            solved, reporting = group.solve_steps()
            mean, std = mean_std([float(s) for s in solved])
            row += [len(solved), reporting, "" if mean is None else mean, "" if std is None else std]
        write(row)
    return buffer.getvalue()


def rich_group_table(sweep: Sweep, groups: list[Group]):
    from rich.markup import escape
    from rich.table import Table

    header, rows = group_rows(sweep, groups)
    table = Table(title="Seeds: jobs that differ only in seed", caption="mean ± sample std (n) of the ok jobs",
                  caption_justify="left")
    for name in header:
        table.add_column(escape(console(name)), justify="left" if name in ("configuration", "seeds", "jobs") else "right",
                         overflow="fold")
    for row in rows:
        table.add_row(*[escape(console(cell)) for cell in row])
    return table


def bar_label(job: Job, value: float | None, best: bool) -> str:
    """The value at the end of a job's bar, or why it has none."""
    if job.status != "ok":
        return job.status
    if value is None:
        return "never" if job.reports_solve and job.steps_to_solve is None else "—"
    return shown(value) + (" ★ best" if best else "")


def bar_chart(sweep: Sweep, path: Path) -> Path:
    """compare.png: :func:`bar_figure`, saved to ``path``."""
    bar_figure(sweep).savefig(path)
    return path


def bar_figure(sweep: Sweep) -> Figure:
    """Horizontal bars of the optimized metric (or, when every job ties on it, of a metric that tells them apart:
    :func:`~attention_lab.review.chart_metric.chart_metric`), one per configuration; failed/running jobs keep
    their slot, labelled with their status; the best job is highlighted. A NaN or infinite value has no bar,
    only its label. Labels are drawn as text: a ``$`` in an override is no math."""
    from matplotlib.figure import Figure

    jobs = sweep.jobs
    chart = chart_metric(sweep)
    labels = [one_line(f"{j.id}: {j.configuration}") for j in jobs]
    fig = Figure(figsize=(8.5, 1.6 + 0.42 * len(jobs)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    drawn = [v is not None and math.isfinite(v) for v in chart.values]
    values = [v if shown_bar else 0.0 for v, shown_bar in zip(chart.values, drawn, strict=True)]
    colors = ["#2ca02c" if best else ("#1f77b4" if j.status == "ok" else "#cccccc")
              for j, best in zip(jobs, chart.best, strict=True)]
    positions = list(range(len(jobs)))
    ax.barh(positions, values, color=colors, height=0.65)
    ax.set_yticks(positions, labels=[label if len(label) <= 48 else label[:45] + "..." for label in labels],
                  parse_math=False)
    ax.invert_yaxis()  # job 0 on top, as in the table
    finite = [v for v, shown_bar in zip(values, drawn, strict=True) if shown_bar]
    low, high = min([0.0, *finite]), max([0.0, *finite])
    bounded = chart.name.endswith("acc") or "accuracy" in chart.name
    if bounded and 0 <= low and high <= 1:
        ax.set_xlim(0, 1.22)  # room for the labels
        ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    else:
        span = (high - low) or 1.0
        ax.set_xlim(low - (0.05 * span if low < 0 else 0), high + 0.25 * span)
    for pos, job, value, raw, best in zip(positions, jobs, values, chart.values, chart.best, strict=True):
        ax.text(max(value, 0.0) + ax.get_xlim()[1] * 0.01, pos, bar_label(job, raw, best), va="center", fontsize=9,
                color="black" if job.status == "ok" else "#b22222", parse_math=False)
    arrow = "higher is better" if chart.direction == "maximize" else "lower is better"
    ax.set_xlabel(f"{chart.name} ({arrow})", parse_math=False)
    tie = f" ({chart.tie})" if chart.tie else ""
    ax.set_title(f"{chart.name} per configuration{tie} · {sweep.dir.name}", fontsize=11, parse_math=False,
                 wrap=True)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    return fig


def write_reports(sweep: Sweep, out: Path, stem: str = "compare") -> dict[str, Path]:
    """compare.csv, .md and .png in ``out`` (a directory checked by :func:`~attention_lab.review.cli.output_dir`);
    with several seeds per configuration, also compare_groups.csv and a "Seeds" section in compare.md."""
    paths = {"csv": out / f"{stem}.csv", "markdown": out / f"{stem}.md", "png": out / f"{stem}.png"}
    groups = seed_groups(sweep)
    markdown = to_markdown(sweep)
    if show_groups(groups):
        paths["groups_csv"] = out / f"{stem}_groups.csv"
        markdown += "\n" + groups_to_markdown(sweep, groups)
    written_text(paths["csv"], to_csv(sweep))
    written_text(paths["markdown"], markdown)
    if "groups_csv" in paths:
        written_text(paths["groups_csv"], groups_to_csv(sweep, groups))
    written(paths["png"], lambda tmp: bar_chart(sweep, tmp))
    return paths


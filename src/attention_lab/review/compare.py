"""Reports of a sweep (see :mod:`attention_lab.review.sweep`): one row per job with its overrides, final
validation metrics, parameter count, steps, wall time, status and error, as a rich table, CSV, Markdown
and a bar chart (:mod:`attention_lab.review.compare_chart`); and, when a configuration ran with several seeds, one
row per configuration with mean ± std (n) of each metric and of steps_to_solve. The ★ marks the configuration
whose seeds separate it from every other (:mod:`attention_lab.review.verdict`); a line under the table says which,
or that the seeds separate none. No torch import: reports of big sweeps are quick. Every cell is escaped for where it goes (:mod:`attention_lab.records.escape`), and the records
that could not be read are listed under the table.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from attention_lab.records.escape import console, csv_cell, markdown_cell, markdown_code
from attention_lab.review.cli import written, written_text
from attention_lab.review.compare_chart import bar_chart
from attention_lab.review.numbers import STEPS_TO_SOLVE, mean_text, value_text
from attention_lab.review.sweep import Group, Job, Sweep, mean_std, seed_groups
from attention_lab.review.verdict import Verdict, rank


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
    return "—" if value is None else value_text(name, value)


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


def starred(text: str, marked: bool) -> str:
    return text + " ★" if marked else text


def table_rows(sweep: Sweep, verdict: Verdict | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows as displayed (rich and Markdown): the ★ on the deciding metric of the best configuration's
    jobs (:mod:`attention_lab.review.verdict`), none when the seeds separate no configuration."""
    verdict = verdict or rank(sweep)
    header = ["job", "overrides", "status", *sweep.metric_names, *_solve_columns(sweep), "params", "steps",
              "wall time", "error"]
    rows = []
    for job in sweep.jobs:
        best = verdict.marks(job)
        metrics = [starred(_metric_cell(job, name), best and name == verdict.metric) for name in sweep.metric_names]
        wall = format_seconds(job.wall_time_s)
        if job.status == "running" and job.wall_time_s is not None:
            wall += " so far"
        error = error_text(job)
        error = error if len(error) <= 160 else error[:157] + "..."
        solve = [starred(_solve_cell(job), best and verdict.metric == STEPS_TO_SOLVE)] if sweep.reports_solve else []
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


def verdict_markdown(verdict: Verdict) -> list[str]:
    line = verdict.line()
    return ["", markdown_cell(line)] if line else []


def to_markdown(sweep: Sweep, verdict: Verdict | None = None) -> str:
    verdict = verdict or rank(sweep)
    header, rows = table_rows(sweep, verdict)
    pooled = ["", markdown_cell(sweep.pooled)] if sweep.pooled else []
    lines = [f"Sweep {markdown_code(sweep.dir.name)}: {markdown_cell(caption(sweep))}", *pooled, "",
             *markdown_table(header, rows, overrides_column=1), *verdict_markdown(verdict), *folded_markdown(sweep),
             *unreadable_markdown(sweep)]
    return "\n".join(lines) + "\n"


class CsvRows:
    def __init__(self, writer) -> None:
        self.writer = writer

    def write(self, row: list) -> None:
        self.writer.writerow([csv_cell(cell) for cell in row])


def to_csv(sweep: Sweep, verdict: Verdict | None = None) -> str:
    """Raw values (no formatting): one row per job; text cells neutralised for spreadsheets; ``best``: a job of the
    configuration the verdict names best."""
    verdict = verdict or rank(sweep)
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
               "" if job.wall_time_s is None else job.wall_time_s, verdict.marks(job), error_text(job), str(job.dir)])
    return buffer.getvalue()


def rich_table(sweep: Sweep, verdict: Verdict | None = None):
    from rich.markup import escape
    from rich.table import Table

    verdict = verdict or rank(sweep)
    header, rows = table_rows(sweep, verdict)
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
        table.add_row(*row, style="bold" if verdict.marks(job) else None)
    return table


# ---------------------------------------------------------------------------------------------- seeds

def show_groups(groups: list[Group]) -> bool:
    """The grouped view is worth showing when some configuration ran more than once (several seeds)."""
    return any(g.total > 1 for g in groups)


def _count(n: int, total: int) -> str:
    return f"n={n}" if n == total else f"n={n} of {total}"


def format_stat(values: list[float], total: int, name: str = "") -> str:
    """``mean ± std (n=k)`` with the sample std (a mean of step counts to one decimal, of metrics to four);
    ``value (n=1)`` for one value; ``of total`` when jobs are missing from the statistics (failed, ...)."""
    mean, std = mean_std(values)
    if mean is None:
        return f"— ({_count(0, total)})"
    text = value_text(name, mean) if std is None else mean_text(name, mean, std)
    return f"{text} ({_count(len(values), total)})"


def format_solve(group: Group) -> str:
    """``3/3 solved, 233.3 ± 76.4``: how many ok jobs reached val/seq_acc >= 0.99, and when (mean ± std)."""
    solved, reporting = group.solve_steps()
    if not reporting:
        return "—"
    mean, std = mean_std([float(s) for s in solved])
    text = f"{len(solved)}/{reporting} solved"
    if mean is not None:
        text += ", " + (value_text(STEPS_TO_SOLVE, mean) if std is None else mean_text(STEPS_TO_SOLVE, mean, std))
    return text + ("" if reporting == group.total else f" ({_count(reporting, group.total)})")


def _statuses(group: Group) -> str:
    counts: dict[str, int] = {}
    for job in group.jobs:
        counts[job.status] = counts.get(job.status, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def group_rows(sweep: Sweep, groups: list[Group], verdict: Verdict | None = None) -> tuple[list[str], list[list[str]]]:
    """One row per configuration; with a verdict, the ★ on the best configuration's deciding metric."""
    header = ["configuration", "seeds", "jobs", *sweep.metric_names, *_solve_columns(sweep)]
    rows = []
    for group in groups:
        best = verdict is not None and verdict.winner is group
        solve = [starred(format_solve(group), best and verdict.metric == STEPS_TO_SOLVE)] if sweep.reports_solve else []
        rows.append([group.configuration, ", ".join(group.seeds), _statuses(group),
                     *[starred(format_stat(group.values(name), group.total, name), best and name == verdict.metric)
                       for name in sweep.metric_names], *solve])
    return header, rows


def groups_to_markdown(sweep: Sweep, groups: list[Group], verdict: Verdict | None = None) -> str:
    header, rows = group_rows(sweep, groups, verdict)
    lines = ["## Seeds", "", "Jobs that differ only in `seed`: mean ± sample std (n) of the jobs with status ok.", "",
             *markdown_table(header, rows, overrides_column=0)]
    return "\n".join(lines) + "\n"


def groups_to_csv(sweep: Sweep, groups: list[Group], verdict: Verdict | None = None) -> str:
    """Raw values, one row per configuration: <metric>_mean, _std (empty below 2 values), _n; ``best``: the
    configuration the verdict names best (its seeds separate it from every other)."""
    verdict = verdict or rank(sweep, groups)
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # RFC 4180 line ends (\r\n): a CR inside a cell is then quoted too
    stats = [f"{name}_{part}" for name in sweep.metric_names for part in ("mean", "std", "n")]
    solve = ["solved", "solve_reported", "steps_to_solve_mean", "steps_to_solve_std"] if sweep.reports_solve else []
    write = CsvRows(writer).write
    write(["configuration", "all_overrides", "seeds", "jobs", "ok", *stats, *solve, "best"])
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
        write([*row, verdict.winner is group])
    return buffer.getvalue()


def rich_group_table(sweep: Sweep, groups: list[Group], verdict: Verdict | None = None):
    from rich.markup import escape
    from rich.table import Table

    header, rows = group_rows(sweep, groups, verdict)
    table = Table(title="Seeds: jobs that differ only in seed", caption="mean ± sample std (n) of the ok jobs",
                  caption_justify="left")
    for name in header:
        table.add_column(escape(console(name)), justify="left" if name in ("configuration", "seeds", "jobs") else "right",
                         overflow="fold")
    for row in rows:
        table.add_row(*[escape(console(cell)) for cell in row])
    return table


def write_reports(sweep: Sweep, out: Path, stem: str = "compare") -> dict[str, Path]:
    """compare.csv, .md and .png in ``out`` (a directory checked by :func:`~attention_lab.review.cli.output_dir`);
    with several seeds per configuration, also compare_groups.csv and a "Seeds" section in compare.md."""
    paths = {"csv": out / f"{stem}.csv", "markdown": out / f"{stem}.md", "png": out / f"{stem}.png"}
    groups = seed_groups(sweep)
    verdict = rank(sweep, groups)
    markdown = to_markdown(sweep, verdict)
    if show_groups(groups):
        paths["groups_csv"] = out / f"{stem}_groups.csv"
        markdown += "\n" + groups_to_markdown(sweep, groups, verdict)
    written_text(paths["csv"], to_csv(sweep, verdict))
    written_text(paths["markdown"], markdown)
    if "groups_csv" in paths:
        written_text(paths["groups_csv"], groups_to_csv(sweep, groups, verdict))
    written(paths["png"], lambda tmp: bar_chart(sweep, tmp, verdict))
    return paths


"""Reports of a sweep (see :mod:`attention_lab.review.sweep`): one row per job with its overrides, final
validation metrics, parameter count, steps, wall time, status and error, as a rich table, CSV, Markdown
and a bar chart of the optimized metric. No torch import: reports of big sweeps are quick.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from attention_lab.review.cli import ReviewError
from attention_lab.review.sweep import Job, Sweep


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


def table_rows(sweep: Sweep) -> tuple[list[str], list[list[str]]]:
    """Header and rows as displayed (rich and Markdown)."""
    header = ["job", "overrides", "status", *sweep.metric_names, "params", "steps", "wall time", "error"]
    rows = []
    for job in sweep.jobs:
        metrics = [_metric_cell(job, name) + (" ★" if job.best and name == sweep.metric else "")
                   for name in sweep.metric_names]
        wall = format_seconds(job.wall_time_s)
        if job.status == "running" and job.wall_time_s is not None:
            wall += " so far"
        error = job.error if len(job.error) <= 160 else job.error[:157] + "..."
        rows.append([job.id, job.configuration, job.status, *metrics,
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


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(sweep: Sweep) -> str:
    header, rows = table_rows(sweep)
    lines = [f"Sweep `{sweep.dir.name}`: {caption(sweep)}", "",
             "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        cells = [_md_cell(c) for c in row]
        cells[1] = f"`{cells[1]}`" if cells[1] != "(defaults)" else cells[1]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_csv(sweep: Sweep) -> str:
    """Raw values (no formatting): one row per job."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["job", "overrides", "all_overrides", "status", *sweep.metric_names, "params", "steps",
                     "wall_time_s", "best", "error", "dir"])
    for job in sweep.jobs:
        writer.writerow([job.id, job.configuration, " ".join(job.overrides), job.status,
                         *[job.metrics.get(name, "") for name in sweep.metric_names],
                         "" if job.params is None else job.params, "" if job.steps is None else job.steps,
                         "" if job.wall_time_s is None else job.wall_time_s, job.best, job.error, str(job.dir)])
    return buffer.getvalue()


def rich_table(sweep: Sweep):
    from rich.table import Table

    header, rows = table_rows(sweep)
    table = Table(title=f"Sweep {sweep.dir}", caption=caption(sweep), caption_justify="left")
    styles = {"ok": "green", "failed": "bold red", "interrupted": "magenta", "running": "yellow", "stale": "magenta"}
    for name in header:
        numeric = name in sweep.metric_names or name in ("params", "steps", "wall time")
        table.add_column(name, justify="right" if numeric else "left", overflow="fold",
                         style="dim" if name == "error" else None)
    for job, row in zip(sweep.jobs, rows, strict=True):
        row = list(row)
        row[2] = f"[{styles[job.status]}]{job.status}[/]"
        table.add_row(*row, style="bold" if job.best else None)
    return table


def bar_chart(sweep: Sweep, path: Path) -> Path:
    """Horizontal bars of the optimized metric, one per configuration; failed/running jobs keep
    their slot, labelled with their status; the best job is highlighted."""
    from matplotlib.figure import Figure

    jobs = sweep.jobs
    labels = [f"{j.id}: {j.configuration}" for j in jobs]
    fig = Figure(figsize=(8.5, 1.6 + 0.42 * len(jobs)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    values = [j.value if j.status == "ok" and j.value is not None else 0.0 for j in jobs]
    colors = ["#2ca02c" if j.best else ("#1f77b4" if j.status == "ok" else "#cccccc") for j in jobs]
    positions = list(range(len(jobs)))
    ax.barh(positions, values, color=colors, height=0.65)
    ax.set_yticks(positions, labels=[label if len(label) <= 48 else label[:45] + "..." for label in labels])
    ax.invert_yaxis()  # job 0 on top, as in the table
    finite = [v for j, v in zip(jobs, values, strict=True) if j.status == "ok"]
    top = max(finite, default=1.0)
    bounded = sweep.metric.endswith("acc") or "accuracy" in sweep.metric
    ax.set_xlim(0, 1.22 if bounded and top <= 1 else (top * 1.25 if top > 0 else 1.0))  # room for the labels
    if bounded and top <= 1:
        ax.set_xticks([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    for pos, job, value in zip(positions, jobs, values, strict=True):
        text = f"{value:.3f}" + (" ★ best" if job.best else "") if job.status == "ok" and job.value is not None else job.status
        ax.text(value + ax.get_xlim()[1] * 0.01, pos, text, va="center", fontsize=9,
                color="black" if job.status == "ok" else "#b22222")
    arrow = "higher is better" if sweep.direction == "maximize" else "lower is better"
    ax.set_xlabel(f"{sweep.metric} ({arrow})")
    ax.set_title(f"{sweep.metric} per configuration · {sweep.dir.name}", fontsize=11)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    fig.savefig(path)
    return path


def write_reports(sweep: Sweep, out: Path, stem: str = "compare") -> dict[str, Path]:
    """compare.csv, .md and .png in ``out`` (a directory checked by :func:`~attention_lab.review.cli.output_dir`)."""
    paths = {"csv": out / f"{stem}.csv", "markdown": out / f"{stem}.md", "png": out / f"{stem}.png"}
    try:
        paths["csv"].write_text(to_csv(sweep))
        paths["markdown"].write_text(to_markdown(sweep))
        bar_chart(sweep, paths["png"])
    except OSError as err:  # e.g. the disk filled up after the check
        raise ReviewError(f"cannot write the reports in {out} ({err.strerror or type(err).__name__}): "
                          "choose another directory with --out DIR") from None
    return paths

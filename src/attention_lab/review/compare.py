"""One row per job of a Hydra sweep: its overrides, final validation metrics, parameter count, wall
time and status, as a rich table, CSV, Markdown and a bar chart of the optimized metric.

Everything comes from the job directories (``.hydra/overrides.yaml``, ``.hydra/config.yaml``,
``metrics.json``, ``run_info.json`` when present) and, when the sweep wrote one,
``sweep_summary.json`` (status and error of each job). Jobs without ``metrics.json`` are
``failed`` when the summary, ``run_info.json`` or the job's log says so, when run_info.json's
process is gone, or when a sequential sweep has moved on to later jobs; ``interrupted`` when
stopped by a signal (resumable); ``running`` while their directory still changes; ``stale`` when
nothing was written for ``stale_minutes`` (killed, or failed without a record).
No torch import: reports of big sweeps are quick.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_lab.review.cli import ReviewError

STATUSES = ("ok", "failed", "interrupted", "running", "stale")
SUMMARY_FILE = "sweep_summary.json"
WALL_TIME_KEYS = ("wall_time_s", "wall_time", "duration_s", "elapsed_s", "runtime_s")
SEQUENTIAL_LAUNCHERS = ("BasicLauncher",)


@dataclass
class Job:
    id: str  # path of the job dir relative to the sweep dir ("0", "1", ...)
    dir: Path
    overrides: list[str]
    status: str = "running"
    metrics: dict[str, float] = field(default_factory=dict)  # final val/* metrics
    params: int | None = None
    steps: int | None = None
    wall_time_s: float | None = None  # for running jobs: time since the job started
    error: str = ""
    optimized_metric: str | None = None
    configuration: str = ""  # the overrides that differ between jobs
    best: bool = False

    @property
    def value(self) -> float | None:
        return self.metrics.get(self.optimized_metric) if self.optimized_metric else None


@dataclass
class Sweep:
    dir: Path
    jobs: list[Job]
    metric: str
    direction: str  # maximize | minimize
    common_overrides: list[str]
    sweep_overrides: list[str]  # the sweep's command line (multirun.yaml), e.g. heads=1,2
    metric_names: list[str]  # val/* columns, the optimized metric first

    def counts(self) -> dict[str, int]:
        return {s: sum(j.status == s for j in self.jobs) for s in STATUSES if any(j.status == s for j in self.jobs)}


# ---------------------------------------------------------------------------------------------- reading

def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # missing, or being written right now
        return None


def _read_yaml(path: Path) -> Any:
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    except Exception:
        return None


def _natural_key(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def find_job_dirs(sweep_dir: Path) -> list[Path]:
    """Directories holding a job's ``.hydra/overrides.yaml`` (any depth), in natural order."""
    dirs = {p.parent.parent for p in sweep_dir.rglob(".hydra/overrides.yaml")} - {sweep_dir}
    return sorted(dirs, key=lambda p: _natural_key(p.relative_to(sweep_dir).as_posix()))


def load_summary(sweep_dir: Path) -> dict[str, dict]:
    """``sweep_summary.json`` entries keyed by job id (number or relative dir), whatever the layout:
    a list of entries, ``{"jobs": [...]}``, or ``{"<job>": {...}}``."""
    data = _read_json(sweep_dir / SUMMARY_FILE)
    if isinstance(data, dict) and isinstance(data.get("jobs"), (list, dict)):
        data = data["jobs"]
    if isinstance(data, dict):
        data = [dict(entry, _key=key) for key, entry in data.items() if isinstance(entry, dict)]
    if not isinstance(data, list):
        return {}
    entries: dict[str, dict] = {}
    for entry in data:
        if not isinstance(entry, dict):
            continue
        for key in ("_key", "num", "job_num", "job", "id", "index"):
            if entry.get(key) is not None and not isinstance(entry[key], (dict, list)):
                entries.setdefault(str(entry[key]), entry)
        for key in ("dir", "output_dir", "job_dir", "run_dir", "path"):
            if isinstance(entry.get(key), str):
                path = Path(entry[key])
                entries.setdefault(path.name, entry)
                try:
                    entries.setdefault(path.resolve().relative_to(sweep_dir.resolve()).as_posix(), entry)
                except ValueError:
                    pass
    return entries


def _normalize_status(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).lower()
    if text in ("ok", "completed", "complete", "success", "succeeded", "done", "finished"):
        return "ok"
    if text in ("failed", "failure", "error", "errored", "crashed", "killed", "cancelled", "canceled"):
        return "failed"
    if text in ("running", "starting", "started", "pending", "queued", "in_progress"):
        return "running"
    if text in ("interrupted", "stopped", "preempted"):  # stopped by a signal, resumable
        return "interrupted"
    return None


def _first(mapping: dict | None, keys: tuple[str, ...]) -> Any:
    for key in keys:
        if mapping and mapping.get(key) is not None:
            return mapping[key]
    return None


def _error_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        value = value.get("message") or value.get("error") or json.dumps(value)
    lines = [line.strip() for line in str(value).strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""  # the exception line, not the traceback


def _log_error(job_dir: Path) -> str:
    """The last error line of the job's log, if it logged one (Hydra names it <job name>.log)."""
    for log_file in job_dir.glob("*.log"):
        try:
            lines = log_file.read_text(errors="replace").splitlines()
        except OSError:
            continue
        errors = [line for line in lines if "Traceback" in line or "[ERROR]" in line or "Error executing job" in line]
        if errors:
            return errors[-1].split("] - ")[-1].strip()
    return ""


def _process_gone(info: dict) -> bool:
    """True when run_info.json names a process of this host that no longer exists."""
    pid, host = info.get("pid"), info.get("host")
    if not isinstance(pid, int) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # exists, owned by someone else
        return False
    return False


def _last_write(job_dir: Path) -> float:
    times = [p.stat().st_mtime for p in job_dir.rglob("*") if p.is_file()]
    return max(times, default=job_dir.stat().st_mtime)


def _started(job_dir: Path) -> float:
    config = job_dir / ".hydra" / "config.yaml"
    return (config if config.exists() else job_dir).stat().st_mtime


def read_job(sweep_dir: Path, job_dir: Path, summary: dict[str, dict]) -> Job:
    job_id = job_dir.relative_to(sweep_dir).as_posix()
    overrides = [str(o) for o in (_read_yaml(job_dir / ".hydra" / "overrides.yaml") or [])]
    config = _read_yaml(job_dir / ".hydra" / "config.yaml") or {}
    job = Job(id=job_id, dir=job_dir, overrides=overrides, optimized_metric=config.get("optimized_metric"))
    entry = summary.get(job_id) or summary.get(job_dir.name) or {}
    metrics = _read_json(job_dir / "metrics.json")
    info = _read_json(job_dir / "run_info.json")
    info = info if isinstance(info, dict) else {}
    if not isinstance(metrics, dict):
        metrics = entry.get("metrics") if isinstance(entry.get("metrics"), dict) else None
    status = _normalize_status(entry.get("status")) or _normalize_status(info.get("status"))
    if metrics:
        job.metrics = {k: float(v) for k, v in metrics.items() if k.startswith("val/") and isinstance(v, (int, float))}
        job.params = _first(metrics, ("params",))
        job.steps = _first(metrics, ("global_step", "steps"))
        job.wall_time_s = _first(metrics, WALL_TIME_KEYS)
        status = status or "ok"
    job.params = job.params if job.params is not None else _first(info, ("params",)) or _first(entry, ("params",))
    job.steps = job.steps if job.steps is not None else _first(info, ("global_step", "steps"))
    if job.wall_time_s is None:
        job.wall_time_s = _first(info, WALL_TIME_KEYS) or _first(entry, WALL_TIME_KEYS)
    job.error = _error_text(_first(entry, ("error", "exception", "message")) or _first(info, ("error", "exception")))
    if status is None and job.error:
        status = "failed"
    if status is None and (log_error := _log_error(job_dir)):
        status, job.error = "failed", log_error
    if status == "running" and not metrics and _process_gone(info):
        status = "failed"
        job.error = job.error or f"the job's process (pid {info['pid']}) is gone without reporting a result"
    job.status = status or "running"
    return job


def _infer_unfinished(sweep_dir: Path, jobs: list[Job], launcher: str, stale_minutes: float, now: float) -> None:
    """Jobs without metrics or a recorded status: failed if a sequential sweep moved past them,
    stale if nothing changed for ``stale_minutes``, else running (with the time so far)."""
    sequential = any(name in launcher for name in SEQUENTIAL_LAUNCHERS)
    optuna_done = (sweep_dir / "optimization_results.yaml").is_file()
    for index, job in enumerate(jobs):
        if job.status != "running" or job.metrics:
            continue
        later_started = any(other.dir.exists() for other in jobs[index + 1:])
        if (sequential and later_started) or optuna_done:
            job.status = "failed"
            job.error = job.error or "no metrics.json: the job ended without finishing (see its log or the sweep's output)"
        elif now - _last_write(job.dir) > stale_minutes * 60:
            job.status = "stale"
            job.error = job.error or f"no metrics.json and nothing written for {stale_minutes:g}+ min"
        elif job.wall_time_s is None:
            job.wall_time_s = round(now - _started(job.dir), 1)


def _direction(multirun: dict | None, metric: str) -> str:
    direction = (((multirun or {}).get("hydra") or {}).get("sweeper") or {}).get("direction")
    if isinstance(direction, list):
        direction = direction[0] if direction else None
    if isinstance(direction, str) and direction.lower().startswith("min"):
        return "minimize"
    if isinstance(direction, str) and direction.lower().startswith("max"):
        return "maximize"
    return "minimize" if re.search(r"loss|error|perplexity|entropy", metric) else "maximize"


def collect_sweep(sweep_dir: str | Path, *, metric: str | None = None, stale_minutes: float = 30.0,
                  now: float | None = None) -> Sweep:
    sweep_dir = Path(sweep_dir).expanduser()
    if not sweep_dir.is_dir():
        raise ReviewError(f"{sweep_dir} is not a directory: pass a sweep directory such as outputs/multirun/<date>/<time>")
    job_dirs = find_job_dirs(sweep_dir)
    if not job_dirs:
        raise ReviewError(f"{sweep_dir} holds no job directories (*/.hydra/overrides.yaml): "
                          "pass the directory a `train.py -m` sweep wrote")
    multirun = _read_yaml(sweep_dir / "multirun.yaml")
    summary = load_summary(sweep_dir)
    jobs = [read_job(sweep_dir, d, summary) for d in job_dirs]
    launcher = str((((multirun or {}).get("hydra") or {}).get("launcher") or {}).get("_target_", "BasicLauncher"))
    _infer_unfinished(sweep_dir, jobs, launcher, stale_minutes, time.time() if now is None else now)

    metric = metric or next((j.optimized_metric for j in jobs if j.optimized_metric), None) or "val/seq_acc"
    for job in jobs:
        job.optimized_metric = metric
    direction = _direction(multirun, metric)
    names = sorted({k for j in jobs for k in j.metrics})
    metric_names = ([metric] if metric in names or not names else []) + [k for k in names if k != metric]

    # Overrides every job shares go in the caption; each row shows what makes it different.
    common = [o for o in jobs[0].overrides if all(o in j.overrides for j in jobs)] if len(jobs) > 1 else []
    for job in jobs:
        job.configuration = " ".join(o for o in job.overrides if o not in common) or "(defaults)"
    values = [j.value for j in jobs if j.status == "ok" and j.value is not None and not math.isnan(j.value)]
    if values:
        best = (max if direction == "maximize" else min)(values)
        for job in jobs:
            job.best = job.status == "ok" and job.value == best
    sweep_overrides = [str(o) for o in (((multirun or {}).get("hydra") or {}).get("overrides") or {}).get("task", [])]
    return Sweep(sweep_dir, jobs, metric, direction, common, sweep_overrides, metric_names)


# ---------------------------------------------------------------------------------------------- formatting

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


def write_reports(sweep: Sweep, out_dir: str | Path | None = None, stem: str = "compare") -> dict[str, Path]:
    out = Path(out_dir).expanduser() if out_dir else sweep.dir
    out.mkdir(parents=True, exist_ok=True)
    paths = {"csv": out / f"{stem}.csv", "markdown": out / f"{stem}.md", "png": out / f"{stem}.png"}
    paths["csv"].write_text(to_csv(sweep))
    paths["markdown"].write_text(to_markdown(sweep))
    bar_chart(sweep, paths["png"])
    return paths

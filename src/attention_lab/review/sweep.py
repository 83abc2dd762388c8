"""One record per job of a Hydra sweep, read from what the project writes and nothing else.

Per job directory: Hydra's ``.hydra/overrides.yaml`` and ``.hydra/config.yaml``, the run's
``metrics.json`` (final metrics, ``global_step``, ``params``) and ``run_info.json`` (``status``:
ok | failed | interrupted | running, ``error``, ``wall_time_s``, ``pid`` and ``host``). Per sweep:
``sweep_summary.json`` (``jobs``: ``job``, ``status``, ``error``, ``metrics``, ``output_dir``,
``wall_time_s``) and Hydra's ``multirun.yaml`` (the sweep's command line, the sweeper's direction).
``metrics.json`` may hold ``steps_to_solve``: the first step at which val/seq_acc >= 0.99, null if never.

A job without a recorded status is ``ok`` once its ``metrics.json`` exists; a ``running`` job whose
process is gone is ``failed``; a job without any record is ``running`` while its files still change
and ``stale`` once nothing was written for ``stale_minutes``. No torch import: big sweeps read quickly.

:func:`seed_groups` groups the jobs whose overrides are equal except for ``seed=``: the repeats of one
configuration (``python scripts/train.py -m ... seed=0,1,2``), summarised as mean ± sample std and n.
"""

from __future__ import annotations

import math
import os
import re
import socket
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_lab.head_metrics import HeadMetric
from attention_lab.review.cli import ReviewError
from attention_lab.run.files import MULTIRUN_RECORD, SUMMARY, read_json

RECORDED_STATUSES = ("ok", "failed", "interrupted", "running")  # what run_info.json and the summary hold
STATUSES = (*RECORDED_STATUSES, "stale")
FORMATION_STEPS = ("formation_step", "loss_drop_step")  # experiment=induction_formation: when the heads formed


@dataclass
class Job:
    id: str  # path of the job dir relative to the sweep dir ("0", "1", ...)
    dir: Path
    overrides: list[str]
    status: str = "running"
    # final val/*, ood/*, per-head head_score/* and ablation/* metrics; head_score/<kind>/max
    metrics: dict[str, float] = field(default_factory=dict)
    params: int | None = None
    steps: int | None = None
    wall_time_s: float | None = None  # for running jobs: time since the job started
    error: str = ""
    optimized_metric: str | None = None
    configuration: str = ""  # the overrides that differ between jobs
    best: bool = False
    reports_solve: bool = False  # metrics.json has steps_to_solve (a number, or null: never solved)
    steps_to_solve: int | None = None
    formation: dict[str, Any] | None = None  # metrics.json's "formation": the history of the induction scores

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
    metric_names: list[str]  # val/* then ood/* columns, the optimized metric (maybe a head score) first

    def counts(self) -> dict[str, int]:
        return {s: sum(j.status == s for j in self.jobs) for s in STATUSES if any(j.status == s for j in self.jobs)}

    @property
    def reports_solve(self) -> bool:
        return any(j.reports_solve for j in self.jobs)


SEED_OVERRIDE = re.compile(r"^\+{0,2}seed=")  # seed=1, +seed=1, ++seed=1


def seed_of(job: Job) -> str | None:
    return next((o.split("=", 1)[1] for o in job.overrides if SEED_OVERRIDE.match(o)), None)


def mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof=1; None below 2 values)."""
    if not values:
        return None, None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


@dataclass
class Group:
    """Jobs of one configuration that differ only in their seed. Statistics use the jobs with status ok;
    the others (failed, interrupted, ...) are counted in ``total`` but not averaged."""

    configuration: str  # the group's overrides that differ between jobs, without the seed
    overrides: list[str]  # all its overrides but the seed
    jobs: list[Job]

    @property
    def total(self) -> int:
        return len(self.jobs)

    @property
    def ok(self) -> list[Job]:
        return [j for j in self.jobs if j.status == "ok"]

    @property
    def seeds(self) -> list[str]:
        return [seed_of(j) or "default" for j in self.jobs]

    def values(self, name: str) -> list[float]:
        return [j.metrics[name] for j in self.ok if name in j.metrics]

    def solve_steps(self) -> tuple[list[int], int]:
        """The steps_to_solve of the ok jobs that solved the task, and how many ok jobs report it."""
        reporting = [j for j in self.ok if j.reports_solve]
        return [j.steps_to_solve for j in reporting if j.steps_to_solve is not None], len(reporting)


def seed_groups(sweep: Sweep) -> list[Group]:
    """Jobs grouped by their overrides without ``seed=``, in the order of each group's first job."""
    groups: dict[tuple[str, ...], Group] = {}
    for job in sweep.jobs:
        overrides = [o for o in job.overrides if not SEED_OVERRIDE.match(o)]
        key = tuple(sorted(overrides))
        if key not in groups:
            configuration = " ".join(o for o in overrides if o not in sweep.common_overrides) or "(defaults)"
            groups[key] = Group(configuration, overrides, [])
        groups[key].jobs.append(job)
    return list(groups.values())


# ---------------------------------------------------------------------------------------------- files

def read_yaml(path: Path) -> Any:
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)


def natural_key(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def find_job_dirs(sweep_dir: Path) -> list[Path]:
    """Directories holding a job's ``.hydra/overrides.yaml`` (any depth), in natural order."""
    dirs = {p.parent.parent for p in sweep_dir.rglob(".hydra/overrides.yaml")} - {sweep_dir}
    return sorted(dirs, key=lambda p: natural_key(p.relative_to(sweep_dir).as_posix()))


def load_summary(sweep_dir: Path) -> dict[str, dict]:
    """The entries of ``sweep_summary.json``, keyed by job number and by the name of the job's directory."""
    entries: dict[str, dict] = {}
    for entry in read_json(sweep_dir / SUMMARY).get("jobs", []):
        if entry.get("job") is not None:
            entries[str(entry["job"])] = entry
        if entry.get("output_dir"):
            entries.setdefault(Path(entry["output_dir"]).name, entry)
    return entries


def recorded_status(record: dict) -> str | None:
    status = record.get("status")
    return status if status in RECORDED_STATUSES else None


def last_line(error: str | None) -> str:
    """One line for a table cell: the last line of a multi-line error."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def process_gone(info: dict) -> bool:
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


def last_write(job_dir: Path) -> float:
    times = [p.stat().st_mtime for p in job_dir.rglob("*") if p.is_file()]
    return max(times, default=job_dir.stat().st_mtime)


def started(job_dir: Path) -> float:
    config = job_dir / ".hydra" / "config.yaml"
    return (config if config.exists() else job_dir).stat().st_mtime


# ---------------------------------------------------------------------------------------------- jobs

def read_job(sweep_dir: Path, job_dir: Path, summary: dict[str, dict]) -> Job:
    job_id = job_dir.relative_to(sweep_dir).as_posix()
    overrides = [str(o) for o in (read_yaml(job_dir / ".hydra" / "overrides.yaml") or [])]
    config = read_yaml(job_dir / ".hydra" / "config.yaml") or {}
    job = Job(id=job_id, dir=job_dir, overrides=overrides, optimized_metric=config.get("optimized_metric"))
    entry = summary.get(job_id) or summary.get(job_dir.name) or {}
    info = read_json(job_dir / "run_info.json")
    metrics = read_json(job_dir / "metrics.json") or entry.get("metrics") or {}
    status = recorded_status(entry) or recorded_status(info)
    if metrics:
        job.metrics = {k: float(v) for k, v in metrics.items()
                       if (k.startswith(("val/", "ood/", "ablation/", "head_score/")) or k in FORMATION_STEPS)
                       and isinstance(v, (int, float)) and not isinstance(v, bool)}
        job.metrics.update(best_head_scores(metrics))
        job.formation = metrics.get("formation") if isinstance(metrics.get("formation"), dict) else None
        job.params, job.steps = metrics.get("params"), metrics.get("global_step")
        if "steps_to_solve" in metrics:
            solve = metrics["steps_to_solve"]
            job.reports_solve = True
            job.steps_to_solve = int(solve) if isinstance(solve, (int, float)) and math.isfinite(solve) else None
        status = status or "ok"
    job.wall_time_s = info.get("wall_time_s") if info.get("wall_time_s") is not None else entry.get("wall_time_s")
    job.error = last_line(entry.get("error") or info.get("error"))
    if status == "running" and not metrics and process_gone(info):
        status = "failed"
        job.error = job.error or f"the job's process (pid {info['pid']}) is gone without reporting a result"
    job.status = status or "running"
    return job


def mark_unfinished(jobs: list[Job], stale_minutes: float, now: float) -> None:
    """Jobs still running: stale if nothing changed for ``stale_minutes``, else with the time so far."""
    for job in jobs:
        if job.status != "running" or job.metrics:
            continue
        if now - last_write(job.dir) > stale_minutes * 60:
            job.status = "stale"
            job.error = job.error or f"no metrics.json and nothing written for {stale_minutes:g}+ min"
        elif job.wall_time_s is None:
            job.wall_time_s = round(now - started(job.dir), 1)


def direction_of(multirun: dict | None, metric: str) -> str:
    """The sweeper's direction (multirun.yaml), else a guess from the metric's name."""
    direction = (((multirun or {}).get("hydra") or {}).get("sweeper") or {}).get("direction")
    if isinstance(direction, list):
        direction = direction[0] if direction else None
    if direction in ("minimize", "maximize"):
        return direction
    if metric.startswith("ablation/"):  # the larger the drop, the more the model needs the head: ranked first
        return "maximize"
    return "minimize" if re.search(r"loss|error|perplexity|entropy|_step$", metric) else "maximize"


def best_head_scores(metrics: dict[str, Any]) -> dict[str, float]:
    """``head_score/<kind>/max``: the highest score of any layer's head, one column per kind (which head it is,
    the run's layers x heads image shows)."""
    best: dict[str, float] = {}
    for key, value in metrics.items():
        record = HeadMetric.parse(key)
        if record is not None and record.family.startswith("head_score/") and isinstance(value, (int, float)):
            name = f"{record.family}/max"
            best[name] = max(best.get(name, -math.inf), float(value))
    return best


def collect_sweep(sweep_dir: str | Path, *, metric: str | None = None, stale_minutes: float = 30.0,
                  now: float | None = None) -> Sweep:
    sweep_dir = Path(sweep_dir).expanduser()
    if not sweep_dir.is_dir():
        raise ReviewError(f"{sweep_dir} is not a directory: pass a sweep directory such as outputs/multirun/<date>/<time>")
    job_dirs = find_job_dirs(sweep_dir)
    if not job_dirs:
        raise ReviewError(f"{sweep_dir} holds no job directories (*/.hydra/overrides.yaml): "
                          "pass the directory a `train.py -m` sweep wrote")
    multirun = read_yaml(sweep_dir / MULTIRUN_RECORD)
    summary = load_summary(sweep_dir)
    jobs = [read_job(sweep_dir, d, summary) for d in job_dirs]
    mark_unfinished(jobs, stale_minutes, time.time() if now is None else now)

    metric = metric or next((j.optimized_metric for j in jobs if j.optimized_metric), None) or "val/seq_acc"
    for job in jobs:
        job.optimized_metric = metric
    direction = direction_of(multirun, metric)
    # val/*, then ood/*; a head score only when asked for (--metric head_score/induction/max): tables stay narrow.
    names = sorted({k for j in jobs for k in j.metrics if k.startswith(("val/", "ood/"))},
                   key=lambda k: (k.startswith("ood/"), k))
    names += [k for k in FORMATION_STEPS if any(k in j.metrics for j in jobs)]
    measured = metric in names or any(metric in j.metrics for j in jobs)
    metric_names = ([metric] if measured or not names else []) + [k for k in names if k != metric]

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

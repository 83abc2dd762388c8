"""One record per job of a Hydra sweep, read from what the project writes and nothing else.

Per job directory: Hydra's ``.hydra/overrides.yaml`` and ``.hydra/config.yaml``, the run's
``metrics.json`` (final metrics, ``global_step``, ``params``) and ``run_info.json`` (``status``:
ok | failed | interrupted | running, ``error``, ``wall_time_s``, ``pid`` and ``host``). Per sweep:
``sweep_summary.json`` (``jobs``: ``job``, ``status``, ``error``, ``metrics``, ``output_dir``,
``wall_time_s``; ``folded``: the combinations a product sweep folded into a job that trains the same run) and
Hydra's ``multirun.yaml`` (the sweep's command line, the sweeper's direction).
``metrics.json`` may hold ``steps_to_solve``: the first step at which val/seq_acc >= 0.99, null if never.

A job without a recorded status is ``ok`` once its ``metrics.json`` exists; a ``running`` job whose
process is gone is ``failed``; a job without any record is ``running`` while its files still change
and ``stale`` once nothing was written for ``stale_minutes``. No torch import: big sweeps read quickly.
A record that cannot be read (see :mod:`attention_lab.review.records`) is left out and named in
``Sweep.problems``, one line each; the job's row says which of its files those were.

:func:`seed_groups` groups the jobs whose overrides are equal except for ``seed=``: the repeats of one
configuration (``python scripts/train.py -m ... seed=0,1,2``), summarised as mean ± sample std and n; which of
them is the best, if any, is :mod:`attention_lab.review.verdict`'s to say. A folder of several sweeps (a date
folder) is read sweep by sweep, each job with its own sweep's records, and pooled or refused
(:mod:`attention_lab.review.sweep_roots`).
"""

from __future__ import annotations

import math
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_lab.analysis.tags import HeadMetric, is_index_tag
from attention_lab.errors import ReviewError
from attention_lab.records.files import (
    METRICS,
    MULTIRUN_RECORD,
    RUN_INFO,
    SAVED_CONFIG,
    SAVED_OVERRIDES,
    SUMMARY,
    SWEEP_DIRECTIONS,
)
from attention_lab.records.run_record import RunInfo, RunStatus, parse
from attention_lab.review.folds import Folded, load_folds
from attention_lab.review.records import (
    Unreadable,
    amount,
    load_json,
    load_yaml,
    mapping,
    metric_values,
    shown,
    strings,
    text,
)
from attention_lab.review.sweep_roots import by_sweep, pooling

# What run_info.json and the summary hold (a run claiming its dir, "starting", is shown as running).
RECORDED_STATUSES = tuple(s.value for s in (RunStatus.OK, RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.RUNNING))
STATUSES = (*RECORDED_STATUSES, "stale")
FORMATION_STEPS = ("formation_step", "loss_drop_step")  # experiment=induction_formation: when the heads formed


@dataclass
class Job:
    id: str  # path of the job dir relative to the sweep dir ("0", "1", ...)
    dir: Path
    overrides: list[str]
    status: str = "running"
    # final val/*, ood/*, per-head head_score/*, ablation/* and patching/* metrics; head_score/<kind>/max
    metrics: dict[str, float] = field(default_factory=dict)
    params: int | None = None
    state_size: int | None = None  # metrics.json's: the recurrent state of a layer, in numbers
    steps: int | None = None
    wall_time_s: float | None = None  # for running jobs: time since the job started
    cpu_time_s: float | None = None  # run_info.json's: the job process's CPU time (a finished job's)
    error: str = ""
    optimized_metric: str | None = None
    configuration: str = ""  # the overrides that differ between jobs
    reports_solve: bool = False  # metrics.json has steps_to_solve (a number, or null: never solved)
    steps_to_solve: int | None = None
    unreadable: list[str] = field(default_factory=list)  # its files named in Sweep.problems
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
    problems: list[str] = field(default_factory=list)  # one line per record that could not be read
    folds: list[Folded] = field(default_factory=list)  # combinations not run: they train the same run as a job
    pooled: str = ""  # a folder of several sweeps (a date folder): the line naming the sweeps pooled

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
        """The finite values of the ok jobs (a NaN or infinite one has no mean: it counts as missing)."""
        return [j.metrics[name] for j in self.ok if name in j.metrics and math.isfinite(j.metrics[name])]

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

def natural_key(name: str) -> list:
    # ASCII digits only: each odd part is a number, each even part text, so any two keys compare.
    return [int(part) if i % 2 else part for i, part in enumerate(re.split(r"([0-9]+)", name))]


def find_job_dirs(sweep_dir: Path) -> list[Path]:
    """Directories holding a job's ``.hydra/overrides.yaml`` (any depth), in natural order."""
    dirs = {p.parent.parent for p in sweep_dir.rglob(SAVED_OVERRIDES.as_posix())} - {sweep_dir}
    return sorted(dirs, key=lambda p: natural_key(p.relative_to(sweep_dir).as_posix()))


def load_summary(sweep_dir: Path, unreadable: Unreadable | None = None) -> dict[str, dict]:
    """The entries of ``sweep_summary.json``, keyed by job number and by the name of the job's directory; each
    entry's fields checked (``status``, ``error``, ``metrics``, ``output_dir``, ``wall_time_s``)."""
    unreadable = unreadable or Unreadable(sweep_dir)
    path = sweep_dir / SUMMARY
    jobs = load_json(path, unreadable).get("jobs")
    if jobs is None:
        return {}
    if not isinstance(jobs, list):
        unreadable.add(path, f"jobs is {shown(jobs)}, not a list; ignored")
        return {}
    entries: dict[str, dict] = {}
    for n, entry in enumerate(jobs):
        where = f"jobs[{n}]."
        if not isinstance(entry, dict):
            unreadable.add(path, f"jobs[{n}] is {shown(entry)}, not an object; ignored")
            continue
        job = entry.get("job")
        if job is not None and (isinstance(job, bool) or not isinstance(job, (int, str))):
            unreadable.add(path, f"{where}job is {shown(job)}, not a job number; ignored")
            job = None
        checked = {"status": text(entry, "status", path, unreadable, where),
                   "error": text(entry, "error", path, unreadable, where),
                   "metrics": mapping(entry, "metrics", path, unreadable, where),
                   "output_dir": text(entry, "output_dir", path, unreadable, where),
                   "wall_time_s": amount(entry, "wall_time_s", path, unreadable, where=where)}
        if job is not None:
            entries[str(job)] = checked
        if checked["output_dir"]:
            entries.setdefault(Path(checked["output_dir"]).name, checked)
    return entries


def recorded_status(record: dict, path: Path | None = None, unreadable: Unreadable | None = None) -> str | None:
    """A summary row's status (a run_info.json's is read by :func:`attention_lab.run.run_info.parse`)."""
    status = record.get("status")
    if status == RunStatus.STARTING.value:
        return RunStatus.RUNNING.value
    if status is None or status in RECORDED_STATUSES:
        return status
    if unreadable is not None and path is not None:
        unreadable.add(path, f"status is {shown(status)}, not one of {', '.join(RECORDED_STATUSES)}; ignored")
    return None


def read_run_info(path: Path, unreadable: Unreadable) -> RunInfo:
    """The job's run_info.json, its fields of the wrong type left out and named in ``unreadable``."""
    record, problems = parse(load_json(path, unreadable))
    for problem in problems:
        unreadable.add(path, f"{problem}; ignored")
    return record


def last_line(error: str | None) -> str:
    """One line for a table cell: the last line of a multi-line error."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile, or a dangling link
        return None


def last_write(job_dir: Path) -> float:
    times = [t for t in (mtime(p) for p in job_dir.rglob("*")) if t is not None]
    return max(times, default=mtime(job_dir) or 0.0)


def started(job_dir: Path) -> float:
    return mtime(job_dir / SAVED_CONFIG) or mtime(job_dir) or time.time()


# ---------------------------------------------------------------------------------------------- jobs

def read_job(sweep_dir: Path, job_dir: Path, summary: dict[str, dict], unreadable: Unreadable | None = None) -> Job:
    unreadable = unreadable or Unreadable(sweep_dir)
    job_id = job_dir.relative_to(sweep_dir).as_posix()
    files = {name: job_dir / name for name in (SAVED_OVERRIDES, SAVED_CONFIG, RUN_INFO, METRICS)}
    overrides = strings(load_yaml(files[SAVED_OVERRIDES], unreadable, list), "the list", files[SAVED_OVERRIDES],
                        unreadable)
    config = load_yaml(files[SAVED_CONFIG], unreadable, dict)
    job = Job(id=job_id, dir=job_dir, overrides=overrides,
              optimized_metric=text(config, "optimized_metric", files[SAVED_CONFIG], unreadable))
    entry = summary.get(job_id) or summary.get(job_dir.name) or {}
    info = read_run_info(files[RUN_INFO], unreadable)
    metrics, metrics_path = load_json(files[METRICS], unreadable), files[METRICS]
    if not metrics:
        metrics, metrics_path = entry.get("metrics") or {}, sweep_dir / SUMMARY
    recorded = RunStatus.RUNNING if info.status is RunStatus.STARTING else info.status
    status = recorded_status(entry, sweep_dir / SUMMARY, unreadable) or (recorded.value if recorded else None)
    if metrics:
        job.metrics = metric_values(metrics, metrics_path, unreadable, ("val/", "ood/", "ablation/", "head_score/",
                                                                                "patching/"))
        job.metrics.update({key: step for key in FORMATION_STEPS
                            if (step := amount(metrics, key, metrics_path, unreadable, whole=True)) is not None})
        job.metrics.update(best_head_scores(metrics))
        job.formation = metrics.get("formation") if isinstance(metrics.get("formation"), dict) else None
        job.params = amount(metrics, "params", metrics_path, unreadable, whole=True)
        job.state_size = amount(metrics, "state_size", metrics_path, unreadable, whole=True)
        job.steps = amount(metrics, "global_step", metrics_path, unreadable, whole=True)
        if "steps_to_solve" in metrics:
            job.reports_solve = True
            job.steps_to_solve = amount(metrics, "steps_to_solve", metrics_path, unreadable, whole=True)
        status = status or "ok"
    job.wall_time_s = info.wall_time_s if info.wall_time_s is not None else entry.get("wall_time_s")
    job.cpu_time_s = info.cpu_time_s
    job.error = last_line(entry.get("error") or info.error)
    if status == RunStatus.RUNNING.value and not metrics and info.ended_without_result():
        status = RunStatus.FAILED.value
        job.error = job.error or f"the job's process (pid {info.pid}) is gone without reporting a result"
    job.status = status or "running"
    job.unreadable = unreadable.about(files.values())
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


def direction_of(hydra: dict, metric: str, path: Path, unreadable: Unreadable) -> str:
    """The sweeper's direction (multirun.yaml's hydra.sweeper.direction), else a guess from the metric's name."""
    direction = mapping(hydra, "sweeper", path, unreadable, "hydra.").get("direction")
    if isinstance(direction, list):  # a multi-objective study: its first objective
        direction = direction[0] if direction else None
    if direction in SWEEP_DIRECTIONS:
        return direction
    if direction is not None:
        unreadable.add(path, f"hydra.sweeper.direction is {shown(direction)}, not {' or '.join(SWEEP_DIRECTIONS)}; "
                             "ignored")
    if metric.startswith(("ablation/", "patching/")):  # the larger the drop (or the part restored), the more the
        # model needs the head: ranked first
        return "maximize"
    return "minimize" if re.search(r"loss|error|perplexity|entropy|_step$|^steps_to_solve$", metric) else "maximize"


def best_head_scores(metrics: dict[str, Any]) -> dict[str, float]:
    """``head_score/<kind>/max``: the highest score of any layer's head, one column per kind (which head it is,
    the run's layers x heads image shows)."""
    best: dict[str, float] = {}
    for key, value in metrics.items():
        record = HeadMetric.parse(key)
        if record is not None and record.family.startswith("head_score/") and isinstance(value, (int, float)) \
                and not isinstance(value, bool) and math.isfinite(value):
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
    unreadable = Unreadable(sweep_dir)
    sweeps = by_sweep(sweep_dir, job_dirs)  # a date folder: the sweeps of that day
    hydras = {root: mapping(load_yaml(root / MULTIRUN_RECORD, unreadable, dict), "hydra", root / MULTIRUN_RECORD,
                            unreadable) for root in sweeps}
    commands = {root: recorded_command(root, hydra, unreadable) for root, hydra in hydras.items()}
    summaries = {root: load_summary(root, unreadable) for root in sweeps}
    read = {root: [read_job(root, d, summaries[root], unreadable) for d in dirs] for root, dirs in sweeps.items()}
    pooled = pooling(sweep_dir, {root: [j.overrides for j in jobs] for root, jobs in read.items()}, commands)
    jobs = [job for sweep_jobs in read.values() for job in sweep_jobs]
    for job in jobs:  # named as the folder given names them
        job.id = job.dir.relative_to(sweep_dir).as_posix()
    mark_unfinished(jobs, stale_minutes, time.time() if now is None else now)

    metric = metric or next((j.optimized_metric for j in jobs if j.optimized_metric), None) or "val/seq_acc"
    for job in jobs:
        job.optimized_metric = metric
    first = next(iter(sweeps))
    direction = direction_of(hydras[first], metric, first / MULTIRUN_RECORD, unreadable)
    # val/*, then ood/*; a head score only when asked for (--metric head_score/induction/max): tables stay narrow.
    names = sorted({k for j in jobs for k in j.metrics if k.startswith(("val/", "ood/")) and not is_index_tag(k)},
                   key=lambda k: (k.startswith("ood/"), k))
    names += [k for k in FORMATION_STEPS if any(k in j.metrics for j in jobs)]
    measured = metric in names or any(metric in j.metrics for j in jobs)
    metric_names = ([metric] if measured or not names else []) + [k for k in names if k != metric]

    # Overrides every job shares go in the caption; each row shows what makes it different.
    common = [o for o in jobs[0].overrides if all(o in j.overrides for j in jobs)] if len(jobs) > 1 else []
    for job in jobs:
        job.configuration = " ".join(o for o in job.overrides if o not in common) or "(defaults)"
    folds = [fold.moved(root.relative_to(sweep_dir).as_posix()) for root in sweeps
             for fold in load_folds(root, unreadable)]
    sweep_overrides = commands[first] if len(sweeps) == 1 else []
    return Sweep(sweep_dir, jobs, metric, direction, common, sweep_overrides, metric_names, unreadable.lines, folds,
                 pooled)


def recorded_command(root: Path, hydra: dict, unreadable: Unreadable) -> list[str]:
    """A sweep's command line as multirun.yaml records it (hydra.overrides.task), e.g. heads=1,2 seed=0,1,2."""
    recorded = mapping(hydra, "overrides", root / MULTIRUN_RECORD, unreadable, "hydra.")
    return strings(recorded.get("task"), "hydra.overrides.task", root / MULTIRUN_RECORD, unreadable)

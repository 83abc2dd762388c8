"""``resume=<sweep dir>``: finish a sweep in its own dir.

The sweep is launched again with its own command line (``<sweep dir>/multirun.yaml``: Hydra's record of the
sweep's overrides) into the same sweep dir, so every job gets the number and dir it had. Each job then decides
(:func:`job_plan`): ok → kept as it is (its files are not touched; the sweeper gets its recorded metric);
interrupted → continues from its checkpoints, as ``resume=<run dir>`` does; failed or never started → trains
again in its dir, the failed attempt's files moved to ``attempt<n>/``.

An Optuna sweep asks new trials instead: its study (in the sweeper's ``storage``) is continued up to
``hydra.sweeper.n_trials`` complete trials in total, the new trials in new job dirs after the existing ones.

The sweep dir is data, never code: its overrides are read as YAML and get the checks of ``resume=<run dir>``
(literal values, no ``hydra.*`` setting beyond the few below, only the project's ``_target_`` classes, each job's
model and task unchanged) before the sweep is launched again: the relaunched process gets them, checked, as its
command line, and each job that continues checks its own dir's record again. A resume may add only settings that
say how long to train and where the jobs run.

The sweep dir's own path is named on the relaunched command line, and must be read there as itself
(:func:`check_spelled`). An Optuna sweep's study is checked as the sweep dir's data too
(:mod:`attention_lab.run.optuna_study`).
"""

from __future__ import annotations

import contextlib
import enum
import os
import shutil
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from attention_lab.errors import ConfigError
from attention_lab.records.files import (
    CHECKPOINTS,
    METRICS,
    MULTIRUN_RECORD,
    RUN_INFO,
    SAVED_OVERRIDES,
    TRACEBACK,
    UnreadableRecord,
    read_json,
    read_yaml_record,
    recorded_overrides,
)
from attention_lab.records.run_record import RunInfo, RunStatus
from attention_lab.run.overrides import is_sweep_dir, override_key, resume_value
from attention_lab.run.replay_bounds import check_jobs
from attention_lab.run.resume import (
    CORPUS,
    FURTHER_TRAINING,
    allowed_targets,
    check_config,
    check_contained,
    check_corpus,
    check_overrides,
    group_choices,
    read_saved_overrides,
)

# Settings of the sweep's own hydra overrides that a resume restores: where its jobs run, how many trials.
RESTORED_HYDRA = ("hydra/launcher", "hydra.launcher.n_jobs", "hydra.sweeper.n_trials")
ADDED_ON_RESUME = (*FURTHER_TRAINING, *RESTORED_HYDRA)  # what a resume of a sweep may add
# The sweeper a sweep was started with, and a budget ladder's settings (hydra/sweeper=ladder): restored as they
# were, never changed (they decide which jobs the sweep has, under which numbers).
KEPT_HYDRA = ("hydra/sweeper", "hydra.sweeper.search", "hydra.sweeper.rungs", "hydra.sweeper.keep",
              "hydra.sweeper.direction", "hydra.sweeper.max_batch_size")
REPLACED = ("resume", "hydra.sweep.dir", "hydra.mode")  # set by the resume itself (hydra.mode: by -m)
# Free space a resume needs besides a copy of multirun.yaml: Hydra's rewrite of it, the summaries, the records.
RECORD_HEADROOM = 1 << 20


def read_record(sweep_dir: Path, setting: str) -> tuple[list[str], list[str]]:
    """The sweep's task and hydra overrides, from multirun.yaml read as data (nothing is resolved)."""
    path = sweep_dir / MULTIRUN_RECORD
    try:
        record = read_yaml_record(path)
    except UnreadableRecord as err:  # the sweep dir is damaged
        raise ConfigError(f"{setting} is invalid: {path} is unreadable: {err.problem}") from None
    task, hydra = recorded_overrides(record, "task"), recorded_overrides(record, "hydra")
    if task is None or hydra is None:
        raise ConfigError(f"{setting} is invalid: {path} is not Hydra's record of a sweep")
    if not isinstance(task, list) or not isinstance(hydra, list) or not all(isinstance(o, str) for o in [*task, *hydra]):
        raise ConfigError(f"{setting} is invalid: {path} holds overrides that are not text")
    parsed = check_overrides([*task, *hydra], setting, path)
    check_jobs(parsed[:len(task)], setting, path)
    keys = {o.input_line: o.key_or_group for o in parsed}
    for line in task:
        if keys[line].split(".")[0].split("/")[0] == "hydra":
            raise ConfigError(f"{setting} is invalid: {path} sets '{line}' among the jobs' overrides, which no "
                              "sweep records; the sweep dir was changed by hand and is not resumed")
    for line in hydra:
        if keys[line] not in (*RESTORED_HYDRA, *KEPT_HYDRA, *REPLACED):
            restored = ", ".join((*RESTORED_HYDRA, *KEPT_HYDRA))
            raise ConfigError(f"{setting} is invalid: the sweep was started with '{line}', which a resume does not "
                              f"restore (it restores only {restored}); resume its jobs one at a time instead: "
                              "resume=<sweep dir>/<job number>")
    kept = [line for line in task if keys[line] not in REPLACED]
    return kept, [line for line in hydra if keys[line] not in REPLACED]


def added_overrides(argv: Sequence[str], saved: Sequence[str], setting: str) -> list[str]:
    """This command's own overrides: only training length and launcher settings (or a saved one, repeated)."""
    from attention_lab.run.overrides import is_override

    added = []
    for arg in argv:
        if not is_override(arg) or arg in saved or override_key(arg) in REPLACED:
            continue
        if override_key(arg) not in ADDED_ON_RESUME:
            raise ConfigError(f"{arg} is invalid with {setting}: a resumed sweep keeps its jobs' settings; it may "
                              f"only add {', '.join(ADDED_ON_RESUME)}")
        added.append(arg)
    return added


def command_line(argv: Sequence[str], config_dir: Path, config_name: str = "train") -> list[str]:
    """``resume=<sweep dir> [max_steps=...]`` → the sweep's own command line, launched into its dir; any other
    command line is returned as it is. Raises ConfigError, before anything runs, for a sweep dir that cannot be
    resumed."""
    value = resume_value(argv)
    if not is_sweep_dir(value):
        return list(argv)
    from hydra import compose

    from attention_lab.run.overrides import hydra_compose_api, is_override
    from attention_lab.run.sweep_jobs import sweep_variants

    setting, sweep_dir = f"resume={value}", Path(str(value)).expanduser().resolve()
    check_spelled(sweep_dir, setting)
    check_contained(sweep_dir, setting)
    check_room(sweep_dir, setting)
    allowed = allowed_targets(config_dir)
    with hydra_compose_api(config_dir):
        task, hydra = read_record(sweep_dir, setting)
        added = added_overrides(argv, [*task, *hydra], setting)
        given = {override_key(o) for o in added}
        overrides = [o for o in [*task, *hydra] if not replaced_by(override_key(o), given)] + added
        overrides += [f"resume={sweep_dir}", f"hydra.sweep.dir={sweep_dir}"]
        named = {override_key(arg) for arg in argv if is_override(arg)}  # this command's own (repeated) settings
        baselines = {}  # variants that choose the same options share their baseline
        first = None
        for variant in sweep_variants(overrides):
            replayed = compose(config_name, overrides=variant, return_hydra_config=True)
            choices = tuple(group_choices(variant))
            if choices not in baselines:
                baselines[choices] = compose(config_name, overrides=list(choices), return_hydra_config=True)
            check_config(replayed, baselines[choices], allowed, setting)
            if CORPUS not in named:
                check_corpus(replayed, baselines[choices], sweep_dir, setting)
            first = replayed if first is None else first
        if first.hydra.runtime.choices.get("hydra/sweeper") == "optuna":
            from attention_lab.run.optuna_study import optuna_overrides

            searched = [o for o in overrides if override_key(o).split(".")[0].split("/")[0] != "hydra"]
            overrides += optuna_overrides(sweep_dir, first.hydra.sweeper, searched, setting)
    flags = [arg for arg in argv if not is_override(arg) and arg not in ("-m", "--multirun")]
    return [*flags, "-m", *overrides]


def check_spelled(sweep_dir: Path, setting: str) -> None:
    """The relaunched command line names the sweep dir (``hydra.sweep.dir=<path>``, ``resume=<path>``), and Hydra
    reads it by its grammar: a path that it reads as anything but itself (a sweep at a comma, an interpolation at
    ``${...}``, a list at ``[``) would send the sweep's jobs, records and study elsewhere. Raises ConfigError for
    such a path, before anything is read or written."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from attention_lab.run.resume import interpolated

    try:
        (override,) = OverridesParser.create().parse_overrides([f"hydra.sweep.dir={sweep_dir}"])
        itself = not override.is_sweep_override() and override.value() == str(sweep_dir) and \
            not interpolated(override.value())
    except Exception:  # noqa: BLE001 - OverrideParseException and friends: it does not parse as one value
        itself = False
    if not itself:
        raise ConfigError(f"{setting} is invalid: Hydra's command line does not read its path as the path itself "
                          "(a ',' makes it a sweep, '${...}' an interpolation, brackets a list), and a resume "
                          "relaunches the sweep in it by that path; move or rename the sweep dir")


def replaced_by(key: str, given: set[str]) -> bool:
    """Whether a recorded setting gives way to this command's: the same key, or a setting of a group the command
    chooses again (``hydra/launcher=basic`` drops the recorded ``hydra.launcher.n_jobs``, which the basic launcher
    does not have; a group's settings live at its default package, the group's path with dots)."""
    return key in given or any(key.startswith(group.replace("/", ".") + ".") for group in given if "/" in group)


def check_room(sweep_dir: Path, setting: str) -> None:
    """A resume rewrites the sweep's records first: on a disk without room for them, or in a dir it cannot write
    (a read-only mount, which binds root too), it does not start."""
    for folder in [sweep_dir, *sorted(p for p in sweep_dir.iterdir() if p.is_dir() and not p.is_symlink())]:
        if not os.access(folder, os.W_OK):
            name = "it" if folder == sweep_dir else f"its {folder.name}/"
            raise ConfigError(f"{setting} is invalid: {name} cannot be written (read-only, or not writable by you), "
                              "and resuming the sweep writes its jobs' records there; make it writable, then resume it again")
    needed = 2 * (sweep_dir / MULTIRUN_RECORD).stat().st_size + RECORD_HEADROOM
    free = shutil.disk_usage(sweep_dir).free
    if free < needed:
        raise ConfigError(f"{setting} is invalid: the disk holding it has {free // 1024} KiB free, and resuming the "
                          f"sweep rewrites its records first (at least {needed // 1024} KiB); free some space, then "
                          "resume it again")


def readable_record(path: Path) -> bool:
    try:
        return isinstance(recorded_overrides(read_yaml_record(path), "task"), list)
    except (FileNotFoundError, UnreadableRecord):
        return False


@contextlib.contextmanager
def record_kept(sweep_dir: Path, setting: str) -> Iterator[None]:
    """Hydra's sweeper rewrites ``multirun.yaml`` in place when the sweep is launched again, so a full disk would
    leave it cut. A copy is made first (ConfigError if even that does not fit, with nothing left behind), and put
    back if the rewrite did not complete."""
    record = sweep_dir / MULTIRUN_RECORD
    backup = sweep_dir / f".{MULTIRUN_RECORD}.before-resume"
    tmp = sweep_dir / f".{MULTIRUN_RECORD}.{os.getpid()}.tmp"
    try:
        shutil.copy2(record, tmp)
        os.replace(tmp, backup)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"{setting} is invalid: a copy of its {MULTIRUN_RECORD} cannot be written "
                          f"({err.strerror or type(err).__name__}); nothing was changed") from None
    try:
        yield
    finally:
        if readable_record(record):
            backup.unlink(missing_ok=True)
        else:
            os.replace(backup, record)


class JobAction(enum.Enum):
    KEEP = "keep"  # ok: not touched; the sweeper gets its recorded metric
    CONTINUE = "continue"  # interrupted: from its checkpoint
    RESTART = "restart"  # failed, or never started: from step 0, the failed attempt set aside


@dataclass
class JobPlan:
    """What one job of a resumed sweep does."""

    action: JobAction
    metric: float | None = None  # a kept job's recorded metric, for the sweeper

    @property
    def kept(self) -> bool:
        return self.action is JobAction.KEEP

    @property
    def continued(self) -> bool:
        return self.action is JobAction.CONTINUE

    @property
    def restarted(self) -> bool:
        return self.action is JobAction.RESTART


def same_job(saved: Sequence[str], planned: Sequence[str]) -> bool:
    """The job dir holds this job's run: the same overrides, apart from training length."""
    def essential(overrides: Sequence[str]) -> set[str]:
        return {o for o in overrides if override_key(o) not in (*FURTHER_TRAINING, "resume")}

    return essential(saved) == essential(planned)


def job_plan(job_dir: Path, planned: Sequence[str], metric_name: str) -> JobPlan:
    """Raises RunDirTaken when the job's dir holds another job's run."""
    from attention_lab.run.run_info import RunDirTaken

    check_contained(job_dir.parent, f"resume={job_dir.parent}", only=job_dir.name)  # it may have changed since
    info = RunInfo.read(job_dir / RUN_INFO) or RunInfo()
    if (job_dir / SAVED_OVERRIDES).is_file():
        saved = read_saved_overrides(job_dir, f"resume={job_dir.parent}")
        if not same_job(saved, planned):
            raise RunDirTaken(f"{job_dir} holds another job's run ({' '.join(saved)}), which is left as it is; "
                              "the sweep's jobs no longer match its dirs")
    if info.status is RunStatus.OK and (job_dir / METRICS).is_file():
        return JobPlan(JobAction.KEEP, read_json(job_dir / METRICS).get(metric_name))
    if info.status is RunStatus.INTERRUPTED:
        return JobPlan(JobAction.CONTINUE)
    return JobPlan(JobAction.RESTART)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """The run's stop signals (SIGINT, SIGTERM, SIGUSR2) that arrive inside are kept, and raised again as it ends,
    for the handlers they would have reached: for work that must not stop half done (a Ctrl-C after a first signal
    raises KeyboardInterrupt wherever it lands)."""
    from attention_lab.callbacks.signals import StopSignals

    if threading.current_thread() is not threading.main_thread():  # signals reach only the main thread
        yield
        return
    received: list[int] = []
    previous = {s: signal.signal(s, lambda signum, frame: received.append(signum)) for s in StopSignals.SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in received:
            signal.raise_signal(signum)


def set_aside(job_dir: Path) -> None:
    """A failed attempt's record, checkpoints and TensorBoard events move to ``attempt<n>/`` before the job
    trains again (train.log is kept: the new attempt appends to it). A signal during the move is handled once it
    is complete: the attempt's files are all aside or all in place, never some of each."""
    info = RunInfo.read(job_dir / RUN_INFO)
    if info is None:
        return
    aside = job_dir / f"attempt{info.attempts or 1}"
    with signals_held():
        aside.mkdir(exist_ok=True)
        shutil.copy2(job_dir / RUN_INFO, aside / "run_info.json.previous")  # not a run_info.json: no summary row
        for name in (TRACEBACK, CHECKPOINTS, "tensorboard"):
            if (job_dir / name).exists():
                shutil.move(str(job_dir / name), str(aside / name))

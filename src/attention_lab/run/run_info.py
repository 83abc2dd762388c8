"""A run dir's claim, lock and writer: the claim on a new run dir, its lock, and its ``run_info.json`` kept up to date.

Run dirs are never reused, one process trains in a run dir at a time (:class:`RunDirLock`), and each keeps its
run_info.json (:class:`RunInfoWriter`; the record itself, :class:`~attention_lab.records.run_record.RunInfo`, is
in ``records/``, where ``review/`` reads it too). :class:`RunDirGuard` is a Hydra callback: it claims a new run dir
(or sweep dir) before Hydra writes anything into it, so a dir that already holds a run is left as it is.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from attention_lab.errors import ConfigError
from attention_lab.records.files import (
    LOCK,
    METRICS,
    MULTIRUN_RECORD,
    RESUME_LOCK,
    RUN_INFO,
    SUMMARY,
    save_yaml,
    secondary_process,
    write_text,
)
from attention_lab.records.run_record import RunInfo, RunStatus, now
from attention_lab.run.overrides import SELF_CHECKING_SWEEPERS, sweeper_of

# A sweep dir's id (kept in the dir, so that a sweep dir moved or copied as a whole still owns its Optuna study) and
# the user attribute of the study that carries it.
SWEEP_ID = ".sweep_id"
SWEEP_ID_ATTRIBUTE = "attention_lab.sweep_id"  # the study's user attribute


class RunDirTaken(ConfigError):
    """A job's dir holds another run: the job fails without writing anything there."""


class RunDirBusy(ConfigError):
    """Another process trains in the run dir right now (it holds the dir's lock); it records how the run ends."""


def claim(folder: Path, markers: tuple[str, ...], record: str, content: dict[str, Any]) -> str | None:
    """Create ``folder/record`` exclusively (O_EXCL: of two claims at the same moment, exactly one wins), unless
    the folder already holds one of ``markers``. Returns the marker that made the claim fail, or None."""
    taken = next((m for m in markers if (folder / m).exists()), None)
    if taken is not None:
        return taken
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(folder / record, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return record
    with os.fdopen(fd, "w") as f:
        json.dump(content, f)
    return None


def claim_run_dir(run_dir: Path) -> None:
    """Refuse a run dir that already holds a run, then claim it."""
    starting = RunInfo(status=RunStatus.STARTING, pid=os.getpid(), host=socket.gethostname())
    taken = claim(run_dir, (RUN_INFO, METRICS, ".hydra", "checkpoints", SUMMARY), RUN_INFO,
                  {key: value for key, value in starting.as_json().items() if value not in (None, [])})
    if taken is not None:
        raise ConfigError(f"hydra.run.dir={run_dir} is invalid: it already holds a run ({taken}), which is left as "
                          f"it is; choose a new dir, or continue that run with resume={run_dir}")


def claim_sweep_dir(sweep_dir: Path) -> None:
    taken = claim(sweep_dir, (SUMMARY, MULTIRUN_RECORD), SUMMARY,
                  {"sweep_dir": str(sweep_dir), "updated_at": now(), "total": 0, "counts": {}, "jobs": []})
    if taken is not None:
        raise ConfigError(f"hydra.sweep.dir={sweep_dir} is invalid: it already holds a sweep ({taken}), which is "
                          "left as it is; choose a new dir")


def stamp_study(sweep_dir: Path, sweeper: Any) -> None:
    """A new Optuna sweep (its study: configs/hparams_search/optuna.yaml): its id in the sweep dir, and the same id on its study (created now, as the sweeper
    would create it: it then loads this one)."""
    import optuna

    sweep_id = uuid.uuid4().hex
    (sweep_dir / SWEEP_ID).write_text(sweep_id + "\n")
    study = optuna.create_study(storage=str(sweeper.storage), study_name=str(sweeper.study_name),
                                direction=str(sweeper.direction), load_if_exists=True)
    study.set_user_attr(SWEEP_ID_ATTRIBUTE, sweep_id)


class RunDirLock:
    """An exclusive lock on ``<run dir>/.run.lock`` for as long as a process trains there. The kernel drops it
    when the process ends, however it ends, so a crashed run never leaves a stale lock."""

    def __init__(self, run_dir: Path) -> None:
        self.path = run_dir / LOCK
        self.handle: Any = None

    def acquire(self, setting: str) -> None:
        handle = open(self.path, "a+")  # noqa: SIM115 - held open until release()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise RunDirBusy(f"{setting} is invalid: {holder} is training in {self.path.parent} right now; "
                             "wait for it to end, or stop it first") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}")
        handle.flush()
        self.handle = handle

    def release(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


@contextlib.contextmanager
def sweep_resume_lock(sweep_dir: Path, setting: str, *, holder: bool) -> Iterator[None]:
    """One resume of a sweep at a time, held from before the resume reads the sweep's records until its last job
    has ended. The lock is on the sweep dir itself, so that a resume refused as busy, or one refused for its
    input, has written nothing there; the process that goes on to run the sweep (``holder``) writes who it is
    into ``.resume.lock``, which a second resume names. The kernel drops the lock when the process ends."""
    try:
        fd = os.open(sweep_dir, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as err:
        raise ConfigError(f"{setting} is invalid: its dir cannot be opened ({err.strerror or type(err).__name__})") \
            from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            named = (sweep_dir / RESUME_LOCK).read_text(errors="replace").strip() \
                if (sweep_dir / RESUME_LOCK).is_file() else ""
            raise ConfigError(f"{setting} is busy: another resume of this sweep is running "
                              f"({named[:80] or 'another process'}); wait for it to end, or stop it first") from None
        if holder:
            try:
                write_text(sweep_dir / RESUME_LOCK, f"pid {os.getpid()} on {socket.gethostname()}\n")
            except OSError as err:
                raise ConfigError(f"{setting} is invalid: its dir cannot be written "
                                  f"({err.strerror or type(err).__name__}), and resuming the sweep writes its jobs' "
                                  "records there; make room or make it writable, then resume it again") from None
        try:
            yield
        finally:
            if holder:  # before the lock goes: the next resume's name is never removed
                (sweep_dir / RESUME_LOCK).unlink(missing_ok=True)
    finally:
        os.close(fd)


class RunInfoWriter:
    """Writes ``<run dir>/run_info.json`` (a :class:`~attention_lab.run.run_info.RunInfo`): status, error,
    overrides, wall time. Kept apart from metrics.json so that metrics.json only holds metrics (identical across
    reruns)."""

    def __init__(self, run_dir: Path, *, enabled: bool = True) -> None:
        self.path, self.enabled = run_dir / RUN_INFO, enabled
        self.info: RunInfo | None = None  # once the run has begun
        self.started = time.perf_counter()
        # CPU time beside wall time: what a job costs whatever else shares the machine (a sweep's CPU cost).
        self.started_cpu = time.process_time()
        self.previous_cpu = 0.0

    def begin(self, *, job: int | None, overrides: list[str], resume: bool) -> None:
        previous = (RunInfo.read(self.path) if resume else None) or RunInfo()
        self.info = RunInfo(
            status=RunStatus.RUNNING, job=job if job is not None else previous.job, overrides=overrides,
            output_dir=str(self.path.parent), pid=os.getpid(), host=socket.gethostname(), started_at=now(),
            attempts=(previous.attempts or 0) + 1, previous_wall_time_s=float(previous.wall_time_s or 0.0))
        self.previous_cpu = float(previous.cpu_time_s or 0.0)
        if self.enabled:
            self.info.write(self.path)

    def end(self, status: RunStatus, error: str | None = None) -> None:
        assert self.info is not None, "a run ends only after it began"
        elapsed = time.perf_counter() - self.started
        self.info.status, self.info.error, self.info.finished_at = status, error, now()
        self.info.wall_time_s = round((self.info.previous_wall_time_s or 0.0) + elapsed, 2)
        self.info.cpu_time_s = round(self.previous_cpu + time.process_time() - self.started_cpu, 2)
        if self.enabled:
            self.info.write(self.path)


def selected_dir(config: DictConfig, key: str) -> Path | None:
    value = OmegaConf.select(config, key)
    return Path(os.path.abspath(str(value))) if value else None


def claim_new_sweep(config: DictConfig) -> Path | None:
    """A new sweep claims its dir (``config``: the sweep's) and returns it; ``resume=<sweep dir>`` launches the
    sweep again into its own dir (None: nothing claimed). A dir that holds a run or a sweep ends the command in one
    line."""
    sweep_dir = selected_dir(config, "hydra.sweep.dir")
    if sweep_dir is None or secondary_process():
        return None
    resume = selected_dir(config, "resume")
    if resume is not None:
        if resume != sweep_dir:  # the command line of a resumed sweep sets both (attention_lab.run.sweep_resume)
            sys.exit(f"error: resume={resume} is invalid with -m: resume a whole sweep as resume=<sweep dir>, "
                     "without -m, or one job as resume=<sweep dir>/<job number>")
        return None
    try:
        claim_sweep_dir(sweep_dir)
    except ConfigError as err:
        sys.exit(f"error: {err}")  # SystemExit: Hydra would turn an Exception in a callback into a warning
    return sweep_dir


class RunDirGuard(Callback):
    """Claims the run dir (or the sweep dir) before Hydra creates it: a dir that holds a run or a sweep is
    never reused. A resumed run's dir is not claimed: the task function locks it. The lab's product sweeper
    claims its sweep dir itself (:func:`claim_new_sweep`), once its jobs pass their checks
    (src/hydra_plugins/attention_lab_sweeper)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        run_dir = selected_dir(config, "hydra.run.dir")
        if run_dir is None or secondary_process() or config.get("resume"):
            return
        try:
            claim_run_dir(run_dir)
        except ConfigError as err:
            sys.exit(f"error: {err}")  # SystemExit: Hydra would turn an Exception in a callback into a warning

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        sweeper = sweeper_of(config)
        sweep_dir = claim_new_sweep(config) if sweeper not in SELF_CHECKING_SWEEPERS else None
        if sweep_dir is None:
            return
        # Hydra's record of the sweep's command line, which resume=<sweep dir> reads. BasicSweeper writes the same
        # file itself, as the product sweeper does; other sweepers (Optuna) do not.
        save_yaml(config, sweep_dir / MULTIRUN_RECORD)
        if sweeper == "optuna":
            stamp_study(sweep_dir, config.hydra.sweeper)  # the study is this sweep's: a resume checks it

"""A run's record and its writer: ``<run dir>/run_info.json``, the claim on a run dir, and its lock.

``run_info.json`` is a typed record (:class:`RunInfo`): how a run (or a sweep job) stands, read and written by
``run/`` and read by ``review/``. The run dir is data: :func:`parse` checks every field's type, and a reader either
refuses the whole record (:meth:`RunInfo.read`, for the run path) or keeps the fields that are right and names the
others (:func:`parse`, for the review tools). One rule says when a job's process is gone without a result
(:meth:`RunInfo.ended_without_result`): the record still says it is starting or running, and either its sweep is
over or its process, on this host, no longer exists.

Run dirs are never reused, one process trains in a run dir at a time (:class:`RunDirLock`), and each keeps its
run_info.json (:class:`RunInfoWriter`). :class:`RunDirGuard` is a Hydra callback: it claims a new run dir (or sweep
dir) before Hydra writes anything into it, so a dir that already holds a run is left as it is.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import os
import socket
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from attention_lab.errors import ConfigError
from attention_lab.files import (
    LOCK,
    METRICS,
    MULTIRUN_RECORD,
    RESUME_LOCK,
    RUN_INFO,
    SUMMARY,
    UnreadableRecord,
    read_json_record,
    save_yaml,
    secondary_process,
    write_json,
    write_text,
)
from attention_lab.run.overrides import PRODUCT_SWEEPER, sweeper_of


class MalformedRunInfo(ConfigError):
    """A run_info.json whose fields have the wrong types (changed by hand, or by another program)."""


class RunStatus(str, enum.Enum):
    """What run_info.json says of a run; the value is what the file holds."""

    STARTING = "starting"  # its dir is claimed; training has not begun
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # a signal stopped it; it resumes from its checkpoint

    @property
    def unfinished(self) -> bool:
        return self in (RunStatus.STARTING, RunStatus.RUNNING)


ENDED_WITHOUT_RESULT = "the job ended without reporting a result (killed or crashed)"
PID_MAX = 1 << 22  # Linux's highest pid_max: a larger "pid" names no process


@dataclass
class RunInfo:
    status: RunStatus | None = None
    error: str | None = None
    job: int | None = None  # the job number in its sweep
    overrides: list[str] = field(default_factory=list)
    attempts: int | None = None
    wall_time_s: float | None = None
    previous_wall_time_s: float | None = None
    pid: int | None = None
    host: str | None = None
    output_dir: str | None = None
    started_at: str | None = None
    finished_at: str | None = None

    @classmethod
    def read(cls, path: Path) -> RunInfo | None:
        """The record in ``path``, None when there is none; raises MalformedRunInfo, in one line, for a file that is
        not a JSON object or a field of the wrong type, so that no reader trips over it later."""
        if not path.is_file():
            return None
        try:
            data = read_json_record(path) if path.stat().st_size else {}
        except UnreadableRecord as err:
            raise MalformedRunInfo(f"{path} is malformed: {err.problem}") from None
        if not isinstance(data, dict):
            raise MalformedRunInfo(f"{path} is malformed: not a JSON object")
        record, problems = parse(data)
        if problems:
            raise MalformedRunInfo(f"{path} is malformed: {problems[0]}")
        return record

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value if self.status is not None else None
        return data

    def write(self, path: Path) -> None:
        write_json(path, self.as_json())

    def process_gone(self) -> bool:
        """Its process was on this host and no longer exists."""
        if self.pid is None or self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except OSError:  # exists, owned by someone else
            return False
        return False

    def ended_without_result(self, *, sweep_over: bool = False) -> bool:
        """The one rule for a job whose process is gone: the record says it has not finished, and its sweep is
        over or its process is gone."""
        unfinished = self.status is None or self.status.unfinished
        return unfinished and (sweep_over or self.process_gone())


# Each field's JSON types (null is always allowed).
TYPES: dict[str, tuple[type, ...]] = {
    "error": (str,), "job": (int,), "overrides": (list,), "attempts": (int,), "wall_time_s": (int, float),
    "previous_wall_time_s": (int, float), "pid": (int,), "host": (str,), "output_dir": (str,),
    "started_at": (str,), "finished_at": (str,),
}


def shown(value: Any) -> str:
    try:
        text = json.dumps(value)
    except ValueError:  # NaN and the like
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse(data: dict[str, Any]) -> tuple[RunInfo, list[str]]:
    """The record a run_info.json's object holds, each field of the wrong type left at None, and one line per
    such field ("pid is -1, expected a process id")."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    status = data.get("status")
    if status is not None:
        try:
            values["status"] = RunStatus(status)
        except ValueError:
            problems.append(f"status is {shown(status)}, expected one of {', '.join(s.value for s in RunStatus)}")
    for name in (f.name for f in fields(RunInfo) if f.name != "status"):
        value, kinds = data.get(name), TYPES[name]
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, kinds):
            problems.append(f"{name} is {shown(value)}, expected {' or '.join(kind.__name__ for kind in kinds)}")
        elif name == "overrides" and not all(isinstance(o, str) for o in value):
            problems.append("overrides holds something other than text")
        elif name == "pid" and not 0 < value < PID_MAX:
            problems.append(f"pid is {shown(value)}, expected a process id")
        else:
            values[name] = value
    return RunInfo(**values), problems


# A sweep dir's id (kept in the dir, so that a sweep dir moved or copied as a whole still owns its Optuna study) and
# the user attribute of the study that carries it.
SWEEP_ID = ".sweep_id"
SWEEP_ID_ATTRIBUTE = "attention_lab.sweep_id"  # the study's user attribute


class RunDirTaken(ConfigError):
    """A job's dir holds another run: the job fails without writing anything there."""


class RunDirBusy(ConfigError):
    """Another process trains in the run dir right now (it holds the dir's lock); it records how the run ends."""


def now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


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

    def begin(self, *, job: int | None, overrides: list[str], resume: bool) -> None:
        previous = (RunInfo.read(self.path) if resume else None) or RunInfo()
        self.info = RunInfo(
            status=RunStatus.RUNNING, job=job if job is not None else previous.job, overrides=overrides,
            output_dir=str(self.path.parent), pid=os.getpid(), host=socket.gethostname(), started_at=now(),
            attempts=(previous.attempts or 0) + 1, previous_wall_time_s=float(previous.wall_time_s or 0.0))
        if self.enabled:
            self.info.write(self.path)

    def end(self, status: RunStatus, error: str | None = None) -> None:
        assert self.info is not None, "a run ends only after it began"
        elapsed = time.perf_counter() - self.started
        self.info.status, self.info.error, self.info.finished_at = status, error, now()
        self.info.wall_time_s = round((self.info.previous_wall_time_s or 0.0) + elapsed, 2)
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
        sweep_dir = claim_new_sweep(config) if sweeper != PRODUCT_SWEEPER else None
        if sweep_dir is None:
            return
        # Hydra's record of the sweep's command line, which resume=<sweep dir> reads. BasicSweeper writes the same
        # file itself, as the product sweeper does; other sweepers (Optuna) do not.
        save_yaml(config, sweep_dir / MULTIRUN_RECORD)
        if sweeper == "optuna":
            stamp_study(sweep_dir, config.hydra.sweeper)  # the study is this sweep's: a resume checks it

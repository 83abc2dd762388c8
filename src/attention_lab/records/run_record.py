"""A run's record, ``<run dir>/run_info.json``: how a run (or a sweep job) stands, written by ``run/`` and read by
``review/``, as a typed record (:class:`RunInfo`). The run dir is data: :func:`parse` checks every field's type,
and a reader either refuses the whole record (:meth:`RunInfo.read`, for the run path) or keeps the fields that are
right and names the others (:func:`parse`, for the review tools). One rule says when a job's process is gone
without a result (:meth:`RunInfo.ended_without_result`): the record still says it is starting or running, and
either its sweep is over or its process, on this host, no longer exists.
"""

from __future__ import annotations

import enum
import json
import os
import socket
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from attention_lab.errors import ConfigError
from attention_lab.records.files import UnreadableRecord, read_json_record, write_json


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
    cpu_time_s: float | None = None  # the job process's CPU time (its threads summed), over every attempt
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
    "previous_wall_time_s": (int, float), "cpu_time_s": (int, float), "pid": (int,), "host": (str,), "output_dir": (str,),
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


def now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")

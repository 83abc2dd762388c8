"""The sizes a run's event files declare for the tab's tags, read from the records themselves before
TensorBoard's data provider builds their arrays.

The provider turns every record into a numpy array of the shape the record declares, and a record of one
value declares any shape it likes (a 272-byte file can ask for gigabytes). So the tab reads the declared shapes
and types first, through TensorBoard's public event-file reader, and asks the provider only for records within
:mod:`~attention_lab.tensorboard_plugin.limits`. Each file is read once, then only what is appended to it; the
numbers its probe records declare are summed on the way (an offline snapshot holds every step: it checks their
total before asking for the arrays). What the run's config declares comes with them
(:mod:`~attention_lab.tensorboard_plugin.run_config`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing import event_file_loader, io_wrapper
from tensorboard.compat.proto import types_pb2

from attention_lab.records.probe_summary import PROBE_TAG, RecordError
from attention_lab.tensorboard_plugin.limits import TooLarge, check_map_shape
from attention_lab.tensorboard_plugin.run_config import RunConfig, RunConfigs
from attention_lab.tensorboard_plugin.scores import parse_tag
from attention_lab.tensorboard_plugin.sentence import run_dir_of

# The number types a record may hold: the TensorProto field that holds them one by one, and their bytes each.
FLOAT_TYPES = {types_pb2.DT_HALF: ("half_val", 2), types_pb2.DT_BFLOAT16: ("half_val", 2),
               types_pb2.DT_FLOAT: ("float_val", 4), types_pb2.DT_DOUBLE: ("double_val", 8)}


class RunOutside(Exception):
    """A run the tab cannot read from disk (``reason``: the line the tab prints)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_value(tag: str, tensor) -> int:
    """One record of the tab's tags: numbers, of a size within the limits, as many as its shape holds; returns how
    many its shape declares. Raises RecordError or TooLarge."""
    shape = [dim.size for dim in tensor.tensor_shape.dim]
    if tensor.dtype not in FLOAT_TYPES:
        raise RecordError(tag, f"a tensor of {types_pb2.DataType.Name(tensor.dtype)}, not of numbers")
    if tag == PROBE_TAG:
        if len(shape) != 4:
            raise RecordError(tag, f"a tensor of rank {len(shape)}, not (layers, heads, queries, keys)")
        check_map_shape(shape)
    elif len(shape) > 1 or int(np.prod(shape, dtype=object)) != 1:  # a scalar: one value (shape [] or [1])
        raise RecordError(tag, f"a scalar of shape {shape}")
    field_name, size = FLOAT_TYPES[tensor.dtype]
    numbers = int(np.prod(shape, dtype=object))
    stored = len(tensor.tensor_content) / size if tensor.tensor_content else len(getattr(tensor, field_name))
    if stored != numbers and not (stored == 1 and not tensor.tensor_content):  # one value fills any shape
        raise RecordError(tag, f"{stored:g} numbers stored for a shape of {numbers}")
    return numbers


def check_event(event) -> tuple[int, int]:
    """The tab's records in one event (as written, before TensorBoard's read-time migrations): a scalar written
    as a plain number is one number; everything else must be a tensor that :func:`check_value` accepts. Returns
    its probe records and the numbers they declare."""
    records = numbers = 0
    for value in event.summary.value:
        if value.tag == PROBE_TAG or parse_tag(value.tag) is not None:
            kind = value.WhichOneof("value")
            if kind == "tensor":
                declared = check_value(value.tag, value.tensor)
                if value.tag == PROBE_TAG:
                    records, numbers = records + 1, numbers + declared
            elif kind not in (None, "simple_value"):
                raise RecordError(value.tag, f"a {kind} record, not a tensor")
    return records, numbers


@dataclass
class FileCheck:
    """One event file, read as far as it was written when last asked (later calls read only what was added),
    and the first problem found in it."""

    path: Path
    inode: int
    size: int = 0
    problem: str | None = None
    probe_records: int = 0  # the probe records read so far, and the numbers they declare
    probe_weights: int = 0
    loader: event_file_loader.LegacyEventFileLoader | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def advance(self, size: int) -> str | None:
        with self.lock:
            if self.loader is None:
                self.loader = event_file_loader.LegacyEventFileLoader(str(self.path))
            if self.problem is None and size != self.size:
                self.size = size
                for event in self.loader.Load():
                    try:
                        records, numbers = check_event(event)
                    except (RecordError, TooLarge) as err:
                        self.problem = f"{self.path.name}, step {event.step}: {err}"
                        break
                    self.probe_records, self.probe_weights = self.probe_records + records, self.probe_weights + numbers
            return self.problem


class DeclaredSizes:
    """Checks the event files of the runs under ``logdir``: each file is read once, and then only what is
    appended to it (a file that shrinks or is another inode was replaced, and is read again). Also what each run's
    config declares (read once per size and modification time)."""

    def __init__(self, logdir: str) -> None:
        self.root = Path(logdir).expanduser().resolve() if logdir else None
        self.files: dict[Path, FileCheck] = {}
        self.lock = threading.Lock()  # guards ``files``; each file is read under its own lock
        self.configs = RunConfigs()

    def run_dir(self, run: str) -> Path:
        if self.root is None:
            raise RunOutside("the attention tab reads its records under --logdir (not --logdir_spec)")
        path = (self.root / run).resolve()
        if path != self.root and self.root not in path.parents:
            raise RunOutside(f"run {run!r} is not inside the log directory")
        return path

    def run_config(self, run: str) -> RunConfig:
        """What ``run``'s config declares: the layers, heads and indices of its tags (the tab's limits without a
        config), and its task's head-score kind."""
        self.run_dir(run)  # inside the logdir, or RunOutside
        return self.configs.of(self.root, run_dir_of(str(self.root), run))

    def problem(self, run: str) -> str | None:
        """The first record of ``run`` that the tab refuses to read (why, in one line), or None."""
        return next((check.problem for check in self.checked(run) if check.problem is not None), None)

    def probe_weights(self, run: str) -> tuple[int, int]:
        """The probe records of ``run`` and the numbers they declare, every step together (checked as
        :meth:`problem` checks them: ask it first)."""
        checks = list(self.checked(run))
        return sum(check.probe_records for check in checks), sum(check.probe_weights for check in checks)

    def checked(self, run: str) -> Iterator[FileCheck]:
        """Each event file of ``run``, read as far as it is written (a file with a problem is read no further)."""
        try:
            files = sorted(self.run_dir(run).iterdir())
        except OSError as err:
            raise RunOutside(f"cannot read the records of run {run!r} ({err.strerror})") from None
        for path in files:
            if not io_wrapper.IsSummaryEventsFile(str(path)) or not path.is_file():
                continue
            stat = path.stat()
            with self.lock:
                check = self.files.get(path)
                if check is None or stat.st_ino != check.inode or stat.st_size < check.size:
                    check = self.files[path] = FileCheck(path, stat.st_ino)
            check.advance(stat.st_size)
            yield check

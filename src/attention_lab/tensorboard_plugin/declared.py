"""The sizes a run's event files declare for the tab's tags, read from the records themselves before
TensorBoard's data provider builds their arrays.

The provider turns every record into a numpy array of the shape the record declares, and a record of one
value declares any shape it likes (a 272-byte file can ask for gigabytes). So the tab reads the declared shapes
and types first, through TensorBoard's public event-file reader, and asks the provider only for records within
:mod:`~attention_lab.tensorboard_plugin.limits`. A file's verdict is kept until its size or modification time
changes.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from tensorboard.backend.event_processing import event_file_loader, io_wrapper
from tensorboard.compat.proto import types_pb2

from attention_lab.tensorboard_plugin.limits import TooLarge, check_map_shape
from attention_lab.tensorboard_plugin.scores import parse_tag
from attention_lab.tensorboard_plugin.summary import PROBE_TAG, RecordError

FLOAT_TYPES = (types_pb2.DT_HALF, types_pb2.DT_BFLOAT16, types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE)


class RunOutside(Exception):
    """A run the tab cannot read from disk (``reason``: the line the tab prints)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def check_value(tag: str, tensor) -> None:
    """One record of the tab's tags: numbers, of a size within the limits. Raises RecordError or TooLarge."""
    shape = [dim.size for dim in tensor.tensor_shape.dim]
    if tensor.dtype not in FLOAT_TYPES:
        raise RecordError(tag, f"a tensor of {types_pb2.DataType.Name(tensor.dtype)}, not of numbers")
    if tag == PROBE_TAG:
        if len(shape) != 4:
            raise RecordError(tag, f"a tensor of rank {len(shape)}, not (layers, heads, queries, keys)")
        check_map_shape(shape)
    elif len(shape) > 1 or int(np.prod(shape, dtype=object)) != 1:  # a scalar: one value (shape [] or [1])
        raise RecordError(tag, f"a scalar of shape {shape}")


def check_file(path: Path) -> str | None:
    """The first problem of the tab's records in one event file, or None."""
    for event in event_file_loader.EventFileLoader(str(path)).Load():
        for value in event.summary.value:
            if value.tag == PROBE_TAG or parse_tag(value.tag) is not None:
                try:
                    check_value(value.tag, value.tensor)
                except (RecordError, TooLarge) as err:
                    return f"step {event.step}: {err}"
    return None


class DeclaredSizes:
    """Checks the event files of the runs under ``logdir``; each file's verdict is kept by its path, size and
    modification time."""

    def __init__(self, logdir: str) -> None:
        self.root = Path(logdir).expanduser().resolve() if logdir else None
        self.verdicts: dict[Path, tuple[int, int, str | None]] = {}
        self.lock = threading.Lock()

    def run_dir(self, run: str) -> Path:
        if self.root is None:
            raise RunOutside("the attention tab reads its records under --logdir (not --logdir_spec)")
        path = (self.root / run).resolve()
        if path != self.root and self.root not in path.parents:
            raise RunOutside(f"run {run!r} is not inside the log directory")
        return path

    def problem(self, run: str) -> str | None:
        """The first record of ``run`` that the tab refuses to read (why, in one line), or None."""
        try:
            files = sorted(self.run_dir(run).iterdir())
        except OSError as err:
            raise RunOutside(f"cannot read the records of run {run!r} ({err.strerror})") from None
        for path in files:
            if not io_wrapper.IsSummaryEventsFile(str(path)) or not path.is_file():
                continue
            stat = path.stat()
            with self.lock:
                kept = self.verdicts.get(path)
            if kept is None or kept[:2] != (stat.st_size, stat.st_mtime_ns):
                kept = (stat.st_size, stat.st_mtime_ns, check_file(path))
                with self.lock:
                    self.verdicts[path] = kept
            if kept[2] is not None:
                return f"{path.name}, {kept[2]}"
        return None

"""The command line of the review scripts, without Hydra or torch: argparse with one-line errors, the output
directory (``--out``) checked before any work is done, each file written into it as a new file, and the one
``error:`` line a script ends with when its work fails (:func:`failed`), a MemoryError included."""

from __future__ import annotations

import argparse
import gc
import logging
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from attention_lab.errors import ReviewError
from attention_lab.records.escape import console
from attention_lab.records.files import replace_atomically

# What a review script's work may end with: its ``except REVIEW_FAILURES as err: return failed(err, ...)`` makes
# each one line. MemoryError is here because a record can be larger than the machine (each tool bounds what it
# reads, but the bounds are far above a lab run's, and the machine may be small or busy).
REVIEW_FAILURES = (ReviewError, MemoryError)


def failed(err: ReviewError | MemoryError, prog: str, subject: str | Path) -> int:
    """Prints the one ``error:`` line of ``prog``'s failed work on ``subject`` to stderr; returns the exit status, 1.
    For a MemoryError, what the failed work built is freed first (it is held by the frames of the error's
    traceback), so that the line itself can be written."""
    if isinstance(err, MemoryError):
        release(err)
        line = (f"{prog} ran out of memory on {subject} (MemoryError): its records need more memory than this "
                "machine has free; close other programs, or use a machine with more memory")
    else:
        line = str(err)
    print(console(f"error: {line}"), file=sys.stderr)
    return 1


def release(err: BaseException) -> None:
    """Drops the frames of ``err``'s traceback (and those of the errors it was raised from) with their locals."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        traceback.clear_frames(err.__traceback__)
        err.__traceback__ = None
        err = err.__cause__ or err.__context__
    gc.collect()


class ReviewArgumentParser(argparse.ArgumentParser):
    """argparse for the review scripts (``script.py <dir> [--flags]``), with one-line errors."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # one line, not argparse's usage block
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


class _LowerLevelFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = console(record.getMessage())  # it may quote a record: a probe, a word of the vocabulary
        return message if record.levelno == logging.INFO else f"{record.levelname.lower()}: {message}"


def setup_logging() -> None:
    """``warning: ...`` lines on stderr for attention_lab's messages (plain lines for info)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_LowerLevelFormatter())
    logger = logging.getLogger("attention_lab")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False


def output_dir(out: str | Path | None, *, default: Path) -> Path:
    """The directory given as ``--out`` (or ``default``), created if missing and checked by writing a
    temporary file in it. An unusable one raises ReviewError with one line naming ``--out``."""
    path = Path(out).expanduser() if out else default
    setting = f"--out={out}" if out else f"the default output directory {path} (no --out given)"
    if path.exists() and not path.is_dir():
        raise ReviewError(f"{setting} is invalid: it is a file; pass a directory (created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as err:
        raise ReviewError(f"{setting} is not writable ({err.strerror or type(err).__name__}): "
                          "pass a directory you can write to with --out DIR") from None
    return path


def written(path: Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)``, then ``path`` replaced by it: an output is never written through a link (a compare.csv that
    links to a file elsewhere is replaced, and that file left as it is). An OSError (the disk filled up after
    the check of --out) is one line."""
    try:
        replace_atomically(path, write)
    except OSError as err:
        raise ReviewError(f"cannot write {path.name} in {path.parent} ({err.strerror or type(err).__name__}): "
                          "choose another directory with --out DIR") from None
    return path


def written_text(path: Path, text: str) -> Path:
    return written(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))

"""The command line of the review scripts, without Hydra or torch: argparse with one-line errors, and the output
directory (``--out``) checked before any work is done, and each file written into it as a new file."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from attention_lab.files import replace_atomically
from attention_lab.review.escape import console


class ReviewError(ValueError):
    """A mistake the user can fix (bad argument, missing checkpoint, ...); the message is one line."""


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

"""The command line of the review scripts, without Hydra or torch: ``key=value`` arguments, one-line
errors, and the output directory (``--out``) checked before any work is done."""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path


class ReviewError(ValueError):
    """A mistake the user can fix (bad argument, missing checkpoint, ...); the message is one line."""


def parse_key_values(tokens: Iterable[str], allowed: Sequence[str]) -> dict[str, str]:
    """``["run=outputs/x", "text=Hello world"]`` -> ``{"run": "outputs/x", "text": "Hello world"}``.

    Values keep everything after the first ``=`` (so ``text=a=b`` is ``a=b``); one pair of matching
    quotes around a value is removed, as Hydra does (``'text="Hello world"'``)."""
    values: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        key = key.strip().lstrip("+")
        if not sep:
            raise ReviewError(f"argument {token!r} is not key=value: use {' '.join(f'{k}=...' for k in allowed)}")
        if key not in allowed:
            raise ReviewError(f"unknown key {key!r} in {token!r}: choose among {', '.join(allowed)}")
        if key in values:
            raise ReviewError(f"{key}= given twice")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key] = value
    return values


class KeyValueParser(argparse.ArgumentParser):
    """argparse for ``script.py key=value ... [--flags]`` with one-line errors."""

    def __init__(self, *args, keys: Sequence[str], **kwargs) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.keys = tuple(keys)
        self.add_argument("assignments", nargs="*", metavar="key=value", help=f"keys: {', '.join(self.keys)}")

    def parse_key_values(self, argv: Sequence[str] | None = None) -> tuple[dict[str, str], argparse.Namespace]:
        args = self.parse_args(argv)
        try:
            values = parse_key_values(args.assignments, self.keys)
        except ReviewError as err:
            self.error(str(err))
        return values, args

    def error(self, message: str):  # one line, not argparse's usage block
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


class _LowerLevelFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
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

"""The command line of scripts/train.py: check it, then hand it to ``@hydra.main``.

Bad input ends in one ``error: ...`` line and exit status 1 before anything is created
(``HYDRA_FULL_ERROR=1`` raises instead, with the traceback). Ctrl-C outside a run exits 130.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attention_lab.errors import ConfigError
from attention_lab.run.describe import describe

# Flags that print something and train nothing: Hydra answers them itself, without our checks.
INFO_FLAGS = ("-h", "--help", "--hydra-help", "-i", "--info", "-c", "--cfg", "-sc", "--shell-completion",
              "--version", "-p", "--package", "-cp", "--config-path", "-cd", "--config-dir")


def check(argv: Sequence[str], config_dir: Path) -> list[str]:
    """Exit with one line when the command line cannot work; else the command line to run (``resume=<sweep
    dir>`` becomes the sweep's own command line, see attention_lab.run.sweep_resume)."""
    from attention_lab.run.overrides import is_override
    from attention_lab.run.preflight import check_command_line  # the Compose API: not for --help
    from attention_lab.run.sweep_resume import command_line

    try:
        argv = command_line(argv, config_dir)
        check_command_line(argv, config_dir)
        return argv
    except Exception as err:
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        sys.exit(f"error: {describe(err, [a for a in argv if is_override(a)])}")


def record_kept(argv: Sequence[str]) -> contextlib.AbstractContextManager[None]:
    """``resume=<sweep dir>``: its multirun.yaml survives Hydra's rewrite of it (see sweep_resume.record_kept)."""
    from attention_lab.run.sweep_resume import is_sweep_dir, record_kept, resume_value

    value = resume_value(argv)
    if not is_sweep_dir(value):
        return contextlib.nullcontext()
    return record_kept(Path(str(value)).expanduser().resolve(), f"resume={value}")


def main(hydra_main: Callable[[], Any], config_dir: Path, argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if any(arg.split("=")[0] in INFO_FLAGS for arg in argv):
            hydra_main()
            return
        sys.argv[1:] = check(argv, config_dir)  # what @hydra.main parses
        try:
            with record_kept(argv):
                hydra_main()
        except ConfigError as err:  # Hydra reports the task's own errors itself: this is the record's copy
            if os.environ.get("HYDRA_FULL_ERROR") == "1":
                raise
            sys.exit(f"error: {describe(err)}")
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (Ctrl-C)\n")
        sys.exit(130)

"""The command line of scripts/train.py, before and around Hydra: handed to ``@hydra.main`` as it was typed.

Hydra composes the config; the lab's checks run on that composition in a Hydra callback, before anything is
created (:class:`attention_lab.run.preflight.PreflightChecks`). Bad input ends in one ``error: ...`` line and exit
status 1 (``HYDRA_FULL_ERROR=1`` raises instead, with the traceback), Hydra's own composition errors included.
``resume=<sweep dir>`` is relaunched as the sweep's own command line. Ctrl-C outside a run exits 130.

- A setting written as an option (``--heads 3``, the argparse habit) is one line, ``use heads=3``
  (:func:`check_dashed_settings`), before Hydra answers it with its usage text.
- A top-level knob of the wrong type (``heads=two``, ``mask=diagonal``) is refused before Hydra starts
  (:func:`check_knob_types`). A knob's type belongs to the schema (:class:`attention_lab.config.TrainConfig`),
  whatever the presets and groups set, so the command line alone decides it. ``@hydra.main`` composes the config
  twice before the app sees it (once to read ``hydra.mode``, once for the run) and the first composition swallows
  the error, so finding it here saves two compositions. The values are parsed by Hydra's own override grammar and
  checked by OmegaConf's typed nodes, as Hydra's composition would; everything else (sweeps, groups, ``+``/``~``,
  nested keys) is left to Hydra.
- Tracebacks only when the user asked for them: scripts/train.py sets ``HYDRA_FULL_ERROR=1`` for Hydra itself, so
  that Hydra hands its errors (a typo in an override, an unknown option) to the lab, which says them in one line,
  instead of printing several. The user's own choice travels in :data:`USER_FULL_ERROR`, set once by
  :func:`hand_errors_to_lab` and inherited by every process the run starts (sweep jobs, a resumed sweep's relaunch).
- The console's log lines without control characters (:class:`ConsoleFormatter`; configs/hydra/default.yaml sets it
  for Hydra's own lines and for the jobs'): they name a job's overrides and errors, which a resumed sweep reads from
  its record, and a record must not send the terminal commands (an OSC sequence that sets its title, one that
  rewrites the clipboard). See :func:`attention_lab.records.escape.console`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

from omegaconf import DictConfig, OmegaConf

from attention_lab.errors import ConfigError
from attention_lab.records.escape import console
from attention_lab.run.describe import describe, expected_error
from attention_lab.run.overrides import is_override, is_sweep_dir, resume_value
from attention_lab.startup_gc import pause

# Flags that print something and train nothing: Hydra answers them itself, without our checks.
INFO_FLAGS = ("-h", "--help", "--hydra-help", "-i", "--info", "-c", "--cfg", "-sc", "--shell-completion",
              "--version", "-p", "--package", "-cp", "--config-path", "-cd", "--config-dir")
# Hydra's own options (its argparse parser's, which also takes any unambiguous prefix of them): any other argument
# that starts with "--" is a setting written as an option (`--heads 3`), answered by check_dashed_settings.
HYDRA_OPTIONS = ("--help", "--hydra-help", "--version", "--cfg", "--resolve", "--package", "--run", "--multirun",
                 "--shell-completion", "--config-path", "--config-name", "--config-dir", "--experimental-rerun",
                 "--info")
# Set in the process that `resume=<sweep dir>` relaunches (the value: that sweep dir), which then runs the
# sweep's command line as it is instead of rewriting it again.
RELAUNCHED_SWEEP = "ATTENTION_LAB_RELAUNCHED_SWEEP"


class DashedSetting(ConfigError):
    """A setting written as a command-line option (``--heads 3``, the argparse habit): Hydra takes ``heads=3``, and
    would answer the option with its usage text. ``given``: the argument(s) as typed; ``override``: the setting."""

    def __init__(self, given: str, override: str) -> None:
        self.given, self.override = given, override
        super().__init__(f"{given} is not how a setting is given: use {override} "
                         "(python scripts/train.py --help lists them)")


def dashed_override(name: str, value: str | None) -> str:
    """``name=value`` as Hydra takes it: a knob's name with "_" for "-" (``--max-steps``), a flag without a value
    ``true`` for a true/false knob."""
    from attention_lab.config import TrainConfig, knob_names
    from attention_lab.run.describe import field_type

    knobs = knob_names()
    if name not in knobs and name.replace("-", "_") in knobs:
        name = name.replace("-", "_")
    if value is None:
        value = "true" if field_type(TrainConfig, name) is bool else "<value>"
    return f"{name}={value}"


def check_dashed_settings(argv: Sequence[str]) -> None:
    """Raises DashedSetting for the first argument that is an option of Hydra's in form only (``--heads 3``,
    ``--heads=3``): its value is the next argument where that is neither an option nor a setting."""
    for index, arg in enumerate(argv):
        name, equals, value = arg.removeprefix("--").partition("=")
        if not arg.startswith("--") or not name or any(option.startswith(f"--{name}") for option in HYDRA_OPTIONS):
            continue
        if equals:
            raise DashedSetting(arg, dashed_override(name, value))
        following = argv[index + 1] if index + 1 < len(argv) else None
        if following is not None and not following.startswith("-") and "=" not in following:
            raise DashedSetting(f"{arg} {following}", dashed_override(name, following))
        raise DashedSetting(arg, dashed_override(name, None))


def fail(err: Exception, argv: Sequence[str]) -> NoReturn:
    """One line for an error about the input (HYDRA_FULL_ERROR=1, or a bug: raised, with its traceback)."""
    if full_error_requested() or not expected_error(err):
        raise err
    sys.exit(f"error: {describe(err, [a for a in argv if is_override(a)])}")


def resumed_sweep_dir(argv: Sequence[str]) -> Path | None:
    value = resume_value(argv)
    return Path(str(value)).expanduser().resolve() if is_sweep_dir(value) else None


def relaunch_resumed_sweep(argv: Sequence[str], sweep_dir: Path | None, config_dir: Path, script: Path) -> None:
    """``resume=<sweep dir>`` (``sweep_dir``): checked, then this process becomes the sweep's own command line (see
    attention_lab.run.sweep_resume.command_line). Returns at once for any other command line, and in the
    relaunched process."""
    if sweep_dir is None:
        return
    if os.environ.get(RELAUNCHED_SWEEP) == str(sweep_dir) and ("-m" in argv or "--multirun" in argv):
        return
    from attention_lab.run.run_info import sweep_resume_lock
    from attention_lab.run.sweep_resume import command_line

    try:  # a second resume of the sweep is refused before it reads a record another one may be rewriting
        with sweep_resume_lock(sweep_dir, f"resume={resume_value(argv)}", holder=False):
            relaunched = command_line(argv, config_dir)
    except Exception as err:  # noqa: BLE001 - fail() says it in one line
        fail(err, argv)
    os.environ[RELAUNCHED_SWEEP] = str(sweep_dir)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, str(script), *relaunched])


@contextlib.contextmanager
def resumed_sweep(argv: Sequence[str], sweep_dir: Path | None) -> Iterator[None]:
    """``resume=<sweep dir>`` (``sweep_dir``): the only resume of the sweep until its jobs have ended (see
    run_dir.sweep_resume_lock), and its multirun.yaml survives Hydra's rewrite of it (see sweep_resume.record_kept)."""
    if sweep_dir is None:
        yield
        return
    from attention_lab.run.run_info import sweep_resume_lock
    from attention_lab.run.sweep_resume import record_kept

    setting = f"resume={resume_value(argv)}"
    with sweep_resume_lock(sweep_dir, setting, holder=True), record_kept(sweep_dir, setting):
        yield


def register_help() -> None:
    """``${lab.help:}`` in configs/hydra/help/lab.yaml: the groups and knobs of ``--help``, written by
    :mod:`attention_lab.run.config_help`, which only ``--help`` imports."""

    def resolve(*, _root_: DictConfig) -> str:
        # Hydra also reads the template while it composes any config (it merges its own defaults over the help):
        # the groups' choices are recorded once the composition is complete, and only then is there a help to write.
        if not OmegaConf.select(_root_, "hydra.runtime.choices"):
            return ""
        from attention_lab.run.config_help import help_sections

        return help_sections(_root_)

    OmegaConf.register_new_resolver("lab.help", resolve, replace=True)


def main(hydra_main: Callable[[], Any], config_dir: Path, script: Path) -> None:
    """Runs ``hydra_main`` (the ``@hydra.main`` function of ``script``) on this process's command line."""
    argv = sys.argv[1:]
    pause()  # until training begins (attention_lab.startup_gc)
    try:
        try:
            check_dashed_settings(argv)
        except DashedSetting as err:
            fail(err, argv)
        if any(arg.split("=")[0] in INFO_FLAGS for arg in argv):
            hydra_main()
            return
        hand_errors_to_lab()
        sweep_dir = resumed_sweep_dir(argv)
        relaunch_resumed_sweep(argv, sweep_dir, config_dir, script)
        try:
            check_knob_types(argv)
            with resumed_sweep(argv, sweep_dir):
                hydra_main()
        except Exception as err:  # noqa: BLE001 - fail() says it in one line
            fail(err, argv)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted (Ctrl-C)\n")
        sys.exit(130)
    except BrokenPipeError:  # `--help | head`: the reader has what it wanted; as the Python docs do it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit's flush
        sys.exit(1)
    except SystemExit as stop:  # the one line a refused command or a failed sweep ends with may quote a record
        if isinstance(stop.code, str):
            sys.exit(console(stop.code))
        raise


def check_knob_types(argv: Sequence[str]) -> None:
    """Raises OmegaConf's ValidationError for a top-level knob typed with a value its schema field refuses."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from omegaconf import OmegaConf

    from attention_lab.config import TrainConfig, knob_names

    knobs = set(knob_names())
    overrides = [o for o in OverridesParser.create().parse_overrides([a for a in argv if is_override(a)])
                 if o.type is OverrideType.CHANGE and o.package is None and not o.is_sweep_override()
                 and o.key_or_group in knobs]
    if not overrides:
        return
    schema = OmegaConf.structured(TrainConfig)
    for override in overrides:
        schema[override.key_or_group] = override.value()


HYDRA_FULL_ERROR = "HYDRA_FULL_ERROR"
USER_FULL_ERROR = "ATTENTION_LAB_FULL_ERROR"


def full_error_requested() -> bool:
    """True when the user set HYDRA_FULL_ERROR=1 (outside scripts/train.py: HYDRA_FULL_ERROR as it is)."""
    return os.environ.get(USER_FULL_ERROR, os.environ.get(HYDRA_FULL_ERROR)) == "1"


def hand_errors_to_lab() -> None:
    """Keep the user's choice, then let Hydra raise its errors instead of printing them."""
    os.environ.setdefault(USER_FULL_ERROR, "1" if os.environ.get(HYDRA_FULL_ERROR) == "1" else "0")
    os.environ[HYDRA_FULL_ERROR] = "1"


class ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return console(super().format(record))

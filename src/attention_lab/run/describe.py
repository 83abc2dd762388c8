"""One line for any error a user can cause: ``<setting>=<value> is invalid: <what is allowed>``.

Built from the exceptions' structured fields (Hydra's ``missing_cfg_file``/``options``/``override``, OmegaConf's
``key``/``full_key``/``value``/``object_type``) and the schema's field types, never from message text.
"""

from __future__ import annotations

import dataclasses
import enum
import errno
import os
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.errors import MissingConfigException, OverrideParseException
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException, ValidationError

from attention_lab.config import SCHEMA_SUFFIX, TaskConfig
from attention_lab.errors import ConfigError, TrainingDiverged, TrainingInterrupted
from attention_lab.names import did_you_mean
from attention_lab.run.overrides import override_key

KINDS = {int: "an integer", float: "a number", bool: "true or false", str: "a string"}


def one_line(text: str, limit: int = 600) -> str:
    """``text`` on one line, cut at ``limit`` characters: the longest list of what is allowed (Lightning's
    strategies, trainer_rules.py) with a sweep's note of the job fits."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def field_type(schema: Any, key: Any) -> Any:
    """The declared type of ``schema.key`` (a dataclass field), Optional unwrapped; None if unknown."""
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        return None
    declared = typing.get_type_hints(schema).get(str(key))
    if isinstance(declared, types.UnionType) or typing.get_origin(declared) is typing.Union:
        declared = next((a for a in typing.get_args(declared) if a is not type(None)), None)
    return declared


def expected(schema: Any, key: Any) -> str:
    declared = field_type(schema, key)
    if isinstance(declared, type) and issubclass(declared, enum.Enum):
        return "choose one of " + ", ".join(member.name for member in declared)
    if typing.get_origin(declared) is list:
        return "expected a list, e.g. [a,b]"
    return f"expected {KINDS.get(declared, 'another type')}"


def override_text(full_key: str, overrides: Sequence[str]) -> str | None:
    """The command-line override that set ``full_key`` (the last one wins, as in Hydra)."""
    for override in reversed(overrides):
        if override_key(override) == full_key:
            return override.lstrip("+~") if "=" in override else f"{full_key}=null"
    return None


def setting_hint(error: OmegaConfBaseException) -> str:
    """The declared setting nearest to the key that ``error`` found no setting for."""
    schema = error.object_type
    if not (isinstance(schema, type) and dataclasses.is_dataclass(schema)):
        return ""
    prefix, _, leaf = str(error.full_key).rpartition(".")
    if schema is TaskConfig:  # a task's own option written as a shared setting: task.pairs for task.options.pairs
        from attention_lab.data.tasks.base import option_hint  # the tasks are read only for this error

        if hint := option_hint(leaf):
            return hint
    return did_you_mean(leaf, [f.name for f in dataclasses.fields(schema)], prefix + "." if prefix else "")


def describe_omegaconf(error: OmegaConfBaseException, overrides: Sequence[str]) -> str:
    full_key = str(error.full_key or error.key)
    given = override_text(full_key, overrides) or f"{full_key}={error.value}"
    if isinstance(error, (ConfigAttributeError, ConfigKeyError)):
        return (f"{given} is invalid: there is no setting '{full_key}'{setting_hint(error)} "
                "(python scripts/train.py --help lists them)")
    if isinstance(error, ValidationError):
        if error.value is None:
            return f"{given} is invalid: it cannot be null"
        return f"{given} is invalid: {expected(error.object_type, error.key)}, got '{error.value}'"
    return f"{given} is invalid: {one_line(error.msg or type(error).__name__)}"


def unwritable(error: BaseException | None) -> bool:
    """A write the filesystem refused: it is full (or over quota), or read-only. Not a bug. (EACCES is left out:
    a read can raise it too.)"""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS)


def describe(error: BaseException, overrides: Sequence[str] = ()) -> str:
    """One line for ``error``; ``overrides`` (the command line's) let it quote the setting as it was typed."""
    if isinstance(error, (ConfigError, TrainingDiverged, TrainingInterrupted)):
        return one_line(str(error))
    for cause in (error, error.__cause__):  # the cause: logging's "Unable to configure handler" for a log file
        if isinstance(cause, OSError) and unwritable(cause):
            where = f"in {Path(os.fsdecode(cause.filename)).parent}" if cause.filename else "its files"
            return one_line(f"cannot write {where} ({cause.strerror or errno.errorcode.get(cause.errno, 'OSError')})")
    if isinstance(error, MissingConfigException) and error.missing_cfg_file:
        group, _, value = error.missing_cfg_file.rpartition("/")
        options = [o for o in (error.options or []) if not o.endswith(SCHEMA_SUFFIX)]
        if group and options:  # the options of the group, as Hydra's config loader lists them
            return f"{group}={value} is unknown: choose one of {', '.join(options)}{did_you_mean(value, options, group + '=')}"
        return f"{error.missing_cfg_file} is unknown: no such config"
    if isinstance(error, OverrideParseException):
        return f"could not parse the override '{error.override}': write key=value, e.g. heads=3"
    for cause in (error, error.__cause__):
        if isinstance(cause, OmegaConfBaseException) and (cause.full_key or cause.key):
            return describe_omegaconf(cause, overrides)
    cause = error.__cause__
    if cause is not None:
        return one_line(f"{type(cause).__name__}: {cause}")
    return one_line(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)


def expected_error(error: BaseException) -> bool:
    """Errors about the input or the run, not bugs: no traceback file for them."""
    from hydra.errors import HydraException

    return isinstance(error, (ConfigError, TrainingDiverged, HydraException, OmegaConfBaseException)) \
        or unwritable(error) or unwritable(error.__cause__)

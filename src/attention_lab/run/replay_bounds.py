"""How much one override of a record may hold, and how many jobs a sweep's record may declare: what replaying a
record costs, bounded before the cost is paid.

A resume replays a record (a run's ``.hydra/overrides.yaml``, a sweep's ``multirun.yaml``) by parsing its overrides
with Hydra's grammar and composing them, several times over; a resumed sweep composes a config for each value of
each sweep, and its sweeper one for each job. Each grows with what one override holds: Hydra's parser takes time
quadratic in an override's tokens (a list of 6,000 names: 3.5 s per parse), and each item of a list is looked up as
the config is composed and checked. A list of 5,000 names in a 64 KiB ``overrides.yaml`` cost 40 s and 3 GB before
the config rules refused it, and one of 100,000 in a 1 MiB ``multirun.yaml`` ran for more than 10 minutes. The
records the lab writes hold the overrides as they were typed, far inside these bounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.override_parser.types import ChoiceSweep, Override, RangeSweep

from attention_lab.errors import ConfigError
from attention_lab.run.overrides import override_key

REPLAYED_CHARS = 4096  # one override of a record, key and value
REPLAYED_ITEMS = 256  # in one value: a list's or a mapping's items, nested ones included; or a sweep's values
REPLAYED_JOBS = 4096  # the jobs a sweep's record declares: the product of its sweeps' values


def shown(line: str, width: int = 60) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def check_length(lines: Sequence[str], setting: str, path: Path) -> None:
    """Raises ConfigError for an override longer than REPLAYED_CHARS: checked on the text, before it is parsed."""
    for line in lines:
        if len(line) > REPLAYED_CHARS:
            raise ConfigError(f"{setting} is invalid: {path.name} holds an override of {len(line)} characters "
                              f"({shown(line)}); a record replays overrides of at most {REPLAYED_CHARS} characters")


def items(value: Any) -> int:
    """The items of a parsed value: a list's and a mapping's, nested ones included (walked without recursion)."""
    count, pending = 0, [value]
    while pending:
        node = pending.pop()
        children = list(node.values()) if isinstance(node, dict) else node if isinstance(node, list) else []
        count += len(children)
        pending.extend(children)
    return count


def sweep_values(override: Override) -> float:
    """How many values a sweep override has (1 for any other override): a choice's, or a range's steps. An
    interval is sampled (Optuna), a glob matches a group's options: 1. A range with a step of 0 is endless."""
    value = override.value()
    if isinstance(value, ChoiceSweep):
        return len(value.list)
    if isinstance(value, RangeSweep):
        if not value.step:
            return math.inf
        return max(0, math.ceil((value.stop - value.start) / value.step))
    return 1


def check_items(override: Override, setting: str, path: Path) -> None:
    """Raises ConfigError for an override whose value, or one of whose sweep's values, holds more than
    REPLAYED_ITEMS items, or a sweep of more than REPLAYED_ITEMS values."""
    value = override.value()
    values = value.list if isinstance(value, ChoiceSweep) else [value]
    count = max([sweep_values(override), *map(items, values)])
    if count > REPLAYED_ITEMS:
        raise ConfigError(f"{setting} is invalid: {path.name} sets {override.key_or_group} to {count} items or "
                          f"values ({shown(override.input_line)}); a record replays at most {REPLAYED_ITEMS} in one "
                          "value (a list, a mapping or a sweep's values)")


def check_jobs(parsed: Sequence[Override], setting: str, path: Path) -> None:
    """Raises ConfigError for a sweep whose record declares more than REPLAYED_JOBS jobs (its overrides'
    sweeps multiplied; a setting given twice counts once, as the sweeper takes the last)."""
    values = {override_key(o.input_line): sweep_values(o) for o in parsed}
    jobs = math.prod(values.values())
    if jobs > REPLAYED_JOBS:
        raise ConfigError(f"{setting} is invalid: {path.name} declares a sweep of {jobs} jobs; a record replays a sweep "
                          f"of at most {REPLAYED_JOBS} jobs")

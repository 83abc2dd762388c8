"""The records of a sweep, read for the review tools with the shapes and types they need.

A sweep dir is data that anyone may have edited or damaged: whatever cannot be read (a file that the lab's bounded
reader refuses: too large, not JSON or YAML, nested too deeply; of the wrong shape, a field of the wrong type)
becomes one line in :class:`Unreadable` and is left out, so the rest of the sweep is still reported. NaN and
infinities are numbers here: the lab writes them for a diverged run's metrics.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_lab.records.files import UnreadableRecord, read_json_record, read_yaml_record

KINDS = {bool: "true/false", int: "a number", float: "a number", str: "text", list: "a list", dict: "an object",
         type(None): "null"}


def kind(value: Any) -> str:
    return KINDS.get(type(value), type(value).__name__)


def shown(value: Any) -> str:
    """A value for a one-line message: numbers and short text as they are, anything else by its kind."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    return kind(value)


@dataclass
class Unreadable:
    """One line per file or field of a sweep that could not be read, named relative to the sweep dir."""

    root: Path
    lines: list[str] = field(default_factory=list)

    def name(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else str(path)

    def add(self, path: Path, what: str) -> None:
        line = f"{self.name(path)}: {what}"
        if line not in self.lines:  # the summary is read once, but a job's files may be looked at twice
            self.lines.append(line)

    def about(self, paths: Iterable[Path]) -> list[str]:
        """The names of those of ``paths`` that have a line here."""
        names = [self.name(p) for p in paths]
        return [n for n in names if any(line.startswith(n + ": ") for line in self.lines)]


def load_json(path: Path, unreadable: Unreadable) -> dict[str, Any]:
    """The JSON object in ``path`` (read by the lab's bounded reader); {} when it is missing (silently: not every
    job has every file) or unreadable."""
    try:
        data = read_json_record(path)
    except FileNotFoundError:
        return {}
    except UnreadableRecord as err:
        unreadable.add(path, f"{err.problem}; ignored")
        return {}
    if not isinstance(data, dict):
        unreadable.add(path, f"holds {kind(data)}, not an object; ignored")
        return {}
    return data


def load_yaml(path: Path, unreadable: Unreadable, shape: type[list] | type[dict]) -> Any:
    """The YAML list or mapping in ``path`` (read by the lab's bounded reader); an empty one when it is missing,
    empty or unreadable."""
    try:
        data = read_yaml_record(path)
    except FileNotFoundError:
        return shape()
    except UnreadableRecord as err:
        unreadable.add(path, f"{err.problem}; ignored")
        return shape()
    if data is None:
        return shape()
    if not isinstance(data, shape):
        unreadable.add(path, f"holds {kind(data)}, not {kind(shape())}; ignored")
        return shape()
    return data


def mapping(record: dict[str, Any], key: str, path: Path, unreadable: Unreadable, where: str = "") -> dict[str, Any]:
    value = record.get(key)
    if value is None or isinstance(value, dict):
        return value or {}
    unreadable.add(path, f"{where}{key} is {kind(value)}, not an object; ignored")
    return {}


def text(record: dict[str, Any], key: str, path: Path, unreadable: Unreadable, where: str = "") -> str | None:
    value = record.get(key)
    if value is None or isinstance(value, str):
        return value
    unreadable.add(path, f"{where}{key} is {shown(value)}, not text; ignored")
    return None


def strings(value: Any, what: str, path: Path, unreadable: Unreadable) -> list[str]:
    """A list of text (overrides); anything else in it is named and left out."""
    if value is None:
        return []
    if not isinstance(value, list):
        unreadable.add(path, f"{what} is {kind(value)}, not a list; ignored")
        return []
    bad = [shown(item) for item in value if not isinstance(item, str)]
    if bad:
        unreadable.add(path, f"{what} holds {', '.join(bad)}, not text; left out")
    return [item for item in value if isinstance(item, str)]


def amount(record: dict[str, Any], key: str, path: Path, unreadable: Unreadable, *, whole: bool = False,
           where: str = "") -> float | None:
    """A finite number >= 0 (a count, a step, seconds); None when absent or not one."""
    value = record.get(key)
    if value is None:
        return None
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and math.isfinite(value) and value >= 0 and (not whole or value == int(value)):
        return int(value) if whole else float(value)
    unreadable.add(path, f"{where}{key} is {shown(value)}, not a {'whole ' if whole else ''}number >= 0; ignored")
    return None


def metric_values(metrics: dict[str, Any], path: Path, unreadable: Unreadable,
                  prefixes: tuple[str, ...]) -> dict[str, float]:
    """The numeric values of the keys with these prefixes; NaN and infinities included."""
    values = {}
    for key, value in metrics.items():
        if not key.startswith(prefixes):
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            values[key] = float(value)
        else:
            unreadable.add(path, f"{key} is {shown(value)}, not a number; ignored")
    return values

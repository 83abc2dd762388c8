"""One line of the results (:class:`Row`) and the small helpers every section shares."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

Progress = Callable[[str], None]  # called once per measured item with a short description


def no_progress(description: str) -> None:
    """The default Progress: report nothing."""


@dataclass
class Row:
    """One line of the results: a measured value, its ratio to a reference and its target."""

    section: str  # "A", "B", "C" or "D"
    key: str  # stable id, e.g. "A/fwd+bwd/multihead"
    name: str  # what was measured, for people
    value: float | None  # None: not measured (the note says why)
    unit: str
    ratio: float | None = None
    ratio_to: str = ""  # what `ratio` divides by
    gflops: float | None = None  # GFLOP/s, kernels only
    target: str = ""
    ok: bool | None = None  # None: no target, or not measured
    note: str = ""
    samples: list[float] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def check(value: float | None, op: str, limit: float) -> bool | None:
    """value <= limit (op "<=") or value >= limit (op ">="); None when nothing was measured."""
    if value is None or math.isnan(value):
        return None
    return value <= limit if op == "<=" else value >= limit


def rows_to_json(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]

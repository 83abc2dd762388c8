"""Numbers as the review tables print them: a count of steps as a whole number (``140``, not ``140.0000``), a mean
of counts with one decimal (``233.3 ± 76.4``), a metric to four decimals. No torch import."""

from __future__ import annotations

import math

from attention_lab.records.metrics_file import STEPS_TO_SOLVE


def is_count(name: str) -> bool:
    """A metric that counts steps: steps_to_solve, and the ``*_step`` findings (formation_step, loss_drop_step)."""
    return name == STEPS_TO_SOLVE or name.endswith("_step")


def value_text(name: str, value: float) -> str:
    """One job's value: a count as a whole number, a metric to four decimals; nan and inf as they are."""
    if is_count(name) and math.isfinite(value) and float(value).is_integer():
        return str(int(value))
    return f"{value:.4f}"


def mean_text(name: str, mean: float, std: float | None) -> str:
    """A mean over seeds and, with two values or more, ``± std``: counts to one decimal, metrics to four."""
    spec = ".1f" if is_count(name) else ".4f"
    return f"{mean:{spec}}" if std is None else f"{mean:{spec}} ± {std:{spec}}"

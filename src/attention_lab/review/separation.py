"""When the seeds of a sweep tell two configurations apart: the one rule that compare.py and plot_sweep.py use
before they call a configuration the best.

A configuration run with several seeds has a mean and a sample standard deviation (its seed-to-seed spread) of
each metric. Two configurations are **separated** on a metric when each has at least :data:`MIN_SEEDS` values
and their means differ by more than the larger of their two standard deviations: the gap is wider than the
noise either one shows by itself. With one seed a configuration has no spread, so one seed separates nothing.
This is a floor, not a significance test: it keeps a difference in the third decimal of runs that all solved the
task from being called a win, and it lets a gap of several spreads through.

No torch import (the review tools read big sweeps quickly)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from attention_lab.review.sweep import mean_std

MIN_SEEDS = 2  # values a configuration needs before its seeds can separate it from another (a spread needs two)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Spread:
    """A configuration's values of one metric over its seeds: mean, sample std (ddof=1; None below 2) and n."""

    mean: float
    std: float | None
    n: int


def spread(values: Iterable[float]) -> Spread | None:
    """The finite values' mean, sample std and count; None when there is none (a NaN or an infinity is no value)."""
    finite = [float(v) for v in values if math.isfinite(v)]
    if not finite:
        return None
    mean, std = mean_std(finite)
    return Spread(mean, std, len(finite))


def separated(a: Spread, b: Spread) -> bool:
    """The rule: both have :data:`MIN_SEEDS` values or more and their means differ by more than the larger std."""
    if a.n < MIN_SEEDS or b.n < MIN_SEEDS or a.std is None or b.std is None:
        return False
    return abs(a.mean - b.mean) > max(a.std, b.std)


def better(direction: str) -> float:
    """The sign that makes a larger signed mean the better one."""
    return 1.0 if direction == "maximize" else -1.0


def leading(spreads: Mapping[K, Spread], direction: str) -> list[K]:
    """The key with the best mean, then every key its seeds do not separate from it, best mean first (equal means
    keep their order). The others trail: the seeds say they are worse."""
    if not spreads:
        return []
    sign = better(direction)
    order = sorted(spreads, key=lambda key: -sign * spreads[key].mean)  # sorted() keeps the order of equals
    top = spreads[order[0]]
    return [key for key in order if key == order[0] or not separated(top, spreads[key])]

"""What a finding claims, in a form a sweep's records can confirm or refute: ``KOfN`` (at least k of n seeds satisfy
a test), ``Order`` (configurations ranked on a metric, seed by seed) and ``Range`` (a metric stayed within the range
observed over the seeds it came from).

A claim reads :class:`Record` s: one finished job each, its overrides as a mapping (``seed`` among them) and the
numbers of its metrics.json. Each claim picks its jobs with ``where`` (override -> value; ``None``: the job does not
set it), so that one finding's sweep can hold several configurations. Evaluated, a claim is a :class:`Verdict`:
held or not, and the numbers that decided it, so a claim that fails says by how much.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

# The comparisons a test may use; "set" / "unset": the metric holds a number / null or nothing
# (steps_to_solve: solved / never solved).
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt}
PRESENCE = ("set", "unset")


@dataclass(frozen=True)
class Record:
    """One finished job: its overrides (key -> value as typed, ``+``/``~`` prefixes dropped) and its metrics
    (a number, or None where metrics.json holds null)."""

    overrides: Mapping[str, str]
    metrics: Mapping[str, float | None]
    wall_time_s: float | None = None
    cpu_time_s: float | None = None  # the job process's CPU time (run_info.json), where recorded

    @property
    def seed(self) -> str:
        return self.overrides.get("seed", "default")


def same_value(a: str, b: str) -> bool:
    """Hydra writes a bool as typed (``true``) or as Python prints it (``True``): one value either way."""
    return a.strip().lower() == b.strip().lower()


def matches(record: Record, where: Mapping[str, str | None]) -> bool:
    for key, value in where.items():
        have = record.overrides.get(key)
        if value is None:
            if have is not None:
                return False
        elif have is None or not same_value(have, value):
            return False
    return True


def described(where: Mapping[str, str | None]) -> str:
    if not where:
        return "every job"
    return " ".join(f"{k}={v}" if v is not None else f"no {k}" for k, v in where.items())


def number(value: float | None) -> str:
    if value is None:
        return "null"
    return f"{value:.4g}" if math.isfinite(value) else str(value)


@dataclass(frozen=True)
class Predicate:
    """A test of one job: ``metric op value`` (``val/seq_acc >= 0.99``), or ``metric set`` / ``metric unset``."""

    metric: str
    op: str
    value: float | None = None

    def __post_init__(self) -> None:
        if self.op not in (*COMPARISONS, *PRESENCE) or (self.op in COMPARISONS) == (self.value is None):
            raise ValueError(f"a test is `metric <op> value` with op one of {list(COMPARISONS)}, or `metric set|unset`;"
                             f" got {self.metric} {self.op} {self.value}")

    def __str__(self) -> str:
        return f"{self.metric} {self.op}" + ("" if self.value is None else f" {self.value:g}")

    def passes(self, record: Record) -> bool:
        value = record.metrics.get(self.metric)
        if self.op in PRESENCE:
            return (value is not None) == (self.op == "set")
        return value is not None and math.isfinite(value) and COMPARISONS[self.op](value, self.value)


@dataclass(frozen=True)
class Verdict:
    claim: str  # the claim in words
    held: bool
    numbers: str  # what decided it
    seeds: tuple[str, ...] = ()

    def line(self) -> str:
        return f"{'held' if self.held else 'NOT HELD'}: {self.claim}: {self.numbers}"


def shown_seeds(seeds: Sequence[int]) -> str:
    """(0, 1, ..., 9) -> ``0-9``; a few or scattered seeds one by one."""
    if len(seeds) > 2 and tuple(seeds) == tuple(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def seeds_of(records: Sequence[Record]) -> tuple[str, ...]:
    return tuple(r.seed for r in records)


@dataclass(frozen=True)
class KOfN:
    """At least ``k`` of ``n`` seeds' jobs (those matching ``where``) pass ``test``. Checked on another number of
    seeds m, the same share is asked: at least ceil(k * m / n) (every one when k = n)."""

    test: Predicate
    k: int
    n: int
    where: Mapping[str, str | None] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{described(self.where)}: {self.test} in at least {self.k} of {self.n} seeds"

    def evaluate(self, records: Sequence[Record]) -> Verdict:
        chosen = [r for r in records if matches(r, self.where)]
        passed = [r for r in chosen if self.test.passes(r)]
        needed = math.ceil(self.k * len(chosen) / self.n) if chosen else 1
        failing = [f"seed {r.seed}: {number(r.metrics.get(self.test.metric))}" for r in chosen if r not in passed]
        numbers = f"{len(passed)} of {len(chosen)} (needed {needed})"
        if failing:
            numbers += "; not: " + ", ".join(failing)
        return Verdict(str(self), bool(chosen) and len(passed) >= needed, numbers, seeds_of(chosen))


@dataclass(frozen=True)
class Order:
    """Seed by seed, ``metric`` ranks the configurations as ``ranking`` does, highest first: every job of one
    entry above every job of the next. An entry of several labels is a tie the claim leaves open (``none`` and
    ``sinusoidal`` within each other's spread). Held when the order holds in at least ``k`` of ``n`` seeds
    (scaled as :class:`KOfN`)."""

    metric: str
    ranking: tuple[tuple[str, ...], ...]
    k: int
    n: int
    by: str = ""  # the override the configurations differ in (``position``): a label is its value
    # or, where they differ in several, each label's jobs (``{"gated": {"model": "gated"}}``)
    configurations: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    where: Mapping[str, str | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        labels = {label for entry in self.ranking for label in entry}
        if bool(self.by) == bool(self.configurations) or (self.configurations and labels - set(self.configurations)):
            raise ValueError(f"an Order names its configurations by one override (by=) or by configurations=, each "
                             f"label of its ranking among them; got by={self.by!r}, labels {sorted(labels)}")

    def labelled(self, record: Record, label: str) -> bool:
        if self.by:
            return same_value(record.overrides.get(self.by, ""), label)
        return matches(record, self.configurations[label])

    def __str__(self) -> str:
        order = " > ".join(" ≈ ".join(labels) for labels in self.ranking)
        by = f" by {self.by}" if self.by else ""
        return f"{described(self.where)}: {self.metric}{by}: {order} in at least {self.k} of {self.n} seeds"

    def evaluate(self, records: Sequence[Record]) -> Verdict:
        chosen = [r for r in records if matches(r, self.where)]
        seeds = sorted({r.seed for r in chosen}, key=lambda s: (len(s), s))
        held_in, broken = [], []
        for seed in seeds:
            ranks = [[r.metrics.get(self.metric) for r in chosen
                      if r.seed == seed and any(self.labelled(r, label) for label in labels)]
                     for labels in self.ranking]
            complete = all(values and None not in values for values in ranks)
            if complete and all(min(upper) > max(lower) for upper, lower in zip(ranks, ranks[1:], strict=False)):
                held_in.append(seed)
            else:
                shown = " / ".join(",".join(number(v) for v in values) or "missing" for values in ranks)
                broken.append(f"seed {seed}: {shown}")
        needed = math.ceil(self.k * len(seeds) / self.n) if seeds else 1
        numbers = f"in {len(held_in)} of {len(seeds)} seeds (needed {needed})"
        if broken:
            numbers += "; not: " + "; ".join(broken)
        return Verdict(str(self), bool(seeds) and len(held_in) >= needed, numbers, tuple(seeds))


def decimals(bound: float) -> int:
    """The decimals a bound is written with: 0.998 -> 3, 1.0 -> 1, 130 -> 0."""
    text = repr(bound)
    return len(text.split(".")[1]) if "." in text and "e" not in text else 0


@dataclass(frozen=True)
class Range:
    """Every job (matching ``where``) has ``metric`` within [low, high]: the range observed over ``seeds``, which
    new seeds may leave (the docs say so); a claim about those seeds, checkable on any."""

    metric: str
    low: float
    high: float
    seeds: tuple[int, ...]
    where: Mapping[str, str | None] = field(default_factory=dict)
    where_set: bool = False  # over the jobs whose metric holds a number only (steps_to_solve: of the solved runs)

    def __str__(self) -> str:
        which = ", where set" if self.where_set else ""
        return (f"{described(self.where)}: {self.metric} in {self.low:g} to {self.high:g} "
                f"(seeds {shown_seeds(self.seeds)}{which})")

    def within(self, value: float | None) -> bool:
        """At the precision the bounds are written in (0.61-0.69: two decimals), as the docs round what they saw."""
        if value is None or not math.isfinite(value):
            return False
        digits = max(decimals(self.low), decimals(self.high))
        return self.low <= round(value, digits) <= self.high

    def evaluate(self, records: Sequence[Record]) -> Verdict:
        chosen = [r for r in records if matches(r, self.where)
                  and not (self.where_set and r.metrics.get(self.metric) is None)]
        values = [r.metrics.get(self.metric) for r in chosen]
        found = [v for v in values if v is not None and math.isfinite(v)]
        outside = [f"seed {r.seed}: {number(v)}" for r, v in zip(chosen, values, strict=True) if not self.within(v)]
        numbers = (f"{number(min(found))} to {number(max(found))} over {len(chosen)} jobs" if found
                   else f"no value over {len(chosen)} jobs")
        if outside:
            numbers += "; outside: " + ", ".join(outside)
        return Verdict(str(self), bool(chosen) and not outside, numbers, seeds_of(chosen))


Claim = KOfN | Order | Range

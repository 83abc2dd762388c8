"""Which metric compare.png draws: the sweep's optimized metric, unless every job ties on it.

A sweep of runs that all solve the task ties at ``val/seq_acc`` 1.000, and a chart of equal bars, each marked best,
says nothing. Then the chart draws the first metric that tells the jobs apart: ``steps_to_solve`` (how soon each
solved it), else ``val/loss``; its title says what tied. When no metric tells them apart, the chart says they tie.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attention_lab.review.sweep import Job, Sweep

# The metrics that break a tie of the optimized metric, in order, with the direction in which each is better.
TIE_BREAKERS = (("steps_to_solve", "minimize"), ("val/loss", "minimize"))


@dataclass(frozen=True)
class ChartMetric:
    """What the bars show: one value per job (None: no bar), the best jobs, and a note on a tie."""

    name: str
    direction: str  # maximize | minimize
    values: list[float | None]
    best: list[bool]
    tie: str = ""  # "val/seq_acc ties at 1.000": why another metric is drawn, or that every metric ties


def job_value(job: Job, name: str) -> float | None:
    """The job's value of ``name`` when it finished (ok): a metric, or the step at which it solved the task."""
    if job.status != "ok":
        return None
    value = job.steps_to_solve if name == "steps_to_solve" else job.metrics.get(name)
    return float(value) if value is not None else None


def best_of(values: list[float | None], direction: str) -> list[bool]:
    """The jobs at the best finite value (a NaN or infinite one is never the best)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return [False] * len(values)
    best = (max if direction == "maximize" else min)(finite)
    return [v == best for v in values]


def separates(values: list[float | None]) -> bool:
    """Two jobs or more have a finite value, and not all the same one."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return len(finite) > 1 and len(set(finite)) > 1


def tied_at(values: list[float | None]) -> str:
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return shown(finite[0]) if finite else "no value"


def shown(value: float) -> str:
    """A value as its bar's label: a step as a whole number, a metric to three decimals."""
    if value.is_integer() and abs(value) >= 10:
        return str(int(value))
    return f"{value:.3f}" if abs(value) >= 0.01 or value == 0 else f"{value:.3g}"


def chart_metric(sweep: Sweep) -> ChartMetric:
    """The optimized metric, or, when every finished job ties on it, the first tie-breaker that tells them apart."""
    values = [job_value(job, sweep.metric) for job in sweep.jobs]
    finished = sum(v is not None and math.isfinite(v) for v in values)
    if finished < 2 or separates(values):
        return ChartMetric(sweep.metric, sweep.direction, values, best_of(values, sweep.direction))
    tie = f"{sweep.metric} ties at {tied_at(values)}"
    for name, direction in TIE_BREAKERS:
        if name == sweep.metric:
            continue
        candidate = [job_value(job, name) for job in sweep.jobs]
        if separates(candidate):
            return ChartMetric(name, direction, candidate, best_of(candidate, direction), tie)
    others = ", ".join(name for name, _ in TIE_BREAKERS if name != sweep.metric)
    return ChartMetric(sweep.metric, sweep.direction, values, [False] * len(values),
                       f"every job ties: {tie}; no other metric tells them apart ({others})")

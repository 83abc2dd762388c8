"""Which metric compare.png draws: the one the sweep's verdict (:mod:`attention_lab.review.verdict`) ranked by.

When a metric separated the configurations, the chart draws the last that did (``steps_to_solve`` when every job
stopped as it solved the task; the optimized metric when it tells them apart). When none did, it draws the
optimized metric, unless every job ties on it (a sweep of runs that all solve the task ties at ``val/seq_acc``
1.000: equal bars say nothing) or every job stopped as it solved the task: then the first tie-breaker whose values
differ (``steps_to_solve``, else ``val/loss``). The title says why, and what the verdict is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from attention_lab.review.numbers import STEPS_TO_SOLVE
from attention_lab.review.sweep import Job, Sweep
from attention_lab.review.verdict import TIE_BREAKERS, Verdict


@dataclass(frozen=True)
class ChartMetric:
    """What the bars show, in which direction a bar is better, and why this metric (for the title)."""

    name: str
    direction: str  # maximize | minimize
    why: str = ""  # "val/seq_acc ties at 1.000", "every job stopped when it solved the task", ...


def job_value(job: Job, name: str) -> float | None:
    """The job's value of ``name`` when it finished (ok): a metric, or the step at which it solved the task."""
    if job.status != "ok":
        return None
    value = job.steps_to_solve if name == STEPS_TO_SOLVE else job.metrics.get(name)
    return float(value) if value is not None else None


def separates(values: list[float | None]) -> bool:
    """Two jobs or more have a finite value, and not all the same one."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return len(finite) > 1 and len(set(finite)) > 1


def shown(value: float) -> str:
    """A value as its bar's label: a step as a whole number, a metric to three decimals."""
    if value.is_integer() and abs(value) >= 10:
        return str(int(value))
    return f"{value:.3f}" if abs(value) >= 0.01 or value == 0 else f"{value:.3g}"


def chart_metric(sweep: Sweep, verdict: Verdict) -> ChartMetric:
    """The metric the verdict ranked by; else the optimized metric, or a tie-breaker whose values differ."""
    if verdict.rankings:
        last = verdict.rankings[-1]
        why = "every job stopped when it solved the task" if verdict.stopped else ""
        return ChartMetric(last.metric, last.direction, why)
    values = [job_value(job, sweep.metric) for job in sweep.jobs]
    finished = [v for v in values if v is not None and math.isfinite(v)]
    if not verdict.stopped and (len(finished) < 2 or separates(values)):
        return ChartMetric(sweep.metric, sweep.direction)
    why = ("every job stopped when it solved the task" if verdict.stopped else
           f"{sweep.metric} ties at {shown(finished[0])}")
    for name, direction in TIE_BREAKERS:
        if name != sweep.metric and separates([job_value(job, name) for job in sweep.jobs]):
            return ChartMetric(name, direction, why)
    others = ", ".join(name for name, _ in TIE_BREAKERS if name != sweep.metric)
    return ChartMetric(sweep.metric, sweep.direction, f"every job ties: {why}; no other metric tells them apart "
                                                      f"({others})")

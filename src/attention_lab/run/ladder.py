"""A budget ladder's plan (``hydra/sweeper=ladder``, src/hydra_plugins/attention_lab_sweeper/ladder_sweeper.py):
which jobs each rung runs, given what the rungs before found. Pure: no Hydra, no files; the sweeper launches,
reads each job's metrics.json and asks :func:`next_rung` for the next rung.

The sweep's product is split into CELLS, one per combination of the keys other than ``search`` (``lr``), each
with the search values in the order the sweep lists them. Rung 0 runs the whole product with ``max_steps =
rungs[0]``. After rung r a cell is solved once any of its jobs solved (``steps_to_solve`` not null) and takes no
more jobs; an unsolved cell runs its ``keep[r+1]`` best search values of rung r (by the optimized metric in the
sweep's ``direction``; a missing or NaN metric ranks last; ties go to the value listed first) at ``max_steps =
rungs[r+1]``.
Each is a fresh run from step 0, not the rung before continued: every job is then a complete run of its budget
(its metrics, its steps_to_solve, its learning-rate schedule all describe one run, and a resume finds each job
whole in its own dir). The ladder's ratio bounds the repeated work: a value that climbs every rung trains again
the steps of the rungs before it, at most 1/(ratio-1) of the last rung's (rungs 500, 2000, 6000: 2,500 steps
beside 6,000)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from attention_lab.errors import ConfigError
from attention_lab.records.files import SWEEP_DIRECTIONS as DIRECTIONS
from attention_lab.run.overrides import override_key

BUDGET = "max_steps"  # the setting the ladder sets per rung


@dataclass
class LadderJob:
    """One job of the ladder, numbered across rungs; its outcome filled in once its rung has run."""

    num: int
    rung: int
    value: str  # the search value, as the sweep lists it
    max_steps: int
    overrides: list[str]  # what the launcher gets: the cell's, the search value's, then max_steps
    steps_to_solve: int | None = None
    metric: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {"job": self.num, "rung": self.rung, "search_value": self.value, "max_steps": self.max_steps,
                "steps_to_solve": self.steps_to_solve, "metric": self.metric}


@dataclass
class Cell:
    """One combination of the keys other than the search key, and its jobs so far."""

    overrides: list[str]  # the combination, without the search key
    values: list[str]  # its search values, in the sweep's order
    jobs: list[LadderJob] = field(default_factory=list)

    @property
    def solved(self) -> bool:
        return any(job.steps_to_solve is not None for job in self.jobs)

    def as_json(self) -> dict[str, Any]:
        # Without a resume's own `resume=<sweep dir>`: the record names the cell the same before and after.
        shown = [o for o in self.overrides if override_key(o) != "resume"]
        return {"overrides": shown, "solved": self.solved, "jobs": [job.as_json() for job in self.jobs]}


def check_ladder(search: str | None, rungs: Any, keep: Any, direction: Any,
                 product: list[list[str]]) -> tuple[str, list[int], list[int | None]]:
    """The ladder's settings, checked before anything runs (ConfigError, one line each) against the sweep's
    ``product``. Returns search, rungs and keep."""
    if direction not in DIRECTIONS:
        raise ConfigError(f"hydra.sweeper.direction={direction} is invalid: it must be one of "
                          f"{', '.join(DIRECTIONS)}, the way the optimized metric ranks a cell's search values")
    swept = list(dict.fromkeys(override_key(o) for job in product for o in job))
    if not search or search not in swept:
        raise ConfigError(f"hydra.sweeper.search={search} is invalid: it must be one of the sweep's params "
                          f"({', '.join(swept) or 'none'}), the key whose values each rung ranks")
    if BUDGET in swept:
        raise ConfigError(f"{BUDGET} is invalid in a ladder sweep: the ladder sets it per rung "
                          "(hydra.sweeper.rungs); leave it out of the sweep")
    rungs = list(rungs or [])
    if not rungs or not all(isinstance(r, int) and not isinstance(r, bool) and r > 0 for r in rungs) or \
            any(b <= a for a, b in zip(rungs, rungs[1:], strict=False)):
        raise ConfigError(f"hydra.sweeper.rungs={rungs} is invalid: it must list each rung's max_steps, positive "
                          "whole numbers in strictly increasing order (such as [500,2000,6000])")
    keep = list(keep) if keep is not None else [None] * len(rungs)
    if len(keep) != len(rungs):
        raise ConfigError(f"hydra.sweeper.keep={keep} is invalid: it must have one entry per rung "
                          f"({len(rungs)}, as hydra.sweeper.rungs), null for all of a cell's values")
    counted = [math.inf if k is None else k for k in keep]
    if not all(k is None or (isinstance(k, int) and not isinstance(k, bool) and k >= 1) for k in keep) or \
            any(b > a for a, b in zip(counted, counted[1:], strict=False)):
        raise ConfigError(f"hydra.sweeper.keep={keep} is invalid: each rung keeps at least 1 of a cell's values "
                          "(null: all), and no rung more than the one before")
    values = max(len(cell.values) for cell in cells_of(product, search))
    if keep[0] is not None and keep[0] < values:
        raise ConfigError(f"hydra.sweeper.keep={keep} is invalid: rung 0 runs every one of a cell's {values} "
                          f"{search} values, so its entry must be null (or at least {values})")
    return search, rungs, keep


def cells_of(product: list[list[str]], search: str) -> list[Cell]:
    """The product's jobs grouped into cells, in the order their first job comes; each cell's search values in
    the order of its jobs (the sweep's)."""
    cells: dict[tuple[str, ...], Cell] = {}
    for job in product:
        rest = [o for o in job if override_key(o) != search]
        value = next(o.split("=", 1)[1] for o in job if override_key(o) == search)
        cells.setdefault(tuple(rest), Cell(rest, [])).values.append(value)
    return list(cells.values())


def job_overrides(cell: Cell, search: str, value: str, max_steps: int) -> list[str]:
    return [*cell.overrides, f"{search}={value}", f"{BUDGET}={max_steps}"]


def first_rung(cells: list[Cell], search: str, rungs: list[int]) -> list[LadderJob]:
    """Rung 0: every value of every cell, numbered from 0 in the cells' order."""
    jobs = []
    for cell in cells:
        for value in cell.values:
            jobs.append(LadderJob(len(jobs), 0, value, rungs[0], job_overrides(cell, search, value, rungs[0])))
            cell.jobs.append(jobs[-1])
    return jobs


def ranking_key(job: LadderJob, values: list[str], direction: str) -> tuple[bool, float, int]:
    missing = job.metric is None or math.isnan(job.metric)
    sign = -1.0 if direction == "maximize" else 1.0
    return missing, 0.0 if missing else sign * float(job.metric), values.index(job.value)


def next_rung(cells: list[Cell], search: str, rungs: list[int], keep: list[int | None], rung: int,
              first_num: int, direction: str) -> list[LadderJob]:
    """Rung ``rung`` + 1's jobs (none after the last rung), numbered from ``first_num``, added to their cells:
    each unsolved cell's ``keep[rung + 1]`` best values of rung ``rung`` (best in ``direction``)."""
    if rung + 1 >= len(rungs):
        return []
    jobs: list[LadderJob] = []
    budget, kept = rungs[rung + 1], keep[rung + 1]
    for cell in cells:
        if cell.solved:
            continue
        ran = sorted((job for job in cell.jobs if job.rung == rung),
                     key=lambda job: ranking_key(job, cell.values, direction))
        for job in ran[:kept]:
            jobs.append(LadderJob(first_num + len(jobs), rung + 1, job.value, budget,
                                  job_overrides(cell, search, job.value, budget)))
            cell.jobs.append(jobs[-1])
    return jobs


def ladder_record(search: str, rungs: list[int], keep: list[int | None], cells: list[Cell],
                  rungs_done: int, metric_name: str, direction: str) -> dict[str, Any]:
    """ladder.json: the settings and each cell's jobs so far (rewritten after every rung)."""
    return {"search": search, "rungs": rungs, "keep": keep, "optimized_metric": metric_name, "direction": direction,
            "rungs_done": rungs_done, "cells": [cell.as_json() for cell in cells]}

"""Which configuration of a sweep is the best, when its seeds say so, and otherwise that they do not.

A sweep's configurations (its jobs grouped by everything but ``seed``: :func:`~attention_lab.review.sweep.seed_groups`)
are ranked metric by metric, each narrowing the **lead**: the configurations that its seeds do not separate from the
best mean (:mod:`attention_lab.review.separation`). The metrics, in order:

- the sweep's optimized metric, then ``steps_to_solve`` (how soon each solved the task, lower is better: only
  when every finished job of the lead solved it) and ``val/loss``;
- only ``steps_to_solve`` when every finished job stopped at the step it solved the task (``global_step ==
  steps_to_solve``: ``callbacks.early_stopping``): their final metrics were all measured at the solve threshold
  (``val/seq_acc`` 0.99x), and what differs in them is noise, while how soon each got there is a measurement.

A metric that separates no configuration of the lead from its best is passed over. A configuration is the best
only when the lead ends with it alone; otherwise the verdict names the lead and says that its seeds do not
separate it (one seed per configuration separates nothing). No torch import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from attention_lab.review.numbers import STEPS_TO_SOLVE, mean_text
from attention_lab.review.separation import MIN_SEEDS, Spread, better, leading, spread
from attention_lab.review.sweep import Group, Job, Sweep, seed_groups

# The metrics that rank configurations the optimized metric does not separate, in order, with the direction in
# which each is better.
TIE_BREAKERS = ((STEPS_TO_SOLVE, "minimize"), ("val/loss", "minimize"))


def stopped_when_solved(job: Job) -> bool:
    """The job's training ended at the step it solved the task (metrics.json: global_step == steps_to_solve)."""
    return job.steps_to_solve is not None and job.steps == job.steps_to_solve


def values(group: Group, name: str) -> list[float]:
    """The ok jobs' finite values of ``name``; of steps_to_solve, the steps of the jobs that solved the task."""
    if name == STEPS_TO_SOLVE:
        return [float(j.steps_to_solve) for j in group.ok if j.steps_to_solve is not None]
    return group.values(name)


@dataclass(frozen=True)
class Ranking:
    """One metric looked at: the lead's spreads of it, best first, and the configurations it kept in the lead."""

    metric: str
    direction: str
    spreads: dict[str, Spread]  # configuration -> spread, the lead it ranked (best mean first)
    kept: list[str]


@dataclass
class Verdict:
    """The configurations a sweep's seeds cannot tell apart at the top, and the metrics that narrowed them."""

    groups: list[Group]  # the configurations with a finished (ok) job
    lead: list[Group]  # best mean first
    rankings: list[Ranking] = field(default_factory=list)  # the metrics that separated a configuration, in order
    stopped: bool = False  # every finished job stopped at the step it solved the task
    looked_at: list[str] = field(default_factory=list)  # the metrics considered, in order

    @property
    def winner(self) -> Group | None:
        """The one configuration the seeds separate from every other, or None: the lead holds it alone and it has
        :data:`MIN_SEEDS` values of the metric that decided (a configuration left alone because the others have no
        value, a NaN, is not separated by one seed)."""
        if len(self.lead) != 1 or not self.rankings:
            return None
        return self.lead[0] if self.rankings[-1].spreads[self.lead[0].configuration].n >= MIN_SEEDS else None

    @property
    def metric(self) -> str | None:
        """The metric that decided the winner (its cells get the ★), or None."""
        return self.rankings[-1].metric if self.winner is not None else None

    def marks(self, job: Job) -> bool:
        """Whether ``job`` is a finished job of the winning configuration (★ best)."""
        return self.winner is not None and any(job is j for j in self.winner.ok)

    @property
    def seeds(self) -> int:
        """The fewest finished seeds of a configuration in the lead (n of "not separated by n seeds")."""
        return min((len(g.ok) for g in self.lead), default=0)

    def line(self) -> str:
        """One line: the best configuration and by what, or why there is none; "" for fewer than two configurations."""
        if len(self.groups) < 2:
            return ""
        note = f" (every job stopped when it solved the task: ranked by {STEPS_TO_SOLVE})" if self.stopped else ""
        winner = self.winner
        if winner is not None:
            last = self.rankings[-1]
            shown = last.spreads[winner.configuration]
            return (f"best: {winner.configuration}, by {', then '.join(r.metric for r in self.rankings)} "
                    f"({last.metric} {mean_text(last.metric, shown.mean, shown.std)}, n={shown.n}): its seeds "
                    f"separate it from every other configuration{note}")
        single = [g.configuration for g in self.lead if len(g.ok) < MIN_SEEDS]
        if all(len(g.ok) < MIN_SEEDS for g in self.groups):
            return f"no best: one seed per configuration separates nothing; run each with seed=0,1,2{note}"
        why = (f"not separated by {self.seeds} seeds" if not single else
               f"not separated ({', '.join(single)}: one finished seed)")
        names = ", ".join(g.configuration for g in self.lead)
        if self.rankings:
            last = self.rankings[-1]
            spreads = ", ".join(mean_text(last.metric, last.spreads[c].mean, last.spreads[c].std) for c in last.kept)
            leading_names = {g.configuration for g in self.lead}
            trailing = [g.configuration for g in self.groups if g.configuration not in leading_names]
            behind = (f"{', '.join(trailing)} trail{'s' if len(trailing) == 1 else ''}" if len(trailing) <= 3 else
                      f"{len(trailing)} other configurations trail")
            return f"no best: {names} lead on {last.metric} ({spreads}), {why}; {behind}{note}"
        return f"no best: {names} are {why} on {', '.join(self.looked_at) or 'any metric'}{note}"


def candidates(sweep: Sweep, stopped: bool) -> list[tuple[str, str]]:
    """The metrics that may rank the configurations, in order, with their directions."""
    if stopped:
        return [(STEPS_TO_SOLVE, "minimize")]
    ranked = [(sweep.metric, sweep.direction), *TIE_BREAKERS]
    return [pair for n, pair in enumerate(ranked) if pair[0] not in [name for name, _ in ranked[:n]]]


def rank(sweep: Sweep, groups: list[Group] | None = None) -> Verdict:
    """The verdict on ``sweep`` (its seed groups, or ``groups``): see the module's docstring."""
    finished = [g for g in (seed_groups(sweep) if groups is None else groups) if g.ok]
    stopped = bool(finished) and all(stopped_when_solved(j) for g in finished for j in g.ok)
    verdict = Verdict(finished, list(finished), stopped=stopped)
    for name, direction in candidates(sweep, stopped):
        if len(verdict.lead) < 2:
            break
        if name == STEPS_TO_SOLVE and not all(j.steps_to_solve is not None for g in verdict.lead for j in g.ok):
            continue  # a mean of the steps of the seeds that solved it says nothing of those that never did
        spreads = {g.configuration: s for g in verdict.lead if (s := spread(values(g, name))) is not None}
        if not spreads:
            continue
        verdict.looked_at.append(name)
        kept = leading(spreads, direction)
        if len(kept) < len(verdict.lead):  # separated from the best, or no value at all (a NaN is never the best)
            verdict.rankings.append(Ranking(name, direction, spreads, kept))
            by_name = {g.configuration: g for g in verdict.lead}
            verdict.lead = [by_name[c] for c in kept]
    if not verdict.rankings and verdict.looked_at:  # nothing separated: best mean first, by the first metric
        name = verdict.looked_at[0]
        sign = better(dict(candidates(sweep, stopped))[name])
        means = {g.configuration: s.mean for g in verdict.lead if (s := spread(values(g, name))) is not None}
        verdict.lead.sort(key=lambda g: -sign * means.get(g.configuration, -sign * math.inf))
    return verdict

"""A seed's best job when a finding sweeps a setting only to pick its best value: the recall race tries every
learning rate (``lr``) of its grid, and its ladder gives some of them more steps (``max_steps``); what a cell
reached in a seed is the best of those jobs. Claims then count seeds, as they do for one job per seed.

The best job is the one that solved (``steps_to_solve`` set) in the fewest steps; where none solved, the one with
the highest ``val/token_acc`` (the race's accuracy per query); a tie goes to the job read first, so the choice does
not depend on anything but the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from attention_lab.findings.claims import Record

SOLVE, ACCURACY = "steps_to_solve", "val/token_acc"


def cell_key(record: Record, searched: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """The job's overrides without the searched ones (seed kept): jobs of one cell and seed share it."""
    skip = set(searched)
    return tuple(sorted((k, v) for k, v in record.overrides.items() if k not in skip))


def rank(record: Record) -> tuple[int, float]:
    """Smaller is better: solved before unsolved; then fewer steps, or a higher accuracy."""
    steps = record.metrics.get(SOLVE)
    if steps is not None:
        return 0, steps
    accuracy = record.metrics.get(ACCURACY)
    return 1, -(accuracy if accuracy is not None else float("-inf"))


def best_per_seed(records: Sequence[Record], searched: Sequence[str]) -> list[Record]:
    """One record per cell and seed, the best of those that differ only in ``searched``; in the order the cells
    first appear."""
    best: dict[tuple[tuple[str, str], ...], Record] = {}
    for record in records:
        key = cell_key(record, searched)
        if key not in best or rank(record) < rank(best[key]):
            best[key] = record
    return list(best.values())

"""The recall race's table in docs/experiments.md, written by ``make docs`` from its recorded jobs
(``docs/results/recall_race.json``, every job of the ladder): per mixer and width, in how many seeds some learning
rate solved the task within the ladder's steps (k of n), the steps it took (each seed's best job:
:mod:`attention_lab.findings.best_of`) and the rates that did it; for a cell no seed solved, the best accuracy per
query (mean ± sample std over seeds). Beside it, the state per layer each mixer keeps at each width, and what each
cell cost: the CPU time of all its jobs (every seed, rate and rung).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from attention_lab.findings.best_of import ACCURACY, SOLVE, best_per_seed
from attention_lab.findings.catalogue import FINDINGS, Finding
from attention_lab.findings.claims import Record, matches
from attention_lab.findings.records import read_results, results_path

RACE = "recall_race"
MIXER, WIDTH = "model", "d_model"


def race_finding() -> Finding:
    return next(f for f in FINDINGS if f.name == RACE)


@dataclass(frozen=True)
class Cell:
    """One mixer at one width: each seed's best job, and every job the cell ran."""

    mixer: str
    width: int
    best: tuple[Record, ...]
    jobs: tuple[Record, ...]

    @property
    def solved(self) -> list[Record]:
        return [r for r in self.best if r.metrics.get(SOLVE) is not None]

    @property
    def steps(self) -> list[float]:
        return sorted(r.metrics[SOLVE] for r in self.solved)  # type: ignore[misc]

    @property
    def accuracy(self) -> list[float]:
        return [v for r in self.best if (v := r.metrics.get(ACCURACY)) is not None]

    @property
    def state_size(self) -> float | None:
        return next((v for r in self.jobs if (v := r.metrics.get("state_size")) is not None), None)

    @property
    def cpu_minutes(self) -> float | None:
        times = [r.cpu_time_s for r in self.jobs if r.cpu_time_s is not None]
        return sum(times) / 60 if times else None

    def rates(self) -> str:
        rates = sorted({float(r.overrides["lr"]) for r in self.solved if "lr" in r.overrides})
        return ", ".join(f"{v:g}" for v in rates)


def race_cells(records: Sequence[Record], searched: Sequence[str]) -> list[Cell]:
    """Every mixer x width of the records, mixers in the order they first appear, widths ascending."""
    best = best_per_seed(records, searched)
    mixers = list(dict.fromkeys(r.overrides.get(MIXER, "") for r in records))
    widths = sorted({int(r.overrides[WIDTH]) for r in records if r.overrides.get(WIDTH, "").isdigit()})
    cells = []
    for mixer in mixers:
        for width in widths:
            where = {MIXER: mixer, WIDTH: str(width)}
            jobs = tuple(r for r in records if matches(r, where))  # every seed, rate and rung: what the cell cost
            if jobs:
                cells.append(Cell(mixer, width, tuple(r for r in best if matches(r, where)), jobs))
    return cells


def spread(values: Sequence[float], digits: int = 3) -> str:
    mean = statistics.fmean(values)
    return f"{mean:.{digits}f}" + (f" ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else "")


def cell_text(cell: Cell) -> str:
    n, k = len(cell.best), len(cell.solved)
    if k:
        steps = cell.steps
        shown = f"{steps[0]:,.0f}" if steps[0] == steps[-1] else f"{steps[0]:,.0f}–{steps[-1]:,.0f}"
        text = f"**{k} of {n}**, {shown} steps (lr {cell.rates()})"
        others = [a for r in cell.best if r.metrics.get(SOLVE) is None and (a := r.metrics.get(ACCURACY)) is not None]
        return text + (f"; the other seeds {spread(others)}" if others else "")
    return f"0 of {n}; {spread(cell.accuracy)}" if cell.accuracy else f"0 of {n}"


def race_table(root: Path) -> str:
    finding = race_finding()
    recorded = read_results(root, finding)
    if recorded is None:
        return (f"No recorded results: `python scripts/findings.py check {RACE} --sweep <sweep dir> --record` "
                f"writes {results_path(root, finding).relative_to(root).as_posix()}.")
    records, _ = recorded
    cells = race_cells(records, finding.best_of)
    widths = sorted({c.width for c in cells})
    mixers = list(dict.fromkeys(c.mixer for c in cells))
    at = {(c.mixer, c.width): c for c in cells}
    head = "| mixer | state per layer (d_model " + " / ".join(map(str, widths)) + ") | " + \
        " | ".join(str(w) for w in widths) + " | CPU min per cell |"
    rows = [head, "|---" * (len(widths) + 3) + "|"]
    for mixer in mixers:
        row = [at.get((mixer, w)) for w in widths]
        states = " / ".join(f"{c.state_size:,.0f}" if c and c.state_size is not None else "—" for c in row)
        costs = " / ".join(f"{c.cpu_minutes:.1f}" if c and c.cpu_minutes is not None else "—" for c in row)
        rows.append(f"| `{mixer}` | {states} | " + " | ".join(cell_text(c) if c else "—" for c in row) +
                    f" | {costs} |")
    return "\n".join(rows)

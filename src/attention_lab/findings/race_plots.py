"""The recall race's two pictures, the two axes Zoology and Based argue about: accuracy against the state a layer
keeps, and steps to solve against it, one line per mixer, each point a cell (a mixer at a width) placed at its
state per layer. Accuracy: each seed's best job (:mod:`attention_lab.findings.best_of`), mean ± sample std over
seeds. Steps: over the seeds that solved only, mean ± sample std; a cell no seed solved has no point, and the
legend says in how many cells each mixer solved in every seed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

from attention_lab.findings.claims import Record
from attention_lab.findings.race_table import Cell, race_cells
from attention_lab.plotting.lines import Series, save_line_plot

ACCURACY_PNG, STEPS_PNG = "mqar_accuracy_vs_state.png", "mqar_steps_vs_state.png"


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def by_mixer(cells: Sequence[Cell]) -> dict[str, list[Cell]]:
    mixers: dict[str, list[Cell]] = {}
    for cell in cells:
        if cell.state_size is not None:
            mixers.setdefault(cell.mixer, []).append(cell)
    return {m: sorted(c, key=lambda c: c.state_size or 0) for m, c in mixers.items()}


def accuracy_series(cells: Sequence[Cell]) -> list[Series]:
    lines = []
    for mixer, row in by_mixer(cells).items():
        points = [(c.state_size, *mean_std(c.accuracy)) for c in row if c.accuracy]
        lines.append(Series(mixer, [p[0] for p in points], [p[1] for p in points], [p[2] for p in points]))
    return lines


def steps_series(cells: Sequence[Cell]) -> list[Series]:
    lines = []
    for mixer, row in by_mixer(cells).items():
        points = [(c.state_size, *mean_std(c.steps)) for c in row if c.steps]
        every = sum(len(c.solved) == len(c.best) for c in row)
        lines.append(Series(f"{mixer} (every seed in {every} of {len(row)} cells)", [p[0] for p in points],
                            [p[1] for p in points], [p[2] for p in points]))
    return lines


def race_plots(records: Sequence[Record], searched: Sequence[str], what: str) -> dict[str, Callable[[Path], Path]]:
    """Each picture's file name and its writer (a path -> the PNG written there); ``what`` names the records in the
    titles (a results file or a sweep)."""
    cells = race_cells(records, searched)
    state = "state per layer (numbers)"
    return {
        ACCURACY_PNG: lambda path: save_line_plot(
            accuracy_series(cells), path, xlabel=state, ylabel="val/token_acc, best job per seed",
            title=f"MQAR: accuracy against state · {what}", tick_every_x=False, fraction=True),
        STEPS_PNG: lambda path: save_line_plot(
            steps_series(cells), path, xlabel=state, ylabel="steps to solve (seeds that solved)",
            title=f"MQAR: steps to solve against state · {what}", tick_every_x=False)}

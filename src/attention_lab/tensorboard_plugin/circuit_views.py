"""A run's logged circuit measurements as the tab shows them beside its maps, read through TensorBoard's data
provider as the head scores are (:meth:`~attention_lab.tensorboard_plugin.run_data.Source.scores`):

- the composition scores (``composition/{q,k,v}/layer{a}/head{i}/layer{b}/head{j}``, :mod:`attention_lab.analysis.circuits`)
  at a step, one writer-heads x reader-heads grid per kind and pair of layers;
- the copying scores (``circuit/copying/layer{l}/head{h}``) at a step, a layers x heads grid;
- the patching recovery (``patching/logit_diff/...``, :mod:`attention_lab.analysis.patching`) at a step, a layers x heads
  grid with the whole layer beside it;
- the strongest paths of the path patching (``path_patching/logit_diff/...``, :mod:`attention_lab.analysis.path_patching`)
  at a step, as the edges of a graph (:mod:`~attention_lab.tensorboard_plugin.path_graph`);
- the loss at each target index (``val/loss_by_index/{i}``, :mod:`attention_lab.analysis.loss_by_index`) at every logged
  step: the step x index heatmap of Olsson et al.

Only the tags of the layers, heads and indices that the run's config declares are read
(:mod:`~attention_lab.tensorboard_plugin.run_config`), and an answer holds at most MAX_ANSWER_CELLS numbers: each
grid is counted before it is built (:class:`~attention_lab.tensorboard_plugin.run_data.CellBudget`).
"""

from __future__ import annotations

from attention_lab.analysis.tags import (
    COMPOSITIONS,
    PATCHING,
    PATH_PATCHING,
    is_index_tag,
    parse_composition_tag,
    parse_copying_tag,
)
from attention_lab.names import natural
from attention_lab.tensorboard_plugin.focus import pair_with_maps
from attention_lab.tensorboard_plugin.path_graph import path_graph, path_record
from attention_lab.tensorboard_plugin.run_config import RunSizes
from attention_lab.tensorboard_plugin.run_data import CellBudget, Source
from attention_lab.tensorboard_plugin.scores import finite, grids_at, latest_at, parse_tag

Series = dict[str, list[tuple[int, float]]]  # tag -> (step, value) points sorted by step

DESCRIPTIONS = {
    "composition": "‖W_OV(writer) · B(reader)‖ / (‖W_OV‖ ‖B‖), B = the reader's W_QK (q), W_QKᵀ (k) or W_OV (v): "
                   "0 independent, 1 the writer feeds the reader fully",
    "copying": "Σλ / Σ|λ| over the eigenvalues of the full OV circuit: 1 copies the attended word, -1 suppresses it",
    "patching": "fraction of the clean - corrupted logit difference that the head's clean output restores (1: all)",
    "loss_by_index": "mean validation loss at each target index (0: the first word the sequence asks for)",
}


def composition_key(tag: str) -> tuple[str, int, int, int, int] | None:
    """(kind, writer layer, writer head, reader layer, reader head) of a composition tag, else None."""
    found = parse_composition_tag(tag)
    if found is None:
        return None
    kind, (a, i), (b, j) = found
    return kind, a, i, b, j


def index_of(tag: str) -> int | None:
    """The target index of a loss-by-index tag, else None."""
    return natural(tag.rpartition("/")[2]) if is_index_tag(tag) else None


def wanted(tag: str, sizes: RunSizes) -> bool:
    """Whether the circuits route reads ``tag``: a circuit tag of layers, heads or an index within ``sizes``."""
    if (key := composition_key(tag)) is not None:
        _, a, i, b, j = key
        return sizes.holds(a, i) and sizes.holds(b, j)
    if (found := parse_copying_tag(tag)) is not None:
        return sizes.holds(*found)
    if (index := index_of(tag)) is not None:
        return sizes.holds_index(index)
    if path_record(tag, sizes) is not None:
        return True
    record = parse_tag(tag)
    return record is not None and record.family == PATCHING and sizes.holds(record.layer, record.head)


def composition_grids(series: Series, step: int, budget: CellBudget) -> list[dict]:
    """One grid per kind and pair of layers (writer layer a < reader layer b): cells[i][j], writer head i into
    reader head j, as logged at the latest step at or before ``step``."""
    grids = []
    keyed = {key: points for tag, points in series.items() if (key := composition_key(tag)) is not None}
    for kind in COMPOSITIONS:
        found = latest_at({key[1:]: points for key, points in keyed.items() if key[0] == kind}, step)
        if found is None:
            continue
        logged, values = found
        pairs: dict[tuple[int, int], dict[tuple[int, int], float]] = {}
        for (a, i, b, j), value in values.items():
            pairs.setdefault((a, b), {})[i, j] = value
        for a, b in sorted(pairs):
            heads = pairs[a, b]
            writers, readers = max(i for i, _ in heads) + 1, max(j for _, j in heads) + 1
            budget.take(writers * readers)
            cells = [[finite(heads.get((i, j))) for j in range(readers)] for i in range(writers)]
            grids.append({"family": f"composition/{kind}", "kind": kind, "writer_layer": a, "reader_layer": b,
                          "step": logged, "cells": cells, "description": DESCRIPTIONS["composition"]})
    return grids


def copying_grid(series: Series, step: int, budget: CellBudget) -> dict | None:
    chosen = {found: points for tag, points in series.items() if (found := parse_copying_tag(tag)) is not None}
    found = latest_at(chosen, step)
    if found is None:
        return None
    logged, values = found
    layers, heads = max(layer for layer, _ in values) + 1, max(head for _, head in values) + 1
    budget.take(layers * heads)
    return {"family": "circuit/copying", "step": logged, "description": DESCRIPTIONS["copying"],
            "cells": [[finite(values.get((layer, head))) for head in range(heads)] for layer in range(layers)],
            "whole_layer": []}


def patching_grid(series: Series, step: int, budget: CellBudget) -> dict | None:
    grids = grids_at({tag: points for tag, points in series.items()
                      if (record := parse_tag(tag)) is not None and record.family == PATCHING}, step, budget.take)
    return {**grids[0].to_json(), "description": DESCRIPTIONS["patching"]} if grids else None


def loss_by_index(series: Series, budget: CellBudget) -> dict | None:
    """Every logged step x every target index: values[s][i] (None where not logged or not finite)."""
    by_index = {index: points for tag, points in series.items() if (index := index_of(tag)) is not None}
    if not by_index:
        return None
    steps = sorted({step for points in by_index.values() for step, _ in points})
    indices = max(by_index) + 1
    budget.take(len(steps) * indices)
    rows = {index: dict(points) for index, points in by_index.items()}
    values = [[finite(rows.get(i, {}).get(step)) for i in range(indices)] for step in steps]
    return {"steps": steps, "indices": indices, "values": values, "description": DESCRIPTIONS["loss_by_index"]}


def circuit_series(source: Source, run: str) -> tuple[Series, RunSizes]:
    """The circuit tags of ``run`` within the sizes its config declares (chosen from the provider's listing, before
    any point is read), and those sizes."""
    sizes = source.run_sizes(run)
    return source.scalar_series(run, lambda tag: wanted(tag, sizes)), sizes


def logged_views(series: Series, step: int | None, budget: CellBudget, sizes: RunSizes) -> dict:
    """The composition, copying and patching grids and the path graph at ``step`` (the last logged step when
    None), each with the step of the maps beside it and the step it was logged at (see :func:`pair_with_maps`)."""
    at = 2**62 if step is None else step
    grids = [*composition_grids(series, at, budget),
             *filter(None, (copying_grid(series, at, budget), patching_grid(series, at, budget),
                            path_graph(series, at, sizes, budget.take)))]
    if step is not None:
        grids = pair_with_maps(grids, step)
    return {"composition": [g for g in grids if g["family"].startswith("composition/")],
            "copying": next((g for g in grids if g["family"] == "circuit/copying"), None),
            "patching": next((g for g in grids if g["family"] == PATCHING), None),
            "paths": next((g for g in grids if g["family"] == PATH_PATCHING), None)}


def circuit_views(source: Source, run: str, step: int | None) -> dict:
    """The circuits route's answer for ``run`` at ``step``: the logged views and the loss by index, together
    within MAX_ANSWER_CELLS numbers. Raises NoMaps (AnswerTooLarge beyond that)."""
    series, sizes = circuit_series(source, run)
    budget = CellBudget("this run's circuits" + ("" if step is None else f" at step {step}"), sizes)
    return {"run": run, **logged_views(series, step, budget, sizes), "loss_by_index": loss_by_index(series, budget)}

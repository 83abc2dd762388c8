"""A run's logged circuit measurements as the tab shows them beside its maps, read through TensorBoard's data
provider as the head scores are (:meth:`~attention_lab.tensorboard_plugin.run_data.Source.scores`):

- the composition scores (``composition/{q,k,v}/layer{a}/head{i}/layer{b}/head{j}``, :mod:`attention_lab.circuits`)
  at a step, one writer-heads x reader-heads grid per kind and pair of layers;
- the copying scores (``circuit/copying/layer{l}/head{h}``) at a step, a layers x heads grid;
- the patching recovery (``patching/logit_diff/...``, :mod:`attention_lab.patching`) at a step, a layers x heads
  grid with the whole layer beside it;
- the loss at each target index (``val/loss_by_index/{i}``, :mod:`attention_lab.loss_by_index`) at every logged
  step: the step x index heatmap of Olsson et al.
"""

from __future__ import annotations

from attention_lab.head_metrics import COMPOSITIONS, PATCHING, parse_composition_tag, parse_copying_tag
from attention_lab.index_tags import is_index_tag
from attention_lab.tensorboard_plugin.focus import pair_with_maps
from attention_lab.tensorboard_plugin.limits import MAX_HEADS, MAX_LAYERS, MAX_WORDS
from attention_lab.tensorboard_plugin.run_data import Source
from attention_lab.tensorboard_plugin.scores import finite, grids_at, parse_tag, value_at

Series = dict[str, list[tuple[int, float]]]  # tag -> (step, value) points sorted by step

MAX_INDICES = MAX_WORDS  # target indices of the loss-by-index heatmap: one per word of a sequence at most

DESCRIPTIONS = {
    "composition": "‖W_OV(writer) · B(reader)‖ / (‖W_OV‖ ‖B‖), B = the reader's W_QK (q), W_QKᵀ (k) or W_OV (v): "
                   "0 independent, 1 the writer feeds the reader fully",
    "copying": "Σλ / Σ|λ| over the eigenvalues of the full OV circuit: 1 copies the attended word, -1 suppresses it",
    "patching": "fraction of the clean - corrupted logit difference that the head's clean output restores (1: all)",
    "loss_by_index": "mean validation loss at each target index (0: the first word the sequence asks for)",
}


def within(*sizes: tuple[str, int]) -> bool:
    """Whether every layer and head index lies inside the tab's limits."""
    return all(value < (MAX_LAYERS if what == "layer" else MAX_HEADS) for what, value in sizes)


def composition_key(tag: str) -> tuple[str, int, int, int, int] | None:
    """(kind, writer layer, writer head, reader layer, reader head) of a composition tag, else None."""
    found = parse_composition_tag(tag)
    if found is None:
        return None
    kind, (a, i), (b, j) = found
    if not within(("layer", a), ("head", i), ("layer", b), ("head", j)):
        return None
    return kind, a, i, b, j


def copying_key(tag: str) -> tuple[int, int] | None:
    found = parse_copying_tag(tag)
    if found is None or not within(("layer", found[0]), ("head", found[1])):
        return None
    return found


def index_of(tag: str) -> int | None:
    if not is_index_tag(tag):
        return None
    index = int(tag.rpartition("/")[2])
    return index if index < MAX_INDICES else None


def wanted(tag: str) -> bool:
    record = parse_tag(tag)
    return (composition_key(tag) is not None or copying_key(tag) is not None or index_of(tag) is not None
            or (record is not None and record.family == PATCHING))


def latest_at(points: dict, step: int) -> tuple[int, dict] | None:
    """``points`` (key -> sorted points): the values logged at the latest step at or before ``step`` by key, with
    that step; keys last logged earlier are left out (one grid shows one step). None when nothing is logged."""
    found = {key: point for key, series in points.items() if (point := value_at(series, step)) is not None}
    if not found:
        return None
    latest = max(point_step for point_step, _ in found.values())
    return latest, {key: value for key, (point_step, value) in found.items() if point_step == latest}


def composition_grids(series: Series, step: int) -> list[dict]:
    """One grid per kind and pair of layers (writer layer a < reader layer b): cells[i][j], writer head i into
    reader head j, as logged at the latest step at or before ``step``."""
    grids = []
    for kind in COMPOSITIONS:
        chosen = {key[1:]: points for tag, points in series.items()
                  if (key := composition_key(tag)) is not None and key[0] == kind}
        found = latest_at(chosen, step)
        if found is None:
            continue
        logged, values = found
        for a, b in sorted({(a, b) for a, _, b, _ in values}):
            writers = max(i for x, i, y, _ in values if (x, y) == (a, b)) + 1
            readers = max(j for x, _, y, j in values if (x, y) == (a, b)) + 1
            cells = [[finite(values.get((a, i, b, j))) for j in range(readers)] for i in range(writers)]
            grids.append({"family": f"composition/{kind}", "kind": kind, "writer_layer": a, "reader_layer": b,
                          "step": logged, "cells": cells, "description": DESCRIPTIONS["composition"]})
    return grids


def copying_grid(series: Series, step: int) -> dict | None:
    chosen = {key: points for tag, points in series.items() if (key := copying_key(tag)) is not None}
    found = latest_at(chosen, step)
    if found is None:
        return None
    logged, values = found
    layers, heads = max(layer for layer, _ in values) + 1, max(head for _, head in values) + 1
    return {"family": "circuit/copying", "step": logged, "description": DESCRIPTIONS["copying"],
            "cells": [[finite(values.get((layer, head))) for head in range(heads)] for layer in range(layers)],
            "whole_layer": []}


def patching_grid(series: Series, step: int) -> dict | None:
    grids = grids_at({tag: points for tag, points in series.items()
                      if (record := parse_tag(tag)) is not None and record.family == PATCHING}, step)
    return {**grids[0].to_json(), "description": DESCRIPTIONS["patching"]} if grids else None


def loss_by_index(series: Series) -> dict | None:
    """Every logged step x every target index: values[s][i] (None where not logged or not finite)."""
    by_index = {index: dict(points) for tag, points in series.items() if (index := index_of(tag)) is not None}
    if not by_index:
        return None
    steps = sorted({step for points in by_index.values() for step in points})
    indices = max(by_index) + 1
    values = [[finite(by_index.get(i, {}).get(step)) for i in range(indices)] for step in steps]
    return {"steps": steps, "indices": indices, "values": values, "description": DESCRIPTIONS["loss_by_index"]}


def circuit_views(source: Source, run: str, step: int | None) -> dict:
    """The circuits route's answer for ``run`` at ``step`` (the last logged step when None): each grid carries
    the step of the maps beside it and the step it was logged at (see :func:`pair_with_maps`)."""
    series = source.scalar_series(run, wanted)
    at = 2**62 if step is None else step
    grids = [*composition_grids(series, at), *filter(None, (copying_grid(series, at), patching_grid(series, at)))]
    if step is not None:
        grids = pair_with_maps(grids, step)
    return {"run": run, "composition": [g for g in grids if g["family"].startswith("composition/")],
            "copying": next((g for g in grids if g["family"] == "circuit/copying"), None),
            "patching": next((g for g in grids if g["family"] == PATCHING), None),
            "loss_by_index": loss_by_index(series)}

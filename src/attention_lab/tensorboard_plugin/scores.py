"""Per-head scalars as layers x heads grids for the tab: the head scores
(``head_score/<kind>/layer{l}/head{h}``, see :mod:`attention_lab.analysis.head_scores`) and the ablation drops
(``ablation/<how>/<metric>/layer{l}/head{h}``, and ``.../layer{l}/all`` for the whole layer)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from attention_lab.analysis.tags import HeadMetric
from attention_lab.tensorboard_plugin.limits import MAX_HEADS, MAX_LAYERS

DESCRIPTIONS = {
    "head_score": "0..1: how much of its attention the head gives to the pattern's key",
    "ablation": "the change when the head is removed (loss: increase; token_acc: drop)",
    "patching": "fraction of the clean - corrupted logit difference that the head's clean output restores (1: all)",
    "attribution": "the patching's fraction estimated to first order from one gradient (attribution patching)",
}


def parse_tag(tag: str) -> HeadMetric | None:
    """The family, layer and head of a head score's or an ablation's tag (:mod:`attention_lab.analysis.tags`, the one
    place that writes them), or None for any other scalar and for a layer or head beyond the tab's limits (a grid
    is as large as its highest layer and head)."""
    record = HeadMetric.parse(tag)
    if record is None or record.family.split("/", 1)[0] not in DESCRIPTIONS:
        return None
    return record if record.layer < MAX_LAYERS and (record.head is None or record.head < MAX_HEADS) else None


@dataclass
class Grid:
    """One family's values at one step: cells[layer][head] (None where not logged), whole_layer[layer]."""

    family: str
    step: int
    cells: list[list[float | None]] = field(default_factory=list)
    whole_layer: list[float | None] = field(default_factory=list)

    def to_json(self) -> dict:
        group = self.family.split("/", 1)[0]
        return {"family": self.family, "step": self.step, "cells": self.cells, "whole_layer": self.whole_layer,
                "description": DESCRIPTIONS.get(group, "")}


def value_at(points: list[tuple[int, float]], step: int) -> tuple[int, float] | None:
    """The point logged last at or before ``step`` (points sorted by step), else None."""
    found = None
    for point_step, value in points:
        if point_step > step:
            break
        found = (point_step, value)
    return found


def latest_at(points: dict, step: int) -> tuple[int, dict] | None:
    """``points`` (key -> sorted points): the values logged at the latest step at or before ``step`` by key, with
    that step; keys last logged earlier are left out (one grid shows one step). None when nothing is logged."""
    found = {key: point for key, series in points.items() if (point := value_at(series, step)) is not None}
    if not found:
        return None
    latest = max(point_step for point_step, _ in found.values())
    return latest, {key: value for key, (point_step, value) in found.items() if point_step == latest}


def grids_at(series: dict[str, list[tuple[int, float]]], step: int,
             take: Callable[[int], None] = lambda cells: None) -> list[Grid]:
    """Every family's grid from ``series`` (tag -> sorted (step, value) points) as logged at or before
    ``step``; each grid takes the latest step at which its family was logged. Non-finite values are None.
    ``take(cells)`` is called with each grid's size before the grid is built (it may refuse it by raising)."""
    by_family: dict[str, dict[tuple[int, int | None], tuple[int, float]]] = {}
    for tag, points in series.items():
        parsed = parse_tag(tag)
        point = value_at(points, step) if parsed is not None else None
        if point is not None:
            by_family.setdefault(parsed.family, {})[parsed.layer, parsed.head] = point
    grids = []
    for family in sorted(by_family):
        cells = by_family[family]
        latest = max(point_step for point_step, _ in cells.values())
        current = {key: value for key, (point_step, value) in cells.items() if point_step == latest}
        layers = max(layer for layer, _ in current) + 1
        heads = max((head for _, head in current if head is not None), default=-1) + 1
        take(layers * heads + layers)
        grids.append(Grid(family, latest,
                          [[finite(current.get((layer, h))) for h in range(heads)] for layer in range(layers)],
                          [finite(current.get((layer, None))) for layer in range(layers)]))
    return grids


def finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: such a value is shown as missing."""
    return value if value is not None and math.isfinite(value) else None

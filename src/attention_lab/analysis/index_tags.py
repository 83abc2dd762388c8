"""The tags of the loss by target index, ``val/loss_by_index/<i>`` (:mod:`attention_lab.analysis.loss_by_index`), and back.
Light (no torch): the final metrics table, the HParams metrics and ``compare.py`` leave these many per-index
values out of their columns, and the review draws them as one heatmap instead."""

from __future__ import annotations

from collections.abc import Mapping

from attention_lab.names import natural

LOSS_BY_INDEX = "val/loss_by_index"


def index_tag(index: int) -> str:
    return f"{LOSS_BY_INDEX}/{index}"


def is_index_tag(name: str) -> bool:
    head, _, index = name.rpartition("/")
    return head == LOSS_BY_INDEX and natural(index) is not None


def by_index(metrics: Mapping[str, float]) -> list[float | None]:
    """The logged loss at each target index, index 0 first, None where none was logged (an empty list: none)."""
    found = {int(name.rpartition("/")[2]): float(value) for name, value in metrics.items() if is_index_tag(name)}
    return [found.get(index) for index in range(max(found) + 1)] if found else []

"""A run's path patching at a step as the tab draws it: the strongest paths, sender head -> a later head's q, k or v
input or -> the logits, as the edges of a graph whose nodes are heads in layer columns.

A run logs path patching once, at its final validation (``path_patching/logit_diff/...``, read back by
:class:`attention_lab.analysis.tags.PathTag`, the one parser of those tags): a graph appears from that step on, as
the patching recovery does. A lab model has 56 paths (2 layers x 4 heads: 4 x 4 x 3 head to head, 8 direct); drawn
all at once they hide one another, so the route sends the TOP_PATHS largest by |value| of those at least
MIN_PATH_VALUE, and says how many were logged.
"""

from __future__ import annotations

from attention_lab.analysis.tags import PATH_PATCHING, PathTag
from attention_lab.tensorboard_plugin.run_config import RunSizes
from attention_lab.tensorboard_plugin.scores import latest_at

Series = dict[str, list[tuple[int, float]]]  # tag -> (step, value) points sorted by step

TOP_PATHS = 8  # edges drawn: enough for a two-layer circuit (a previous-token head -> an induction head's k, ...)
MIN_PATH_VALUE = 0.05  # |fraction of the logit difference| below which a path is not drawn: a twentieth
DESCRIPTION = ("fraction of the clean - corrupted logit difference that one path restores: the sender's clean "
               "output reaching only that input of the receiver (or the logits directly), every other head frozen")


def path_record(tag: str, sizes: RunSizes) -> PathTag | None:
    """The path of ``tag`` when it is one the tab reads: sender and receiver within ``sizes``, the receiver in a
    later layer (the only paths a causal stack has); else None."""
    record = PathTag.parse(tag)
    if record is None or not sizes.holds(*record.sender):
        return None
    if record.receiver is not None and not (sizes.holds(*record.receiver) and record.receiver[0] > record.sender[0]):
        return None
    return record


def edge(record: PathTag, value: float) -> dict:
    return {"sender": list(record.sender), "receiver": None if record.receiver is None else list(record.receiver),
            "kind": record.kind, "value": value}


def strongest(values: dict[PathTag, float]) -> list[dict]:
    """The TOP_PATHS finite values of at least MIN_PATH_VALUE in size, largest |value| first (ties: by sender,
    receiver and kind, so that an answer is the same at every request)."""
    kept = [(record, value) for record, value in values.items() if abs(value) >= MIN_PATH_VALUE]  # NaN: False
    kept.sort(key=lambda item: (-abs(item[1]), item[0].sender, item[0].receiver or (1 << 30, 0), item[0].kind))
    return [edge(record, value) for record, value in kept[:TOP_PATHS]]


def path_graph(series: Series, step: int, sizes: RunSizes, take) -> dict | None:
    """The paths logged last at or before ``step`` (None when none is): the strongest as ``edges``, with how many
    were logged and the rule that chose them. ``take(cells)`` is called with the number of paths before they are
    ranked (a CellBudget's take: it may refuse them by raising)."""
    keyed = {record: points for tag, points in series.items() if (record := path_record(tag, sizes)) is not None}
    found = latest_at(keyed, step)
    if found is None:
        return None
    logged, values = found
    take(len(values))
    layers = 1 + max(max(r.sender[0], -1 if r.receiver is None else r.receiver[0]) for r in values)
    return {"family": PATH_PATCHING, "step": logged, "paths": len(values), "top": TOP_PATHS,
            "threshold": MIN_PATH_VALUE, "layers": layers, "edges": strongest(values), "description": DESCRIPTION}

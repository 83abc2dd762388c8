"""The rule of ``formation_step`` (:class:`attention_lab.callbacks.induction_formation.InductionFormation`) and how
the lab words a run that recorded none. Light (no torch, no Lightning): the final metrics table and the review's
formation plot use it too.

The rule counts only heads above layer 0: an induction head reads what a previous-token head below it wrote. A
one-layer model has none, so it records no formation step even where its layer-0 heads score high on the detector
(as they do with ``smeared_keys=true``) and even when it solves the task: solving (``steps_to_solve``) is a rule of
its own. Said where both show, so that the two do not read as a contradiction."""

from __future__ import annotations

from typing import Any

__all__ = ["counts_a_head", "unformed"]

THRESHOLD = 0.5  # the induction score a head must reach
MIN_LAYER = 1  # the rule counts the heads of the layers from this one on: above layer 0


def counts_a_head(history: dict[str, Any]) -> bool:
    """Whether a run's ``formation`` history (metrics.json) scored any head the rule counts: a one-layer model's
    scored none."""
    return any(score is not None for score in history.get("induction_later_layers", []))


def unformed(metrics: dict[str, Any]) -> str:
    """What the final metrics table says of a run whose ``formation_step`` is None: why, in the rule's words."""
    history = metrics.get("formation")
    if not isinstance(history, dict):
        return "not formed"
    if not counts_a_head(history):
        return f"none: the rule counts only heads above layer {MIN_LAYER - 1}, and this model has none"
    return f"not formed: no head above layer {MIN_LAYER - 1} reached {history.get('threshold', THRESHOLD):g}"

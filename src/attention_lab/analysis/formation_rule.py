"""The rule of ``formation_step`` (:class:`attention_lab.callbacks.induction_formation.InductionFormation`) and how
the lab words a run that recorded none. Light (no torch, no Lightning): the final metrics table and the review's
formation plot use it too; the measurement is :mod:`attention_lab.analysis.formation_heads`.

One rule for every depth: a head counts when

1. its prefix-matching score on the rotated-repeat probe (:mod:`attention_lab.analysis.prefix_matching`) is at
   least THRESHOLD (0.4), above the most any pattern of positions alone reaches there, also one that leaves out the
   keys holding the query's own token (0.33 at the lab's context of 16; 0.17 without leaving them out:
   ``position_bound``), so that a head attending a distance back, or by position while avoiding its own token,
   cannot pass; and
2. the score falls below THRESHOLD once what supplies the previous token to its keys is removed: the heads of the
   layers below it (their outputs 0) and smeared keys up to its layer. A plain layer-0 head has no such supply, so
   it cannot count (nor pass 1); a layer-0 head with smeared keys has one and may count.

``formation_step`` is the first validation at which some head meets both. The rule before it asked only for an
induction-detector score of 0.5 on the task's own inputs from a head above layer 0: a run whose layer-0 heads were
all zeroed, with no previous-token head and the task unsolved, met it in 8 of 8 seeds, a position-only head
reaching the detector's 0.5 on the task, where each offset sits at its own positions."""

from __future__ import annotations

from typing import Any

__all__ = ["best_prefix_matching", "rule_words", "unformed"]

THRESHOLD = 0.4  # the prefix-matching score a head must reach on the probe: above the position-only bound, 0.33


def rule_words(threshold: float) -> str:
    """The rule in a line, for the plot's legend."""
    return f"formation: a head's prefix matching >= {threshold:g}, and < {threshold:g} with the layers below zeroed"


def best_prefix_matching(history: dict[str, Any]) -> float | None:
    """The highest prefix-matching score of any head over a run's ``formation`` history, or None when none was
    measured."""
    values = [value for value in history.get("prefix_matching", []) if value is not None]
    return max(values) if values else None


def unformed(metrics: dict[str, Any]) -> str:
    """What the final metrics table says of a run whose ``formation_step`` is None: why, in the rule's words."""
    history = metrics.get("formation")
    if not isinstance(history, dict):
        return "not formed"
    threshold = history.get("threshold", THRESHOLD)
    best = best_prefix_matching(history)
    if best is None:
        return "not formed: no head's prefix matching was measured"
    if best < threshold:
        return f"not formed: no head's prefix matching reached {threshold:g} (best {best:.2f})"
    return (f"not formed: heads reached {threshold:g} in prefix matching but kept it with the previous token's "
            "supply removed")

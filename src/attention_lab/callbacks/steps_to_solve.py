"""When a run is solved: validation reaches ``val/seq_acc`` >= 0.99 (:data:`SOLVED`, the one place the threshold is
written). Two callbacks apply that one rule:

- :class:`StepsToSolve` records ``steps_to_solve``, the first training step at which it holds. When every
  configuration ends at 1.0, how fast it got there is what differs. Kept in checkpoints, so a resumed run reports
  the step of the original run.
- :class:`StopWhenSolved` (``callbacks.early_stopping``) ends training there: the run's final metrics are those of
  the model that solved the task, and a default run takes no step after it is done."""

from __future__ import annotations

from typing import Any

import lightning as L

SOLVED = 0.99
METRIC = "val/seq_acc"


def is_solved(value: Any, threshold: float = SOLVED) -> bool:
    """The rule: the metric's ``value`` (None: not measured) at or above ``threshold``."""
    return value is not None and float(value) >= threshold


def fit_validation(trainer: L.Trainer) -> bool:
    """Whether the validation that just ended ran during training (not the sanity check, not a final validate)."""
    return trainer.state.fn == "fit" and not trainer.sanity_checking


class StepsToSolve(L.Callback):
    def __init__(self, metric: str = METRIC, threshold: float = SOLVED) -> None:
        self.metric, self.threshold = metric, threshold
        self.step: int | None = None  # None: not solved (yet)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.step is None and fit_validation(trainer) and is_solved(trainer.callback_metrics.get(self.metric),
                                                                      self.threshold):
            self.step = trainer.global_step

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.step = state_dict.get("step")


class StopWhenSolved(L.Callback):
    """Early stopping by the rule of ``steps_to_solve``: training ends after the first validation at which
    ``metric`` >= ``threshold``. ``reason`` says so (None while it has not stopped the run)."""

    def __init__(self, metric: str = METRIC, threshold: float = SOLVED) -> None:
        self.metric, self.threshold = metric, threshold
        self.reason: str | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not fit_validation(trainer):
            return
        value = trainer.callback_metrics.get(self.metric)
        # Every process decides alike (the validation metrics are reduced over them); any one that stops stops all.
        if trainer.strategy.reduce_boolean_decision(is_solved(value, self.threshold), all=False):
            trainer.should_stop = True
            shown = f"{float(value):.4f}" if value is not None else "?"
            self.reason = (f"early stopping at step {trainer.global_step}: solved, {self.metric} = {shown} "
                           f">= {self.threshold:g}")

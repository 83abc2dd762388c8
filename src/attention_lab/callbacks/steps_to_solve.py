"""``steps_to_solve``: the first training step at which validation reaches ``val/seq_acc`` >= 0.99. When every
configuration ends at 1.0, how fast it got there is what differs. Kept in checkpoints, so a resumed run reports
the step of the original run."""

from __future__ import annotations

from typing import Any

import lightning as L

SOLVED = 0.99


class StepsToSolve(L.Callback):
    def __init__(self, metric: str = "val/seq_acc", threshold: float = SOLVED) -> None:
        self.metric, self.threshold = metric, threshold
        self.step: int | None = None  # None: not solved (yet)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.metric)
        if self.step is None and trainer.state.fn == "fit" and value is not None and float(value) >= self.threshold:
            self.step = trainer.global_step

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.step = state_dict.get("step")

"""The validation loss by target index over training (``val/loss_by_index/<i>``, logged at every validation by the
LightningModule) as one step x index heatmap in TensorBoard (image ``val/loss_by_index``), drawn once, at the final
validation, from the values of every validation during training: the scalars hold each value, the picture shows
where in the sequence the loss fell (Olsson et al. 2022). Kept in checkpoints, so a resumed run draws its whole
history."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only

from attention_lab.analysis.tags import LOSS_BY_INDEX, by_index


class LossByIndexMap(L.Callback):
    def __init__(self, run_name: str = "") -> None:
        self.run_name = run_name  # in the title: which config the map belongs to
        self.steps: list[int] = []
        self.rows: list[list[float | None]] = []

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        row = by_index({name: float(value) for name, value in trainer.callback_metrics.items()})
        if trainer.state.fn == "fit":
            if row and (not self.steps or self.steps[-1] != trainer.global_step):
                self.steps.append(trainer.global_step)
                self.rows.append(row)
            return
        self.draw(trainer)

    @rank_zero_only
    def draw(self, trainer: L.Trainer) -> None:
        writer = next((logger.experiment for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)), None)
        if writer is None or not self.rows:
            return
        # The drawing (matplotlib) is imported by the runs that have a map to draw: a task with loss_by_index rows.
        from attention_lab.plotting.loss_by_index import loss_by_index_image

        image = loss_by_index_image(self.steps, self.rows, self.run_name)
        writer.add_image(LOSS_BY_INDEX, image, trainer.global_step, dataformats="HWC")

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "rows": self.rows}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.steps, self.rows = list(state_dict.get("steps", [])), [list(r) for r in state_dict.get("rows", [])]

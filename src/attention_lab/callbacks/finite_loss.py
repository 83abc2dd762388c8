"""Stop at the first nan/inf training loss, before backward() and the optimizer step: the weights in memory
and in every checkpoint stay finite, and last.ckpt is left as it was."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch

from attention_lab.errors import TrainingDiverged
from attention_lab.records.checkpoints import last_checkpoint_path


class StopOnNonFiniteLoss(L.Callback):
    def __init__(self) -> None:
        self.checkpoint_step: int | None = None  # the step of the newest checkpoint saved or loaded

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        self.checkpoint_step = int(checkpoint.get("global_step", trainer.global_step))

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        self.checkpoint_step = int(checkpoint.get("global_step", 0))

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        if bool(torch.isfinite(loss).all()):
            return
        path = last_checkpoint_path(trainer)
        saved = path.is_file()
        raise TrainingDiverged(float(loss.detach().float().mean()), trainer.global_step, path if saved else None,
                               self.checkpoint_step if saved else None)

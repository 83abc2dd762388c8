"""``checkpoints/last.ckpt`` always holds the newest model: after every validation during training and at its end.

ModelCheckpoint's ``save_last=True`` writes last.ckpt only when it also writes a top-k checkpoint, that is when
``best.ckpt`` improves: a run solved at step 250 and trained to 300 would keep step 250 in both files, so the
review tools would show another model than the one metrics.json describes, and a resume would train the gap
again."""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.trainer.states import TrainerFn

from attention_lab.records.checkpoints import last_checkpoint_path


class LastCheckpoint(L.Callback):
    def __init__(self) -> None:
        self.saved_step: int | None = None

    def save(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if (trainer.state.fn != TrainerFn.FITTING or trainer.sanity_checking or trainer.fast_dev_run
                or trainer.global_step == 0 or trainer.global_step == self.saved_step):
            return
        if not all(bool(torch.isfinite(p).all()) for p in module.parameters()):
            return  # diverging: every checkpoint stays finite, and the next loss stops the run (finite_loss.py)
        trainer.save_checkpoint(last_checkpoint_path(trainer), weights_only=False)  # full state; atomic: AtomicCheckpointIO
        self.saved_step = trainer.global_step

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.save(trainer, pl_module)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.save(trainer, pl_module)

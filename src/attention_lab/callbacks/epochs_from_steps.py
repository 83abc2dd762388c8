"""A run bounded by ``max_steps`` alone has no epoch limit: Lightning keeps ``max_epochs=-1``, which the
progress bar shows as "Epoch 0/-2". Once the training batches are counted, this sets the number of epochs that
``max_steps`` spans, so the bar reads "Epoch 3/23"; the limit never binds before ``max_steps`` does."""

from __future__ import annotations

import math

import lightning as L


class EpochsFromSteps(L.Callback):
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        batches = trainer.num_training_batches
        if not (trainer.max_epochs == -1 and trainer.max_steps > 0 and 0 < batches < math.inf):
            return
        steps_per_epoch = math.ceil(batches / trainer.accumulate_grad_batches)
        if trainer.global_step == 0:  # a new run: every epoch is whole
            trainer.fit_loop.max_epochs = math.ceil(trainer.max_steps / steps_per_epoch)
        else:  # a resumed run may stand anywhere in its epoch: one more, so that max_steps is what ends it
            left = trainer.max_steps - trainer.global_step
            trainer.fit_loop.max_epochs = trainer.current_epoch + 1 + math.ceil(max(left, 0) / steps_per_epoch)

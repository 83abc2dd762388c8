"""After SIGINT/SIGTERM (see :class:`attention_lab.callbacks.signals.StopSignals`): save ``checkpoints/last.ckpt`` at
the end of the current step and stop; ``python scripts/train.py resume=<run dir>`` continues the run."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import lightning as L

from attention_lab.callbacks.signals import StopNow, StopSignals
from attention_lab.errors import TrainingInterrupted
from attention_lab.records.checkpoints import last_checkpoint_path

log = logging.getLogger(__name__)


class GracefulStop(L.Callback):
    def __init__(self, stop: StopSignals) -> None:
        self.stop = stop
        self.saved: Path | None = None

    def save(self, trainer: L.Trainer) -> Path | None:
        if trainer.global_step == 0:
            return None  # nothing trained yet: nothing new to save
        path = last_checkpoint_path(trainer)
        trainer.save_checkpoint(path, weights_only=False)  # full state; atomic: AtomicCheckpointIO
        log.warning("checkpoint of step %d saved to %s", trainer.global_step, path)
        self.saved = path
        return path

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.stop.signum is not None:  # the signal came during setup
            raise TrainingInterrupted(self.stop.signum, trainer.global_step, None)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.stop.signum is not None:
            raise TrainingInterrupted(self.stop.signum, trainer.global_step, self.save(trainer))

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        """Lightning ends fit by itself on SIGTERM during validation (SIGTERMException) and on Ctrl-C: when
        that was our stop, save the step reached, as at the end of a step. Not after a second Ctrl-C."""
        stopped_here = isinstance(exception, (TrainingInterrupted, StopNow, KeyboardInterrupt))
        if self.stop.signum is not None and not stopped_here and trainer.state.fn == "fit" and self.saved is None:
            self.save(trainer)

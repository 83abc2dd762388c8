"""A measurement over the validation set at the end of a run, which the head ablation and the activation patching
share: at the final validation (train.py's, after fit) and, with ``every_validation``, at each one during training.

The values reach ``metrics.json`` (:meth:`findings`: so ``optimized_metric`` and ``compare.py``), the callback
metrics (the heatmaps of :class:`~attention_lab.callbacks.head_score_maps.HeadScoreMaps` read them there) and the
attention tab. Measured at every validation, they are curves in TensorBoard's scalars, like any validation metric.
Measured once, at the end (the default), they are not: one point per head and layer would be a chart of one dot
each, dozens of them. They go to the attention tab as its own scalars
(:func:`~attention_lab.records.probe_summary.end_values_summary`)."""

from __future__ import annotations

import time
from typing import Any

import lightning as L
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from tensorboard.compat.proto import event_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from attention_lab.analysis.ablation import Batch
from attention_lab.callbacks.findings import Findings
from attention_lab.records.probe_summary import end_values_summary


@rank_zero_only
def write_end_values(trainer: L.Trainer, values: dict[str, float]) -> None:
    """``values`` at the trainer's step, in an event file of their own in the run's TensorBoard dir."""
    log_dir = next((logger.log_dir for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)), None)
    if log_dir is None or not values:
        return
    writer = EventFileWriter(log_dir, filename_suffix=".ablation")
    try:
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=trainer.global_step,
                                         summary=end_values_summary(values)))
    finally:
        writer.close()


def validation_of(trainer: L.Trainer) -> tuple[str, int]:
    """Which validation the trainer is in: its entry point (``fit``'s validations, or the final ``validate``) and
    step. Two passes measured in the same one carry the same stamp (:attr:`ValidationPass.measured_at`)."""
    return str(trainer.state.fn), trainer.global_step


class ValidationPass(Findings):
    """Subclasses say whether the run is measured (:meth:`active`) and measure (:meth:`measure`)."""

    def __init__(self, every_validation: bool = False) -> None:
        self.every_validation = every_validation
        self.names: list[str] = []  # the metrics of the last pass
        self.final: dict[str, float] = {}  # their values at the final validation (reduced over the processes)
        # The last pass's values as measured (not reduced) and the validation they are of (validation_of): another
        # pass compares with them where both measured in the same one (after_pass).
        self.values: dict[str, float] = {}
        self.measured_at: tuple[str, int] | None = None

    def active(self, pl_module: L.LightningModule) -> bool:
        raise NotImplementedError

    def measure(self, pl_module: L.LightningModule, batches: list[Batch]) -> dict[str, float]:
        raise NotImplementedError

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or (trainer.state.fn == "fit" and not self.every_validation):
            return
        if not self.active(pl_module):
            return
        loaders = trainer.val_dataloaders
        loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders  # the validation set, not ood
        if loader is None:
            return
        batches = [tuple(t.to(pl_module.device) for t in batch) for batch in loader]
        results = self.measure(pl_module, batches)
        self.names, self.values, self.measured_at = list(results), results, validation_of(trainer)
        for name, value in results.items():
            # In the callback metrics either way (the heatmaps read them there); in the loggers as curves only.
            pl_module.log(name, value, on_epoch=True, sync_dist=True, add_dataloader_idx=False,
                          logger=self.every_validation)
        for callback in trainer.callbacks:  # whichever of two passes measures second sees both
            if isinstance(callback, ValidationPass):
                callback.after_pass(trainer, pl_module)

    def after_pass(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Called on every pass of the run each time one of them (this one too) has measured, still in
        ``on_validation_epoch_end`` (where values can be logged): a pass that compares its values with another's
        does it here once both have measured in this validation, whatever the callbacks' order."""

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn == "fit" or not self.names:
            return
        metrics = trainer.callback_metrics
        self.final = {name: float(metrics[name]) for name in self.names if name in metrics}
        if not self.every_validation:
            write_end_values(trainer, self.final)

    def findings(self) -> dict[str, Any]:
        return dict(self.final)
